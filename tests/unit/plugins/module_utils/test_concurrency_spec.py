# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""num_speculative_tokens as a dimension of the concurrency sweep (plugins/module_utils/_concurrency_spec.py): the
plan and its refusals, the runs kept from one run to the next, and the comparison at the site's concurrency."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _concurrency_spec as spec

DEPLOY = "playbooks/deploy.yml"
MTP2 = ["vllm", "serve", "/m", "--speculative-config", '{"method":"mtp","num_speculative_tokens":2}']
RUNNING = {"item": "vllm-replica.service", "running": True, "args_now": MTP2}


def row(profile, concurrency, tokens, ttft=0.5, tpot=0.05, failed=0, completion=128):
    return {"profile": profile, "concurrency": concurrency, "tokens_per_s": tokens, "ttft_p50": ttft,
            "ttft_p95": ttft * 2, "tpot_p50": tpot, "tpot_p95": tpot * 1.5, "requests_failed": failed,
            "completion_tokens_mean": completion}


def test_an_empty_list_is_the_dimension_off_whatever_the_engine_runs():
    for asked in ([], None, ""):
        assert spec.plan(asked, {}, {}, "spark-a", DEPLOY) == {
            "tokens": [], "config": {}, "source": "", "now": None, "errors": [], "next": []}


def test_the_running_engines_config_plans_one_run_per_other_value():
    planned = spec.plan([2, "4"], RUNNING, {"method": "mtp", "num_speculative_tokens": 4}, "spark-a", DEPLOY)
    assert planned["errors"] == [] and planned["tokens"] == [2, 4] and planned["now"] == 2
    assert planned["source"] == "vllm-replica.service"
    assert planned["next"] == ["ansible-playbook -i <inventory> playbooks/deploy.yml -e '{\"vllm_speculative_config\": "
                               "{\"method\": \"mtp\", \"num_speculative_tokens\": 4}}' --limit spark-a,proxy"]


def test_without_a_running_engine_the_inventorys_config_is_read():
    planned = spec.plan([2, 4], {}, {"model": "/models/draft", "num_speculative_tokens": 4}, "spark-a", DEPLOY)
    assert planned["errors"] == [] and planned["now"] == 4 and planned["source"] == ""
    assert '"model": "/models/draft", "num_speculative_tokens": 2' in planned["next"][0]


@pytest.mark.parametrize("asked", [[0, 2], [2, 2], ["two"], [True], 2, [2.5]])
def test_a_list_that_is_not_distinct_integers_of_one_or_more_is_refused(asked):
    assert spec.plan(asked, RUNNING, {}, "spark-a", DEPLOY)["errors"] == [
        "tune_num_speculative_tokens must be a list of distinct integers >= 1 (vLLM's num_speculative_tokens, draft "
        "tokens proposed per step), got %s." % (asked,)]


def test_an_engine_without_a_speculative_config_is_refused_saying_what_to_set():
    running = dict(RUNNING, args_now=["vllm", "serve", "/m"])
    assert spec.plan([2, 4], running, {"method": "mtp"}, "spark-a", DEPLOY)["errors"] == [
        "tune_num_speculative_tokens [2, 4] sweeps vLLM's num_speculative_tokens, which only an engine with a "
        "speculative config has: the engine vllm-replica.service on spark-a runs no --speculative-config with a "
        "method or a draft model. Set vllm_speculative_config in the inventory (for example {method: mtp, "
        "num_speculative_tokens: 2} for a model with MTP heads, or {model: <draft model directory>, "
        "num_speculative_tokens: 2}), deploy it (playbooks/deploy.yml --limit spark-a,proxy), then sweep; or leave "
        "tune_num_speculative_tokens empty."]
    errors = spec.plan([2], {}, {"num_speculative_tokens": 2}, "spark-a", DEPLOY)["errors"]
    assert errors and "the inventory of spark-a sets no --speculative-config" in errors[0]


def test_an_engine_running_a_value_outside_the_list_is_refused_with_the_deploy_of_the_first():
    assert spec.plan([3, 4], RUNNING, {}, "spark-a", DEPLOY)["errors"] == [
        "The engine vllm-replica.service on spark-a runs num_speculative_tokens 2, not one of "
        "tune_num_speculative_tokens [3, 4]: each run of the sweep measures the value the engine runs. Deploy one of "
        "them first (ansible-playbook -i <inventory> playbooks/deploy.yml -e '{\"vllm_speculative_config\": "
        "{\"method\": \"mtp\", \"num_speculative_tokens\": 3}}' --limit spark-a,proxy), or add 2 to the list."]
    errors = spec.plan([2], {}, {"method": "mtp"}, "spark-a", DEPLOY)["errors"]
    assert "runs num_speculative_tokens unset (vLLM's default)" not in errors[0]
    assert "sets num_speculative_tokens unset (vLLM's default), not one of" in errors[0]


