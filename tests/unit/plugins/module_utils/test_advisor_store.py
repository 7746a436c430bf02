# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_advisor_store.py: the advisor's store keyed by grouping and build, what a window
measures, a failed switch settled from its report, and the ranking over the two groupings."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _advisor_store as st
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_advisor as ta


def replay(tokens_per_s, errors=None):
    errors = errors or {}
    return {"total": {"tokens_per_s": tokens_per_s, "requests_per_min": 30.0, "requests_ok": 10, "requests_planned": 10,
                      "errors": sum(errors.values()), "errors_by_status": errors,
                      "ttft_seconds": {"p50": 0.1, "p95": 0.2}, "tpot_seconds": {"p50": 0.02, "p95": 0.03}},
            "in_flight_bound": {"requests_not_sent": 0, "hit": False}}


PROFILE = {"total": {"arrival_rate_requests_per_s": 0.5, "busiest_hour_utc": "2026-01-01T03",
                     "by_hour": [{"hour_utc": "2026-01-01T03", "arrival_rate_requests_per_s": 0.5}],
                     "prompt_length_tokens": {"max_at_most": 2000}, "output_length_tokens": {"max_at_most": 500}}}


def test_the_store_reads_back_what_it_writes():
    results = st.measured([], "split", "b1", "r1", "t", replay(100.0))
    assert st.read(st.dump(results)) == results
    assert st.read("") == []


@pytest.mark.parametrize("text, words", [
    ("{", "is not JSON"),
    (json.dumps({"schema": "other/1", "results": []}), "is not a topology results store"),
    (json.dumps({"schema": st.SCHEMA, "results": [{"grouping": "split"}]}), "needs grouping and build"),
])
def test_a_store_that_is_not_one_is_refused_saying_what_to_do(text, words):
    with pytest.raises(ValueError, match=words):
        st.read(text, "/s/results.json")


def test_one_build_for_the_site():
    assert st.site_build({"spark-a": "b1", "spark-b": "b1"}) == "b1"
    mixed = st.site_build({"spark-a": "b1", "spark-b": "b2"})
    assert mixed.startswith("mixed-") and mixed == st.site_build({"spark-b": "b2", "spark-a": "b1"})


@pytest.mark.parametrize("builds, words", [({"spark-a": "b1", "spark-b": None}, "spark-b"), ({}, "any engine host")])
def test_a_host_without_a_build_id_is_refused_naming_it(builds, words):
    with pytest.raises(st.StoreError, match="no tool gate build id for %s.*build_id" % words):
        st.site_build(builds)


def test_candidates_are_replicas_and_split_or_one_replica():
    assert st.candidates(2) == [{"sizes": [1, 1]}, {"sizes": [2]}]
    assert st.candidates(1) == [{"sizes": [1]}]
    with pytest.raises(st.StoreError, match="no engine host"):
        st.candidates(0)


def test_more_hosts_give_every_grouping_the_models_heads_allow():
    names = [ta.grouping_name(c["sizes"]) for c in st.candidates(4)]
    assert names == ["replicas", "2+1+1", "2+2", "3+1", "split"]
    # 32 attention heads, 8 key/value heads: no group of three.
    assert [c["sizes"] for c in st.candidates(4, 32, 8)] == [[1, 1, 1, 1], [2, 1, 1], [2, 2], [4]]
    assert [c["sizes"] for c in st.candidates(3, 32, 8)] == [[1, 1, 1], [2, 1]]


def test_a_window_measures_only_what_has_no_result_for_the_build():
    stored = st.measured([], "split", "b1", "r0", "t", replay(100.0))
    plan = st.plan(stored, "b1", "split", 2)
    assert plan == {"build": "b1", "start": "split", "other": "replicas", "candidates": ["replicas", "split"],
                    "measure_start": False, "measure_other": True, "stored": ["split"], "failed": []}
    # A new build (another model or image): everything again.
    assert st.plan(stored, "b2", "split", 2)["measure_start"] is True
    assert st.plan(stored, "b1", "split", 2, remeasure=True)["measure_start"] is True
    assert st.plan([], "b1", "replicas", 1)["other"] is None and st.plan([], "b1", "replicas", 1)["measure_other"] is False


def test_a_current_grouping_the_advisor_does_not_compare_is_refused():
    # Three hosts, a model whose heads no group of three splits: split (3) is none of the groupings.
    with pytest.raises(st.StoreError, match="run split, which is none of the groupings.*switch to one of them first"):
        st.plan([], "b1", "split", 3, heads=(32, 8))


def test_with_more_hosts_a_window_replays_the_grouping_in_place_and_ranks_the_others_from_the_store():
    stored = st.measured([], "replicas", "b1", "r0", "t", replay(100.0))
    plan = st.plan([], "b1", "2+1", 3, heads=(32, 8))
    assert (plan["candidates"], plan["other"], plan["measure_start"], plan["measure_other"]) == (
        ["replicas", "2+1"], None, True, False)
    advice = st.advise(stored, None, "b1", "2+1", 3, heads=(32, 8))
    assert advice["not_measured"] == ["2+1"] and [r["grouping"] for r in advice["rows"]] == ["replicas", "2+1"]


def test_a_record_replaces_the_groupings_result_for_the_build_and_keeps_the_switchs_seconds():
    results = st.measured([], "replicas", "b1", "r0", "t0", replay(90.0))
    results = st.measured(results, "replicas", "b1", "r1", "t1", replay(95.0), replay(99.0),
                          {"outcome": "ok", "downtime": 41.5})
    rolled_back = {"outcome": "rolled_back", "downtime": 9.0}
    results = st.measured(results, "replicas", "b2", "r1", "t1", replay(80.0), None, rolled_back)
    assert [(r["build"], r["run"], r["switch_seconds_without_model"]) for r in results] == [
        ("b1", "r1", 41.5), ("b2", "r1", None)]


