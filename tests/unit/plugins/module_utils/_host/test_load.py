# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Load statistics and the load generator against a loopback stand-in for vLLM's HTTP shape
(``fake_openai`` in ../conftest.py, not vLLM). The recommendation is in test_concurrency_plan.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._host.load import (
    LoadError,
    Workload,
    calibrate,
    level_line,
    make_session,
    percentile,
    run_closed_loop,
    stream_chat,
    summarize,
    sweep,
)
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))

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
    # vllm bench serve's definitions: one gap per event after the first output (2 here, ~0.1 s each), and
    # TPOT = (latency to the last token event - TTFT) / (completion tokens - 1) = ~0.2 / 8.
    # (Each gap is timed where the client reads it; their sum is what the server spent.)
    assert len(record["itl"]) == 2 and 0.18 <= sum(record["itl"]) < 0.35
    assert record["last_token"] == pytest.approx(record["ttft"] + sum(record["itl"]))
    assert record["tpot"] == pytest.approx((record["last_token"] - record["ttft"]) / 8)


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
    assert record["tpot"] is None and len(record["itl"]) == 2   # gaps are timed; tokens are never guessed


def test_one_token_has_no_tpot(fake_openai):
    fake_openai.events, fake_openai.completion_tokens = 1, 1
    record = stream_chat(make_session(), fake_openai.base + "/v1/chat/completions", Workload("m").payload("short", 0))
    assert record["ok"] and record["itl"] == [] and record["tpot"] is None


def test_itl_pools_gaps_and_tpot_is_per_request_like_vllm_bench_serve():
    # Two requests: ITL pools their 5 gaps (0.1, 0.1, 0.1, 0.2, 0.4); TPOT is one value per request.
    records = [dict(rec(0.0, 0.5, 1.0), itl=[0.1, 0.1, 0.1], tpot=0.1),
               dict(rec(0.0, 0.5, 1.2), itl=[0.2, 0.4], tpot=0.3),
               dict(rec(0.0, None, 2.0, ok=False, error="boom"), itl=[9.0], tpot=9.0)]   # failed: left out
    summary = summarize(records)
    assert summary["itl_mean"] == pytest.approx(0.18)
    assert summary["itl_p50"] == pytest.approx(0.1)
    assert summary["itl_p99"] == pytest.approx(0.392)     # numpy.percentile([.1, .1, .1, .2, .4], 99)
    assert summary["tpot_mean"] == pytest.approx(0.2) and summary["tpot_p50"] == pytest.approx(0.2)
    assert summary["tpot_p99"] == pytest.approx(0.298)
    assert summary["e2e_p99"] == pytest.approx(1.198) and summary["ttft_p99"] == pytest.approx(0.5)
    # Records without them (balance.py's, an older sweep's): none reported, nothing breaks.
    assert summarize([rec(0.0, 0.5, 1.0)])["tpot_p50"] is None


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


def test_a_sweep_cut_into_calls_runs_every_level_once_and_calibrates_once(fake_openai):
    fake_openai.between = 0.005
    args = dict(base_url=fake_openai.base, model="lab-chat", concurrency=[1, 2], count=3, long_prompt_tokens=600,
                long_max_tokens=8, short_max_tokens=8, report_after=1e-9)
    calls, resume = [], None
    while True:
        result = sweep(resume=resume, **args)
        calls.append(result)
        if result["done"]:
            break
        resume = json.loads(json.dumps(result["resume"]))
    assert [len(c["levels"]) for c in calls] == [1, 2, 3, 4]
    assert [(r["profile"], r["concurrency"]) for r in calls[-1]["levels"]] == [
        ("short", 1), ("short", 2), ("long", 1), ("long", 2)]
    # one calibration (1-token requests) and one warm-up per profile, whichever call ran them
    assert len([b for b in fake_openai.bodies if b["max_tokens"] == 1]) <= 3
    warmups = [b for b in fake_openai.bodies if b["messages"][-1]["content"].startswith("(2000000)")]
    assert len(warmups) == 1
    assert calls[-1]["profiles"] == calls[0]["profiles"] and "resume" not in calls[-1]


@pytest.mark.parametrize("resume", [
    {"engine": {}, "profiles": {}, "levels": [{"profile": "long", "concurrency": 1}], "long_words": 10},
    {"engine": {}, "profiles": {}, "levels": [], "long_words": "many"},
    {"levels": []},
])
def test_a_sweep_refuses_a_resume_of_another_sweep(fake_openai, resume):
    with pytest.raises(LoadError, match="resume is not what an earlier call of this sweep returned"):
        sweep(fake_openai.base, "lab-chat", concurrency=[1, 2], count=1, resume=resume)
    assert fake_openai.bodies == []


def test_level_line():
    level = {"profile": "short", "concurrency": 8, "tokens_per_s": 109.24, "requests_per_min": 26.08, "ttft_p95": 0.412,
             "tpot_mean": 0.0312, "e2e_p95": 4.21, "requests_failed": 0}
    assert level_line(2, 10, level) == ("level 3 of 10: short x 8: 109.2 tokens/s, 26.1 requests/min, TTFT p95 0.41 s, "
                                        "TPOT 0.031 s, e2e p95 4.2 s, 0 failed")
    assert level_line(0, 1, {"profile": "long", "concurrency": 1, "requests_failed": 3}) == (
        "level 1 of 1: long x 1: - tokens/s, - requests/min, TTFT p95 - s, TPOT - s, e2e p95 - s, 3 failed")


# ------------------------------------------------------ copied next to a benchmark


@pytest.mark.parametrize("benchmark", ["balance", "affinity"])
def test_the_benchmark_runs_from_what_its_playbook_copies(tmp_path, benchmark):
    """benchmarks/<name>.yml copies the benchmark and, next to it, the collection's host package whole;
    python3 runs it there without the collection or PYTHONPATH."""
    with open(os.path.join(ROOT, "benchmarks", benchmark + ".yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    copies = [task for play in plays for task in play.get("tasks", ()) if "ansible.builtin.copy" in task]
    (scripts,) = [task["loop"] for task in copies if benchmark + ".py" in task.get("loop", ())]
    (package,) = [task for task in copies if "/_host/" in task["ansible.builtin.copy"]["dest"]]
    assert "plugins/module_utils/_host/*.py" in package["loop"]
    for name in scripts:
        shutil.copy(os.path.join(ROOT, "benchmarks", name), str(tmp_path))
    host_layout.install(tmp_path)
    done = subprocess.run([sys.executable, "-E", "-s", str(tmp_path / (benchmark + ".py")), "--help"],
                          capture_output=True, text=True, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: %s.py" % benchmark)
