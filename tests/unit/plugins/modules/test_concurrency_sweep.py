# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.concurrency_sweep against ``fake_openai`` (../conftest.py),
a loopback stand-in for vLLM's HTTP shape, not vLLM."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import concurrency_sweep


def test_sweep_returns_levels_table_and_recommendation(fake_openai, run_module):
    fake_openai.between = 0.005
    code, result = run_module(concurrency_sweep, {
        "url": fake_openai.base, "model": "lab-chat", "concurrency": [1, 2], "requests": 4,
        "long_prompt_tokens": 600, "long_max_tokens": 16, "short_max_tokens": 8, "target_seconds": 30,
        "shares": {"short": 3, "long": 1},
    })
    assert code == 0, result
    assert result["changed"] is False and result["load_sent"] is True
    assert all(row["tpot_p50"] is not None and row["itl_p99"] is not None for row in result["levels"])
    assert [(r["profile"], r["concurrency"], r["requests_ok"]) for r in result["levels"]] == [
        ("short", 1, 4), ("short", 2, 4), ("long", 1, 4), ("long", 2, 4)]
    assert result["recommendation"]["max_num_seqs"] in (1, 2)
    assert result["recommendation"]["shares"] == {"short": 0.75, "long": 0.25}
    assert result["table"][0].startswith("PROFILE")
    assert len(result["table"]) == 5
    assert result["profiles"]["long"]["prompt_tokens_target"] == 600
    assert all(body["stream_options"] == {"include_usage": True} for body in fake_openai.bodies)


def test_check_mode_sends_no_load(fake_openai, run_module):
    """tune-concurrency.yml --check: the engine is asked /v1/models and nothing else."""
    code, result = run_module(concurrency_sweep, {
        "url": fake_openai.base, "model": "lab-chat", "concurrency": [1, 2], "requests": 4,
        "shares": {"short": 3, "long": 1}, "_ansible_check_mode": True,
    })
    assert code == 0, result
    assert result["changed"] is False and result["load_sent"] is False
    assert fake_openai.bodies == []
    assert result["levels"] == [] and result["table"] == [] and result["recommendation"]["max_num_seqs"] is None
    assert result["engine"] == {"url": fake_openai.base, "model": "lab-chat", "max_model_len": 4096}
    assert result["recommendation"]["shares"] == {"short": 0.75, "long": 0.25}
    assert result["recommendation"]["reasoning"][0].startswith("check mode: ")


@pytest.mark.parametrize("args, match", [
    ({"model": "other"}, "serves ['lab-chat'], not 'other'"),
    ({"long_prompt_tokens": 4000}, "needs 4000 + 256 tokens but the engine's max_model_len is 4096"),
])
def test_check_mode_still_checks_the_engine(fake_openai, run_module, args, match):
    code, result = run_module(concurrency_sweep, dict({"url": fake_openai.base, "model": "lab-chat",
                                                       "_ansible_check_mode": True}, **args))
    assert code == 1 and match in result["msg"]
    assert fake_openai.bodies == []


@pytest.mark.parametrize("args, match", [
    ({"concurrency": [0, 4]}, "concurrency must list integers >= 1"),
    ({"duration": 0}, "duration must be a positive number"),
    ({"tolerance": 2}, "tolerance is a fraction"),
    ({"target_seconds": -1}, "target_seconds must be a positive"),
    ({"profiles": ["short"], "shares": {"long": 1}}, "shares name profiles that are not swept: long"),
])
def test_bad_parameters_fail_before_any_request(fake_openai, run_module, args, match):
    code, result = run_module(concurrency_sweep, dict({"url": fake_openai.base, "model": "lab-chat"}, **args))
    assert code == 1
    assert match in result["msg"]
    assert fake_openai.bodies == []


def test_engine_not_reachable(run_module):
    code, result = run_module(concurrency_sweep, {"url": "http://127.0.0.1:9", "model": "lab-chat", "requests": 1})
    assert code == 1
    assert result["msg"].startswith("concurrency_sweep against http://127.0.0.1:9: GET http://127.0.0.1:9/v1/models")


def test_failing_engine_is_reported_not_recommended(fake_openai, run_module):
    fake_openai.mode = "status"
    code, result = run_module(concurrency_sweep, {
        "url": fake_openai.base, "model": "lab-chat", "profiles": ["short"], "warmup": 0,
        "concurrency": [2], "duration": 5, "max_failures": 3})
    assert code == 0
    row = result["levels"][0]
    assert row["requests_ok"] == 0 and 3 <= row["requests_failed"] <= 4
    assert row["errors"][0].startswith("HTTP 503")
    assert result["recommendation"]["max_num_seqs"] is None


def test_a_sweep_in_parts_prints_a_line_per_level_and_recommends_over_all(fake_openai, run_module):
    fake_openai.between = 0.005
    args = {"url": fake_openai.base, "model": "lab-chat", "concurrency": [1, 2], "requests": 3, "profiles": ["short"],
            "short_max_tokens": 8, "progress_interval": 1e-9}
    parts, resume = [], None
    while True:
        code, result = run_module(concurrency_sweep, dict(args, **({"resume": resume} if resume else {})))
        assert code == 0, result
        parts.append(result)
        if result["progress"]["done"]:
            break
        resume = result["progress"]["resume"]
    assert len(parts) == 2 and "recommendation" not in parts[0]
    assert [line.split(":")[0] for part in parts for line in part["progress"]["lines"]] == ["level 1 of 2", "level 2 of 2"]
    assert parts[1]["progress"]["lines"][0].startswith("level 2 of 2: short x 2: ")
    assert len(parts[-1]["levels"]) == 2 and parts[-1]["recommendation"]["max_num_seqs"] in (1, 2)
    assert len(parts[-1]["table"]) == 3


# --- the action plugin reads the tune_* knobs the task leaves out (issue 36) --------------------------------------

def _swept_args(task_args, variables):
    """The module arguments the action plugin's first run sends, for a task with ``task_args`` and ``variables``."""
    from ansible_collections.factory_floor.llm.plugins.action.concurrency_sweep import ActionModule
    from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import action_plugin

    return action_plugin(ActionModule, "concurrency_sweep", task_args, variables).module_args(variables)


def test_the_action_reads_the_tune_knobs_the_task_leaves_out():
    knobs = dict(tune_concurrency=[1, 4], tune_profiles=["short"], tune_duration=30, tune_requests=None,
                 tune_short_max_tokens=64, tune_long_prompt_tokens=2000, tune_long_max_tokens=128,
                 tune_request_timeout=300, tune_target_seconds=None, tune_target_metric="ttft", tune_shares={})
    assert _swept_args({"url": "http://127.0.0.1:8000"}, knobs) == {
        "url": "http://127.0.0.1:8000", "concurrency": [1, 4], "profiles": ["short"], "duration": 30,
        "short_max_tokens": 64, "long_prompt_tokens": 2000, "long_max_tokens": 128, "timeout": 300,
        "target_metric": "ttft"}  # null requests / target_seconds and empty shares: the module's defaults
    # Explicit arguments win; set knobs pass through; undefined ones leave the module's defaults.
    assert _swept_args({"duration": 5, "shares": {"short": 1}}, dict(tune_requests=7, tune_target_seconds=2.5)) == {
        "duration": 5, "shares": {"short": 1}, "requests": 7, "target_seconds": 2.5}
    assert _swept_args({}, {}) == {}
