# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_switch_report.py (pure logic, made-up probe logs)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_report as sr

T0 = 1795950000.0


def rec(t, status=200, took=0.1, upstream=None, error=None):
    """One probe client record, ``t`` in seconds after T0."""
    return {"t": T0 + t, "end": T0 + t + took, "status": status, "latency": took,
            "upstream": upstream, "error": error}


def series(*spans):
    """Records every second: spans of (status, how many)."""
    records, t = [], 0.0
    for status, count in spans:
        for dummy in range(count):
            records.append(rec(t, status))
            t += 1.0
    return records


def jsonl(records):
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


# --- load_records() ---------------------------------------------------------------------------


def test_load_records_skips_torn_last_line():
    records = series((200, 3))
    text = jsonl(records) + json.dumps(rec(3.0), sort_keys=True)[:25]
    assert sr.load_records(text) == records


def test_load_records_sorts_by_start_and_skips_blank_lines():
    records = [rec(2.0), rec(0.0, 503), rec(1.0, 0)]
    text = "\n".join(json.dumps(r) for r in records) + "\n\n   \n"
    assert [r["t"] for r in sr.load_records(text)] == [T0, T0 + 1.0, T0 + 2.0]


@pytest.mark.parametrize("text", ["", "\n", '{"t": 17959'])
def test_load_records_nothing(text):
    assert sr.load_records(text) == []


# --- longest_gap() ----------------------------------------------------------------------------


@pytest.mark.parametrize("records", [[], series((200, 5))])
def test_longest_gap_without_failures_is_zero(records):
    assert sr.longest_gap(records) == (0.0, None, None)


@pytest.mark.parametrize("spans, gap, begin, finish", [
    # From the end of the last 200 before the outage to the end of the first 200 after it.
    ([(200, 3), (503, 10), (200, 3)], 11.0, 2.1, 13.1),
    ([(200, 1), (0, 1), (200, 1)], 2.0, 0.1, 2.1),
    # Failures at the very start: from the first request's start.
    ([(503, 4), (200, 2)], 4.1, 0.0, 4.1),
    # Failures at the very end: to the last request's end.
    ([(200, 2), (502, 5)], 5.0, 1.1, 6.1),
    # Nothing but failures.
    ([(0, 6)], 5.1, 0.0, 5.1),
    # Two outages: the longer one.
    ([(200, 1), (503, 2), (200, 1), (0, 7), (200, 1), (502, 3), (200, 1)], 8.0, 3.1, 11.1),
])
def test_longest_gap(spans, gap, begin, finish):
    seconds, gap_from, gap_to = sr.longest_gap(series(*spans))
    assert seconds == pytest.approx(gap)
    assert gap_from == pytest.approx(T0 + begin) and gap_to == pytest.approx(T0 + finish)


def test_longest_gap_with_two_workers():
    """Two workers through the outage: each one's failures fall between the same two answers."""
    second = [rec(t + 0.5, s) for t, s in [(1, 200), (2, 0), (4, 0), (6, 200)]]
    records = sorted(series((200, 2), (503, 5), (200, 2)) + second, key=lambda r: r["t"])
    assert sr.longest_gap(records) == (pytest.approx(5.0), pytest.approx(T0 + 1.6), pytest.approx(T0 + 6.6))


# --- summarize() ------------------------------------------------------------------------------


TIMELINE = {"start": T0 - 5.0, "old_stopped": T0 + 2.5, "first_serving": T0 + 12.0, "end": T0 + 20.0}


def switch_records():
    """200s, then the old topology stops: 503s, two 0s, then a 502 and a 503 after first_serving."""
    records = series((200, 3), (503, 5), (0, 2), (503, 2), (502, 1), (503, 1), (200, 6))
    assert [r["status"] for r in records if r["t"] >= T0 + 12.0][:2] == [502, 503]
    return records


def test_summarize_counts():
    report = sr.summarize(switch_records(), TIMELINE)
    assert report["requests"] == 20
    assert report["by_status"] == {"200": 9, "503": 8, "0": 2, "502": 1}
    assert (report["count_200"], report["count_502"], report["count_503"], report["count_no_answer"]) == (9, 1, 8, 2)
    assert report["downtime"] == pytest.approx(12.0)
    assert report["downtime_from"] == pytest.approx(T0 + 2.1) and report["downtime_to"] == pytest.approx(T0 + 14.1)


def test_summarize_failures_after_first_serving():
    report = sr.summarize(switch_records(), TIMELINE)
    assert report["first_serving"] == T0 + 12.0
    assert report["failures_after_serving"] == 2
    assert report["count_502_after_serving"] == 1
    assert [r["status"] for r in report["failures_after_serving_sample"]] == [502, 503]


def test_summarize_sample_is_at_most_five():
    records = series((200, 1), (503, 8))
    report = sr.summarize(records, {"first_serving": T0})
    assert report["failures_after_serving"] == 8 and len(report["failures_after_serving_sample"]) == 5


