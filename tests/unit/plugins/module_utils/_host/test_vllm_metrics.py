# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_host/vllm_metrics.py.

Most tests feed pairs of exposition texts (tests/unit/fixtures/metrics) through an
injected ``fetch``/``sleep``/``clock``; the last group serves the same texts from a real
HTTP server on 127.0.0.1 so the ``requests`` path is exercised too.

The fixtures were written with prometheus_client's own exposition writer, with numbers
chosen by hand so the expectations below can be checked on paper:

============  ==========  ===========  =========  ==========  ====  ===========
fixture       prompt      generation   finished   KV used     KV    ttft +Inf
============  ==========  ===========  =========  ==========  ====  ===========
a_t0          1,200,000     350,000      915      0.40        760k   915
a_t1 (+20 s)  1,300,000     352,220      924      0.45        760k   924
b_t0            900,000     280,000      708      0.30      1,080k   708
b_t1 (+20 s)    980,000     281,980      716      0.35      1,080k   716
b_restarted      15,000       1,980        8      0.05      1,008k     8
============  ==========  ===========  =========  ==========  ====  ===========

``vllm_0_32_frozen_t0``/``_t1`` carry vLLM 0.32.0's own names, labels and buckets (from
vllm/v1/metrics/loggers.py and buckets.py of that release), the engine-step histogram
``vllm:iteration_tokens_total`` included: 200 steps, 2,400 prompt and 4,620 generated tokens,
4 running; between t0 and t1 only the waiting count moves (2 -> 3), a frozen scheduler.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_metrics as vm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "metrics")

A = {"name": "spark-a", "url": "http://spark-a:8000"}
B = {"name": "spark-b", "url": "http://spark-b:8000"}
C = {"name": "spark-c", "url": "http://spark-c:8000"}


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return handle.read()


def drop(text, metric):
    """The exposition text without any line about ``metric``."""
    return "".join(line for line in text.splitlines(True) if metric not in line)


class FakeEngines:
    """``fetch``/``sleep``/``clock`` for collect(): serves texts in order, per URL.

    A value that is an Exception is raised instead (an engine that is down).
    """

    def __init__(self, answers):
        self.answers = {vm.metrics_url(url): list(texts) for url, texts in answers.items()}
        self.now = 1000.0
        self.slept = []
        self.urls = []

    def fetch(self, url):
        self.urls.append(url)
        answer = self.answers[url].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds

    def clock(self):
        return self.now

    def collect(self, engines, **kwargs):
        return vm.collect(engines, self.fetch, sleep=self.sleep, clock=self.clock, **kwargs)


def refused(engine):
    return vm.ScrapeError("GET %s: cannot connect: [Errno 111] Connection refused" % vm.metrics_url(engine["url"]))


def by_name(result):
    return {engine["name"]: engine for engine in result["engines"]}


# --------------------------------------------------------------------------- parsing


def test_parse_keeps_total_suffix_and_sums_series():
    parsed = vm.parse_metrics(fixture("vllm_a_t1"))
    assert parsed["model_name"] == "local-model"
    assert parsed["num_requests_running"] == 9
    assert parsed["num_requests_waiting"] == 1
    # prometheus_client names these families vllm:prompt_tokens etc.; the samples keep _total
    assert parsed["prompt_tokens_total"] == 1300000
    assert parsed["generation_tokens_total"] == 352220
    assert parsed["num_preemptions_total"] == 4
    assert parsed["request_success_total"] == {"stop": 908, "length": 13, "abort": 3, "error": 0}
    assert parsed["kv_cache_usage_perc"] == 0.45
    assert parsed["kv_cache_capacity_tokens"] == 47500 * 16
    assert parsed["process_start_time_seconds"] == pytest.approx(1767171600.41)
    ttft = parsed["histograms"]["ttft_seconds"]
    assert ttft[math.inf] == 924 and ttft[0.25] == 300 and ttft[0.1] == 0
    assert len(ttft) == 23  # vLLM's 22 bounds + +Inf
    assert len(parsed["histograms"]["e2e_latency_seconds"]) == 22


