# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""docs/teardown.md names everything the roles put on a host (issue 35).

No teardown was documented: an operator had to read seven roles to know what to remove. The page lists the units,
files, directories, nftables tables, containers, textfile metrics and packages the roles create; this test reads
them from the roles themselves (their vars, the unit files their tasks write, the tables their templates load, the
metrics files the daemons write) so that a role that adds one and forgets the page fails here."""

from __future__ import annotations

import glob
import os
import re

import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._host.textfile import watchdog_name
from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode import walk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Defaults that name what a role writes (not what the operator brings).
WRITTEN_DEFAULTS = {"site": ["site_textfile_dir", "site_maintenance_lock_file"],
                    "vllm": ["vllm_container_cache_dir", "vllm_prometheus_file_sd_dir"],
                    "monitoring": ["monitoring_rules_file"], "memory_guard": ["memory_guard_slice"]}


def _doc():
    with open(os.path.join(ROOT, "docs", "teardown.md"), encoding="utf-8") as handle:
        return handle.read()


def _yaml(*parts):
    path = os.path.join(ROOT, *parts)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def _literal(value):
    return isinstance(value, str) and "{{" not in value and value.strip() and not re.search(r"\s", value.strip())


def named_by_the_roles():
    """{what: where it comes from}: every path, unit, table, metrics file and package the roles put on a host."""
    found = {}
    for vars_file in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "vars", "main.yml"))):
        role = vars_file.split(os.sep)[-3]
        for key, value in _yaml("roles", role, "vars", "main.yml").items():
            values = value if isinstance(value, list) else [value]
            for item in values:
                if _literal(item) and (item.startswith("/") or key.endswith(("_unit", "_dropin", "_packages"))
                                       or re.search(r"\.(service|slice)$", item)):
                    found[item] = "roles/%s/vars/main.yml %s" % (role, key)
    for role, keys in WRITTEN_DEFAULTS.items():
        defaults = _yaml("roles", role, "defaults", "main.yml")
        for key in keys:
            assert _literal(defaults.get(key)), (role, key)
            found[defaults[key]] = "roles/%s/defaults/main.yml %s" % (role, key)
    for topology in _yaml("roles", "site", "vars", "main.yml")["_site_topologies"].values():
        found[topology["unit"]] = found[topology["watchdog_unit"]] = "roles/site/vars/main.yml _site_topologies"
        found[topology["unit"].rsplit(".", 1)[0]] = "the container named after its unit (roles/vllm)"
        found[watchdog_name(topology["unit"]) + ".prom"] = "the watchdog's textfile metrics"
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        for task, _whens in walk(_yaml(path)):
            for module in ("ansible.builtin.template", "ansible.builtin.copy"):
                dest = (task.get(module) or {}).get("dest")
                if _literal(dest) and dest.startswith("/etc/systemd/system/"):
                    found[dest] = os.path.relpath(path, ROOT)
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "templates", "*.nft.j2"))):
        with open(path, encoding="utf-8") as handle:
            for table in re.findall(r"^table inet (\w+)", handle.read(), re.MULTILINE):
                found["inet " + table] = os.path.relpath(path, ROOT)
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "module_utils", "_host", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            for name in re.findall(r'write_textfile\("(\w+)"', handle.read()):
                found[name + ".prom"] = os.path.relpath(path, ROOT)
    return found


def _covered(item, doc):
    """Named in the page, or (a path) under a directory the page removes whole."""
    if item in doc:
        return True
    parent = os.path.dirname(item) if item.startswith("/") else ""
    while parent not in ("", "/"):
        if re.search(r"rm -rf [^\n]*%s(\s|$)" % re.escape(parent), doc):
            return True
        parent = os.path.dirname(parent)
    return False


def test_the_page_names_everything_the_roles_leave_on_a_host():
    doc = _doc()
    missing = {item: where for item, where in named_by_the_roles().items() if not _covered(item, doc)}
    assert missing == {}


def test_what_it_checks():
    found = named_by_the_roles()
    for item in ("vllm-replica.service", "vllm-split-watchdog.service", "/etc/systemd/system/factory-floor-firewall.service",
                 "/etc/systemd/system/factory-floor-engine-leave.service", "factory-floor-upstream.service",
                 "factory-floor-switch-probe",
                 "inet factory_floor", "inet factory_floor_leave", "factory_floor_upstream.prom",
                 "factory_floor_watchdog_vllm-split.prom", "/etc/nginx/nginx.conf", "keepalived",
                 "60-factory-floor-start-check.conf", "/var/lib/factory-floor/topology.json", "vllm-replica"):
        assert item in found, item
    assert _covered("/usr/local/lib/factory-floor/lua", "rm -rf /etc/factory-floor /usr/local/lib/factory-floor\n")
    assert not _covered("/etc/nginx/nginx.conf", "rm -rf /etc/nginx-other\n")


def test_the_readme_links_it():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        assert "(docs/teardown.md)" in handle.read()
