# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_topology_advisor.py: the ranking from stored measurements."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _kv_cache_plan as kv
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_advisor as ta

SITE = {"arrival_rate_requests_per_s": 1.0, "busiest_hour_rate_requests_per_s": 1.5, "long_context_need_tokens": 40000}
# Two hosts: replicas (two groups of one) and the split (one group of two), as plan_groupings gives them.
KV = [{"sizes": [1, 1], "groups": 2, "kv_tokens": [60000, 60000], "starts": True, "holds_need": True},
      {"sizes": [2], "groups": 1, "kv_tokens": [180000], "starts": True, "holds_need": True}]


def replay(tokens_per_s, ttft=0.3, tpot=0.04, errors=None, not_sent=0):
    errors = errors or {}
    return {"total": {"tokens_per_s": tokens_per_s, "requests_per_min": 60.0, "errors": sum(errors.values()),
                      "errors_by_status": errors, "ttft_seconds": {"p50": ttft / 2, "p95": ttft},
                      "tpot_seconds": {"p50": tpot / 2, "p95": tpot}},
            "in_flight_bound": {"requests_not_sent": not_sent, "hit": bool(not_sent)}}


def result(grouping, build, load, busiest=None, switch=12.0):
    return {"grouping": grouping, "build": build, "measured_load": load, "busiest_hour": busiest,
            "switch_seconds_without_model": switch, "measured_at": "2026-01-01T03:00:00Z"}


def test_names_follow_the_site():
    assert [ta.grouping_name(s) for s in ([1, 1], [2], [1], [1, 2, 1], [4])] == [
        "replicas", "split", "replicas", "2+1+1", "split"]


def test_switches_when_the_gain_beats_the_margin():
    results = [result("replicas", "b1", replay(180), replay(200)), result("split", "b1", replay(185), replay(240), 20.5)]
    advice = ta.rank(results, SITE, KV, "b1", "replicas")
    assert advice["basis"] == "busiest_hour"
    assert advice["recommendation"]["grouping"] == "split" and advice["recommendation"]["switch"] is True
    assert "+20%" in advice["recommendation"]["reasons"][0] and "20.5 s without a model" in advice["recommendation"]["reasons"][0]
    split = advice["rows"][1]
    assert split["tokens_per_s_measured_load"] == 185 and split["tokens_per_s_busiest_hour"] == 240
    assert split["ttft_p95_seconds"] == 0.3 and split["latency_at"] == "busiest_hour"
    assert advice["rows"][0]["switch_seconds_without_model"] == 0.0  # staying costs nothing
    assert advice["not_measured"] == []
    assert advice["lines"][0].startswith("grouping") and "replicas (current)" in advice["lines"][1]


@pytest.mark.parametrize("split_tps, chosen", [(209.9, "replicas"), (210.0, "replicas"), (210.5, "split")])
def test_ties_and_small_gains_stay_on_the_current_topology(split_tps, chosen):
    results = [result("replicas", "b1", replay(150), replay(200)), result("split", "b1", replay(150), replay(split_tps))]
    advice = ta.rank(results, SITE, KV, "b1", "replicas", margin=0.05)
    assert advice["recommendation"]["grouping"] == chosen
    if chosen == "replicas":
        assert advice["recommendation"]["switch"] is False
        assert "within the 5% margin" in advice["recommendation"]["reasons"][0]


def test_an_errored_grouping_is_not_chosen_and_the_reason_says_so():
    results = [result("replicas", "b1", replay(180), replay(200)),
               result("split", "b1", replay(190), replay(260, errors={"503": 2, "stream": 1}))]
    advice = ta.rank(results, SITE, KV, "b1", "replicas")
    assert advice["recommendation"]["grouping"] == "replicas"
    assert "split not chosen: errored in its replay: 3 errors (503: 2, stream: 1)" in advice["recommendation"]["reasons"]


def test_requests_not_sent_at_the_bound_count_as_not_taking_the_load():
    results = [result("replicas", "b1", replay(180), replay(200, not_sent=4)), result("split", "b1", replay(170), replay(190))]
    advice = ta.rank(results, SITE, KV, "b1", "replicas")
    assert advice["recommendation"]["grouping"] == "split" and advice["recommendation"]["switch"] is True
    assert any("4 requests not sent at the in-flight bound" in r for r in advice["recommendation"]["reasons"])
    assert "0+4 not sent" in advice["lines"][1]