def test_a_switch_that_never_came_back_is_settled_from_its_report():
    results = st.pending([], "replicas", "b1", "r1", "/s/switch-r1-replicas.json", "t")
    reports = {"/s/switch-r1-replicas.json": {"outcome": "rolled_back", "reason": "spark-b did not serve in 900 s"}}
    settled = st.settle(results, reports.get)
    assert settled == [{"grouping": "replicas", "build": "b1", "run": "r1", "measured_at": "t",
                        "switch_report_file": "/s/switch-r1-replicas.json",
                        "failed": "outcome rolled_back (run r1): spark-b did not serve in 900 s"}]
    interrupted = st.settle(results, lambda path: None)[0]["failed"]
    assert "ended before its replay, with no switch report at /s/switch-r1-replicas.json" in interrupted


def test_the_advice_ranks_both_groupings_with_the_profiles_need():
    results = st.measured([], "split", "b1", "r1", "t", replay(100.0), replay(110.0))
    results = st.measured(results, "replicas", "b1", "r1", "t", replay(150.0), replay(160.0), {"outcome": "ok",
                                                                                               "downtime": 30.0})
    advice = st.advise(results, PROFILE, "b1", "split", 2, max_model_len=4096)
    assert advice["recommendation"]["grouping"] == "replicas" and advice["recommendation"]["switch"] is True
    assert [r["grouping"] for r in advice["rows"]] == ["replicas", "split"]
    assert advice["site"]["long_context_need_tokens"] == 2500
    assert advice["rows"][0]["switch_seconds_without_model"] == 30.0


def test_the_advice_without_a_profile_says_so_and_what_is_not_measured():
    results = st.measured([], "split", "b1", "r1", "t", replay(100.0))
    advice = st.advise(results, None, "b1", "split", 2)
    assert advice["not_measured"] == ["replicas"] and advice["recommendation"]["grouping"] == "split"
    assert advice["recommendation"]["reasons"][-1].startswith("no workload profile")


def test_the_summaries_name_the_figures():
    lines = st.profile_lines({"started": "s", "engines_counted": 2, "complete": False, "notes": ["n1"],
                              "total": {"window_seconds": 60.0, "arrival_rate_requests_per_s": 0.5}})
    assert lines[0] == "window 60.0 s from s, 2 engine(s) counted (incomplete: see the notes)" and lines[-1] == "note: n1"
    assert st.replay_lines("split", replay(12.5, {"502": 1}))[0].startswith("split: 12.5 tokens/s, 30.0 requests/min")


def test_a_record_after_the_runs_own_switch_keeps_where_its_report_is():
    results = st.pending([], "replicas", "b1", "r1", "/s/switch-r1-replicas.json", "t")
    kept = st.measured(results, "replicas", "b1", "r1", "t", replay(1.0), switch_report={"outcome": "ok", "downtime": 3})
    assert kept[0]["switch_report_file"] == "/s/switch-r1-replicas.json" and "status" not in kept[0]
    other_run = st.measured(results, "replicas", "b1", "r2", "t", replay(1.0))
    assert "switch_report_file" not in other_run[0]


def test_a_grouping_whose_switch_failed_is_not_tried_again_unless_asked():
    results = st.pending(st.measured([], "split", "b1", "r0", "t", replay(1.0)), "replicas", "b1", "r1", "/s/f.json", "t")
    settled = st.settle(results, lambda path: {"outcome": "rolled_back", "reason": "gate failed"})
    plan = st.plan(settled, "b1", "split", 2)
    assert (plan["measure_other"], plan["stored"], plan["failed"]) == (False, ["split"], ["replicas"])
    assert st.plan(settled, "b1", "split", 2, remeasure=True)["measure_other"] is True


def test_a_grouping_whose_run_was_interrupted_before_its_switch_reported_is_measured_again():
    # The lab's first advisor window was refused before its switch started (molecule's --skip-tags): no report,
    # nothing measured - the next window must try that grouping, not report it failed for this build.
    results = st.pending(st.measured([], "split", "b1", "r0", "t", replay(1.0)), "replicas", "b1", "r1", "/s/f.json", "t")
    settled = st.settle(results, lambda path: None)
    assert settled[1]["interrupted"] is True and "interrupted" in settled[1]["failed"]
    for given in (results, settled):
        plan = st.plan(given, "b1", "split", 2)
        assert (plan["measure_other"], plan["stored"], plan["failed"]) == (True, ["split"], []), given


def test_a_grouping_switched_to_whose_replay_was_not_recorded_is_measured_again():
    # advise_topology.yml switches back when the replay after its switch fails: the switch's report says ok, the
    # grouping has no figures - the next window measures it, and never reports it as a failed switch.
    results = st.pending(st.measured([], "split", "b1", "r0", "t", replay(1.0)), "replicas", "b1", "r1", "/s/f.json", "t")
    settled = st.settle(results, lambda path: {"outcome": "ok", "downtime": 30.0})
    assert settled[1]["interrupted"] is True and "recorded no replay there" in settled[1]["failed"]
    plan = st.plan(settled, "b1", "split", 2)
    assert (plan["measure_other"], plan["stored"], plan["failed"]) == (True, ["split"], [])
