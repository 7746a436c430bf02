# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Load statistics, the load generator against a loopback stand-in for vLLM's HTTP shape
(``fake_openai`` in ../conftest.py, not vLLM), and the max_num_seqs recommendation with
tables built on the operations report's figures."""

from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._load import (
    LoadError,
    Workload,
    calibrate,
    format_table,
    make_session,
    percentile,
    recommend,
    run_closed_loop,
    stream_chat,
    summarize,
    sweep,
)

# ------------------------------------------------------------------ percentiles


@pytest.mark.parametrize("values, q, expected", [
    ([], 0.5, None),
    ([None], 0.95, None),
    ([7.0], 0.95, 7.0),
    ([1, 2, 3, 4], 0.5, 2.5),
    ([4, 1, 3, 2], 0.5, 2.5),                 # order does not matter
    ([1, 2, 3, 4, 5], 0.95, 4.8),             # (5 - 1) x 0.95 = 3.8 -> 4 + 0.8 x (5 - 4)
    (list(range(1, 101)), 0.95, 95.05),       # numpy.percentile(range(1, 101), 95) == 95.05
    (list(range(1, 101)), 0.5, 50.5),
    ([1, 2, 3], 1.0, 3.0),
    ([1, 2, 3], 0.0, 1.0),
    ([1, None, 3], 0.5, 2.0),                 # missing values are left out
])
def test_percentile(values, q, expected):
    result = percentile(values, q)
    assert result == (None if expected is None else pytest.approx(expected))


# ---------------------------------------------------------------- summarize


def rec(start, ttft, e2e, completion=128, prompt=30, ok=True, error=None):
    return {"ok": ok, "status": 200 if ok else 503, "error": error, "start": start, "end": start + e2e,
            "ttft": ttft, "e2e": e2e, "prompt_tokens": prompt if ok else None,
            "completion_tokens": completion if ok else None, "upstream": None}


def test_tokens_per_s_is_usage_over_wall_time():
    # Two clients, 10 s of wall time (0 -> 10), 3 answers of 100, 200 and 300 tokens.
    records = [rec(0.0, 0.5, 4.0, 100), rec(0.0, 0.7, 6.0, 200), rec(4.0, 0.4, 6.0, 300)]
    summary = summarize(records)
    assert summary["duration_s"] == 10.0
    assert summary["completion_tokens"] == 600
    assert summary["tokens_per_s"] == 60.0
    assert summary["requests_per_min"] == 18.0
    assert summary["completion_tokens_mean"] == 200.0
    assert summary["prompt_tokens_mean"] == 30.0
    assert summary["e2e_p50"] == 6.0
    assert summary["ttft_p50"] == 0.5
    assert summary["ttft_p95"] == pytest.approx(0.68)
    assert (summary["requests_ok"], summary["requests_failed"], summary["usage_missing"]) == (3, 0, 0)


def test_failed_requests_count_in_wall_time_not_in_tokens_or_latency():
    records = [rec(0.0, 1.0, 5.0, 100), rec(1.0, None, 9.0, ok=False, error="HTTP 503: busy"),
               rec(2.0, None, 1.0, ok=False, error="HTTP 503: busy"), rec(0.0, None, 2.0, ok=False, error="timeout")]
    summary = summarize(records)
    assert summary["duration_s"] == 10.0
    assert summary["tokens_per_s"] == 10.0
    assert summary["requests_per_min"] == 6.0
    assert summary["e2e_p95"] == 5.0
    assert summary["requests_failed"] == 3
    assert summary["errors"] == ["HTTP 503: busy", "timeout"]


def test_tokens_are_not_guessed_when_usage_is_missing():
    records = [rec(0.0, 0.5, 4.0, 100), rec(0.0, 0.5, 4.0, None)]
    summary = summarize(records)
    assert summary["usage_missing"] == 1
    assert summary["tokens_per_s"] is None
    assert summary["completion_tokens"] is None
    assert summary["requests_per_min"] == 30.0


