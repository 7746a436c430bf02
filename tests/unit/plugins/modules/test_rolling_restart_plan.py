# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.rolling_restart_plan through its action plugin: the start-up read on the host, the rest read from
the task's variables, the decision and the sentences _restart_plan's (one test per outcome: go, refuse, forced, idle)."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.factory_floor.llm.plugins.action.rolling_restart_plan import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils._restart_plan import restart_plan
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import (
    assert_documents_the_spec, run_action_answering)

CHANGE = "was --max-num-seqs 8, now --max-num-seqs 12"
SLURPED = {"content": base64.b64encode(json.dumps({"replicas": 93.5}).encode()).decode(), "encoding": "base64"}


def variables(in_rotation=("spark-b",), **more):
    """The variables the task sees on spark-a: the groups, the proxy host's rotation, the engine plan."""
    found = {"inventory_hostname": "spark-a", "playbook_dir": "/src/ff/playbooks", "site_engine_group": "gb10",
             "site_proxy_group": "proxy", "groups": {"gb10": ["spark-a", "spark-b"], "proxy": ["proxy-1"]},
             "vllm_service_plan": {"change": CHANGE},
             "hostvars": {"proxy-1": {"nginx_proxy_rotation": {"in_rotation": list(in_rotation)}}}}
    found.update(more)
    return found


def run(args, task_vars, slurped=None, check_mode=False):
    result, calls = run_action_answering(ActionModule, "rolling_restart_plan", args, task_vars, [slurped or SLURPED],
                                         check_mode=check_mode)
    assert calls == [("ansible.legacy.slurp", {"src": "/var/lib/factory-floor/startup.json"})]
    return result


SERVING = {"status": "serving", "peers": [{"item": "spark-b", "status": "serving"}]}


@pytest.mark.parametrize("check_mode", [False, True])
def test_it_goes_while_another_replica_carries_the_load_as_switch_plan_words_it(check_mode):
    result = run(SERVING, variables(), check_mode=check_mode)
    expected = restart_plan("spark-a", ["spark-a", "spark-b"], "serving", SERVING["peers"], [{"in_rotation": ["spark-b"]}],
                            {"replicas": 93.5}, CHANGE, False, check_mode, "/src/ff/playbooks")
    assert not result.get("failed")
    assert {key: result[key] for key in expected} == expected and result["carriers"] == ["spark-b"]


def test_it_refuses_when_nobody_carries_the_load_failing_with_the_sentence():
    result = run(SERVING, variables(in_rotation=()))
    assert result["failed"] is True and result["msg"] == result["refusal"]
    assert result["msg"].startswith("Not restarting spark-a for its new configuration (%s): it serves, and no other "
                                    "replica both serves and is in the proxy's rotation" % CHANGE)
    assert "spark-b: serving, not in rotation" in result["msg"] and "about 1.6 min, last measured here" in result["msg"]
    assert result["msg"].endswith("To restart it now anyway, accepting the outage: playbooks/deploy.yml "
                                  "-e vllm_restart_force=true.")


@pytest.mark.parametrize("force", [True, "true"])
def test_forced_it_goes_and_says_so_first(force):
    result = run(SERVING, variables(in_rotation=(), vllm_restart_force=force))
    assert not result.get("failed") and result["refusal"] == ""
    assert result["forced"].startswith("Restarting spark-a although no other replica serves and is in the proxy's "
                                       "rotation (vllm_restart_force)")


def test_a_replica_that_does_not_serve_goes_without_asking_anyone_with_gb10s_range_when_no_start_up_was_measured():
    result = run({"status": "loading"}, variables(in_rotation=()), slurped={"failed": True, "msg": "file not found"})
    assert not result.get("failed") and (result["serving"], result["carriers"]) == (False, [])
    assert result["announcement"] == ("Restarting spark-a for its new configuration (%s): it does not serve now "
                                      "(loading), so nobody loses anything." % CHANGE)


def test_the_module_documents_the_plugins_options():
    assert_documents_the_spec("rolling_restart_plan", ARGUMENT_SPEC)
