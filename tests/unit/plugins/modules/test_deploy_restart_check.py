# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_restart_check through its action plugin: the one probe on the host (only on a replica
whose configuration changed), then _vllm_check's restart refusals, in their words; one test per outcome."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.action.deploy_restart_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import (
    assert_documents_the_spec, run_action_answering)

ENDPOINT = {"url": "http://127.0.0.1:8000", "model": "lab-chat"}
PROBE = ("factory_floor.llm.vllm_health", dict(ENDPOINT, probe="generate", generate_timeout=60, timeout=0))
SERVING = {"status": "serving", "reason": "probed"}


def variables(engines=("spark-a", "spark-b"), **more):
    found = {"inventory_hostname": "spark-a", "playbook_dir": "/src/ff/playbooks", "topology": "replicas",
             "site_engine_group": "gb10", "groups": {"gb10": list(engines), "proxy": ["proxy-1"]},
             "vllm_service_plan": {"restart_pending": True, "change": "was --max-num-seqs 8, now 12"},
             "_site_vllm_endpoint": ENDPOINT}
    found.update(more)
    return found


def run(task_vars, answers, check_mode=False):
    return run_action_answering(ActionModule, "deploy_restart_check", {}, task_vars, answers, check_mode=check_mode)


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_serving_replica_with_another_one_goes_on_after_one_probe(check_mode):
    # The probe only reads: a --check deploy asks the same.
    result, calls = run(variables(), [SERVING], check_mode=check_mode)
    assert calls == [PROBE]
    assert not result.get("failed") and (result["errors"], result["serving"]) == ([], SERVING)


@pytest.mark.parametrize("more", [{"inventory_hostname": "proxy-1"}, {"vllm_service_plan": {"restart_pending": False}},
                                  {"topology": "split"}], ids=["proxy-host", "unchanged", "split"])
def test_a_host_that_does_not_restart_a_replica_is_not_asked(more):
    result, calls = run(variables(**more), [])
    assert calls == [] and not result.get("failed") and result["serving"] == {}


def test_a_probe_that_could_not_ask_fails_with_its_message():
    result, _calls = run(variables(), [{"failed": True, "reason": "error", "msg": "invalid header value in api_key"}])
    assert (result["failed"], result["msg"]) == (True, "invalid header value in api_key")


def test_a_rejected_key_is_refused_naming_the_rotation():
    result, _calls = run(variables(), [{"status": "dead", "reason": "rejected", "http_status": 401}])
    assert result["failed"] is True and [error["check"] for error in result["errors"]] == ["api_key_rejected"]
    assert result["msg"].startswith("spark-a's engine rejects vllm_api_key (HTTP 401 or 403)")
    assert "vllm_api_key_next" in result["msg"]


def test_the_only_replica_that_serves_is_refused_unless_forced():
    result, _calls = run(variables(engines=("spark-a",)), [SERVING])
    assert result["failed"] is True and result["msg"].startswith(
        "spark-a is the only replica and its configuration changed (was --max-num-seqs 8, now 12).")
    assert "playbooks/deploy.yml -e vllm_restart_force=true" in result["msg"]
    result, _calls = run(variables(engines=("spark-a",), vllm_restart_force=True), [SERVING])
    assert not result.get("failed") and result["errors"] == []


def test_the_module_documents_the_plugins_options():
    assert_documents_the_spec("deploy_restart_check", ARGUMENT_SPEC)