@pytest.mark.parametrize("records", [[], [rec(0.0, None, 3.0, ok=False, error="refused")]])
def test_nothing_succeeded(records):
    summary = summarize(records)
    assert summary["tokens_per_s"] is None
    assert summary["requests_per_min"] is None
    assert summary["e2e_p95"] is None


# ----------------------------------------------------------------- workload


def test_payload_asks_for_usage_and_streams():
    body = Workload("lab-chat").payload("short", 3)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True
    assert body["max_tokens"] == 128
    assert body["model"] == "lab-chat"
    assert "ignore_eos" not in Workload("lab-chat", ignore_eos=False).payload("short", 3)


def test_long_prompts_differ_per_request_and_repeat_per_seed():
    work = Workload("m", long_prompt_tokens=2000, long_max_tokens=64)
    first, second = work.messages("long", 0), work.messages("long", 1)
    assert first[0] == second[0]                       # shared system prompt (prefix-cacheable)
    assert first[1]["content"] != second[1]["content"]  # the thread is different every time
    assert Workload("m", long_prompt_tokens=2000).messages("long", 0) == first
    assert Workload("m", long_prompt_tokens=2000, seed=1).messages("long", 0) != first
    assert work.payload("long", 0)["max_tokens"] == 64
    words = len(first[1]["content"].split())
    assert 0.9 * work.long_words <= words <= 1.2 * work.long_words


def test_unknown_profile():
    with pytest.raises(LoadError, match="unknown profile 'medium'"):
        Workload("m").payload("medium", 0)


def test_calibration_scales_the_thread_to_the_measured_prompt_tokens(fake_openai):
    work = Workload("lab-chat", long_prompt_tokens=1500)
    session = make_session()
    measured = calibrate(work, lambda payload: stream_chat(session, fake_openai.base + "/v1/chat/completions", payload))
    assert abs(measured - 1500) <= 45
    assert all(body["max_tokens"] == 1 for body in fake_openai.bodies)


# ------------------------------------------------------ one streamed request


def test_stream_measures_ttft_e2e_and_tokens_from_usage(fake_openai):
    # 3 content events but usage says 9 tokens: with speculative decoding one event
    # carries several tokens, so tokens come from usage, never from counting events.
    fake_openai.first_delay, fake_openai.between, fake_openai.events = 0.2, 0.1, 3
    fake_openai.completion_tokens = 9
    fake_openai.upstream = "10.0.0.2:8000"
    record = stream_chat(make_session(), fake_openai.base + "/v1/chat/completions",
                         Workload("lab-chat").payload("short", 0))
    assert record["ok"], record["error"]
    assert record["completion_tokens"] == 9
    assert record["prompt_tokens"] > 0
    assert 0.2 <= record["ttft"] < 0.35
    assert 0.4 <= record["e2e"] < 0.6
    assert record["upstream"] == "10.0.0.2:8000"


@pytest.mark.parametrize("mode, error", [
    ("status", "HTTP 503: "),
    ("error_event", "error event: engine died"),
    ("cut", "the stream ended without data: [DONE]"),
])
def test_stream_failures(fake_openai, mode, error):
    fake_openai.mode = mode
    record = stream_chat(make_session(), fake_openai.base + "/v1/chat/completions", Workload("m").payload("short", 0))
    assert not record["ok"]
    assert record["error"].startswith(error)
    assert record["e2e"] >= 0


def test_stream_without_usage_is_ok_but_has_no_tokens(fake_openai):
    fake_openai.mode = "no_usage"
    record = stream_chat(make_session(), fake_openai.base + "/v1/chat/completions", Workload("m").payload("short", 0))
    assert record["ok"]
    assert record["completion_tokens"] is None


def test_stream_connection_refused():
    record = stream_chat(make_session(), "http://127.0.0.1:9/v1/chat/completions", Workload("m").payload("short", 0),
                         timeout=2)
    assert not record["ok"]
    assert "ConnectionError" in record["error"]