def test_short_kv_capacity_is_not_chosen():
    site = dict(SITE, long_context_need_tokens=100000)
    kv_plan = [dict(KV[0], holds_need=False), KV[1]]
    results = [result("replicas", "b1", replay(300), replay(400)), result("split", "b1", replay(180), replay(200))]
    advice = ta.rank(results, site, kv_plan, "b1", "replicas")
    assert advice["recommendation"]["grouping"] == "split"
    assert ("replicas not chosen: KV capacity short: its smallest group holds 60,000 tokens, the site's long-context "
            "need is 100,000") in advice["recommendation"]["reasons"]
    assert "does not qualify" in advice["recommendation"]["reasons"][0]


def test_a_grouping_that_does_not_start_is_not_chosen():
    kv_plan = [KV[0], dict(KV[1], starts=False)]
    results = [result("replicas", "b1", replay(100)), result("split", "b1", replay(300))]
    advice = ta.rank(results, SITE, kv_plan, "b1", "replicas")
    assert advice["recommendation"]["grouping"] == "replicas"
    assert any(r.startswith("split not chosen: does not start") for r in advice["recommendation"]["reasons"])


def test_unmeasured_for_this_build_is_listed_and_results_of_another_build_are_not_used():
    results = [result("replicas", "b2", replay(180), replay(200)), result("split", "b1", replay(999), replay(999))]
    advice = ta.rank(results, SITE, KV, "b2", "replicas")
    assert advice["not_measured"] == ["split"]
    assert advice["recommendation"]["grouping"] == "replicas"
    assert "split not chosen: not measured for this build" in advice["recommendation"]["reasons"]
    assert advice["recommendation"]["reasons"][-1] == "chosen among the measured groupings only; split not measured for build b2"
    assert advice["rows"][1]["tokens_per_s_busiest_hour"] is None and "-" in advice["lines"][2]


def test_nothing_qualifies():
    advice = ta.rank([], SITE, KV, "b1", "split")
    assert advice["recommendation"] == {"grouping": None, "switch": False, "reasons": [
        "no recommendation: no grouping qualifies for build b1; stay on split",
        "replicas not chosen: not measured for this build", "split not chosen: not measured for this build"]}
    assert advice["not_measured"] == ["replicas", "split"]


def test_measured_load_is_the_basis_when_a_busiest_hour_is_missing():
    results = [result("replicas", "b1", replay(180), replay(200)), result("split", "b1", replay(220))]
    advice = ta.rank(results, SITE, KV, "b1", "replicas")
    assert advice["basis"] == "measured_load" and advice["recommendation"]["grouping"] == "split"
    assert advice["rows"][1]["latency_at"] == "measured_load"


def test_to_measure_names_only_what_changed():
    kv_plan = KV + [{"sizes": [2, 1, 1], "kv_tokens": [100, 100, 100], "starts": False, "holds_need": False}]
    stored = [result("replicas", "b1", replay(1)), result("split", "b1", replay(1)), result("split", "b2", replay(1))]
    assert ta.to_measure(kv_plan, stored, "b2") == {"run": ["replicas"], "stored": ["split"], "skipped": [
        {"grouping": "2+1+1", "reason": "does not start: a group holds less than one max_model_len request (KV plan)"}]}
    assert ta.to_measure(kv_plan, stored, "b3")["run"] == ["replicas", "split"]


def test_store_keeps_the_newest_per_key():
    first, second = result("split", "b1", replay(1)), result("split", "b1", replay(2))
    stored = ta.store(ta.store([result("replicas", "b1", replay(5))], first), second)
    assert len(stored) == 2 and stored[-1] is second
    with pytest.raises(ta.AdvisorError, match="needs grouping and build"):
        ta.store([], {"grouping": "split"})


