# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.concurrency_sweep_check`` through its action plugin: the variables it reads as the task sees
them (templated), its refusal as the task's message, and its documentation against its argument spec. The decisions
themselves are tests/unit/plugins/module_utils/test_concurrency_sweep_check.py's."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.concurrency_sweep_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action

VARIABLES = {
    "inventory_hostname": "spark-a", "playbook_dir": "/src/playbooks", "inventory_dir": "/inv",
    "groups": {"gb10": ["spark-a", "spark-b"], "proxy": ["gw"]}, "site_engine_group": "gb10",
    "tune_concurrency": [1, 4, 8], "tune_profiles": ["short", "long"], "tune_target_metric": "e2e",
    # The entry point's block variables are templates: read as the task sees them.
    "tune_load_host": trust_as_template("{{ inventory_hostname }}"),
    "tune_write_path": trust_as_template("{{ inventory_dir }}/host_vars/{{ inventory_hostname }}.yml"),
    "tune_long_prompt_tokens": 3000, "tune_write": False, "tune_target_seconds": None,
    "tune_output_dir": "/src/build/tune-concurrency", "vllm_max_num_seqs": 4,
    "_site_vllm_endpoint": {"url": "http://127.0.0.1:8000"},
}


def run(args, variables=None, check_mode=False):
    """The action plugin's run, with Ansible's templar over ``variables`` as the task's."""
    return run_action(ActionModule, "concurrency_sweep_check", args, dict(VARIABLES, **(variables or {})),
                      check_mode=check_mode)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_plan_reads_the_knobs_and_the_inventorys_cap(check_mode):
    result = run({"check": "plan"}, {"tune_concurrency": [1, 4]}, check_mode=check_mode)
    assert "failed" not in result and result["url"] == "http://127.0.0.1:8000" and result["cap"] == 4
    assert result["load_host"] == "spark-a"


def test_the_plan_reads_the_running_engines_cap_on_the_host():
    calls = []
    answers = {"vllm-replica.service": {"running": False}, "vllm-split.service": {
        "running": True, "args_now": ["--max-num-seqs", "8", "--max-num-batched-tokens=4096"]}}

    def execute(self, module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(answers[module_args["unit"]])

    units = {"_site_engine_units": ["vllm-replica.service", "vllm-split.service"]}
    with mock.patch.object(ActionModule, "_execute_module", execute):
        result = run({"check": "plan"}, units)
    assert calls == [("factory_floor.llm.vllm_engine_info", {"unit": unit}) for unit in units["_site_engine_units"]]
    assert "failed" not in result and result["cap"] == "8" and result["cap_source"] == "vllm-split.service"
    assert result["batched"] == "4096"


def test_a_refused_plan_fails_with_its_message():
    result = run({"check": "plan"})
    assert result["failed"] is True and result["msg"].startswith("The highest level (8) is above the engine's")


def test_the_report_reads_the_write_path_as_the_task_sees_it():
    planned = run({"check": "plan"}, {"tune_concurrency": [1, 4]})
    sweep = {"load_sent": True, "table": [], "engine": {"max_model_len": 8192}, "profiles": {}, "levels": [],
             "recommendation": {"max_num_seqs": None, "reasoning": [], "shares": {}}}
    result = run({"check": "report", "plan": planned, "sweep": sweep}, {"tune_write": True})
    assert "failed" not in result
    assert result["refusal"].startswith("No level met the target, so nothing was written to /inv/host_vars/spark-a.yml.")


def test_num_speculative_tokens_without_a_speculative_config_in_the_inventory_is_refused():
    result = run({"check": "plan"}, {"tune_concurrency": [1, 4], "tune_num_speculative_tokens": [2, 4]})
    assert result["failed"] is True and "the inventory of spark-a sets no --speculative-config" in result["msg"]
    result = run({"check": "plan"}, {"tune_concurrency": [1, 4], "tune_num_speculative_tokens": [2, 4],
                                     "vllm_speculative_config": {"method": "mtp", "num_speculative_tokens": 4}})
    assert "failed" not in result and result["speculative"]["now"] == 4 and len(result["speculative"]["next"]) == 1


def test_the_report_compares_with_the_runs_saved_in_the_output_directory(tmp_path):
    told = {"tune_concurrency": [1, 4], "tune_num_speculative_tokens": [2, 4], "tune_output_dir": str(tmp_path),
            "vllm_speculative_config": {"method": "mtp", "num_speculative_tokens": 4}}
    planned = run({"check": "plan"}, told)
    level = {"profile": "short", "concurrency": 4, "tokens_per_s": 50.0, "requests_failed": 0,
             "completion_tokens_mean": 128}
    sweep = {"load_sent": True, "table": [], "engine": {"model": "chat"}, "profiles": {}, "levels": [level],
             "recommendation": {"max_num_seqs": 4, "reasoning": [], "shares": {"short": 1.0}}}
    key = run({"check": "report", "plan": planned, "sweep": sweep}, told)["saved"]["speculative"]["key"]
    (tmp_path / "spark-a.json").write_text(json.dumps({"speculative": {"key": key, "runs": {"2": [
        dict(level, tokens_per_s=72.5)]}}}))
    result = run({"check": "report", "plan": planned, "sweep": sweep}, told)
    assert result["saved"]["speculative"]["recommendation"]["best"] == 2
    assert sorted(result["saved"]["speculative"]["runs"]) == ["2", "4"]
    (tmp_path / "spark-a.json").write_text("not JSON")
    assert run({"check": "report", "plan": planned, "sweep": sweep}, told)["saved"]["speculative"]["runs"] == {
        "4": [level]}


def test_an_unknown_check_is_refused_by_the_spec():
    with pytest.raises(AnsibleActionFail, match="check"):
        run({"check": "sweep"})


def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("concurrency_sweep_check", ARGUMENT_SPEC)