# ------------------------------------------------------------- closed loop


def fake_send(seconds=0.02, fail=()):
    state = {"in_flight": 0, "max": 0}
    lock = threading.Lock()

    def send(index, worker):
        with lock:
            state["in_flight"] += 1
            state["max"] = max(state["max"], state["in_flight"])
        start = time.perf_counter()
        time.sleep(seconds)
        with lock:
            state["in_flight"] -= 1
        ok = index not in fail
        return rec(start, seconds / 2, time.perf_counter() - start, ok=ok, error=None if ok else "boom")

    return send, state


@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_closed_loop_keeps_exactly_concurrency_in_flight(concurrency):
    send, state = fake_send()
    records = run_closed_loop(send, concurrency, count=4 * concurrency)
    assert len(records) == 4 * concurrency
    assert state["max"] == concurrency


def test_closed_loop_duration_stops_new_requests():
    send, dummy = fake_send(0.05)
    started = time.perf_counter()
    records = run_closed_loop(send, 2, duration=0.3)
    elapsed = time.perf_counter() - started
    assert 0.3 <= elapsed < 0.45          # started requests finish, none start after 0.3 s
    assert 8 <= len(records) <= 14


def test_closed_loop_stops_after_max_failures():
    send, dummy = fake_send(0.01, fail=set(range(1000)))
    records = run_closed_loop(send, 2, duration=5, max_failures=3)
    assert 3 <= len(records) <= 4


def test_closed_loop_needs_an_end():
    with pytest.raises(LoadError, match="duration or a request count"):
        run_closed_loop(lambda i, w: None, 2)


# -------------------------------------------------------------- whole sweep


def test_sweep_against_the_loopback_stand_in(fake_openai):
    fake_openai.between = 0.01
    result = sweep(fake_openai.base, "lab-chat", concurrency=[1, 3], count=6, long_prompt_tokens=800,
                   long_max_tokens=32, short_max_tokens=16)
    assert [(r["profile"], r["concurrency"]) for r in result["levels"]] == [
        ("short", 1), ("short", 3), ("long", 1), ("long", 3)]
    assert result["engine"]["max_model_len"] == 4096
    for row in result["levels"]:
        assert row["requests_ok"] == 6 and row["requests_failed"] == 0
        assert row["completion_tokens"] == 6 * (16 if row["profile"] == "short" else 32)
        assert row["tokens_per_s"] > 0
    long_rows = [r for r in result["levels"] if r["profile"] == "long"]
    assert all(abs(r["prompt_tokens_mean"] - 800) <= 40 for r in long_rows)
    assert abs(result["profiles"]["long"]["prompt_tokens_calibrated"] - 800) <= 24
    assert fake_openai.max_in_flight == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="other"), "serves \\['lab-chat'\\], not 'other'"),
    (dict(long_prompt_tokens=4000), "needs 4000 \\+ 256 tokens but the engine's max_model_len is 4096"),
    (dict(concurrency=[0]), "integers >= 1"),
    (dict(profiles=["medium"]), "unknown profile"),
])
def test_sweep_refuses(fake_openai, kwargs, match):
    args = dict(base_url=fake_openai.base, model="lab-chat", count=1)
    args.update(kwargs)
    with pytest.raises(LoadError, match=match):
        sweep(**args)
    assert not [b for b in fake_openai.bodies if b["max_tokens"] != 1]   # no load was sent


def test_sweep_unreachable_engine_says_where():
    with pytest.raises(LoadError, match="GET http://127.0.0.1:9/v1/models failed.*vllm_allowed_clients"):
        sweep("http://127.0.0.1:9", "lab-chat", count=1)


# ----------------------------------------------------------- recommendation


