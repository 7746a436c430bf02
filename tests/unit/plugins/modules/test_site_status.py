# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.site_status on observations shaped as the roles register them."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.modules import site_status
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_site_status import GATE, engine, proxy


@pytest.mark.parametrize("check_mode", [False, True])
def test_one_view_from_every_host_with_the_gate_scores_read_on_the_controller(run_module, tmp_path, check_mode):
    (tmp_path / ("b" * 16 + ".dddd.spark-a.json")).write_text(json.dumps(GATE["spark-a"]))
    code, result = run_module(site_status, {
        "inventory_topology": "replicas", "engines": {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")},
        "proxies": {"gateway": proxy()}, "gate_store_dir": str(tmp_path), "_ansible_check_mode": check_mode})
    assert code == 0, result
    # the observations' times are a fixed moment; only their age depends on the clock
    assert result["changed"] is False
    assert [a for a in result["attention"] if "verdict since" not in a and "state is from" not in a] == []
    assert [e["gate"]["score"] if e["gate"] else None for e in result["engines"]] == [38.9, None]
    assert result["table"][0].startswith("Factory Floor status, ")
    documented = set(yaml.safe_load(site_status.RETURN))
    assert set(result) - {"changed", "invocation"} == documented


def test_nothing_read_anywhere_is_a_view_too(run_module):
    code, result = run_module(site_status, {"inventory_topology": "split", "engines": {"spark-a": None}})
    assert code == 0 and result["not_read"] == [{"host": "spark-a", "error": "not read (no observation from this host)"}]
    assert result["topology"]["running"] == "none"


def test_the_topology_must_be_one_of_the_two(run_module):
    code, result = run_module(site_status, {"inventory_topology": "mesh", "engines": {}})
    assert code == 1 and "inventory_topology" in result["msg"]


# --- engine_hosts: what each host's status entry point read, from hostvars, by the action plugin (issue 36) --------

def _through_the_action(task_args, hostvars):
    from unittest import mock

    from ansible_collections.factory_floor.llm.plugins.action.site_status import ActionModule

    task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.site_status",
                          args=task_args)
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    runs = []
    action._execute_module = lambda module_name=None, module_args=None, task_vars=None, **kw: runs.append(module_args) or {}
    action.run(task_vars={"hostvars": hostvars})
    return runs


def test_the_action_reads_each_hosts_status_and_refuses_both_forms():
    from ansible.errors import AnsibleActionFail

    hostvars = {"spark-a": {"vllm_status": {"reachable": False, "error": "timeout"}, "topology": "split"},
                "proxy-1": {"nginx_proxy_status": {"reachable": True}, "keepalived_status": {"address": "10.0.0.9"}}}
    (args,) = _through_the_action({"engine_hosts": ["spark-a"], "proxy_hosts": ["proxy-1"], "gate_store_dir": "/s"},
                                  hostvars)
    assert args == {"engines": {"spark-a": {"reachable": False, "error": "timeout"}},
                    "proxies": {"proxy-1": {"reachable": True}}, "inventory_topology": "split", "split_head": "spark-a",
                    "keepalived": {"address": "10.0.0.9"}, "gate_store_dir": "/s"}
    (args,) = _through_the_action({"engine_hosts": ["spark-a"], "inventory_topology": "replicas"}, hostvars)
    assert args["inventory_topology"] == "replicas" and args["proxies"] == {} and "keepalived" not in args
    with pytest.raises(AnsibleActionFail, match="not both"):
        _through_the_action({"engine_hosts": ["spark-a"], "engines": {}}, hostvars)
    with pytest.raises(AnsibleActionFail, match="proxy_hosts only with engine_hosts"):
        _through_the_action({"engines": {}, "proxy_hosts": ["proxy-1"]}, hostvars)
    assert _through_the_action({"engines": {"spark-a": {}}, "inventory_topology": "replicas"}, hostvars) == [
        {"engines": {"spark-a": {}}, "inventory_topology": "replicas"}]