@pytest.mark.parametrize("name, steps", [("vllm_0_32_frozen_t0", 200), ("vllm_a_t1", None)])
def test_parse_engine_steps_from_iteration_tokens_count(name, steps):
    """vLLM 0.32's histogram vllm:iteration_tokens_total: its _count is the engine steps that produced output."""
    assert vm.parse_metrics(fixture(name))["iteration_tokens_total_count"] == steps


def test_parse_ignores_created_samples():
    parsed = vm.parse_metrics(fixture("vllm_a_t1"))
    names = {name for name, _labels in parsed["counter_series"]}
    assert not any(name.endswith("_created") for name in names)
    assert "vllm:generation_tokens_total" in names


def test_parse_legacy_gpu_cache_usage_perc_without_engine_label():
    parsed = vm.parse_metrics(fixture("vllm_legacy_v0"))
    assert parsed["kv_cache_usage_perc"] == 0.125
    assert parsed["kv_cache_capacity_tokens"] == 31250 * 16
    assert parsed["num_preemptions_total"] == 7
    assert parsed["request_success_total"] == {"stop": 40, "length": 2, "abort": 0}


def test_parse_prefers_kv_cache_usage_perc_over_gpu_cache_usage_perc():
    text = fixture("vllm_a_t1") + (
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.\n"
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="local-model"} 0.99\n')
    assert vm.parse_metrics(text)["kv_cache_usage_perc"] == 0.45


def test_parse_capacity_unknown_when_num_gpu_blocks_is_none():
    text = fixture("vllm_a_t1").replace('num_gpu_blocks="47500"', 'num_gpu_blocks="None"')
    assert vm.parse_metrics(text)["kv_cache_capacity_tokens"] is None


def test_parse_data_parallel_engines_in_one_endpoint():
    """Two engine labels on one /metrics: gauges/counters summed, KV usage weighted."""
    lines = []
    for line in fixture("vllm_a_t1").splitlines(True):
        lines.append(line)
        if line.startswith("vllm:") and 'engine="0"' in line:
            other = line.replace('engine="0"', 'engine="1"')
            other = other.replace('num_gpu_blocks="47500"', 'num_gpu_blocks="142500"')
            lines.append(other.replace("} 0.45", "} 0.05"))
    parsed = vm.parse_metrics("".join(lines))
    assert parsed["num_requests_running"] == 18
    assert parsed["generation_tokens_total"] == 2 * 352220
    assert parsed["kv_cache_capacity_tokens"] == (47500 + 142500) * 16
    # (0.45 * 760000 + 0.05 * 2280000) / 3040000 = 0.15
    assert parsed["kv_cache_usage_perc"] == pytest.approx(0.15)
    assert parsed["histograms"]["ttft_seconds"][math.inf] == 2 * 924


@pytest.mark.parametrize("text, message", [
    ("# HELP nginx_up nginx\n# TYPE nginx_up gauge\nnginx_up 1.0\n", "no vllm:* metric"),
    ("<html><body>502 Bad Gateway</body></html>\n", "not Prometheus exposition text"),
    ("", "no vllm:* metric"),
])
def test_parse_rejects_what_is_not_a_vllm_engine(text, message):
    with pytest.raises(vm.MetricsError, match=re.escape(message)):
        vm.parse_metrics(text)


# --------------------------------------------------------------------------- histograms