def test_runs_of_the_same_engine_are_kept_and_another_engines_dropped():
    planned = spec.plan([2, 4], RUNNING, {}, "spark-a", DEPLOY)
    key = spec.key(planned["config"], {"model": "chat"}, "8192")
    assert key == spec.key(dict(planned["config"], num_speculative_tokens=4), {"model": "chat"}, "8192")
    assert key != spec.key(planned["config"], {"model": "chat"}, "4096")
    four = [row("short", 8, 100.0)]
    merged = spec.merge(planned, {"key": key, "runs": {"4": four, "2": [row("short", 8, 1.0)]}}, key,
                        [row("short", 8, 145.0)])
    assert merged["runs"]["4"] == four and merged["runs"]["2"][0]["tokens_per_s"] == 145.0 and merged["dropped"] == []
    merged = spec.merge(planned, {"key": "other", "runs": {"4": four, "10": four}}, key, [])
    assert merged == {"key": key, "runs": {}, "dropped": ["4", "10"]}


def test_the_comparison_names_the_best_value_at_the_engines_max_num_seqs():
    runs = {"2": [row("short", 1, 30.0), row("short", 8, 145.0), row("long", 8, 145.0, tpot=0.02)],
            "4": [row("short", 1, 32.0), row("short", 8, 100.0), row("long", 8, 100.0)]}
    done = spec.compare({"key": "k", "runs": runs, "dropped": []}, [2, 4], "8", 1, {"short": 1, "long": 1})
    assert done["best"] == 2 and done["level"] == 8 and done["rates"] == {2: 145.0, 4: 100.0} and done["missing"] == []
    assert done["lines"][-1] == ("recommended num_speculative_tokens: 2 at 8 concurrent requests (the engine's "
                                 "max_num_seqs): 145.0 tokens/s for the mix, ahead of 4 (100.0) by 45%")
    assert done["lines"][1].split() == ["PROFILE", "CONC", "DRAFT", "TOK/S", "TTFT_P50", "TTFT_P95", "TPOT_P50_MS",
                                        "TPOT_P95_MS"]
    assert done["lines"][2].split() == ["short", "1", "2", "30.0", "0.500", "1.000", "50.0", "75.0"]
    assert [line.split()[:3] for line in done["lines"][2:8]] == [
        ["short", "1", "2"], ["short", "1", "4"], ["short", "8", "2"], ["short", "8", "4"], ["long", "8", "2"],
        ["long", "8", "4"]]
    assert done["figures"][2]["long"][8]["tpot_p50"] == 0.02


def test_within_the_tolerance_the_fewer_draft_tokens_win_and_failures_do_not_qualify():
    runs = {"2": [row("short", 8, 100.0)], "4": [row("short", 8, 102.0)], "6": [row("short", 8, 500.0, failed=1)]}
    done = spec.compare({"key": "k", "runs": runs, "dropped": []}, [2, 4, 6], None, 8, {"short": 1})
    assert done["best"] == 2 and done["level"] == 8 and 6 not in done["rates"]
    assert "(the recommended max_num_seqs)" in done["lines"][-1]


def test_a_value_not_measured_yet_is_named_and_the_best_so_far_said_so():
    done = spec.compare({"key": "k", "runs": {"2": [row("short", 4, 80.0)]}, "dropped": ["3"]}, [2, 4], 16, None, {})
    assert done["missing"] == [4] and done["best"] == 2 and done["level"] == 4
    assert done["lines"][-2] == ("not compared: the runs saved for 3 were of another engine (model, speculative "
                                 "method or draft, or batch budget); measure them again")
    assert done["lines"][-1].endswith("(the highest level every value ran): 80.0 tokens/s for the mix; of the values "
                                      "measured so far, not yet [4]")


def test_no_value_without_failures_recommends_none():
    done = spec.compare({"key": "k", "runs": {"2": [row("short", 4, 80.0, failed=2)]}, "dropped": []}, [2], 4, None,
                        {})
    assert done["best"] is None
    assert done["lines"][-1] == ("recommended num_speculative_tokens: none (no value ran at 4 concurrent requests "
                                 "without failures)")
    assert spec.compare({"key": "k", "runs": {}, "dropped": []}, [2], 4, None, {})["lines"][-1] == (
        "recommended num_speculative_tokens: none (no level every value ran; not measured yet: [2])")
