# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""status.yml shows the floating address and its holder (issue 35: it always said "none configured").

The status playbook's proxy play runs the keepalived role's status entry point (which sets
``keepalived_status`` on the proxy hosts), and the vllm role's site_status entry point hands that
fact to ``factory_floor.llm.site_status``: its task's arguments are evaluated with Ansible's
templating, as a run would, and the view is made from them (``_site_status.build``, the module's code).
"""

from __future__ import annotations

import os

import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _keepalived as ka
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_status as site
from ansible_collections.factory_floor.llm.tests.unit.roles.test_unit_freshness import ROOT, evaluate, tasks

OMIT = "__omit_place_holder__"
PROXIES = ["proxy-a", "proxy-b"]
ENGINES = ["spark-a", "spark-b"]


def _status():
    statuses = {"proxy-a": {"holds_address": False, "vrrp_state": "BACKUP", "vrrp_state_current": True,
                            "service_state": "active"},
                "proxy-b": {"holds_address": True, "vrrp_state": "MASTER", "vrrp_state_current": True,
                            "service_state": "active"}}
    return ka.summarize(statuses, "192.0.2.10/24")


def _site_status_arguments(hostvars):
    (task,) = [t for t in tasks("roles/vllm/tasks/site_status.yml") if "factory_floor.llm.site_status" in t]
    variables = {"hostvars": hostvars, "groups": {"gb10": ENGINES, "proxy": PROXIES}, "vllm_engine_group": "gb10",
                 "vllm_proxy_group": "proxy", "tool_gate_scores_dir": "", "omit": OMIT}
    variables.update({name: evaluate(value, variables) for name, value in task.get("vars", {}).items()})
    return {name: evaluate(value, variables) if isinstance(value, str) else value
            for name, value in task["factory_floor.llm.site_status"].items()}


def _table(arguments):
    keepalived = arguments.get("keepalived")
    view = site.build({}, {}, "replicas", floating=arguments.get("floating_addresses"),
                      keepalived=None if keepalived == OMIT else keepalived, now=0.0)
    return site.table(view, 0.0)


def test_the_status_view_names_the_floating_address_and_its_holder():
    hostvars = {name: {} for name in ENGINES}
    # The keepalived role's status entry point sets the fact on every host of the proxy play (run_once set_fact).
    hostvars.update({name: {"keepalived_status": _status()} for name in PROXIES})
    lines = _table(_site_status_arguments(hostvars))
    assert "floating proxy address: keepalived 192.0.2.10 on proxy-b (proxy-a BACKUP; proxy-b MASTER)" in lines


def test_one_proxy_host_has_none():
    hostvars = {name: {} for name in ENGINES + PROXIES}
    assert "floating proxy address: none configured" in _table(_site_status_arguments(hostvars))


def test_the_status_playbook_asks_keepalived_on_the_proxy_hosts_before_the_view_is_made():
    with open(os.path.join(ROOT, "playbooks", "status.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    includes = [(index, task) for index, play in enumerate(plays) for task in play.get("tasks", [])
                if (task.get("ansible.builtin.include_role") or {}).get("name") == "factory_floor.llm.keepalived"]
    assert len(includes) == 1
    index, task = includes[0]
    assert plays[index]["hosts"] == "proxy" and task["ansible.builtin.include_role"]["tasks_from"] == "status"
    view_play = next(i for i, play in enumerate(plays)
                     if any((t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "site_status"
                            for t in play.get("tasks", [])))
    assert index < view_play