def level(profile, concurrency, tokens_per_s, e2e_p95=5.0, ttft_p95=0.5, ok=100, failed=0, tokens_mean=None):
    if tokens_mean is None:
        tokens_mean = 128.0 if profile == "short" else 256.0
    return {"profile": profile, "concurrency": concurrency, "tokens_per_s": tokens_per_s, "e2e_p95": e2e_p95,
            "ttft_p95": ttft_p95, "requests_ok": ok, "requests_failed": failed, "completion_tokens_mean": tokens_mean,
            "errors": ["HTTP 500: x"] if failed else []}


# MISSION.md, one copy, tokens/s by concurrent requests.
SEED_SHORT = {1: 36, 4: 82, 8: 109, 16: 150}
SEED_LONG = {4: 81, 8: 113, 16: 87}


def table(profile, rates, e2e=None):
    return [level(profile, c, t, e2e_p95=(e2e or {}).get(c, 5.0)) for c, t in rates.items()]


@pytest.mark.parametrize("levels, target, expected", [
    # "Above eight long-prompt requests, adding more made the copy slower": 8 wins.
    pytest.param(table("long", SEED_LONG), None, 8, id="seed-long-above-8-slower"),
    pytest.param(table("long", {**SEED_LONG, 12: 104}), None, 8, id="seed-long-with-12"),
    # Short prompts kept gaining up to 16 in the seed's table.
    pytest.param(table("short", SEED_SHORT), None, 16, id="seed-short"),
    # The afternoon: cap 12 gave 91-93 tokens/s, cap 8 81-83 -> 12 beats 8.
    pytest.param(table("short", {8: 82, 12: 92}), None, 12, id="seed-afternoon-12-beats-8"),
    # With a latency target, 16 is too slow for short traffic and 12 is the best that fits.
    pytest.param(table("short", {**SEED_SHORT, 12: 130}, {1: 3.6, 4: 6.3, 8: 9.5, 12: 11.9, 16: 17.2}),
                 15.0, 12, id="short-target-15s"),
    pytest.param(table("short", {**SEED_SHORT, 12: 130}, {1: 3.6, 4: 6.3, 8: 9.5, 12: 11.9, 16: 17.2}),
                 3.0, None, id="nothing-meets-the-target"),
])
def test_recommend_one_profile(levels, target, expected):
    result = recommend(levels, target_seconds=target)
    assert result["max_num_seqs"] == expected
    assert result["reasoning"][-1].startswith("max_num_seqs %d" % expected if expected else "no level meets")


def test_recommend_says_when_the_pick_is_the_highest_level_swept():
    # Lab sweep 2026-11-29 (spark-a, levels 1-12, no target): 12, the highest swept, was
    # the pick; more may be better. A level below the highest carries no such note.
    result = recommend(table("short", {8: 82, 12: 92}))
    assert result["max_num_seqs"] == 12
    assert any(line.startswith("12 is the highest level swept") for line in result["reasoning"])
    result = recommend(table("long", SEED_LONG))
    assert result["max_num_seqs"] == 8
    assert not any("highest level swept" in line for line in result["reasoning"])


def test_recommend_warns_of_few_samples_without_a_target_too():
    # The lab's long levels: one wave each, p50 = p95.
    result = recommend([level("long", 4, 3.6, ok=4), level("long", 8, 4.0, ok=8)])
    assert "long at 4: p95 from only 4 requests; run longer levels for a firmer figure" in result["reasoning"]
    assert "(no latency target)" in result["reasoning"][-1]


def mixed_seed(long_e2e=None):
    # The seed's tables with 12 measured too (short 130, long 110: not in the report).
    return (table("short", {**SEED_SHORT, 12: 130})
            + table("long", {**SEED_LONG, 12: 110}, long_e2e))


