# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.workload_replay against the stub server of
tests/unit/plugins/module_utils/test_workload_replay_run.py on 127.0.0.1 (a stub, not vLLM)."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import workload_replay
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_workload_replay_run import _Stub, plan_of

# A profile as workload_profile returns it, cut to what a plan reads: 20 requests/s, prompts of 11-20 tokens,
# outputs of 3-5.
PROFILE = {"schema": "factory_floor.llm.workload_profile/1", "total": {
    "arrival_rate_requests_per_s": 20.0, "prefix_cache_hit_fraction": 0.0,
    "prompt_length_tokens": {"buckets": [[10, 0], [20, 50], ["+Inf", 50]], "mean": 15.0},
    "output_length_tokens": {"buckets": [[2, 0], [5, 50], ["+Inf", 50]], "mean": 4.0}}}


@pytest.fixture()
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.bodies = []
    server.behave = lambda body: {"upstream": "10.0.0.1:8000"}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield server
    server.shutdown()
    server.server_close()


def test_replays_a_profile(run_module, stub):
    code, result = run_module(workload_replay, {"url": stub.url, "model": "m", "api_key": "sekrit-1",
                                                "profile": PROFILE, "seconds": 0.5, "seed": 2})
    assert code == 0, result
    replay = result["replay"]
    planned = replay["total"]["requests_planned"]
    assert result["changed"] is False and planned == replay["plan"]["summary"]["requests"] > 0
    assert replay["total"]["requests_ok"] == planned == len(stub.bodies)
    assert replay["total"]["output_tokens"] == replay["total"]["output_tokens_planned"]
    assert replay["engines"][0]["name"] == "10.0.0.1:8000" and replay["url"] == stub.url + "/v1/completions"
    assert "sekrit-1" not in repr(result)


def test_check_mode_sends_nothing(run_module, stub):
    code, result = run_module(workload_replay, {"url": stub.url, "model": "m", "profile": PROFILE, "seconds": 0.5,
                                                "_ansible_check_mode": True})
    assert code == 0 and result["replay"]["plan"]["summary"]["requests"] > 0 and stub.bodies == []


def test_in_flight_bound_warns(run_module, stub):
    stub.behave = lambda body: {"ttft": 0.3}
    code, result = run_module(workload_replay, {"url": stub.url, "model": "m", "max_in_flight": 1,
                                                "plan": plan_of([(0.0, 2), (0.05, 2)])})
    assert code == 0 and result["replay"]["in_flight_bound"]["requests_not_sent"] == 1
    warnings = [w["event"]["msg"] if isinstance(w, dict) else w for w in result["warnings"]]
    assert any("1 planned requests were not sent" in w for w in warnings)


@pytest.mark.parametrize("extra, message", [
    ({"api_key": "sekrit key"}, "the api_key holds whitespace"),
    ({"endpoint": "chat"}, "prompt token_ids needs endpoint completions"),
    ({"token_id_range": [5, 5]}, "token_id_range must be"),
    ({"token_id_range": [3, 500], "vocab_size": 367}, "reaches past the model's vocabulary of 367 tokens"),
    ({"vocab_size": 1}, "vocab_size must be the model's vocabulary"),
    ({"max_in_flight": 0}, "max_in_flight must be at least 1"),
    ({"plan": {"seed": 1}, "profile": None}, "plan has no requests list"),
    ({"hour": "2026-01-01T05"}, "the profile has no hour"),
])
def test_refused_before_sending(run_module, stub, extra, message):
    args = dict({"url": stub.url, "model": "m", "profile": PROFILE, "seconds": 0.5}, **extra)
    args = {k: v for k, v in args.items() if v is not None}
    code, result = run_module(workload_replay, args)
    assert code == 1 and message in result["msg"] and stub.bodies == []
    assert "sekrit" not in result["msg"]


def test_prompts_stay_within_the_vocabulary_the_module_is_given(run_module, stub):
    # The lab's split model has 367 tokens: the default ids (1000-20000) would be answered 400 "out of vocabulary".
    code, result = run_module(workload_replay, {"url": stub.url, "model": "m", "vocab_size": 367,
                                                "plan": plan_of([(0.0, 2), (0.0, 2)])})
    assert code == 0 and len(stub.bodies) == 2
    ids = [t for _path, _headers, body in stub.bodies for t in body["prompt"]]
    assert ids and all(36 <= t < 367 for t in ids)
