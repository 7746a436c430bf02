# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""switch_plan's procedure move (move_groups.yml): the target, the refusals, the per-host views the switch's entry
points act on, the gate, the rollback of the move's own groups, the rotation, and the records after a move."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_plan as sp

A, B, C, D = "spark-a", "spark-b", "spark-c", "spark-d"
ABC = [A, B, C]
REPLICA = ["active", "inactive"]
SPLIT = ["inactive", "active"]
NONE = ["inactive", "inactive"]
THREE_REPLICAS = {A: REPLICA, B: REPLICA, C: REPLICA}
PAIR_AND_ONE = {A: SPLIT, B: SPLIT, C: REPLICA}


def pair_records(grouping=([A, B], [C])):
    grouping = [list(group) for group in grouping]
    records = {}
    for group in grouping:
        for rank, host in enumerate(group):
            kind = "replicas" if len(group) == 1 else "split"
            records[host] = {"record": {"topology": kind, "grouping": grouping, "group": group, "rank": rank},
                             "runs": kind}
    return records


def plan(units=None, target=([A, B], [C]), **kwargs):
    kwargs.setdefault("members", list(ABC))
    return sp.move_switch_plan(ABC, A, units or THREE_REPLICAS, [list(g) for g in target], **kwargs)


@pytest.mark.parametrize("row, move_to, declared, grouping, refused", [
    ("move_to wins", [[A, B], [C]], [[A], [B], [C]], [[A, B], [C]], False),
    ("the declared grouping without move_to", [], [[A], [B, C]], [[A], [B, C]], False),
    ("neither", [], [], [], True),
    ("a host twice", [[A, B], [B, C]], [], [], True),
    ("a host left out", [[A, B]], [], [], True),
    ("a host not an engine", [[A, B], [C], [D]], [], [], True),
])
def test_move_target(row, move_to, declared, grouping, refused):
    found, errors = sp.move_target(ABC, move_to, declared)
    assert found == grouping, row
    assert bool(errors) is refused, row
    assert all("move_to" in error for error in errors), row


def test_three_replicas_to_a_pair_and_a_replica():
    found = plan()
    assert found["procedure"] == "move" and found["todo"] and not found["on_target"]
    assert found["touched"] == [A, B]
    assert found["serving"] == [[C]] and not found["away"]
    assert found["drain"] == [A, B] and found["admit"] == [A]
    assert found["api_engines"] == [A]
    assert found["holder"] == "move-groups"
    assert found["capacity"]["hosts_serving"] == 1 and found["capacity"]["hosts_total"] == 3
    # Each touched host's own part: the split with its rank in its new group; spark-c is left alone.
    views = found["views"]
    assert views[A] == dict(views[A], in_move=True, topology="split", unit="vllm-split.service", role="vllm_split",
                            other="replicas", other_unit="vllm-replica.service", group=[A, B], rank=0,
                            split_hosts=[A, B], split_head=A, rollback=False, serving_topology="split")
    assert views[B]["rank"] == 1 and views[B]["split_head"] == A
    assert views[C] == dict(views[C], in_move=False, topology="replicas", other="replicas", group=[C],
                            split_hosts=[], serving_topology="replicas")
    assert found["expected_in_rotation"] == [A, C]
    assert found["refusal"] == ""


def test_the_pair_back_to_three_replicas_reads_the_records():
    found = plan(PAIR_AND_ONE, ([A], [B], [C]), records=pair_records())
    assert found["current"] == [[A, B], [C]]
    assert found["touched"] == [A, B] and found["serving"] == [[C]]
    assert found["drain"] == [A] and found["admit"] == [A, B]
    assert found["api_engines"] == [A, B]
    assert found["views"][B] == dict(found["views"][B], topology="replicas", other="split", rank=0, split_hosts=[])


def test_on_target_does_nothing():
    found = plan(PAIR_AND_ONE, ([A, B], [C]), records=pair_records())
    assert found["on_target"] and not found["todo"] and found["touched"] == []
    assert found["expected_in_rotation"] == [A, C]
    assert not found["gated"]


def test_an_interrupted_move_left_its_drain_finishes():
    found = plan(PAIR_AND_ONE, ([A, B], [C]), records=pair_records(), gated=True,
                 drains=[{A: "move-groups"}], notes={A: {"gate": {"passed": True}}})
    assert found["heal"] and found["heal_hosts"] == [A]
    assert found["gate_hosts"] == [A] and found["undrain"] == [A]
    assert "interrupted group move" in found["announcement"]


def test_the_gate_tests_each_new_group_rank_0_and_only_passing_ones_join():
    found = plan(gated=True, incumbent_score={"score": 90})
    assert found["gate_hosts"] == [A] and found["gate_mode"] == "before_admission"
    assert found["gate_topology"] == "split"
    assert not found["admit_at_cut_over"]
    assert found["incumbent"] == {"topology": "replicas", "host": A}
    # Before the verdict the new pair is not expected in rotation; spark-c is.
    assert found["expected_in_rotation"] == [C]
    passed = plan(gated=True, incumbent_score={"score": 90}, notes={A: {"gate": {"passed": True}}})
    assert passed["undrain"] == [A] and passed["joined"] and passed["proxy_drain"] == {"hosts": [A], "state": "absent"}
    assert passed["expected_in_rotation"] == [A, C]