def test_recommend_for_a_mix_of_both_profiles():
    # Equal shares, 128 and 256 tokens per answer: the mix at 8 is 111.6 tokens/s, at 12
    # 116.0, at 16 101.2 (long prompts slow down): 12, what the report's team settled on.
    result = recommend(mixed_seed())
    assert result["per_profile"] == {"short": 16, "long": 8}
    assert result["max_num_seqs"] == 12
    assert sorted(result["mixed_tokens_per_s"]) == [4, 8, 12, 16]      # 1: long not measured there
    assert result["mixed_tokens_per_s"][8] == pytest.approx(111.63, abs=0.01)
    assert result["mixed_tokens_per_s"][12] == pytest.approx(115.95, abs=0.01)
    assert "mix (short 50%, long 50%)" in result["reasoning"][-1]


@pytest.mark.parametrize("shares, expected", [
    ({"short": 1, "long": 0}, 16),
    ({"long": 1}, 8),
    ({"short": 1, "long": 1}, 12),
    ({"short": 1, "long": 4}, 8),
])
def test_recommend_follows_the_traffic_mix(shares, expected):
    assert recommend(mixed_seed(), shares=shares)["max_num_seqs"] == expected


def test_latency_target_in_any_profile_rules_a_level_out():
    result = recommend(mixed_seed(long_e2e={12: 40.0, 16: 55.0}), target_seconds=30)
    assert result["max_num_seqs"] == 8
    assert "long at 12: not eligible, e2e_p95 40.0 s is over the target 30 s" in result["reasoning"]


def test_ttft_metric():
    levels = [level("short", 8, 100, e2e_p95=50, ttft_p95=0.8), level("short", 12, 120, e2e_p95=50, ttft_p95=2.5)]
    assert recommend(levels, target_seconds=1.0, metric="ttft")["max_num_seqs"] == 8
    assert recommend(levels, target_seconds=1.0, metric="e2e")["max_num_seqs"] is None


def test_failed_requests_make_a_level_ineligible():
    levels = [level("short", 8, 100), level("short", 12, 130, failed=2)]
    result = recommend(levels)
    assert result["max_num_seqs"] == 8
    assert "short at 12: not eligible, 2 of 102 requests failed (HTTP 500: x)" in result["reasoning"]


@pytest.mark.parametrize("tolerance, expected", [(0.03, 8), (0.0, 12)])
def test_within_tolerance_the_lower_level_wins(tolerance, expected):
    levels = [level("short", 8, 100.0), level("short", 12, 102.0), level("short", 16, 90.0)]
    assert recommend(levels, tolerance=tolerance)["max_num_seqs"] == expected


def test_few_samples_are_flagged():
    result = recommend([level("long", 8, 100.0, ok=6)], target_seconds=60)
    assert "long at 8: p95 from only 6 requests" in result["reasoning"][0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(metric="p99"), "metric must be one of"),
    (dict(shares={"medium": 1}), "not measured: medium"),
    (dict(shares={"short": 0}), "not all 0"),
    (dict(tolerance=1.5), "tolerance"),
])
def test_recommend_errors(kwargs, match):
    with pytest.raises(LoadError, match=match):
        recommend([level("short", 8, 100.0)], **kwargs)


def test_table_marks_the_recommendation():
    rows = [dict(level("short", 8, 109.04), requests_per_min=51.0, ttft_p50=0.3, e2e_p50=4.1, prompt_tokens_mean=31.0),
            dict(level("short", 12, 130.0), requests_per_min=None, ttft_p50=None, e2e_p50=None, prompt_tokens_mean=None)]
    lines = format_table(rows, recommended=12)
    assert lines[0].split() == ["PROFILE", "CONC", "REQ_OK", "FAIL", "TOK/S", "REQ/MIN", "TTFT_P50", "TTFT_P95",
                                "E2E_P50", "E2E_P95", "PROMPT_TOK"]
    assert lines[1].split() == ["short", "8", "100", "0", "109.0", "51.0", "0.300", "0.500", "4.10", "5.00", "31"]
    assert lines[2].split()[:2] == ["short", "*12"]
    assert lines[2].split()[5] == "-"
