# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The concurrency tuning's decisions around the sweep (plugins/module_utils/_concurrency_sweep_check.py): one test
per outcome and refusal, in the words the role's tasks said before."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _concurrency_sweep_check as sc

ASKED = dict(inventory_hostname="spark-a", engines=["spark-a", "spark-b"], tune_concurrency=[1, 4, 8],
             tune_profiles=["short", "long"], tune_target_metric="e2e", tune_write_path="/inv/host_vars/spark-a.yml",
             tune_allow_over_cap=False, tune_long_prompt_tokens=3000, tune_load_host="spark-a",
             vllm_max_num_seqs=None, vllm_max_num_batched_tokens=None, nginx_proxy_backend_address="",
             url="http://127.0.0.1:8000", playbook_dir="/src/playbooks")
RUNNING = [{"item": "vllm-replica.service", "running": True,
            "args_now": ["vllm", "serve", "/m", "--max-num-seqs", "4", "--max-num-batched-tokens=8192"]},
           {"item": "vllm-split.service", "running": False}]


def test_a_sweep_within_the_cap_plans_the_engines_url():
    planned = sc.plan(ASKED, [])
    assert planned["errors"] == [] and planned["url"] == "http://127.0.0.1:8000" and planned["cap"] is None
    assert planned["cap_source"] == "" and planned["load_host"] == "spark-a"


def test_the_cap_and_budget_are_the_running_engines_else_the_inventorys():
    planned = sc.plan(dict(ASKED, tune_concurrency=[1, 4]), RUNNING)
    assert (planned["cap"], planned["batched"], planned["cap_source"]) == ("4", "8192", "vllm-replica.service")
    planned = sc.plan(dict(ASKED, vllm_max_num_seqs=16, vllm_max_num_batched_tokens=4096), RUNNING[1:])
    assert (planned["cap"], planned["batched"], planned["cap_source"]) == (16, 4096, "")


def test_the_load_from_a_proxy_host_goes_to_the_replicas_backend_address():
    planned = sc.plan(dict(ASKED, tune_load_host="gw", nginx_proxy_backend_address="10.89.8.10"), [])
    assert planned["url"] == "http://10.89.8.10:8000" and planned["load_host"] == "gw"
    assert sc.plan(dict(ASKED, tune_load_host="gw"), [])["url"] == "http://spark-a:8000"


@pytest.mark.parametrize("change", [
    {"inventory_hostname": "gw"}, {"tune_concurrency": []}, {"tune_concurrency": [0, 4]}, {"tune_profiles": []},
    {"tune_profiles": ["short", "chat"]}, {"tune_target_metric": "p99"}, {"tune_write_path": ""},
])
def test_what_is_not_asked_right_is_refused(change):
    asked = dict(ASKED, **change)
    assert sc.plan(asked, [])["errors"] == [
        "tune_host must be a host of group gb10 (got %s); tune_concurrency a list of integers >= 1 (got %s); "
        "tune_profiles some of short, long (got %s); tune_target_metric e2e, ttft or tpot (got %s)."
        % (asked["inventory_hostname"], asked["tune_concurrency"], asked["tune_profiles"], asked["tune_target_metric"])]


def test_levels_above_the_engines_cap_are_refused_unless_allowed():
    assert sc.plan(ASKED, RUNNING)["errors"] == [
        "The highest level (8) is above the engine's max_num_seqs (4): vLLM would queue the rest and the levels above 4 "
        "would measure its queue, not the engine running that many. Deploy this host with a higher cap for the sweep "
        "(ansible-playbook -i <inventory> playbooks/deploy.yml -e vllm_max_num_seqs=8 --limit spark-a,proxy), lower "
        "tune_concurrency, or pass -e tune_allow_over_cap=true."]
    assert sc.plan(dict(ASKED, tune_allow_over_cap="true"), RUNNING)["errors"] == []


def test_the_batch_note_says_the_budget_and_warns_when_a_long_prompt_is_chunked():
    assert sc.plan(ASKED, [])["batch_note"] == (
        "The engine runs with max_num_batched_tokens unset (vLLM's default: 2048 on GB10, where it cannot read the "
        "device's memory): the figures below hold for it. A long prompt of 3000 tokens is prefilled in chunks of it; "
        "the GB10 recipes run 8192-16384 (vllm_max_num_batched_tokens, then playbooks/deploy.yml) - measure with the "
        "budget you will serve with.")
    assert sc.plan(dict(ASKED, tune_concurrency=[1]), RUNNING)["batch_note"] == (
        "The engine runs with max_num_batched_tokens 8192: the figures below hold for it. ")


