# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_workload_profile.py (issue 38: the profile reproduces a known load).

The known load (tests/unit/plugins/synthetic_load.py) is seeded Poisson arrivals at known
rates, prompt and output lengths from a known mixture, conversations re-sending earlier
turns; its /metrics texts are written with prometheus_client under vLLM 0.32's names and
bucket boundaries at every scrape, and ``sample()`` reads them on a fake clock.

Tolerances, and why:

- arrivals, finished requests, token rates, mean lengths, prefix-cache hit fraction:
  exact (1e-6 relative). They come from counters and histogram ``_sum``/``_count``, which
  lose nothing; arrivals are finished + change of running + waiting, which is the
  conservation of requests in the engine at the sample instants.
- quantiles of the lengths: inside the bucket that holds the true quantile (vLLM's
  1-2-5 buckets: up to 2.5x wide, e.g. 2,000-5,000 tokens). Nothing finer is in /metrics.
- long-context share: the true share lies between the reported bounds (they hold for any
  pairing of prompt and output lengths); the estimate is checked against them only.
- arrival rate by hour: exact when the samples fall on the hour (the test's), else off by
  at most one interval's arrivals shared over two hours.
- concurrency: running + waiting exactly at each sample instant.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_profile as wp
from ansible_collections.factory_floor.llm.tests.unit.plugins import synthetic_load as sl

T0 = 1767225600.0  # 2026-01-01T00:00:00Z, on the hour
ENGINES = [{"name": "spark-a", "url": "http://spark-a:8000"}, {"name": "spark-b", "url": "http://spark-b:8000"}]
THRESHOLDS = (20000, 32768, 131072)
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "metrics")


def run(load, window, interval, restarts=None, engines=None, start=T0):
    site = sl.Site(load, start - 3600, restarts)
    clock = sl.FakeTime(start)

    def fetch(url):
        return site.text(url.split("//")[1].split(":")[0], clock.wall())

    sampled = wp.sample(engines or ENGINES, fetch, window, interval, sleep=clock.sleep, clock=clock.clock,
                        wall=clock.wall)
    return wp.profile(sampled, THRESHOLDS), site


def bucket_of(value):
    """The (lower, upper] length bucket of vLLM's 1-2-5 boundaries holding ``value``."""
    lower = 0
    for upper in sl.LENGTH_BUCKETS:
        if value <= upper:
            return lower, upper
        lower = upper
    return lower, math.inf


@pytest.fixture(scope="module")
def two_hours():
    """0.5 requests/s in the first hour, 1.5 in the second, over two engines; sampled every 60 s."""
    load = sl.make_load(7, T0 - 600, [(600, 0.5), (3600, 0.5), (3600, 1.5), (300, 1.0)])
    result, _site = run(load, 7200, 60)
    return load, result


def test_rates_and_counts_are_read_back_exactly(two_hours):
    load, result = two_hours
    truth = sl.truth(load, T0, T0 + 7200, THRESHOLDS)
    total = result["total"]
    assert result["complete"] and result["engines_counted"] == 2 and result["restarts"] == []
    assert total["window_seconds"] == 7200
    assert total["requests_arrived"] == pytest.approx(truth["arrived"], rel=1e-9)
    assert total["arrival_rate_requests_per_s"] == pytest.approx(truth["arrival_rate"], rel=1e-6)
    assert total["requests_finished"] == truth["finished"]
    assert total["requests_finished_by_reason"] == {"abort": 0, "error": 0, "length": 0, "stop": truth["finished"]}
    assert total["prompt_tokens_per_s"] == pytest.approx(truth["prompt_tokens_per_s"], rel=1e-6)
    assert total["generation_tokens_per_s"] == pytest.approx(truth["generation_tokens_per_s"], rel=1e-6)
    assert total["prefix_cache_hit_fraction"] == pytest.approx(truth["hit_fraction"], rel=1e-5)
    # The known load's rates, read back: Poisson counts over an hour are within 3 sigma of 0.5 and 1.5 per second.
    hours = {row["hour_utc"]: row for row in total["by_hour"]}
    assert sorted(hours) == ["2026-01-01T00", "2026-01-01T01"]
    for hour, (begin, rate) in {"2026-01-01T00": (T0, 0.5), "2026-01-01T01": (T0 + 3600, 1.5)}.items():
        arrived = sl.truth(load, begin, begin + 3600)["arrived"]
        assert hours[hour]["seconds_covered"] == 3600
        assert hours[hour]["arrival_rate_requests_per_s"] == pytest.approx(arrived / 3600.0, rel=1e-6)
        assert abs(arrived - rate * 3600) < 3 * math.sqrt(rate * 3600)
    assert total["busiest_hour_utc"] == "2026-01-01T01"


