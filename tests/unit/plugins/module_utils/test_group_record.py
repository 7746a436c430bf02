# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The record of a grouping (issue 37): written as one decision to every host, read back, old records read as their
grouping, and the grouping that runs now."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr
from ansible_collections.factory_floor.llm.plugins.module_utils._group_record import (
    grouping_writes,
    parse_fields,
    record_of,
    recorded_grouping,
    running_grouping,
)

A, B, C, D = "spark-a", "spark-b", "spark-c", "spark-d"
FOUR = [A, B, C, D]


def written(grouping, host, **extra):
    """A record as a host's file would hold it, parsed as the topology_record module parses it."""
    fields = record_of(grouping, host)
    return tr.parse(json.dumps(dict(fields, since=1795950000.0, by="ops@controller", playbook="switch.yml", **extra)))


def observed(grouping, runs=None, records=None):
    """Per host what topology_record returns: its record of ``grouping`` and the unit it runs."""
    seen = {}
    for group in grouping:
        for host in group:
            seen[host] = {"record": written(grouping, host), "runs": "replicas" if len(group) == 1 else "split"}
    for host, value in (runs or {}).items():
        seen.setdefault(host, {"record": None})["runs"] = value
    for host, value in (records or {}).items():
        seen.setdefault(host, {"runs": None})["record"] = value
    return seen


@pytest.mark.parametrize("grouping", [
    [[A], [B]],
    [[A, B]],
    [[B, A]],
    [[A, B], [C]],
    [[A], [B], [C]],
    [[A, B], [C, D]],
    [[A], [B], [C, D]],
])
def test_a_grouping_round_trips_through_every_hosts_record(grouping):
    hosts = [h for g in grouping for h in g]
    seen = observed(grouping)
    for group in grouping:
        for rank, host in enumerate(group):
            record = seen[host]["record"]
            assert record["error"] is None and "grouping_error" not in record
            assert record["topology"] == ("replicas" if len(group) == 1 else "split")
            assert (record["group"], record["rank"]) == (group, rank)
    assert recorded_grouping(hosts, seen) == {"grouping": grouping, "old": False, "disagreements": []}
    now = running_grouping(sorted(hosts), seen)
    assert sorted(now["grouping"]) == sorted(grouping) and now["agrees"] is True


def test_old_records_read_as_their_grouping():
    assert "grouping" not in tr.parse('{"topology": "split"}')
    old = {A: {"record": tr.parse('{"topology": "split"}'), "runs": "split"},
           B: {"record": tr.parse('{"topology": "split"}'), "runs": "split"}}
    assert recorded_grouping([A, B], old, head=B) == {"grouping": [[B, A]], "old": True, "disagreements": []}
    old = {host: {"record": tr.parse('{"topology": "replicas"}'), "runs": "replicas"} for host in (A, B, C)}
    assert recorded_grouping([A, B, C], old)["grouping"] == [[A], [B], [C]]
    assert running_grouping([A, B, C], old)["agrees"] is True


def test_the_records_place_split_hosts_in_their_pairs():
    # Four hosts run the split's unit: without records one group of four, with them two pairs.
    pairs = [[A, B], [C, D]]
    assert running_grouping(FOUR, observed(pairs))["grouping"] == pairs
    bare = {host: {"record": None, "runs": "split"} for host in FOUR}
    assert running_grouping(FOUR, bare)["grouping"] == [FOUR]


def test_a_record_out_of_step_is_named():
    seen = observed([[A, B], [C]])
    seen[C]["record"] = written([[A], [B], [C]], C)
    found = recorded_grouping([A, B, C], seen)
    assert found["grouping"] is None
    assert found["disagreements"] == ["the hosts' records hold different groupings: spark-a [spark-a, spark-b] "
                                      "[spark-c]; spark-b [spark-a, spark-b] [spark-c]; spark-c [spark-a] [spark-b] "
                                      "[spark-c]"]
    # What runs still decides the next move.
    now = running_grouping([A, B, C], seen)
    assert now["grouping"] == [[A, B], [C]] and now["agrees"] is False


def test_mixed_old_and_new_records_are_named():
    seen = observed([[A], [B]])
    seen[B]["record"] = tr.parse('{"topology": "replicas"}')
    assert recorded_grouping([A, B], seen)["disagreements"] == [
        "spark-b holds no grouping (written before groups) while spark-a holds one"]


def test_records_that_say_other_than_what_runs_are_named():
    seen = observed([[A, B], [C]], runs={A: "replicas", B: "replicas"})
    now = running_grouping([A, B, C], seen)
    assert now["grouping"] == [[A], [B], [C]]
    assert now["disagreements"] == ["the records say [spark-a, spark-b] [spark-c], the engine units run [spark-a] "
                                    "[spark-b] [spark-c]"]


@pytest.mark.parametrize("data, words", [
    ({"topology": "split", "grouping": [[A, B], [B]], "group": [A, B], "rank": 0}, "every host once"),
    ({"topology": "split", "grouping": "pairs", "group": [A, B], "rank": 0}, "not a list"),
    ({"topology": "split", "grouping": [[A, B]], "group": [B, A], "rank": 0}, "not one of its grouping"),
    ({"topology": "split", "grouping": [[A, B]], "group": [A, B], "rank": 2}, "not a place in its group"),
    ({"topology": "split", "grouping": [[A, B]], "group": [A, B], "rank": True}, "not a place in its group"),
    ({"topology": "replicas", "grouping": [[A, B]], "group": [A, B], "rank": 1}, "not what a group of 2 runs"),
])
def test_a_record_whose_parts_do_not_hold_together_is_refused(data, words):
    fields = parse_fields(data, data["topology"])
    assert words in fields["grouping_error"]
    seen = {A: {"record": tr.parse(json.dumps(data)), "runs": "split"}}
    assert recorded_grouping([A], seen)["disagreements"][0].startswith("spark-a's grouping record cannot be read (")


def test_one_decision_is_written_to_every_host():
    # After the move [[a, b], [c]] -> [[a], [b], [c]]: a and b run replicas now, their records still say the pair.
    seen = observed([[A, B], [C]], runs={A: "replicas", B: "replicas"})
    writes = grouping_writes([A, B, C], seen, touched=[A, B], models={"replicas": "/models/SmolLM2"})
    assert writes["grouping"] == [[A], [B], [C]]
    assert sorted(writes["write"]) == [A, B, C]                 # c's record too: its grouping changed
    assert {host: w["grouping"] for host, w in writes["write"].items()} == dict.fromkeys([A, B, C], [[A], [B], [C]])
    assert writes["write"][B] == {"topology": "replicas", "grouping": [[A], [B], [C]], "group": [B], "rank": 0,
                                  "model": "/models/SmolLM2", "note": ""}
    assert writes["unrecorded"] == {} and writes["api_hosts"] == [A, B, C]
    # Written, read back: nothing left to write, the records agree with what runs.
    after = {host: {"record": tr.parse(json.dumps(dict(w, since=1.0))), "runs": "replicas"}
             for host, w in writes["write"].items()}
    again = grouping_writes([A, B, C], after, models={"replicas": "/models/SmolLM2"})
    assert again["write"] == {}
    assert running_grouping([A, B, C], after)["agrees"] is True


def test_a_host_that_runs_nothing_keeps_its_record_and_is_named():
    seen = observed([[A, B], [C]], runs={C: "none"})
    seen[D] = None
    writes = grouping_writes(FOUR, seen)
    assert writes["grouping"] == [[A, B]]
    assert sorted(writes["write"]) == [A, B]
    assert writes["unrecorded"] == {C: "no engine unit runs there", D: "could not be read"}