def test_wrong_inputs_refused():
    with pytest.raises(ta.AdvisorError, match="margin"):
        ta.rank([], SITE, KV, "b1", "replicas", margin=1.5)
    with pytest.raises(ta.AdvisorError, match="none of the KV plan's groupings"):
        ta.rank([], SITE, KV, "b1", "3+1")


def test_site_from_a_profile():
    profile = {"total": {"arrival_rate_requests_per_s": 1.0, "busiest_hour_utc": "2026-01-01T01",
                         "by_hour": [{"hour_utc": "2026-01-01T00", "arrival_rate_requests_per_s": 0.5},
                                     {"hour_utc": "2026-01-01T01", "arrival_rate_requests_per_s": 1.5}],
                         "prompt_length_tokens": {"max_at_most": 20000}, "output_length_tokens": {"max_at_most": 5000}}}
    assert ta.site_of(profile) == {"arrival_rate_requests_per_s": 1.0, "busiest_hour_utc": "2026-01-01T01",
                                   "busiest_hour_rate_requests_per_s": 1.5, "long_context_need_tokens": 25000}
    assert ta.site_of(profile, max_model_len=16384)["long_context_need_tokens"] == 16384


def test_with_the_kv_plans_own_groupings():
    def side(size):
        return {"kv_tokens": 50000 * size * size, "full_context_requests": size}
    groupings = kv.plan_groupings(2, side, max_model_len=32768, need_tokens=40000)
    advice = ta.rank([result("replicas", "b1", replay(100)), result("split", "b1", replay(120))],
                     SITE, groupings, "b1", "split")
    assert [r["grouping"] for r in advice["rows"]] == ["replicas", "split"]
    assert advice["recommendation"]["grouping"] == "split" and advice["recommendation"]["switch"] is False
    # The KV plan's requests in all and the sweeps' tokens/s are shown, not ranked on.
    assert [r["full_context_requests_total"] for r in advice["rows"]] == [2, 2]
    assert [r["sweep_tokens_per_s"] for r in advice["rows"]] == [None, None]


def test_the_kv_plans_measured_tokens_per_s_is_a_column_not_a_rank():
    def side(size):
        return {"kv_tokens": 50000 * size * size, "full_context_requests": size}
    groupings = kv.plan_groupings(2, side, max_model_len=32768, need_tokens=40000,
                                  measured={1: {"tokens_per_s": 300.0, "max_num_seqs": 8}})
    advice = ta.rank([result("replicas", "b1", replay(100)), result("split", "b1", replay(120))],
                     SITE, groupings, "b1", "split")
    assert [r["sweep_tokens_per_s"] for r in advice["rows"]] == [600.0, None]
    assert advice["recommendation"]["grouping"] == "split"
    assert " 600.0 " in advice["lines"][1] and advice["lines"][0].split()[-4:] == ["tok/s", "switch", "s", "verdict"]


def test_an_unknown_kv_capacity_excludes_nothing_and_shows_a_dash():
    # No KV plan (kv_tokens null): ranked on the replays alone; the table says the capacity is unknown.
    options = [{"sizes": [1, 1], "kv_tokens": None}, {"sizes": [2]}]
    results = [result("replicas", "b1", replay(180), replay(200)), result("split", "b1", replay(185), replay(240))]
    advice = ta.rank(results, SITE, options, "b1", "replicas")
    assert [r["excluded"] for r in advice["rows"]] == [None, None]
    assert advice["recommendation"]["grouping"] == "split"
    assert all(" -/40,000 " in line for line in advice["lines"][1:3])


def test_a_failed_switch_is_reported_and_never_chosen():
    failed = {"grouping": "split", "build": "b1", "failed": "outcome rolled_back (run r1): the engine did not serve"}
    advice = ta.rank([result("replicas", "b1", replay(180)), failed], SITE, KV, "b1", "replicas")
    split = advice["rows"][1]
    assert split["excluded"] == "switch failed: outcome rolled_back (run r1): the engine did not serve"
    assert advice["recommendation"]["grouping"] == "replicas" and advice["not_measured"] == []
    assert "split not chosen: switch failed: outcome rolled_back (run r1): the engine did not serve" in \
        advice["recommendation"]["reasons"]
    assert advice["lines"][2].rstrip().endswith("switch failed")