def test_engines_add_up_to_the_total(two_hours):
    load, result = two_hours
    views = [e["profile"] for e in result["engines"]]
    for name, view in zip(("spark-a", "spark-b"), views):
        assert view["requests_finished"] == sum(1 for r in load if r.engine == name and T0 < r.finish <= T0 + 7200)
    total = result["total"]
    assert sum(v["requests_finished"] for v in views) == total["requests_finished"]
    assert sum(v["arrival_rate_requests_per_s"] for v in views) == pytest.approx(total["arrival_rate_requests_per_s"])
    assert sum(v["prompt_length_tokens"]["count"] for v in views) == total["prompt_length_tokens"]["count"]


@pytest.mark.parametrize("key, field", [("prompt_length_tokens", "prompts"), ("output_length_tokens", "outputs")])
def test_lengths_mean_exact_quantiles_within_their_bucket(two_hours, key, field):
    load, result = two_hours
    truth = sl.truth(load, T0, T0 + 7200)[field]
    got = result["total"][key]
    assert got["count"] == len(truth)
    assert got["mean"] == pytest.approx(sum(truth) / len(truth), rel=1e-6)
    assert got["metric"] == {"prompts": "vllm:request_prompt_tokens", "outputs": "vllm:request_generation_tokens"}[field]
    for name, q in wp.QUANTILES:
        true = truth[int(math.ceil(q * len(truth))) - 1]
        lower, upper = bucket_of(true)
        assert lower <= got[name] <= upper, (name, got[name], true)
    assert got["max_at_most"] == bucket_of(truth[-1])[1]
    assert got["buckets"][-1] == ["+Inf", len(truth)]


def test_long_context_share_lies_within_the_bounds(two_hours):
    load, result = two_hours
    truth = sl.truth(load, T0, T0 + 7200, THRESHOLDS)["long"]
    rows = {row["tokens"]: row for row in result["total"]["long_context"]}
    assert sorted(rows) == list(THRESHOLDS)
    for threshold, share in truth.items():
        row = rows[threshold]
        assert row["share_lower_bound"] <= share <= row["share_upper_bound"], (threshold, share, row)
        assert row["share_lower_bound"] <= row["share_estimate"] <= row["share_upper_bound"]
        assert row["requests_per_s_estimate"] == pytest.approx(
            row["share_estimate"] * result["total"]["finish_rate_requests_per_s"], abs=1e-6)
    # The known load has long-context requests (5% of fresh prompts are 40k-150k tokens): they are seen.
    assert rows[32768]["share_lower_bound"] > 0.02


def test_concurrency_is_running_plus_waiting_at_each_sample(two_hours):
    load, result = two_hours
    expected = [sl.inflight_at(load, T0 + 60 * i) for i in range(121)]
    got = result["total"]["concurrency_requests"]
    assert got["samples"] == 121
    assert got["max"] == max(expected)
    assert got["mean"] == pytest.approx(sum(expected) / len(expected), abs=1e-3)
    assert got["p50"] == sorted(expected)[60]


def test_a_backlog_in_the_queue_counts_as_arrived():
    # Traffic rises past what the engines schedule: requests wait minutes before they start. They arrived, and have
    # neither finished nor been counted in the prompt-token counters yet: only num_requests_waiting shows them.
    load = sl.make_load(11, T0 - 300, [(300, 0.1), (900, 1.0)], queued=240.0)
    result, _site = run(load, 900, 30)
    truth = sl.truth(load, T0, T0 + 900)
    backlog = sl.inflight_at(load, T0 + 900) - sl.inflight_at(load, T0)
    assert backlog > 100  # the term this test is about is large: the backlog grew by that many
    total = result["total"]
    assert total["requests_arrived"] == pytest.approx(truth["arrived"], rel=1e-9)
    assert total["requests_arrived"] == pytest.approx(truth["finished"] + backlog, rel=1e-9)
    assert total["requests_finished"] == truth["finished"]


def test_profile_is_json_and_keeps_what_the_replay_needs(two_hours):
    _load, result = two_hours
    text = json.dumps(result, allow_nan=False)
    again = json.loads(text)
    assert again["schema"] == wp.SCHEMA
    assert again["started"] == "2026-01-01T00:00:00Z" and again["ended"] == "2026-01-01T02:00:00Z"
    assert again["total"]["prompt_length_tokens"]["buckets"][0] == [1, 0]