SWEEP = {"load_sent": True, "table": ["level 1 ..."], "engine": {"max_model_len": 8192},
         "profiles": {"long": {"prompt_tokens": 3000}}, "levels": [{"concurrency": 1}],
         "recommendation": {"max_num_seqs": 8, "reasoning": ["8 is the best"], "shares": {"short": 1, "long": 1}}}
TOLD = dict(inventory_hostname="spark-a", tune_target_seconds=20.0, tune_target_metric="e2e", tune_write=False,
            tune_write_path="/inv/host_vars/spark-a.yml", tune_output_dir="/src/build/tune-concurrency")


def test_the_report_prints_saves_and_words_the_inventory_line():
    planned = sc.plan(dict(ASKED, tune_concurrency=[1, 4]), RUNNING)
    done = sc.report(TOLD, planned, SWEEP)
    assert done["lines"] == [
        "level 1 ...", "",
        "engine http://127.0.0.1:8000 (load from spark-a), max_model_len 8192, max_num_seqs now 4 (vllm-replica.service)",
        "engine group: tensor_parallel_size 1 (vllm-replica.service: no --tensor-parallel-size, vLLM's default), "
        "saved with the figures for kv_cache_plan's groupings",
        'long profile: {"prompt_tokens": 3000}', "latency target: e2e p95 <= 20.0 s", "", "8 is the best", "",
        "recommended vllm_max_num_seqs: 8",
        "the proxy (nginx_proxy) has no per-replica cap to set; max_num_seqs is the only one",
        "files: /src/build/tune-concurrency/spark-a.json, .png",
        "not written (-e tune_write=true writes it to /inv/host_vars/spark-a.yml)"]
    assert done["saved"]["max_num_batched_tokens"] == 8192 and done["saved"]["url"] == "http://127.0.0.1:8000"
    assert done["saved"]["tensor_parallel_size"] == 1
    assert done["line"] == ('vllm_max_num_seqs: 8  # tune-concurrency.yml, e2e p95 <= 20.0 s, shares '
                            '{"short": 1, "long": 1}')
    assert done["refusal"] == ""


def test_the_report_without_a_target_or_an_engine_reading():
    done = sc.report(dict(TOLD, tune_target_seconds=None, tune_write=True), sc.plan(ASKED, []), SWEEP)
    assert "latency target: none (-e tune_target_seconds=S)" in done["lines"]
    assert "engine http://127.0.0.1:8000 (load from spark-a), max_model_len 8192, max_num_seqs now None (inventory)" \
        in done["lines"]
    assert done["lines"][-1] == "writing it to /inv/host_vars/spark-a.yml (next task)"
    assert done["saved"]["max_num_batched_tokens"] is None and ", no latency target, " in done["line"]


def test_writing_asked_with_no_qualifying_level_is_refused_after_a_sweep_that_sent_load():
    sweep = dict(SWEEP, recommendation={"max_num_seqs": None, "reasoning": [], "shares": {}})
    done = sc.report(dict(TOLD, tune_write=True), sc.plan(ASKED, []), sweep)
    assert done["refusal"] == ("No level met the target, so nothing was written to /inv/host_vars/spark-a.yml. See the "
                               "reasoning above; relax tune_target_seconds or sweep lower levels.")
    assert "recommended vllm_max_num_seqs: none" in done["lines"]
    assert sc.report(dict(TOLD, tune_write=True), sc.plan(ASKED, []), dict(sweep, load_sent=False))["refusal"] == ""


MTP = {"item": "vllm-replica.service", "running": True,
       "args_now": ["vllm", "serve", "/m", "--max-num-seqs", "8", "--speculative-config",
                    '{"method":"mtp","num_speculative_tokens":2}']}


def test_the_num_speculative_tokens_dimension_is_off_by_default_and_refused_without_a_speculative_config():
    assert sc.plan(ASKED, [MTP])["speculative"]["tokens"] == []
    planned = sc.plan(dict(ASKED, tune_concurrency=[1, 4], tune_num_speculative_tokens=[2, 4]), RUNNING)
    assert len(planned["errors"]) == 1 and planned["errors"][0].startswith(
        "tune_num_speculative_tokens [2, 4] sweeps vLLM's num_speculative_tokens, which only an engine with a "
        "speculative config has: the engine vllm-replica.service on spark-a runs no --speculative-config")
    planned = sc.plan(dict(ASKED, tune_num_speculative_tokens=[2, 4]), [MTP])
    assert planned["errors"] == [] and planned["speculative"]["now"] == 2 and len(planned["speculative"]["next"]) == 1