@pytest.mark.parametrize("q, buckets, expected", [
    # rank 5 of 10 in (0, 1]: 0 + 1 * 5/10
    (0.5, {1.0: 10, 2.0: 10, math.inf: 10}, 0.5),
    # rank 10 of 20 lands in (1, 2] holding 10 of them: 1 + 1 * (10 - 5)/10
    (0.5, {1.0: 5, 2.0: 15, math.inf: 20}, 1.5),
    # rank 19 of 20 is in the +Inf bucket: highest finite bound
    (0.95, {1.0: 5, 2.0: 15, math.inf: 20}, 2.0),
    # rank 99 of 100 in (0.5, 1] holding 40: 0.5 + 0.5 * (99 - 60)/40
    (0.99, {0.25: 20, 0.5: 60, 1.0: 100, math.inf: 100}, 0.9875),
    # rank 30 of 100 in (0.25, 0.5] holding 40: 0.25 + 0.25 * (30 - 20)/40
    (0.3, {0.25: 20, 0.5: 60, 1.0: 100, math.inf: 100}, 0.3125),
    (0.5, {1.0: 0, math.inf: 0}, None),  # no observation
    (0.5, {1.0: 3, 2.0: 4}, None),  # no +Inf bucket
    (0.5, {}, None),
    (0.5, {-1.0: 4, 1.0: 8, math.inf: 8}, -1.0),  # first bound <= 0 is returned as is
    # non-monotonic counts are forced monotonic like Prometheus: {1: 5, 2: 5, inf: 10}
    (0.25, {1.0: 5, 2.0: 4, math.inf: 10}, 0.5),
])
def test_histogram_quantile(q, buckets, expected):
    result = vm.histogram_quantile(q, buckets)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_merge_buckets_keeps_common_bounds_only():
    merged = vm.merge_buckets([{0.5: 1, 1.0: 2, math.inf: 3}, {1.0: 10, 2.5: 20, math.inf: 30}, {}])
    assert merged == {1.0: 12, math.inf: 33}


def test_quantiles_merged_across_two_engines_hand_computed():
    """Buckets are added first, then interpolated: not an average of per-engine quantiles.

    time_to_first_token_seconds, cumulative, a_t1 + b_t1:
      le 0.25: 300+120=420, 0.5: 750+470=1220, 0.75: 860+580=1440, 1.0: 900+620=1520,
      2.5: 920+680=1600, 5.0 and +Inf: 924+716=1640
      p50: rank 820 in (0.25, 0.5]: 0.25 + 0.25 * (820-420)/(1220-420) = 0.375
      p95: rank 1558 in (1.0, 2.5]: 1.0 + 1.5 * (1558-1520)/(1600-1520) = 1.7125
      p99: rank 1623.6 in (2.5, 5.0]: 2.5 + 2.5 * (1623.6-1600)/(1640-1600) = 3.975
    e2e_request_latency_seconds: 5: 50+30=80, 10: 300+200=500, 15: 600+450=1050,
      20: 800+620=1420, 30: 900+690=1590, 40: 920+710=1630, 50: 924+716=1640
      p50: rank 820 in (10, 15]: 10 + 5 * 320/550
      p95: rank 1558 in (20, 30]: 20 + 10 * 138/170
      p99: rank 1623.6 in (30, 40]: 30 + 10 * 33.6/40 = 38.4
    """
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")], B["url"]: [fixture("vllm_b_t1")]})
    total = engines.collect([A, B])["total"]
    assert total["ttft_seconds"] == {"p50": pytest.approx(0.375), "p95": pytest.approx(1.7125),
                                     "p99": pytest.approx(3.975), "count": 1640}
    assert total["e2e_latency_seconds"] == {
        "p50": pytest.approx(10 + 5 * 320 / 550, abs=1e-6),
        "p95": pytest.approx(20 + 10 * 138 / 170, abs=1e-6),
        "p99": pytest.approx(38.4), "count": 1640}


def test_quantiles_over_the_window_use_bucket_increases():
    """With a window only requests finished in it count.

    ttft increases a: 0.25:3 0.5:6 0.75:7 1.0:8 2.5:9 5.0:9; b: 2 5 6 7 8 8
    merged: 0.25:5 0.5:11 0.75:13 1.0:15 2.5:17 +Inf:17
    p50: rank 8.5 in (0.25, 0.5]: 0.25 + 0.25 * (8.5-5)/(11-5)
    """
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")],
                           B["url"]: [fixture("vllm_b_t0"), fixture("vllm_b_t1")]})
    ttft = engines.collect([A, B], window=20)["total"]["ttft_seconds"]
    assert ttft["count"] == 17
    assert ttft["p50"] == pytest.approx(0.25 + 0.25 * 3.5 / 6, abs=1e-6)


