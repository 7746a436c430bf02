# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_workload_replay.py: the plan replays the profile it was made from.

The profile is the one ``_workload_profile`` reads from the known synthetic load
(tests/unit/plugins/synthetic_load.py). Tolerances are statistical, four standard errors
of the plan's own draws (a false failure about once in 15,000 runs, and the seeds are
fixed): arrivals are Poisson (count within 4 sqrt(expected)); each length bucket's share is
binomial; the mean length within 4 standard errors of the profile's exact mean. The prefix
cache hit fraction is calibrated, so it must meet the target within 0.002 + what one
request can move.
"""

from __future__ import annotations

import math
import os
import statistics

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_profile as wp
from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_replay as wr
from ansible_collections.factory_floor.llm.tests.unit.plugins import synthetic_load as sl

T0 = 1767225600.0  # 2026-01-01T00:00:00Z
ENGINES = [{"name": "spark-a", "url": "http://spark-a:8000"}, {"name": "spark-b", "url": "http://spark-b:8000"}]


@pytest.fixture(scope="module")
def profile():
    load = sl.make_load(7, T0 - 600, [(600, 0.5), (3600, 0.5), (3600, 1.5), (300, 1.0)])
    site = sl.Site(load, T0 - 3600)
    clock = sl.FakeTime(T0)
    sampled = wp.sample(ENGINES, lambda url: site.text(url.split("//")[1].split(":")[0], clock.wall()), 7200, 60,
                        sleep=clock.sleep, clock=clock.clock, wall=clock.wall)
    return wp.profile(sampled)


@pytest.fixture(scope="module")
def long_plan(profile):
    return wr.plan(profile, 20000, seed=1)


def test_arrivals_are_poisson_at_the_profiles_rate(profile, long_plan):
    rate = profile["total"]["arrival_rate_requests_per_s"]
    expected = rate * 20000
    assert long_plan["arrival_rate_requests_per_s"] == pytest.approx(rate, abs=1e-6)
    assert abs(long_plan["summary"]["requests"] - expected) <= 4 * math.sqrt(expected)
    times = [r["at_seconds"] for r in long_plan["requests"]]
    assert times == sorted(times) and 0 < times[0] and times[-1] < 20000
    gaps = [b - a for a, b in zip(times, times[1:])]
    # Open loop, exponential gaps: their standard deviation equals their mean. The sample standard deviation of
    # exponential gaps has a relative standard error of sqrt(2 / n) (kurtosis 9); allow four.
    assert statistics.pstdev(gaps) == pytest.approx(statistics.fmean(gaps), rel=4 * math.sqrt(2.0 / len(gaps)))


@pytest.mark.parametrize("key, field", [("prompt_length_tokens", "prompt_tokens"), ("output_length_tokens", "output_tokens")])
def test_lengths_follow_the_profiles_buckets_and_mean(profile, long_plan, key, field):
    measured = profile["total"][key]
    drawn = [r[field] for r in long_plan["requests"]]
    n = len(drawn)
    total = measured["buckets"][-1][1]
    lower, below = 0, 0
    for le, count in measured["buckets"]:
        upper = math.inf if le == "+Inf" else le
        share = (count - below) / total
        got = sum(1 for x in drawn if lower < x <= upper) / n
        assert abs(got - share) <= 4 * math.sqrt(share * (1 - share) / n) + 1e-9, (le, got, share)
        lower, below = upper, count
    error = statistics.pstdev(drawn) / math.sqrt(n)
    assert abs(statistics.fmean(drawn) - measured["mean"]) <= 4 * error, (statistics.fmean(drawn), measured["mean"])


def test_prefix_reuse_meets_the_profiles_hit_fraction(profile, long_plan):
    target = profile["total"]["prefix_cache_hit_fraction"]
    assert long_plan["prefix_cache_hit_fraction_target"] == target
    assert long_plan["summary"]["prefix_cache_hit_fraction"] == pytest.approx(target, abs=0.003)
    sent = {}
    for request in long_plan["requests"]:
        conversation = request["conversation"]
        assert 0 <= request["cached_tokens"] <= request["prefix_tokens"] < request["prompt_tokens"] or (
            request["prefix_tokens"] == 0 and conversation not in sent)
        assert request["cached_tokens"] % wr.BLOCK_TOKENS == 0
        if conversation not in sent:
            assert request["cached_tokens"] == 0
            sent[conversation] = request["prompt_tokens"]
        else:
            assert request["cached_tokens"] <= sent[conversation]
            sent[conversation] = max(sent[conversation], request["prefix_tokens"])
    assert long_plan["summary"]["conversations"] == len(sent) > 1


def test_same_seed_same_plan_other_seed_other_plan(profile):
    one, again, other = wr.plan(profile, 600, seed=3), wr.plan(profile, 600, seed=3), wr.plan(profile, 600, seed=4)
    assert one == again
    assert one["requests"] != other["requests"]


def test_an_hours_rate_and_the_scale(profile):
    busiest = wr.plan(profile, 3600, seed=2, hour="busiest")
    hours = {row["hour_utc"]: row["arrival_rate_requests_per_s"] for row in profile["total"]["by_hour"]}
    assert busiest["arrival_rate_requests_per_s"] == pytest.approx(hours["2026-01-01T01"], abs=1e-6)
    quiet = wr.plan(profile, 3600, seed=2, hour="2026-01-01T00", rate_scale=2.0)
    assert quiet["arrival_rate_requests_per_s"] == pytest.approx(2 * hours["2026-01-01T00"], abs=1e-6)
    with pytest.raises(wr.PlanError, match="no hour '2026-01-02T00'"):
        wr.plan(profile, 60, seed=2, hour="2026-01-02T00")


def test_one_engines_part_and_the_model_length_cap(profile):
    part = wr.plan(profile, 3600, seed=5, engine="spark-a", max_model_len=32768)
    rate = profile["engines"][0]["profile"]["arrival_rate_requests_per_s"]
    assert part["arrival_rate_requests_per_s"] == pytest.approx(rate, abs=1e-6)
    assert all(r["prompt_tokens"] + r["output_tokens"] <= 32768 for r in part["requests"])
    with pytest.raises(wr.PlanError, match="no engine 'spark-z'"):
        wr.plan(profile, 60, seed=5, engine="spark-z")


def test_a_profile_without_lengths_cannot_be_replayed():
    """The recorded fixtures carry no per-request length histograms."""
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "metrics")

    def snap(name, when):
        with open(os.path.join(fixtures, name + ".txt"), encoding="utf-8") as handle:
            return {"time": when, "parsed": wp.parse_snapshot(handle.read()), "error": None}

    profile = wp.profile([{"name": "spark-a", "url": "http://spark-a:8000",
                           "samples": [snap("vllm_a_t0", T0), snap("vllm_a_t1", T0 + 20)]}])
    with pytest.raises(wr.PlanError, match="no prompt length distribution"):
        wr.plan(profile, 60, seed=1)


@pytest.mark.parametrize("change, message", [
    ({"schema": "something/1"}, "not a workload profile"),
    ({"total": dict(arrival_rate_requests_per_s=0.0)}, "arrival rate is 0.0"),
])
def test_wrong_profiles_are_refused(profile, change, message):
    with pytest.raises(wr.PlanError, match=message):
        wr.plan(dict(profile, **change), 60, seed=1)