def test_the_report_compares_this_runs_value_with_the_ones_saved_before():
    planned = sc.plan(dict(ASKED, tune_num_speculative_tokens=[2, 4]), [MTP])
    levels = [{"profile": "short", "concurrency": 8, "tokens_per_s": 145.0, "requests_failed": 0,
               "completion_tokens_mean": 128, "ttft_p50": 0.5, "ttft_p95": 1.0, "tpot_p50": 0.05, "tpot_p95": 0.07}]
    sweep = dict(SWEEP, engine={"model": "chat", "max_model_len": 8192}, levels=levels,
                 recommendation={"max_num_seqs": 8, "reasoning": [], "shares": {"short": 1.0}})
    first = sc.report(TOLD, planned, sweep, {})
    assert first["saved"]["speculative"]["runs"] == {"2": levels}
    assert "recommended num_speculative_tokens: 2 at 8 concurrent requests (the engine's max_num_seqs): 145.0 " \
        "tokens/s for the mix; of the values measured so far, not yet [4]" in first["lines"]
    assert first["lines"][-5].startswith("next value: ansible-playbook -i <inventory> playbooks/deploy.yml -e")
    assert first["lines"][-4:] == ["", "the proxy (nginx_proxy) has no per-replica cap to set; max_num_seqs is the only one",
                                   "files: /src/build/tune-concurrency/spark-a.json, .png",
                                   "not written (-e tune_write=true writes it to /inv/host_vars/spark-a.yml)"]
    four = sc.plan(dict(ASKED, tune_num_speculative_tokens=[2, 4]),
                   [dict(MTP, args_now=MTP["args_now"][:-1] + ['{"method":"mtp","num_speculative_tokens":4}'])])
    slower = [dict(levels[0], tokens_per_s=100.0)]
    second = sc.report(TOLD, four, dict(sweep, levels=slower), first["saved"])
    assert second["saved"]["speculative"]["runs"] == {"2": levels, "4": slower}
    assert second["saved"]["speculative"]["recommendation"] == {"best": 2, "level": 8, "rates": {2: 145.0, 4: 100.0},
                                                                "missing": []}
    assert "recommended num_speculative_tokens: 2 at 8 concurrent requests (the engine's max_num_seqs): 145.0 " \
        "tokens/s for the mix, ahead of 4 (100.0) by 45%" in second["lines"]
    assert not [line for line in second["lines"] if line.startswith("next value")]
    assert "speculative" not in sc.report(TOLD, sc.plan(ASKED, [MTP]), sweep)["saved"]


SPLIT = [{"item": "vllm-replica.service", "running": False},
         {"item": "vllm-split.service", "running": True,
          "args_now": ["vllm", "serve", "/m", "--tensor-parallel-size", "2", "--max-num-seqs", "8"]}]


@pytest.mark.parametrize("variables, running, size, source", [
    ({}, SPLIT, 2, "vllm-split.service --tensor-parallel-size"),
    ({}, RUNNING, 1, "vllm-replica.service: no --tensor-parallel-size, vLLM's default"),
    # No engine runs: the inventory's group for the host, else the topology's.
    ({"site_engine_groups": [["spark-b"], ["spark-a", "spark-c", "spark-d"]]}, [], 3, "site_engine_groups"),
    ({"topology": "split", "vllm_split_tensor_parallel_size": "2"}, [], 2, "vllm_split_tensor_parallel_size"),
    ({"topology": "replicas"}, [], 1, "topology replicas"),
])
def test_the_sweep_saves_the_size_of_the_engine_group_it_loads(variables, running, size, source):
    planned = sc.plan(dict(ASKED, tune_concurrency=[1], **variables), running)
    assert (planned["tensor_parallel_size"], planned["tensor_parallel_size_source"]) == (size, source)
    saved = sc.report(dict(TOLD, measured_at="2026-12-07T12:00:00Z"), planned, SWEEP)["saved"]
    assert saved["tensor_parallel_size"] == size and saved["measured_at"] == "2026-12-07T12:00:00Z"