def test_quantiles_merge_engines_with_different_buckets():
    """A V0 engine's coarser e2e buckets: only bounds both engines have are used."""
    legacy = {"name": "old", "url": "http://old:8000"}
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")], legacy["url"]: [fixture("vllm_legacy_v0")]})
    e2e = engines.collect([A, legacy])["total"]["e2e_latency_seconds"]
    # common bounds 1, 2.5, 5, 10, 15, ..., 60, +Inf; counts 5: 60, 10: 330, 15: 642, total 966
    # p50: rank 483 in (10, 15]: 10 + 5 * (483-330)/(642-330)
    assert e2e["count"] == 966
    assert e2e["p50"] == pytest.approx(10 + 5 * 153 / 312, abs=1e-6)


# --------------------------------------------------------------------------- sums and rates


def test_two_replicas_one_sample_sums_without_rates():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")], B["url"]: [fixture("vllm_b_t1")]})
    result = engines.collect([A, B])
    assert engines.slept == []
    assert result["complete"] is True and result["unreachable_engines"] == [] and result["restarts"] == []
    assert result["window"] == 0.0 and result["topology"] == "replicas"
    total = result["total"]
    assert total["engines_counted"] == 2
    assert total["num_requests_running"] == 21
    assert total["num_requests_waiting"] == 4
    assert total["prompt_tokens_total"] == 2280000
    assert total["generation_tokens_total"] == 634200
    assert total["num_preemptions_total"] == 4
    assert total["request_success_total"] == {"stop": 1617, "length": 18, "abort": 5, "error": 0}
    assert "rates" not in total
    assert all("rates" not in engine for engine in result["engines"])
    assert [e["restarted"] for e in result["engines"]] == [False, False]


def test_two_replicas_pair_rates():
    """20 s apart: a +2220 gen, +100000 prompt, +9 finished; b +1980, +80000, +8."""
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")],
                           B["url"]: [fixture("vllm_b_t0"), fixture("vllm_b_t1")]})
    result = engines.collect([A, B], window=20)
    assert engines.slept == [20.0]
    assert result["complete"] is True and result["restarts"] == []
    engine = by_name(result)
    assert engine["spark-a"]["rates"] == {"generation_tokens_per_s": 111.0, "prompt_tokens_per_s": 5000.0,
                                          "requests_per_min": 27.0, "elapsed_seconds": 20.0}
    assert engine["spark-b"]["rates"] == {"generation_tokens_per_s": 99.0, "prompt_tokens_per_s": 4000.0,
                                          "requests_per_min": 24.0, "elapsed_seconds": 20.0}
    assert result["total"]["rates"] == {"generation_tokens_per_s": 210.0, "prompt_tokens_per_s": 9000.0,
                                        "requests_per_min": 51.0}
    # values are those of the second read
    assert engine["spark-a"]["generation_tokens_total"] == 352220
    assert result["total"]["num_requests_waiting"] == 4


def test_rates_use_the_time_measured_between_reads():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")]})
    real_sleep = engines.sleep

    def slow_sleep(seconds):  # the second read comes 4 s late (slow scrape, busy host)
        real_sleep(seconds + 4.0)

    engines.sleep = slow_sleep
    rates = engines.collect([A], window=20)["engines"][0]["rates"]
    assert rates["elapsed_seconds"] == 24.0
    assert rates["generation_tokens_per_s"] == pytest.approx(2220 / 24, abs=1e-3)


def test_restart_between_samples_counts_from_zero_and_is_reported():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")],
                           B["url"]: [fixture("vllm_b_t0"), fixture("vllm_b_restarted")]})
    result = engines.collect([A, B], window=20)
    engine = by_name(result)
    assert result["restarts"] == ["spark-b"]
    assert engine["spark-b"]["restarted"] is True and engine["spark-a"]["restarted"] is False
    # the second value is the increase: 1980/20, 15000/20, 8 finished in 20 s
    assert engine["spark-b"]["rates"] == {"generation_tokens_per_s": 99.0, "prompt_tokens_per_s": 750.0,
                                          "requests_per_min": 24.0, "elapsed_seconds": 20.0}
    assert result["total"]["rates"]["generation_tokens_per_s"] == 210.0
    assert all(v >= 0 for e in result["engines"] for v in e["rates"].values())
    # a restart is not an outage: the engine still counts
    assert result["complete"] is True
    assert result["total"]["ttft_seconds"]["count"] == 9 + 8
    assert "restarted" in result["table"][2]