def test_window_off_the_hour_shares_the_straddling_interval():
    load = sl.make_load(11, T0 - 600, [(4200, 1.0)])
    result, _site = run(load, 1200, 90, start=T0 + 3000)
    hours = result["total"]["by_hour"]
    assert [h["hour_utc"] for h in hours] == ["2026-01-01T00", "2026-01-01T01"]
    assert sum(h["seconds_covered"] for h in hours) == pytest.approx(1200)
    truth = sl.truth(load, T0 + 3000, T0 + 4200)
    assert result["total"]["arrival_rate_requests_per_s"] == pytest.approx(truth["arrival_rate"], rel=1e-6)
    for row, (begin, end) in zip(hours, ((T0 + 3000, T0 + 3600), (T0 + 3600, T0 + 4200))):
        exact = sl.truth(load, begin, end)["arrived"]
        # The interval across the hour (90 s at about 1 request/s) is shared in proportion to its seconds.
        assert abs(row["arrival_rate_requests_per_s"] * row["seconds_covered"] - exact) <= 90 * 2.5


def test_a_restart_counts_from_zero_and_only_loses_what_it_lost():
    load = sl.make_load(5, T0 - 600, [(2400, 1.0)])
    restart = T0 + 610.0  # between the samples at 600 and 660
    result, site = run(load, 1200, 60, restarts={"spark-b": restart})
    assert result["restarts"] == ["spark-b"]
    assert any("spark-b restarted 1 time" in note for note in result["notes"])
    b = result["engines"][1]
    assert b["restarts"] == 1
    lost = site.lost
    assert lost, "the test's restart should drop requests in flight"
    theirs = [r for i, r in enumerate(load) if r.engine == "spark-b" and i not in lost]
    # Counted: every request of spark-b finished in the window except those finished between the sample at
    # 600 s and the restart (that engine's counters died with it).
    finished = [r for r in theirs if T0 < r.finish <= T0 + 1200 and not T0 + 600 < r.finish <= restart]
    assert b["profile"]["requests_finished"] == len(finished)
    assert b["profile"]["prompt_length_tokens"]["count"] == len(finished)
    truth = sl.truth(load, T0, T0 + 1200)
    assert 0 < result["total"]["requests_finished"] <= truth["finished"]
    for key in ("requests_finished", "requests_arrived"):
        assert all(e["profile"][key] >= 0 for e in result["engines"])


def test_an_engine_down_for_a_sample_is_spanned_and_one_never_read_is_left_out():
    load = sl.make_load(3, T0 - 600, [(1800, 1.0)])
    site = sl.Site(load, T0 - 3600)
    clock = sl.FakeTime(T0)
    calls = {"spark-b": 0}

    def fetch(url):
        name = url.split("//")[1].split(":")[0]
        if name == "spark-c":
            raise wp.vm.ScrapeError("GET %s: cannot connect: [Errno 111] Connection refused" % url)
        if name == "spark-b":
            calls[name] += 1
            if calls[name] == 3:
                raise wp.vm.ScrapeError("GET %s: no answer within 5s" % url)
        return site.text(name, clock.wall())

    sampled = wp.sample(ENGINES + [{"name": "spark-c", "url": "http://spark-c:8000"}], fetch, 600, 60,
                        sleep=clock.sleep, clock=clock.clock, wall=clock.wall)
    result = wp.profile(sampled)
    assert result["complete"] is False and result["engines_counted"] == 2
    assert result["engines"][2]["profile"] is None and "Connection refused" in result["engines"][2]["errors"][0]
    assert result["engines"][1]["samples_read"] == 10 and result["engines"][1]["samples"] == 11
    truth = sl.truth(load, T0, T0 + 600)
    assert result["total"]["requests_finished"] == truth["finished"]
    assert result["total"]["arrival_rate_requests_per_s"] == pytest.approx(truth["arrival_rate"], rel=1e-6)
    # The round where spark-b was unreadable has no model-wide concurrency sample.
    assert result["total"]["concurrency_requests"]["samples"] == 10
    assert any("spark-c: fewer than two readable samples" in n for n in result["notes"])


@pytest.mark.parametrize("window, interval, message", [
    (0, 15, "window must be a positive number"),
    (60, 0, "interval must be a positive number"),
    (10, 15, "interval (15s) is longer than window (10s)"),
    ("soon", 15, "window must be a number of seconds"),
])
def test_wrong_requests_read_nothing(window, interval, message):
    def fetch(url):
        raise AssertionError("read %s" % url)

    with pytest.raises(wp.ProfileError) as caught:
        wp.sample(ENGINES, fetch, window, interval, sleep=lambda s: None)
    assert message in str(caught.value)


