# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the floating address follows, as the keepalived role configures it (keepalived.conf.j2 rendered
as the role renders it; the decision of the engines check itself: test_keepalived.py).

- nginx's /healthz: a failure is FAULT (weight 0), the address leaves at once;
- an engine in rotation on this proxy: a failure lowers the priority by the weight, never FAULT, so when
  no proxy has one the holder keeps the address;
- equal priorities and preemption with a delay: a backup takes over only while it outranks the holder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, render, role_variables


def render_value(role, name, **inventory):
    """A role variable as Ansible evaluates it under ``inventory``."""
    variables = dict(role_variables(role), **inventory)
    return with_filters(Templar(loader=DataLoader(), variables=variables)).template(trust_as_template("{{ %s }}" % name))


def inventory(**extra):
    values = {"inventory_hostname": "spark-a", "groups": {"proxy": ["spark-a", "spark-b"]},
              "ansible_facts": {"default_ipv4": {"interface": "eth0", "address": "10.89.7.10"}},
              "__keepalived_peers": {"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11"]},
              "__keepalived_address": "10.89.7.100/24"}
    values.update(extra)
    return values


def block(text, name):
    """The lines of the block that starts with ``name`` (vrrp_script X, vrrp_instance X), folded."""
    lines, depth, inside = [], 0, False
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if not inside and stripped.startswith(name + " {"):
            inside, depth = True, 0
        if inside:
            if stripped:
                lines.append(re.sub(r"\s+", " ", stripped))
            depth += stripped.count("{") - stripped.count("}")
            if depth == 0:
                return lines
    return lines


def test_the_address_follows_nginx_and_the_engines_by_default():
    text = render("keepalived", "keepalived.conf.j2", **inventory())
    healthz = block(text, "vrrp_script proxy_healthz")
    assert not any(line.startswith("weight") for line in healthz)      # weight 0: a failure is FAULT
    engines = block(text, "vrrp_script proxy_engines")
    assert engines[1] == ('script "/usr/bin/env PYTHONPATH=/usr/local/lib/factory-floor /usr/bin/python3 -m _host.keepalived '
                          '--state-file /run/factory-floor/upstream.json --stale-after 30"')
    assert {"weight -50", "fall 3", "rise 2", "init_fail", "interval 1"} <= set(engines)
    instance = block(text, "vrrp_instance factory_floor")
    assert "priority 250" in instance and "preempt_delay 5" in instance and "nopreempt" not in instance
    track = instance[instance.index("track_script {") + 1:]
    assert track[:2] == ["proxy_healthz", "proxy_engines"]


def test_every_proxy_host_has_the_same_priority():
    """A host that comes back never outranks the holder: no second break of every client's connection."""
    defaults = yaml.safe_load(open(os.path.join(ROOT, "roles", "keepalived", "defaults", "main.yml"), encoding="utf-8"))
    assert defaults["keepalived_priority"] == 250 and defaults["keepalived_nopreempt"] is False
    assert defaults["keepalived_engines_script_weight"] < defaults["keepalived_priority"]
    for host in ("spark-a", "spark-b"):
        text = render("keepalived", "keepalived.conf.j2", **inventory(inventory_hostname=host))
        assert "priority 250" in block(text, "vrrp_instance factory_floor")


def test_three_proxy_hosts_each_advertise_to_the_other_two():
    """keepalived_check's plan for three proxy hosts, rendered: one unicast_peer line per other host."""
    text = render("keepalived", "keepalived.conf.j2", **inventory(
        groups={"proxy": ["spark-a", "spark-b", "spark-c"]},
        __keepalived_peers={"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11", "10.89.7.12"]}))
    instance = block(text, "vrrp_instance factory_floor")
    assert "unicast_src_ip 10.89.7.10" in instance
    peers = instance[instance.index("unicast_peer {") + 1:]
    assert peers[:3] == ["10.89.7.11", "10.89.7.12", "}"]


def test_nopreempt_follows_nginx_only():
    text = render("keepalived", "keepalived.conf.j2", **inventory(keepalived_nopreempt=True))
    instance = block(text, "vrrp_instance factory_floor")
    assert "nopreempt" in instance and not any(line.startswith("preempt_delay") for line in instance)


def test_without_the_engines_check():
    text = render("keepalived", "keepalived.conf.j2", **inventory(keepalived_track_engines=False))
    assert "proxy_engines" not in text
    instance = block(text, "vrrp_instance factory_floor")
    assert instance[instance.index("track_script {") + 1] == "proxy_healthz"


def test_the_engines_check_reads_the_file_the_membership_checker_writes():
    ours = yaml.safe_load(open(os.path.join(ROOT, "roles", "keepalived", "vars", "main.yml"), encoding="utf-8"))
    nginx = yaml.safe_load(open(os.path.join(ROOT, "roles", "nginx_proxy", "vars", "main.yml"), encoding="utf-8"))
    assert ours["_keepalived_checker_state_file"] == nginx["_nginx_proxy_state_file"]
    assert ours["_keepalived_engines_check"] == "{{ _site_host_python }} _host.keepalived"
    assert os.path.exists(os.path.join(ROOT, "plugins", "module_utils", "_host", "keepalived.py"))


def test_the_watch_writes_where_every_daemon_writes_and_systemd_accepts_its_unit(tmp_path):
    """The floating address's watch: its metrics go to the site's one textfile directory, labelled with the
    inventory name; systemd's own check (the role's validate command) passes the unit."""
    text = render("keepalived", "keepalived-watch.service.j2", **inventory())
    assert 'Environment="FACTORY_FLOOR_TEXTFILE_DIR=/var/lib/node_exporter"' in text
    assert 'Environment="FACTORY_FLOOR_HOST=spark-a"' in text
    assert ("Environment=PYTHONPATH=/usr/local/lib/factory-floor\nExecStart=/usr/bin/python3 -m _host.keepalived_watch "
            "--config /etc/factory-floor/keepalived-watch.json") in text
    assert "WatchdogSec=30" in text
    moved = render("keepalived", "keepalived-watch.service.j2",
                   **inventory(site_textfile_dir="/var/lib/prometheus/node-exporter"))
    assert 'Environment="FACTORY_FLOOR_TEXTFILE_DIR=/var/lib/prometheus/node-exporter"' in moved
    if not shutil.which("systemd-analyze"):
        pytest.skip("needs systemd-analyze")
    unit = tmp_path / "unit"
    unit.write_text(text)
    variables = inventory()
    validate = render_value("keepalived", "_keepalived_watch_unit_validate", **variables)
    done = subprocess.run(validate.replace("%s", str(unit)), shell=True, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