def test_restart_seen_from_counters_alone():
    """Without process_start_time_seconds (multiprocess mode) a counter going down is enough."""
    before = drop(fixture("vllm_b_t0"), "process_start_time_seconds")
    after = drop(fixture("vllm_b_restarted"), "process_start_time_seconds")
    engines = FakeEngines({B["url"]: [before, after]})
    result = engines.collect([B], window=20)
    assert result["restarts"] == ["spark-b"]
    assert result["engines"][0]["rates"]["generation_tokens_per_s"] == 99.0


def test_restart_seen_from_process_start_time_alone():
    """Counters already past their old values, but the process is a new one."""
    after = fixture("vllm_b_t1").replace("process_start_time_seconds 1.76717202087e+09",
                                         "process_start_time_seconds 1.76717292087e+09")
    engines = FakeEngines({B["url"]: [fixture("vllm_b_t0"), after]})
    result = engines.collect([B], window=20)
    assert result["restarts"] == ["spark-b"]
    assert result["engines"][0]["rates"]["generation_tokens_per_s"] == pytest.approx(281980 / 20)


# --------------------------------------------------------------------------- unreachable


def test_engine_down_is_reported_and_left_out_never_zero():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")], B["url"]: [fixture("vllm_b_t1")],
                           C["url"]: [refused(C)]})
    result = engines.collect([A, B, C])
    down = by_name(result)["spark-c"]
    assert down["reachable"] is False
    assert "Connection refused" in down["error"] and "spark-c:8000/metrics" in down["error"]
    assert down["num_requests_running"] is None and down["kv_cache_usage_perc"] is None
    assert result["complete"] is False
    assert result["unreachable_engines"] == ["spark-c"]
    assert result["total"]["engines_counted"] == 2
    assert result["total"]["num_requests_running"] == 21
    assert result["total"]["kv_cache_capacity_tokens"] == 1840000
    assert result["total"]["kv_cache_usage_perc_weighted_mean"] == pytest.approx(0.391304, abs=1e-6)
    table = "\n".join(result["table"])
    assert "DOWN" in table and "INCOMPLETE: spark-c left out" in table


def test_engine_down_in_first_sample_is_unreachable():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")],
                           B["url"]: [refused(B), fixture("vllm_b_t1")]})
    result = engines.collect([A, B], window=20)
    assert result["unreachable_engines"] == ["spark-b"]
    assert by_name(result)["spark-b"]["error"].startswith("first sample: ")
    assert by_name(result)["spark-b"]["rates"] is None
    assert result["total"]["rates"] == {"generation_tokens_per_s": 111.0, "prompt_tokens_per_s": 5000.0,
                                        "requests_per_min": 27.0}


def test_engine_answering_something_else_is_unreachable():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")],
                           B["url"]: ["# TYPE nginx_up gauge\nnginx_up 1\n"]})
    result = engines.collect([A, B])
    assert result["unreachable_engines"] == ["spark-b"]
    assert "no vllm:* metric" in by_name(result)["spark-b"]["error"]


def test_all_engines_down_totals_are_null():
    engines = FakeEngines({A["url"]: [refused(A)], B["url"]: [OSError("network unreachable")]})
    result = engines.collect([A, B])
    total = result["total"]
    assert result["unreachable_engines"] == ["spark-a", "spark-b"]
    assert total["engines_counted"] == 0
    assert total["num_requests_running"] is None and total["generation_tokens_total"] is None
    assert total["kv_cache_usage_perc_weighted_mean"] is None
    assert total["ttft_seconds"] == {"p50": None, "p95": None, "p99": None, "count": 0}
    assert "0/2 up" in result["table"][-1]


# --------------------------------------------------------------------------- topology


