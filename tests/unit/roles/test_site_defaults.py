# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One definition of each shared default: the internal ``site`` role's.

- The roles that read a shared setting default to the site role's variable and
  depend on the role; no role file writes the value again (a literal engine group,
  engine port, max_num_seqs, lock path or topology unit in a role's defaults, vars,
  tasks or templates).
- Modules and daemons run without the roles and keep a default of their own for an
  option the roles always pass: each equals the site role's.
"""

from __future__ import annotations

import ast
import os
import re

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _layout
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_status
from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_plan
from ansible_collections.factory_floor.llm.plugins.module_utils._host.watchdog_config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SITE = yaml.safe_load(open(os.path.join(ROOT, "roles", "site", "defaults", "main.yml"), encoding="utf-8"))
TOPOLOGIES = yaml.safe_load(open(os.path.join(ROOT, "roles", "site", "vars", "main.yml"), encoding="utf-8"))["_site_topologies"]
# Every other role: a role included by another one evaluates the values and conditions its
# includer passes (built on the includer's defaults, which read the site's) in its own context.
DEPENDENTS = tuple(sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if name != "site"))

# What would be a second copy of a site default in a role file.
COPIES = [
    re.compile(r"groups\[\s*['\"](gb10|proxy)['\"]\s*\]"),
    re.compile(r"default\(\s*['\"]?(gb10|proxy)['\"]?\s*\)"),
    re.compile(r"default\(\s*(8000|8080|12)\s*\)"),
    re.compile(r"^\s*\w+:\s*(gb10|proxy|8000|/run/factory-floor-maintenance)\s*$"),
    # The topologies' units: the site role's table (vars/main.yml).
    re.compile(r"vllm-(replica|split)(-watchdog)?\.service"),
    # node_exporter's textfile directory: site_textfile_dir, one for every daemon.
    re.compile(r"/var/lib/(node_exporter|prometheus/node-exporter)"),
]


def _role_files():
    for role in sorted(os.listdir(os.path.join(ROOT, "roles"))):
        if role == "site":
            continue
        for part in ("defaults", "vars", "tasks", "templates", "handlers"):
            top = os.path.join(ROOT, "roles", role, part)
            for here, dummy, names in os.walk(top):
                for name in names:
                    yield os.path.join(here, name)


def test_no_role_writes_a_site_default_again():
    found = []
    for path in _role_files():
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                code = line.split("#", 1)[0] if not line.lstrip().startswith("{#") else ""
                if any(pattern.search(code) for pattern in COPIES):
                    found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert found == []


@pytest.mark.parametrize("role", DEPENDENTS)
def test_dependents_depend_on_the_site_role(role):
    meta = yaml.safe_load(open(os.path.join(ROOT, "roles", role, "meta", "main.yml"), encoding="utf-8"))
    assert {"role": "factory_floor.llm.site"} in meta["dependencies"]


def test_module_defaults_equal_the_site_roles():
    assert _layout.DEFAULTS["vllm_port"] == SITE["site_engine_port"]
    assert _layout.ENGINE_GROUP == SITE["site_engine_group"]
    assert _layout.PROXY_GROUP == SITE["site_proxy_group"]
    assert Config.url == "http://127.0.0.1:%d" % SITE["site_engine_port"]
    source = open(os.path.join(ROOT, "plugins", "modules", "maintenance_lock.py"), encoding="utf-8").read()
    spec = [node for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.keyword) and node.arg == "path" and isinstance(node.value, ast.Call)]
    defaults = [kw.value.value for call in spec for kw in call.value.keywords if kw.arg == "default"]
    assert defaults == [SITE["site_maintenance_lock_file"]]


def test_module_topologies_equal_the_site_roles_table():
    # The modules read the topologies without the roles: their tables must be the site role's.
    assert list(_switch_plan.UNIT_ORDER) == list(TOPOLOGIES)
    assert _switch_plan.UNITS == {name: t["unit"] for name, t in TOPOLOGIES.items()}
    assert _site_status.UNITS == _switch_plan.UNITS
    assert _site_status.WATCHDOG_UNITS == {name: t["watchdog_unit"] for name, t in TOPOLOGIES.items()}
    assert {name: _switch_plan.other(name) for name in TOPOLOGIES} == {name: t["other"] for name, t in TOPOLOGIES.items()}
    engines, head = ["spark-a", "spark-b"], "spark-a"
    assert {name: _switch_plan.api_engines(name, engines, head) for name in TOPOLOGIES} == {
        name: engines if t["api"] == "all" else [head] for name, t in TOPOLOGIES.items()}