@pytest.mark.parametrize("timeline, first_serving", [
    ({"in_rotation": T0 + 12.0}, T0 + 12.0),
    ({"first_serving": T0 + 11.0, "in_rotation": T0 + 12.0}, T0 + 11.0),
    ({}, None),
])
def test_summarize_first_serving_falls_back_to_in_rotation(timeline, first_serving):
    report = sr.summarize(switch_records(), timeline)
    assert report["first_serving"] == first_serving
    if first_serving is None:
        assert report["failures_after_serving"] == 0 and report["startup"] is None


def test_summarize_startup_and_timeline():
    timeline = dict(TIMELINE, in_rotation=str(T0 + 12.5), rollback_started=None)
    report = sr.summarize(switch_records(), timeline)
    assert report["startup"] == 9.5
    # Seconds since start, in time order; events that did not happen are left out.
    assert list(report["timeline"].items()) == [
        ("start", 0.0), ("old_stopped", 7.5), ("first_serving", 17.0), ("in_rotation", 17.5), ("end", 25.0)]


def test_summarize_timeline_without_start_counts_from_first_request():
    report = sr.summarize(switch_records(), {"old_stopped": T0 + 2.5})
    assert report["timeline"] == {"old_stopped": 2.5}
    assert report["startup"] is None


def test_summarize_ignores_an_earlier_switch_in_the_same_log():
    """The probe client appends to its log: a second switch must not count the first one's requests."""
    earlier = [dict(r, t=r["t"] - 3600, end=r["end"] - 3600) for r in series((200, 2), (503, 30), (200, 2))]
    report = sr.summarize(earlier + switch_records(), TIMELINE)
    assert report == sr.summarize(switch_records(), TIMELINE)


def test_summarize_nothing_recorded():
    report = sr.summarize([], {})
    assert report["requests"] == 0 and report["by_status"] == {} and report["downtime"] == 0.0
    assert report["downtime_from"] is None and report["timeline"] == {}
    assert "probe client through the proxy: 0 requests, by status {}" in report["table"]


def test_summarize_passes_given_values_through():
    report = sr.summarize(switch_records(), TIMELINE, engines={"spark-a": "serving"}, tool_score=86.0,
                          outcome="rolled_back", reason="tool-calling score 70 below 80")
    assert (report["outcome"], report["reason"], report["engines"], report["tool_score"]) == (
        "rolled_back", "tool-calling score 70 below 80", {"spark-a": "serving"}, 86.0)


@pytest.mark.parametrize("outcome, limit, expected", [
    ("ok", 0, "ok_with_failures"),          # 2 failed after first_serving, bar 0
    ("ok", 1, "ok_with_failures"),
    ("ok", 2, "ok"),                        # at the bar
    ("ok", None, "ok"),                     # no bar: as given (switch.yml)
    ("rolled_back", 0, "rolled_back"),      # only a switch that went through is downgraded
    ("failed", 0, "failed"),
    ("unchanged", 0, "unchanged"),
])
def test_summarize_failures_after_serving_against_the_bar(outcome, limit, expected):
    report = sr.summarize(switch_records(), TIMELINE, outcome=outcome, max_failures_after_serving=limit)
    assert report["failures_after_serving"] == 2
    assert report["outcome"] == expected
    if expected == "ok_with_failures":
        assert report["reason"] == ('2 of 20 requests through the proxy were not answered 200 after the model served '
                                    '(by status {"502": 1, "503": 1}); the bar is %d' % limit)
        assert report["table"][0] == "switch outcome: ok_with_failures (%s)" % report["reason"]
    else:
        assert report["reason"] is None


def test_summarize_keeps_a_given_reason_with_failures():
    report = sr.summarize(switch_records(), TIMELINE, reason="see the probe log", max_failures_after_serving=0)
    assert (report["outcome"], report["reason"]) == ("ok_with_failures", "see the probe log")


def test_summarize_no_failures_is_ok_with_a_bar_of_0():
    report = sr.summarize(series((200, 5)), {"start": T0, "first_serving": T0}, max_failures_after_serving=0)
    assert (report["outcome"], report["reason"], report["failures_after_serving"]) == ("ok", None, 0)


def test_table_has_the_numbers():
    report = sr.summarize(switch_records(), TIMELINE, engines={"spark-a": "serving", "spark-b": "loading"},
                          tool_score=86, outcome="rolled_back", reason="spark-b did not come up")
    table = report["table"]
    assert table[0] == "switch outcome: rolled_back (spark-b did not come up)"
    assert table[1] == "timeline (s since start):"
    assert "  %-18s %8.1f" % ("first_serving", 17.0) in table
    assert "seconds without a model (longest gap between answers): 12.0" in table
    assert "new topology start-up (old stopped -> first engine serving): 9.5 s" in table
    assert 'probe client through the proxy: 20 requests, by status {"0": 2, "200": 9, "502": 1, "503": 8}' in table
    assert "502 seen: 1; failures after the first engine served: 2 (502: 1)" in table
    assert table[-3:] == ["engine spark-a    serving", "engine spark-b    loading", "tool-calling score: 86"]


def test_table_ok_without_optional_lines():
    table = sr.summarize(series((200, 3)), {"start": T0})["table"]
    assert table[0] == "switch outcome: ok"
    assert not any(line.startswith(("new topology", "engine ", "tool-calling")) for line in table)