def test_split_reads_the_head_only():
    head = {"name": "spark-a", "url": "http://10.0.0.1:8000"}
    engines = FakeEngines({head["url"]: [fixture("vllm_split_head_t0"), fixture("vllm_split_head_t1")]})
    result = engines.collect([head], topology="split", window=20)
    total = result["total"]
    assert result["topology"] == "split" and result["complete"] is True
    assert total["engines_counted"] == 1
    assert total["kv_cache_capacity_tokens"] == 3040000
    assert total["kv_cache_usage_perc_weighted_mean"] == 0.22
    assert total["rates"] == {"generation_tokens_per_s": 180.0, "prompt_tokens_per_s": 6000.0,
                              "requests_per_min": 21.0}
    assert total["num_requests_running"] == result["engines"][0]["num_requests_running"] == 12


def test_split_with_two_engines_fails_clearly():
    with pytest.raises(vm.MetricsError, match=r"exactly one engine, the rank-0 head .* 2 were given: spark-a, spark-b"):
        vm.collect([A, B], lambda url: pytest.fail("must not read anything"), topology="split")


# --------------------------------------------------------------------------- KV cache


def test_kv_usage_is_capacity_weighted_never_summed():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")], B["url"]: [fixture("vllm_b_t1")]})
    total = engines.collect([A, B])["total"]
    # (0.45 * 760000 + 0.35 * 1080000) / 1840000 = 720000 / 1840000
    assert total["kv_cache_usage_perc_weighted_mean"] == pytest.approx(720000 / 1840000, abs=1e-6)
    assert total["kv_cache_usage_weighting"] == "capacity"
    assert total["kv_cache_capacity_tokens"] == 1840000


def test_kv_usage_unweighted_mean_when_capacity_unknown_and_said_so():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t1")],
                           B["url"]: [drop(fixture("vllm_b_t1"), "vllm:cache_config_info")]})
    result = engines.collect([A, B])
    total = result["total"]
    assert total["kv_cache_usage_perc_weighted_mean"] == pytest.approx(0.40)
    assert total["kv_cache_usage_weighting"] == "unweighted"
    assert total["kv_cache_capacity_tokens"] is None
    assert by_name(result)["spark-b"]["kv_cache_capacity_tokens"] is None
    assert any("unweighted mean" in note and "spark-b" in note for note in result["notes"])
    assert "unweighted" in result["table"][-1]


# --------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("engines, topology, message", [
    ([], "replicas", "engines is empty"),
    ([{"name": "a"}], "replicas", "has no url"),
    ([{"url": "http://a:8000"}], "replicas", "has no name"),
    ([{"name": "a", "url": "spark-a:8000"}], "replicas", "not an http"),
    ([A, dict(A, url="http://other:8000")], "replicas", "given twice"),
    ([A], "tp", "topology must be one of replicas, split"),
    (["spark-a"], "replicas", "must be a dict"),
])
def test_validate_engines_rejects(engines, topology, message):
    with pytest.raises(vm.MetricsError, match=message):
        vm.validate_engines(engines, topology)


@pytest.mark.parametrize("window", [-1, float("nan"), "soon"])
def test_bad_window_is_rejected(window):
    with pytest.raises(vm.MetricsError, match="window"):
        vm.collect([A], lambda url: "", window=window)


@pytest.mark.parametrize("url, expected", [
    ("http://spark-a:8000", "http://spark-a:8000/metrics"),
    ("http://spark-a:8000/", "http://spark-a:8000/metrics"),
    ("http://spark-a:8000/metrics", "http://spark-a:8000/metrics"),
    ("https://10.0.0.2:8443/vllm/", "https://10.0.0.2:8443/vllm/metrics"),
])
def test_metrics_url(url, expected):
    assert vm.metrics_url(url) == expected


def test_table_has_a_row_per_engine_and_a_total():
    engines = FakeEngines({A["url"]: [fixture("vllm_a_t0"), fixture("vllm_a_t1")],
                           B["url"]: [fixture("vllm_b_t0"), fixture("vllm_b_t1")]})
    table = engines.collect([A, B], window=20)["table"]
    assert len(table) == 4
    assert table[0].split()[:2] == ["ENGINE", "STATE"] and "GEN_TOK/S" in table[0]
    assert table[1].startswith("spark-a") and table[2].startswith("spark-b")
    assert table[3].split()[:3] == ["TOTAL", "2/2", "up"]
    assert "210.0" in table[3] and "39.1%" in table[3] and "1,840,000" in table[3]


