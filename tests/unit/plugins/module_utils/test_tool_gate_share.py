# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A suite split over the new engines (plugins/module_utils/_tool_gate_share.py): the shares, the union, its score."""

from __future__ import annotations

import fnmatch

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_share as share
from ansible_collections.factory_floor.llm.plugins.module_utils._tool_call import score

SELECTED = ["c1", "c2", "c3", "c4", "c5"]
HOSTS = ["spark-a", "spark-b"]


def result(case_id, passed, category="simple", latency=1.0):
    return {"id": case_id, "category": category, "passed": passed, "latency": latency}


def share_of(host, ids, passed=(), elapsed=3.0):
    run = {"results": [result(case_id, case_id in passed) for case_id in ids], "elapsed": elapsed,
           "failed_cases": [{"id": case_id} for case_id in ids if case_id not in passed], "url": "http://x:8000",
           "model": "m", "suite_name": "default", "repeat": 1, "flipped_cases": []}
    return share.share_value(host, HOSTS, ids, len(SELECTED), run, 100.0, 100.0 + elapsed)


@pytest.mark.parametrize("hosts, dealt", [
    (HOSTS, {"spark-a": ["c1", "c3", "c5"], "spark-b": ["c2", "c4"]}),
    (["a", "b", "c"], {"a": ["c1", "c4"], "b": ["c2", "c5"], "c": ["c3"]}),
    (["a"], {"a": SELECTED}),
])
def test_the_cases_are_dealt_round_robin_in_suite_order(hosts, dealt):
    assert share.shares(SELECTED, hosts) == dealt


def test_more_engines_than_cases_leaves_one_without_a_share():
    assert share.shares(["c1"], HOSTS) == {"spark-a": ["c1"], "spark-b": []}


def test_the_patterns_match_exactly_their_ids():
    ids = ["simple_1", "a*b", "q?", "x[1]"]
    for pattern, case_id in zip(share.patterns(ids), ids):
        assert fnmatch.fnmatchcase(case_id, pattern)
    assert not fnmatch.fnmatchcase("aXb", share.patterns(["a*b"])[0])


def test_a_share_has_no_verdict_yet():
    value = share_of("spark-a", ["c1", "c3", "c5"], passed=("c1", "c3"))
    assert value["passed"] is None and value["share"]["cases"] == ["c1", "c3", "c5"] and value["share"]["of"] == 5
    assert value["message"] == ("Tool-calling gate on spark-a: its share of the suite split over spark-a, spark-b ran, "
                                "2 of 3 cases passed; the verdict is over all 5 cases.")


def test_the_union_is_scored_as_one_run_over_every_case():
    values = {"spark-a": share_of("spark-a", ["c1", "c3", "c5"], passed=("c1", "c3")),
              "spark-b": share_of("spark-b", ["c2", "c4"], passed=("c2", "c4"))}
    run, missing = share.union(HOSTS, values, SELECTED, "d" * 64)
    assert missing == []
    assert [one["id"] for one in run["results"]] == SELECTED
    # The same formula as a whole run of the suite: 4 of 5 cases.
    assert run["score"] == score([result(c, c != "c5") for c in SELECTED])["score"] == 80.0
    assert run["total"] == 5 and run["passed_count"] == 4 and run["failed_count"] == 1
    assert run["failed_cases"] == [{"id": "c5"}] and run["suite_digest"] == "d" * 64
    assert run["url"] == "http://x:8000" and run["by_category"] == {"simple": {"total": 5, "passed": 4, "score": 80.0}}
    assert share.union_words(HOSTS, values) == (
        " The suite was split over the new engines (cases each: spark-a 3, spark-b 2), each case alone on its engine; "
        "this verdict is over all of them.")


@pytest.mark.parametrize("values, missing", [
    ({"spark-a": share_of("spark-a", ["c1", "c3", "c5"])},
     ["spark-b's share did not run"]),
    ({"spark-a": share_of("spark-a", ["c1", "c3", "c5"]), "spark-b": {"msg": "Tool-calling test stopped: HTTP 500"}},
     ["spark-b's share did not run: Tool-calling test stopped: HTTP 500"]),
    ({"spark-a": share_of("spark-a", ["c1", "c3"]), "spark-b": share_of("spark-b", ["c2", "c4"])},
     ["no result for 1 of the 5 cases (c5)"]),
])
def test_a_missing_share_is_no_verdict(values, missing):
    assert share.union(HOSTS, values, SELECTED, "d" * 64) == (None, missing)