def test_a_failed_new_group_rolls_back_only_its_own_hosts():
    found = plan(gated=True, incumbent_score={"score": 90}, notes={B: {"failed": True}})
    assert found["rollback"] and found["failed_hosts"] == [B]
    assert found["rollback"] is True and found["gate_hosts"] == []
    assert found["after"] == [[A], [B], [C]]
    views = found["views"]
    assert views[A]["rollback"] and views[B]["rollback"] and not views[C]["rollback"]
    # Each host gets back what it ran: a replica (the split's group is gone).
    assert views[A]["serving_topology"] == "replicas" and views[A]["split_hosts"] == []
    assert not views[C]["in_move"]
    assert found["expected_in_rotation"] == [A, B, C]
    assert found["undrain"] == []


def test_a_failed_pair_going_to_replicas_gets_its_split_back_with_its_ranks():
    found = plan(PAIR_AND_ONE, ([A], [B], [C]), records=pair_records(), notes={B: {"failed": True}})
    views = found["views"]
    assert found["rollback"]
    assert views[B] == dict(views[B], rollback=True, serving_topology="split", split_hosts=[A, B], split_head=A)


@pytest.mark.parametrize("row, kwargs, units, words", [
    ("a bad target", {"errors": ["spark-d is not an engine host (move_to or site_engine_groups)"]}, None,
     "spark-d is not an engine host"),
    ("a host that runs both units", {}, {A: ["active", "active"], B: REPLICA, C: REPLICA}, "both engine units"),
    ("an API host the proxy does not balance to", {"members": [B, C]}, None, "the proxy does not balance to spark-a"),
    ("a gate with no bar", {"gated": True, "min_score": 0}, None, "no bar"),
])
def test_refusals(row, kwargs, units, words):
    found = plan(units, **kwargs)
    assert words in found["refusal"], row


def test_the_proxy_members_default_to_the_declared_grouping():
    found = sp.move_switch_plan(ABC, A, THREE_REPLICAS, [[A, B], [C]], declared=[[A, B], [C]])
    assert found["refusal"] == ""
    found = sp.move_switch_plan(ABC, A, THREE_REPLICAS, [[A], [B], [C]], declared=[[A, B], [C]])
    assert "spark-b" in found["refusal"]


def test_a_lost_host_is_never_expected_and_its_old_group_is_named():
    found = plan(PAIR_AND_ONE, ([A], [B], [C]), records=pair_records(), play_hosts=[A, C])
    assert found["lost_hosts"] == [B]
    # The pair cannot come back without spark-b: spark-a serves as a replica, spark-b is named, never expected.
    assert found["rollback"] is False and found["after"] == [[A], [C]]
    assert found["expected_in_rotation"] == [A, C]
    assert found["move"]["stop"] == [[A, B]]


def test_records_after_a_move_hold_the_grouping_and_each_hosts_place():
    done = plan(notes={})
    observed = {A: {"record": {"topology": "replicas"}, "runs": "split"},
                B: {"record": {"topology": "replicas"}, "runs": "split"},
                C: {"record": {"topology": "replicas"}, "runs": "replicas"}}
    found = sp.move_record_writes(done, ABC, observed, A, {"replicas": "/m/small", "split": "/m/big"})
    assert found["grouping"] == [[A, B], [C]]
    assert found["write"][A] == dict(found["write"][A], topology="split", grouping=[[A, B], [C]], group=[A, B], rank=0,
                                     model="/m/big")
    assert found["write"][B]["rank"] == 1
    assert found["write"][C] == dict(found["write"][C], topology="replicas", group=[C], rank=0, model="/m/small")
    assert found["unrecorded"] == {}


def test_records_name_a_lost_host():
    done = dict(plan(), lost_hosts=[B])
    observed = {A: {"record": None, "runs": "replicas"}, C: {"record": None, "runs": "replicas"}}
    found = sp.move_record_writes(done, ABC, observed, A)
    assert found["unrecorded"] == {B: "lost from the run (unreachable or failed)"}
    assert set(found["write"]) == {A, C}


# --- the report of a move (switch_report with a move's plan) -----------------------------------------------------

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_report as srep  # noqa: E402


def _report(records, notes=None, **kwargs):
    done = dict(plan(notes=notes or {}, **kwargs), start=1000.0)
    hosts = [{"name": host, "events": events} for host, events in (
        (A, {"drained": 1001.0, "old_stopped": 1002.0, "serving": 1060.0}), (B, {"old_stopped": 1002.5}),
        (C, {}))]
    return srep.switch_report(records, hosts, done, 1100.0)


def test_a_move_while_another_group_serves_has_no_time_without_a_model():
    records = [{"t": 1000.0 + 0.5 * i, "end": 1000.2 + 0.5 * i, "status": 200} for i in range(200)]
    report = _report(records)
    moved = report["move_report"]
    assert moved["time_without_model"] == 0.0 and moved["failed_requests"] == 0 and moved["served_throughout"]
    assert [row["role"] for row in moved["groups"]] == ["stopped", "stopped", "started", "served"]
    started = [row for row in moved["groups"] if row["role"] == "started"][0]
    assert started["group"] == [A, B] and started["timeline"] == {"drained": 1.0, "old_stopped": 2.0, "serving": 60.0}
    assert [row["step"] for row in moved["capacity"]] == ["before", "during", "after"]
    assert moved["capacity"][1]["hosts_serving"] == 1 and moved["capacity"][2]["groups_total"] == 2
    assert any("time without a model: 0.0 s (another group served throughout)" in line for line in report["lines"])
    assert report["outcome"] == "ok" and report["message"] == ""


def test_a_request_that_failed_while_another_group_served_fails_the_move():
    records = [{"t": 1000.0 + 0.5 * i, "end": 1000.2 + 0.5 * i, "status": 200 if i != 10 else 502} for i in range(200)]
    report = _report(records)
    assert report["move_report"]["failed_requests"] == 1
    assert report["outcome"] == "ok_with_failures" and "while other groups served" in report["message"]