def test_module_util_imports_without_ansible():
    """The watchdog imports it as ``_host.vllm_metrics``, with no ansible installed."""
    code = ("import sys; sys.modules['ansible'] = None; sys.modules['ansible_collections'] = None; "
            "sys.path.insert(0, %r); import _host.vllm_metrics as m; "
            "assert m.PROMETHEUS_CLIENT_IMPORT_ERROR is None" % os.path.dirname(os.path.dirname(vm.__file__)))
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- real HTTP on 127.0.0.1


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.routes[path]``: a list of (status, body, delay) taken in order."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.seen.append((self.path, dict(self.headers)))
        queue = self.server.routes.get(self.path)
        status, body, delay = queue.pop(0) if queue else (404, "not found\n", 0)
        if delay:
            time.sleep(delay)
        payload = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


@pytest.fixture
def http_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.routes = {}
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.base = "http://127.0.0.1:%d" % server.server_address[1]
    yield server
    server.shutdown()
    server.server_close()


def test_http_two_engines_pair_and_one_refused(http_server, closed_port, monkeypatch):
    # an environment proxy must not reroute a direct read of an engine
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:%d" % closed_port)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:%d" % closed_port)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    http_server.routes = {
        "/a/metrics": [(200, fixture("vllm_a_t0"), 0), (200, fixture("vllm_a_t1"), 0)],
        "/b/metrics": [(200, fixture("vllm_b_t0"), 0), (200, fixture("vllm_b_t1"), 0)],
    }
    engines = [{"name": "spark-a", "url": http_server.base + "/a"},
               {"name": "spark-b", "url": http_server.base + "/b/"},
               {"name": "spark-c", "url": "http://127.0.0.1:%d" % closed_port}]
    result = vm.collect(engines, vm.make_fetch(timeout=2), window=0.2)
    engine = by_name(result)
    assert engine["spark-a"]["reachable"] and engine["spark-b"]["reachable"]
    assert engine["spark-a"]["generation_tokens_total"] == 352220
    assert result["total"]["generation_tokens_total"] == 634200
    assert result["unreachable_engines"] == ["spark-c"]
    assert "cannot connect" in engine["spark-c"]["error"]
    # real clock: 2220 tokens over ~0.2 s
    assert engine["spark-a"]["rates"]["elapsed_seconds"] >= 0.2
    assert 0 < engine["spark-a"]["rates"]["generation_tokens_per_s"] <= 2220 / 0.2
    assert [path for path, _headers in http_server.seen] == ["/a/metrics", "/b/metrics"] * 2


def test_http_non_200_is_unreachable(http_server):
    http_server.routes = {"/metrics": [(503, "Service Unavailable\n", 0)]}
    result = vm.collect([{"name": "spark-a", "url": http_server.base}], vm.make_fetch(timeout=2))
    assert result["complete"] is False
    assert "HTTP 503" in result["engines"][0]["error"]


def test_http_timeout_is_unreachable(http_server):
    http_server.routes = {"/metrics": [(200, fixture("vllm_a_t1"), 1.5)]}
    started = time.monotonic()
    result = vm.collect([{"name": "spark-a", "url": http_server.base}], vm.make_fetch(timeout=0.3))
    assert time.monotonic() - started < 1.4
    assert result["unreachable_engines"] == ["spark-a"]
    assert "no answer within 0.3s" in result["engines"][0]["error"]


def test_http_sends_api_key_and_asks_for_text_format(http_server):
    http_server.routes = {"/metrics": [(200, fixture("vllm_a_t1"), 0)]}
    fetch = vm.make_fetch(api_key="s3cret")
    assert "vllm:num_requests_running" in fetch(http_server.base + "/metrics")
    headers = http_server.seen[0][1]
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Accept"].startswith("text/plain")