def test_sample_rounds_follow_the_interval_and_end_on_the_window():
    clock = sl.FakeTime(T0)
    seen = []

    def fetch(url):
        seen.append(clock.wall())
        return fixture("vllm_a_t0")

    wp.sample(ENGINES[:1], fetch, 100, 30, sleep=clock.sleep, clock=clock.clock, wall=clock.wall)
    assert [t - T0 for t in seen] == [0, 30, 60, 90, 100]


# --------------------------------------------------------------------------- recorded fixtures

def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return handle.read()


def pair(name, first, second, seconds=20.0):
    return {"name": name, "url": "http://%s:8000" % name, "samples": [
        {"time": T0, "parsed": wp.parse_snapshot(fixture(first)), "error": None},
        {"time": T0 + seconds, "parsed": wp.parse_snapshot(fixture(second)), "error": None}]}


def test_recorded_pairs_read_as_the_fixture_table_says():
    """The fixtures' own table (tests/unit/plugins/module_utils/_host/test_vllm_metrics.py), 20 s apart."""
    result = wp.profile([pair("spark-a", "vllm_a_t0", "vllm_a_t1"), pair("spark-b", "vllm_b_t0", "vllm_b_t1")])
    a, b = (e["profile"] for e in result["engines"])
    # a: 915 -> 924 finished (stop 900 -> 908, length 12 -> 13); in flight 8+0 -> 9+1.
    assert a["requests_finished"] == 9 and a["finish_rate_requests_per_s"] == 0.45
    assert a["requests_arrived"] == 11 and a["arrival_rate_requests_per_s"] == 0.55
    assert a["prompt_tokens_per_s"] == 5000.0 and a["generation_tokens_per_s"] == 111.0
    # prefix cache: hits 2.4M -> 2.6M of queries 3.6M -> 3.9M tokens.
    assert a["prefix_cache_hit_fraction"] == pytest.approx(200000 / 300000, abs=1e-6)
    assert b["requests_finished"] == 8 and b["generation_tokens_per_s"] == 99.0
    assert result["total"]["generation_tokens_per_s"] == 210.0
    assert result["total"]["ttft_seconds"]["count"] == 17
    # These fixtures carry no per-request length histograms: lengths are unknown, and the profile says so.
    assert result["total"]["prompt_length_tokens"] is None
    assert all(row["share_estimate"] is None for row in result["total"]["long_context"])
    assert any("no per-request length histograms" in n for n in result["notes"])


def test_recorded_restart_counts_from_zero():
    result = wp.profile([pair("spark-b", "vllm_b_t0", "vllm_b_restarted")])
    b = result["engines"][0]["profile"]
    assert result["restarts"] == ["spark-b"]
    # After the restart: 15,000 prompt and 1,980 generated tokens, 8 finished, 3 running: all counted from zero.
    assert b["prompt_tokens_per_s"] == 750.0 and b["generation_tokens_per_s"] == 99.0
    assert b["requests_finished"] == 8 and b["requests_arrived"] == 8 + 3
    assert b["prefix_cache_hit_fraction"] == pytest.approx(30000 / 45000, abs=1e-6)


def test_recorded_frozen_engine_has_arrivals_but_finishes_nothing():
    """vLLM 0.32's own names: 4 running, waiting 2 -> 3 and no counter moving in 20 s."""
    result = wp.profile([pair("spark-a", "vllm_0_32_frozen_t0", "vllm_0_32_frozen_t1")])
    a = result["engines"][0]["profile"]
    assert a["requests_finished"] == 0 and a["generation_tokens_per_s"] == 0.0
    assert a["requests_arrived"] == 1 and a["arrival_rate_requests_per_s"] == 0.05
    assert a["concurrency_requests"] == {"samples": 2, "mean": 6.5, "p50": 6, "p95": 7, "max": 7,
                                         "running_max": 4, "waiting_max": 3}
    assert result["restarts"] == []


def test_not_vllm_is_refused():
    with pytest.raises(wp.vm.MetricsError, match="no vllm"):
        wp.parse_snapshot("# TYPE up gauge\nup 1\n")


@pytest.mark.parametrize("threshold, interpolate, expected", [
    (10, False, 0.75), (20, False, 0.25), (15, True, 0.5), (0, True, 1.0), (100, True, 0.0), (1e9, True, 0.0)])
def test_tail_share(threshold, interpolate, expected):
    buckets = {10.0: 1.0, 20.0: 3.0, 50.0: 4.0, math.inf: 4.0}
    assert wp.tail_share(buckets, threshold, interpolate) == pytest.approx(expected)
