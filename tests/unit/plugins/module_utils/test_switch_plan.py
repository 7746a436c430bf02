# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The topology switch's decision table (plugins/module_utils/_switch_plan.py), every row.

The interrupted-switch rows: a switch interrupted after the new engines started and
before the gate's verdict leaves them drained by ``switch-to-*``; the re-run finds the
hosts on the target and finishes the job (heal) instead of doing nothing.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_plan as sp

ENGINES = ["spark-a", "spark-b"]
HEAD = "spark-a"
REPLICAS = ["active", "inactive"]
SPLIT = ["inactive", "active"]
NONE = ["inactive", "inactive"]


def units(a, b):
    return {"spark-a": a, "spark-b": b}


@pytest.mark.parametrize("row, topology, hosts, drains, gated, expected", [
    ("split serves, switch to replicas", "replicas", units(SPLIT, SPLIT), [{}], True,
     dict(on_target=False, heal=False, heal_hosts=[], heal_holders=[], drained_other={},
          incumbent={"topology": "split", "host": HEAD}, gated=True, api_engines=ENGINES)),
    ("replicas serve, switch to split", "split", units(REPLICAS, REPLICAS), [{}], True,
     dict(on_target=False, heal=False, incumbent={"topology": "replicas", "host": "spark-a"}, gated=True, api_engines=[HEAD])),
    ("only spark-b's replica serves", "split", units(NONE, REPLICAS), [{}], False,
     dict(on_target=False, incumbent={"topology": "replicas", "host": "spark-b"}, gated=False)),
    ("nothing serves", "replicas", units(NONE, NONE), [], True,
     dict(on_target=False, heal=False, incumbent={"topology": "", "host": ""}, gated=True)),
    ("a host that answered nothing is not on the target", "replicas", {"spark-a": REPLICAS}, [], True,
     dict(on_target=False, incumbent={"topology": "replicas", "host": "spark-a"})),
    ("already on the target: nothing to do, no gate", "replicas", units(REPLICAS, REPLICAS), [{}], True,
     dict(on_target=True, heal=False, heal_hosts=[], incumbent={"topology": "", "host": ""}, gated=False)),
    ("interrupted switch to replicas: both drained", "replicas", units(REPLICAS, REPLICAS),
     [{"spark-a": "switch-to-replicas", "spark-b": "switch-to-replicas"}], True,
     dict(on_target=True, heal=True, heal_hosts=ENGINES, heal_holders=["switch-to-replicas"], drained_other={},
          incumbent={"topology": "", "host": ""}, gated=True)),
    ("interrupted switch, the gate off for the target", "replicas", units(REPLICAS, REPLICAS),
     [{"spark-b": "switch-to-replicas"}], False,
     dict(on_target=True, heal=True, heal_hosts=["spark-b"], gated=False)),
    ("interrupted switch to split, drains of two runs on two proxies", "split", units(SPLIT, SPLIT),
     [{"spark-a": "switch-to-split"}, {"spark-b": "switch-to-replicas"}], True,
     dict(on_target=True, heal=True, heal_hosts=ENGINES, heal_holders=["switch-to-split", "switch-to-replicas"], gated=True,
          api_engines=[HEAD])),
    ("on the target, one drained by the switch, one by an operator", "replicas", units(REPLICAS, REPLICAS),
     [{"spark-a": "ops", "spark-b": "switch-to-replicas"}], True,
     dict(on_target=True, heal=True, heal_hosts=["spark-b"], drained_other={"spark-a": "ops"})),
    ("on the target, drained by an operator only: nothing to finish", "replicas", units(REPLICAS, REPLICAS),
     [{"spark-a": "", "gateway": "ops"}], True,
     dict(on_target=True, heal=False, heal_hosts=[], drained_other={"spark-a": ""}, gated=False)),
    ("a switch's drain off the target is not healed (the switch drains again anyway)", "replicas",
     units(SPLIT, SPLIT), [{"spark-a": "switch-to-replicas"}], True,
     dict(on_target=False, heal=False, heal_hosts=[], heal_holders=["switch-to-replicas"],
          incumbent={"topology": "split", "host": HEAD})),
    # The one reading of what runs (running_topology): an engine on its way up or reloading runs; this
    # decision once counted only "active", and took a split coming up on the head for nothing serving.
    ("a split still starting on the head is the incumbent", "replicas", units(["inactive", "activating"], SPLIT), [{}],
     True, dict(on_target=False, incumbent={"topology": "split", "host": HEAD})),
    ("a replica reloading on spark-b is the incumbent", "split", units(NONE, ["reloading", "inactive"]), [{}], False,
     dict(on_target=False, incumbent={"topology": "replicas", "host": "spark-b"})),
    ("a unit that failed does not run", "split", units(["failed", "inactive"], NONE), [{}], False,
     dict(on_target=False, incumbent={"topology": "", "host": ""})),
])
def test_decide(row, topology, hosts, drains, gated, expected):
    plan = sp.decide(topology, ENGINES, HEAD, hosts, drains, gated)
    assert {key: plan[key] for key in expected} == expected, row


def plan_for(topology, hosts, drains=(), gated=True):
    return sp.decide(topology, ENGINES, HEAD, hosts, list(drains), gated)


SWITCH = plan_for("replicas", units(SPLIT, SPLIT))
SWITCH_SPLIT = plan_for("split", units(REPLICAS, REPLICAS))
UNGATED = plan_for("replicas", units(SPLIT, SPLIT), gated=False)
HEAL = plan_for("replicas", units(REPLICAS, REPLICAS), [{"spark-a": "switch-to-replicas", "spark-b": "switch-to-replicas"}])
HEAL_ONE = plan_for("replicas", units(REPLICAS, REPLICAS), [{"spark-b": "switch-to-replicas"}])
HEAL_SPLIT = plan_for("split", units(SPLIT, SPLIT), [{"spark-a": "switch-to-split", "spark-b": "switch-to-split"}])
HEAL_UNGATED = plan_for("replicas", units(REPLICAS, REPLICAS), [{"spark-a": "switch-to-replicas"}], gated=False)
ON_TARGET = plan_for("replicas", units(REPLICAS, REPLICAS))
ON_TARGET_OPS_DRAIN = plan_for("replicas", units(REPLICAS, REPLICAS), [{"spark-b": "ops"}])
SWITCH_OPS_DRAIN = plan_for("replicas", units(SPLIT, SPLIT), [{"spark-b": "ops"}])


# ``passed``: the engines whose gate verdict passed (their notes' ``gate.passed``); in a
# gated switch no verdict is a failure: only those rejoin the proxy.
@pytest.mark.parametrize("row, plan, failed, passed, gate_hosts, expected", [
    ("switch, every engine serves: all gated, all join", SWITCH, [], ENGINES, ENGINES,
     dict(rollback=False, serving_topology="replicas", joined=True, undrain=ENGINES, heal_ready=[], heal_left=[],
          expected_in_rotation=ENGINES)),
    ("switch to split: rank 0 is gated, both ranks join", SWITCH_SPLIT, [], [HEAD], [HEAD],
     dict(rollback=False, joined=True, undrain=ENGINES, expected_in_rotation=[HEAD])),
    ("switch, one engine did not start: no gate, roll back", SWITCH, ["spark-b"], [], [],
     dict(rollback=True, serving_topology="split", joined=False, undrain=[], expected_in_rotation=[HEAD])),
    ("switch to split failed: the replicas come back", SWITCH_SPLIT, ["spark-a"], [], [],
     dict(rollback=True, serving_topology="replicas", expected_in_rotation=ENGINES)),
    ("ungated switch: no gate, joined already at the cut-over", UNGATED, [], [], [],
     dict(rollback=False, joined=False, undrain=[], expected_in_rotation=ENGINES)),
    ("nothing to do", ON_TARGET, [], [], [],
     dict(rollback=False, joined=False, undrain=[], heal_ready=[], heal_left=[], expected_in_rotation=ENGINES)),
    ("nothing to do, spark-b drained by an operator: not expected in rotation", ON_TARGET_OPS_DRAIN, [], [], [],
     dict(rollback=False, undrain=[], expected_in_rotation=["spark-a"])),
    ("switch with spark-b drained by an operator: the cut-over's drain replaces it, both join", SWITCH_OPS_DRAIN, [],
     ENGINES, ENGINES, dict(rollback=False, joined=True, undrain=ENGINES, expected_in_rotation=ENGINES)),
    ("interrupted switch finished: both pass and rejoin", HEAL, [], ENGINES, ENGINES,
     dict(rollback=False, joined=False, undrain=ENGINES, heal_ready=ENGINES, heal_left=[], expected_in_rotation=ENGINES)),
    ("interrupted switch, spark-b fails its gate: it stays drained, no rollback", HEAL, ["spark-b"], ["spark-a"], ["spark-a"],
     dict(rollback=False, serving_topology="replicas", undrain=["spark-a"], heal_ready=["spark-a"], heal_left=["spark-b"],
          expected_in_rotation=["spark-a"])),
    ("interrupted switch, only spark-b drained: only it is gated", HEAL_ONE, [], ["spark-b"], ["spark-b"],
     dict(undrain=["spark-b"], heal_ready=["spark-b"], heal_left=[], expected_in_rotation=ENGINES)),
    ("interrupted switch to split, rank 0 passes: both ranks rejoin", HEAL_SPLIT, [], [HEAD], [HEAD],
     dict(rollback=False, undrain=ENGINES, heal_ready=ENGINES, heal_left=[], expected_in_rotation=[HEAD])),
    ("interrupted switch to split, rank 0 fails: both stay drained", HEAL_SPLIT, [HEAD], [], [],
     dict(rollback=False, serving_topology="split", undrain=[], heal_ready=[], heal_left=ENGINES, expected_in_rotation=[])),
    ("interrupted switch, gate off: they rejoin untested", HEAL_UNGATED, [], [], [],
     dict(rollback=False, undrain=["spark-a"], heal_ready=["spark-a"], heal_left=[])),
    # No verdict is a failure (issue 33, item 5): an engine the gate never judged never reaches a client.
    ("gated switch, spark-b has no verdict (its gate never ran to the end): spark-b stays drained", SWITCH, [], ["spark-a"],
     ENGINES, dict(rollback=False, joined=True, undrain=["spark-a"], expected_in_rotation=["spark-a"])),
    ("gated switch to split, rank 0 has no verdict: nobody rejoins", SWITCH_SPLIT, [], [], [HEAD],
     dict(rollback=False, joined=False, undrain=[], expected_in_rotation=[])),
    ("interrupted switch, gated, spark-b has no verdict: it stays drained", HEAL, [], ["spark-a"], ENGINES,
     dict(undrain=["spark-a"], heal_ready=["spark-a"], heal_left=["spark-b"], expected_in_rotation=["spark-a"])),
])
def test_gate_and_conclude(row, plan, failed, passed, gate_hosts, expected):
    assert sp.gate_hosts(plan, ENGINES, HEAD, failed) == gate_hosts, row
    result = sp.conclude(plan, ENGINES, HEAD, failed, (), passed)
    assert {key: result[key] for key in expected} == expected, row


# Issue 33, item 5: an engine host lost (unreachable, or dropped after a failure) during the switch.
# ``lost``: the engine hosts no longer in the run; ``failed``: those that failed in it.
@pytest.mark.parametrize("row, plan, lost, failed, passed, gate_hosts, expected", [
    ("to replicas, spark-b lost during the gate, spark-a passed: the split cannot come back without spark-b, spark-a "
     "serves, spark-b never rejoins", SWITCH, ["spark-b"], [], ["spark-a", "spark-b"], ["spark-a"],
     dict(rollback=False, serving_topology="replicas", joined=True, undrain=["spark-a"], failed_hosts=["spark-b"],
          lost_hosts=["spark-b"], expected_in_rotation=["spark-a"])),
    ("to replicas, spark-b lost before the gate: spark-a is still gated (there is no way back)", SWITCH, ["spark-b"], [],
     [], ["spark-a"], dict(rollback=False, undrain=[], joined=False, expected_in_rotation=[])),
    ("to replicas, spark-b lost and spark-a failed its gate: nothing can serve, nobody rejoins", SWITCH, ["spark-b"],
     ["spark-a"], [], [], dict(rollback=False, undrain=[], failed_hosts=ENGINES, expected_in_rotation=[])),
    ("to split, rank 1 lost: roll back to replicas where it can (spark-a), spark-b left as it is", SWITCH_SPLIT,
     ["spark-b"], [], [HEAD], [],
     dict(rollback=True, serving_topology="replicas", undrain=[], joined=False, expected_in_rotation=["spark-a"])),
    ("to split, rank 0 lost: roll back to replicas on spark-b", SWITCH_SPLIT, [HEAD], [], [], [],
     dict(rollback=True, serving_topology="replicas", undrain=[], expected_in_rotation=["spark-b"])),
    ("every engine host lost: no rollback, nobody rejoins", SWITCH, ENGINES, [], ENGINES, [],
     dict(rollback=False, undrain=[], failed_hosts=ENGINES, expected_in_rotation=[])),
    ("ungated switch to replicas, spark-b lost: no way back; spark-a (joined at the cut-over) serves", UNGATED,
     ["spark-b"], [], [], [], dict(rollback=False, undrain=[], expected_in_rotation=["spark-a"])),
    ("interrupted switch, spark-b lost: it stays drained", HEAL, ["spark-b"], [], ENGINES, ["spark-a"],
     dict(rollback=False, undrain=["spark-a"], heal_left=["spark-b"], expected_in_rotation=["spark-a"])),
    ("interrupted switch to split, rank 1 lost, rank 0 passed: rank 0 rejoins, rank 1 stays drained", HEAL_SPLIT,
     ["spark-b"], [], [HEAD], [HEAD], dict(undrain=[HEAD], heal_left=["spark-b"], expected_in_rotation=[HEAD])),
])
def test_a_lost_engine_host_is_never_undrained(row, plan, lost, failed, passed, gate_hosts, expected):
    assert sp.gate_hosts(plan, ENGINES, HEAD, failed, lost) == gate_hosts, row
    result = sp.conclude(plan, ENGINES, HEAD, failed, lost, passed)
    assert {key: result[key] for key in expected} == expected, row
    for host in lost:
        assert host not in result["undrain"] and host not in result["expected_in_rotation"], row


@pytest.mark.parametrize("other_topology, lost, back", [
    ("split", [], True), ("split", ["spark-b"], False), ("replicas", ["spark-b"], True), ("replicas", ENGINES, False),
])
def test_can_roll_back(other_topology, lost, back):
    plan = SWITCH if other_topology == "split" else SWITCH_SPLIT
    assert sp.can_roll_back(plan, ENGINES, lost) is back


def test_switch_plan_names_the_hosts_the_play_lost():
    # The gate play ran on spark-a only: spark-b became unreachable. Its notes (from before) say it served.
    notes = {"spark-a": {"events": {"serving": 1.0}, "gate": {"passed": True}},
             "spark-b": {"events": {"serving": 1.0}}}
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {}, {"score": 75.0}, None, notes,
                          play_hosts=["spark-a"])
    assert plan["lost_hosts"] == ["spark-b"] and plan["failed_hosts"] == ["spark-b"]
    assert plan["undrain"] == ["spark-a"] and plan["rollback"] is False
    # Before, every engine of the group was undrained: spark-b served without a verdict.
    assert sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {}, {"score": 75.0}, None, notes,
                          play_hosts=ENGINES)["undrain"] == ["spark-a"]


def test_passed_gate_reads_the_verdicts():
    notes = {"spark-a": {"gate": {"passed": True}}, "spark-b": {"gate": {"passed": False}}, "gateway": {"gate": {"passed": True}}}
    assert sp.passed_gate(ENGINES, notes) == ["spark-a"]
    assert sp.passed_gate(ENGINES, {"spark-a": {"gate": {"passed": "True"}}}) == ["spark-a"]
    assert sp.passed_gate(ENGINES, None) == []


def test_conclude_keeps_inventory_order_and_engines_only():
    assert sp.conclude(SWITCH, ENGINES, HEAD, ["gateway", "spark-b", "spark-a"])["failed_hosts"] == ENGINES


GATE_STORED = {"build_id": "0123456789abcdef0123", "score": 75.0}


@pytest.mark.parametrize("row, plan, startup, score, text", [
    ("gated, measured before, score stored", SWITCH, {"replicas": 330.0, "replicas_gate": 41.6}, GATE_STORED,
     "Switching to replicas. The model will be away for about one replica's start-up (5.5 min, last measured) plus the "
     "tool-calling gate, which tests each new engine directly before it joins the proxy (42 s last time). It must reach "
     "tool_gate_min_score and stay within tool_gate_tolerance of the incumbent build 0123456789abcdef (split), which "
     "scores 75.0 (stored). If it fails, the split is started again."),
    ("gated, nothing measured, incumbent scored now", SWITCH_SPLIT, {}, dict(GATE_STORED, score=86, measured_now=True),
     "Switching to split. The model will be away for about one split's start-up (not measured yet on these hosts; 5 to 20 "
     "min on GB10) plus the tool-calling gate, which tests each new engine directly before it joins the proxy (not timed "
     "yet here). It must reach tool_gate_min_score and stay within tool_gate_tolerance of the incumbent build "
     "0123456789abcdef (replicas), which scores 86 (measured now). If it fails, the replicas is started again."),
    ("gated, no score stored", SWITCH, {"replicas": 60}, {"build_id": "abc", "score": None},
     "Switching to replicas. The model will be away for about one replica's start-up (1.0 min, last measured) plus the "
     "tool-calling gate, which tests each new engine directly before it joins the proxy (not timed yet here). It must "
     "reach tool_gate_min_score; no score is stored for the incumbent build abc (split). If it fails, the split is started "
     "again."),
    ("gated, nothing serves", plan_for("replicas", units(NONE, NONE)), {}, {},
     "Switching to replicas. The model will be away for about one replica's start-up (not measured yet on these hosts; 5 "
     "to 20 min on GB10) plus the tool-calling gate, which tests each new engine directly before it joins the proxy (not "
     "timed yet here). It must reach tool_gate_min_score; nothing serves now, so there is no incumbent to compare with. "
     "If it fails, the old topology is started again."),
    ("gate off", UNGATED, {"replicas": 90}, {},
     "Switching to replicas. The model will be away for about one replica's start-up (1.5 min, last measured). The "
     "tool-calling gate is off for replicas (tool_gate_topologies): the new engines take traffic untested."),
    ("already there", ON_TARGET, {}, {}, "Already on replicas: checking that it serves, nothing will stop."),
    ("already there, an operator's drains", plan_for("replicas", units(REPLICAS, REPLICAS), [{"spark-a": "", "spark-b": "ops"}]),
     {}, {},
     "Already on replicas: checking that it serves, nothing will stop. Drained by someone else, left as they are: "
     "spark-a (no holder), spark-b (ops); the proxy sends nothing there until its drain file is removed (nginx_proxy "
     "drain entry point, state absent)."),
    ("finishing an interrupted switch, gated", HEAL, {}, {},
     "Already on replicas, but spark-a, spark-b are still drained from the proxy by an interrupted switch-to-replicas run. "
     "Finishing it: nothing stops or starts; once they serve, the tool-calling gate tests each of them directly, against "
     "tool_gate_min_score and its own build's last passing score minus tool_gate_tolerance (the incumbent is gone), and "
     "each engine that passes rejoins the proxy. One that fails stays drained and the run fails, naming the way on."),
    ("finishing an interrupted switch to split, gated", HEAL_SPLIT, {}, {},
     "Already on split, but spark-a, spark-b are still drained from the proxy by an interrupted switch-to-split run. "
     "Finishing it: nothing stops or starts; once rank 0 serves, the tool-calling gate tests rank 0 directly, against "
     "tool_gate_min_score and its own build's last passing score minus tool_gate_tolerance (the incumbent is gone), and "
     "each engine that passes rejoins the proxy. One that fails stays drained and the run fails, naming the way on."),
    ("finishing an interrupted switch, gate off, one other drain", plan_for(
        "replicas", units(REPLICAS, REPLICAS), [{"spark-a": "switch-to-replicas", "spark-b": "ops"}], gated=False), {}, {},
     "Already on replicas, but spark-a is still drained from the proxy by an interrupted switch-to-replicas run. Finishing "
     "it: nothing stops or starts; once they serve, they rejoin the proxy (the tool-calling gate is off for replicas: "
     "untested). Drained by someone else, left as it is: spark-b (ops); the proxy sends nothing there until its drain "
     "file is removed (nginx_proxy drain entry point, state absent)."),
])
def test_announcement(row, plan, startup, score, text):
    assert sp.announcement(plan, startup, score) == text, row


def test_switch_plan_has_every_answer():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {"replicas": 60}, {}, None)
    assert plan["announcement"].startswith("Switching to replicas.")
    assert plan["gate_hosts"] == ENGINES and plan["rollback"] is False
    # No verdict yet: nobody is expected in rotation, nobody is undrained.
    assert plan["undrain"] == [] and plan["expected_in_rotation"] == []
    assert plan["refusal"] == "" and plan["records"] is None and plan["lost_hosts"] == []
    passed = {host: {"gate": {"passed": True}} for host in ENGINES}
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {"replicas": 60}, {}, None, passed)
    assert plan["undrain"] == ENGINES and plan["expected_in_rotation"] == ENGINES and plan["joined"] is True


# Issue 33, item 16: tool_gate_min_score 0 (the default) with no incumbent score passes any score above 0.
@pytest.mark.parametrize("row, topology, hosts, drains, gated, min_score, score, refused", [
    ("gated, min_score 0, nothing serves", "replicas", units(NONE, NONE), [], True, 0, {}, "nothing serves now"),
    ("gated, min_score 0, no score stored, not measured", "replicas", units(SPLIT, SPLIT), [], True, 0,
     {"build_id": "abc", "score": None}, "no score is stored for the incumbent build abc (split), and it was not measured"),
    ("gated, min_score 0, finishing an interrupted switch", "replicas", units(REPLICAS, REPLICAS),
     [{"spark-a": "switch-to-replicas"}], True, 0, {}, "finishing an interrupted switch"),
    ("gated, min_score 0, the incumbent scored: its score is the bar", "replicas", units(SPLIT, SPLIT), [], True, 0,
     {"build_id": "abc", "score": 75.0}, ""),
    ("gated, min_score 20: a bar of its own", "replicas", units(NONE, NONE), [], True, 20, {}, ""),
    ("not gated: no bar needed", "replicas", units(NONE, NONE), [], False, 0, {}, ""),
    ("min_score not known yet (the first decision)", "replicas", units(NONE, NONE), [], True, None, {}, ""),
    ("already on the target: nothing is gated", "replicas", units(REPLICAS, REPLICAS), [], True, 0, {}, ""),
])
def test_a_gate_with_no_bar_is_refused(row, topology, hosts, drains, gated, min_score, score, refused):
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, drains, gated, {}, score, None, None, min_score=min_score)
    if not refused:
        assert plan["refusal"] == "", row
        return
    assert plan["refusal"].startswith("The tool-calling gate has no bar for replicas: tool_gate_min_score is 0 and there is "
                                      "no incumbent score to compare with (%s" % refused), row
    assert "Nothing was changed. Set tool_gate_min_score above 0" in plan["refusal"]
    assert "leave replicas out of tool_gate_topologies" in plan["refusal"]


def test_the_announcement_names_the_records_disagreement():
    said = {"spark-a": {"record": {"topology": "split"}, "runs": "split"},
            "spark-b": {"record": {"topology": "replicas"}, "runs": "split"}}
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], False, {}, {}, None, records=said)
    assert plan["records"]["disagreements"] == ["spark-b records replicas but runs split",
                                                "the hosts' records differ: spark-a split, spark-b replicas"]
    assert plan["announcement"].endswith(
        "The engine hosts' topology records and what they run disagree: spark-b records replicas but runs split; the "
        "hosts' records differ: spark-a split, spark-b replicas. This switch records on each host what it runs once every "
        "host's outcome is known.")


# --- the records written at the end of a switch (item 2: one decision, after every outcome) ------------


def said(recorded, running, model=None):
    record = None if recorded is None else {"topology": recorded, "model": model, "error": None}
    return {"record": record, "runs": running}


MODELS = {"replicas": "/m/R", "split": "/m/S"}


@pytest.mark.parametrize("row, plan, observed, write, unrecorded", [
    ("a switch that went through: every host records the target, this run", dict(SWITCH, rollback=False),
     {"spark-a": said("split", "replicas", "/m/S"), "spark-b": said("split", "replicas", "/m/S")},
     {"spark-a": {"topology": "replicas", "model": "/m/R", "note": ""},
      "spark-b": {"topology": "replicas", "model": "/m/R", "note": ""}}, {}),
    ("the issue: a switch to split whose hosts both run replicas again; each records what it runs",
     dict(SWITCH_SPLIT, rollback=True),
     {"spark-a": said("split", "replicas", "/m/R"), "spark-b": said("replicas", "replicas", "/m/R")},
     {"spark-a": {"topology": "replicas", "model": "/m/R", "note": "the switch to split rolled back"}}, {}),
    ("rolled back, records already right: nothing written", dict(SWITCH, rollback=True),
     {"spark-a": said("split", "split", "/m/S"), "spark-b": said("split", "split", "/m/S")}, {}, {}),
    ("spark-b lost: not written, named", dict(SWITCH, rollback=False, lost_hosts=["spark-b"]),
     {"spark-a": said("split", "replicas")},
     {"spark-a": {"topology": "replicas", "model": "/m/R", "note": ""}},
     {"spark-b": "lost from the run (unreachable or failed)"}),
    ("the rollback failed: nothing runs on spark-b, its record stays", dict(SWITCH, rollback=True),
     {"spark-a": said("split", "split", "/m/S"), "spark-b": said("split", "none", "/m/S")}, {},
     {"spark-b": "no engine unit runs there"}),
    ("a record without the model gets it", dict(ON_TARGET, rollback=False),
     {"spark-a": said("replicas", "replicas"), "spark-b": said("replicas", "replicas", "/m/R")},
     {"spark-a": {"topology": "replicas", "model": "/m/R", "note": ""}}, {}),
])
def test_record_writes(row, plan, observed, write, unrecorded):
    decided = sp.record_writes(plan, ENGINES, observed, MODELS)
    assert decided == {"write": write, "unrecorded": unrecorded}, row


# What the hosts noted during the switch (the maintenance window's notes): the start-ups to record.
SERVED = {"events": {"drained": 1000.0, "old_stopped": 1010.04, "serving": 1322.46, "gate_done": 1363.5}}


@pytest.mark.parametrize("row, topology, hosts, notes, failed, records", [
    ("a gated switch that went through: both record start-up and gate", "replicas", units(SPLIT, SPLIT),
     {"spark-a": SERVED, "spark-b": {"events": {"old_stopped": 1000, "serving": 1100.0}}}, [],
     {"spark-a": {"replicas": 312.4, "replicas_gate": 41.0}, "spark-b": {"replicas": 100.0}}),
    ("to split: rank 1 serves no API and records nothing", "split", units(REPLICAS, REPLICAS),
     {"spark-a": SERVED, "spark-b": {"events": {"old_stopped": 1000}}}, [],
     {"spark-a": {"split": 312.4, "split_gate": 41.0}}),
    ("spark-b noted a failure: rollback, nothing recorded", "replicas", units(SPLIT, SPLIT),
     {"spark-a": SERVED, "spark-b": {"failed": True, "reason": "spark-b: start failed"}}, ["spark-b"], {}),
    ("already on the target: nothing recorded", "replicas", units(REPLICAS, REPLICAS), {"spark-a": SERVED}, [], {}),
    ("nothing noted yet (the preflight)", "replicas", units(SPLIT, SPLIT), {}, [], {}),
])
def test_notes_give_failures_and_startup_records(row, topology, hosts, notes, failed, records):
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, [{}], True, {}, {}, [], notes)
    assert plan["failed_hosts"] == failed, row
    assert plan["rollback"] is bool(failed), row
    assert plan["startup_records"] == records, row


def test_failed_and_notes_add_up():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {}, {}, ["spark-b"],
                          {"spark-a": {"failed": True}, "spark-b": {"failed": True}})
    assert plan["failed_hosts"] == ENGINES and plan["gate_hosts"] == []


# --- the rolling upgrade ------------------------------------------------------------------------


def replica(running, running_image="", model="/models/New", image="", image_id=""):
    return {"running": running, "running_image": running_image, "model": model, "image": image, "image_id": image_id}


@pytest.mark.parametrize("row, rep, done", [
    ("serves the candidate model (venv)", replica("/models/New"), True),
    ("serves the old model", replica("/models/Old"), False),
    ("the candidate model in the candidate image", replica("/models/New", "sha256:b", image="v2", image_id="sha256:b"), True),
    ("the candidate model in the old image", replica("/models/New", "sha256:a", image="v2", image_id="sha256:b"), False),
    ("the candidate image is not on the host yet", replica("/models/New", "sha256:a", image="v2", image_id=""), False),
])
def test_upgrade_done(row, rep, done):
    assert sp.upgrade_done(rep) is done, row


INCUMBENTS = {"spark-a": {"model_path": "/models/Old", "build_id": "0123456789abcdef0123456789", "score": 75.0},
              "spark-b": {"model_path": "/models/Old", "build_id": "short", "score": None}}


@pytest.mark.parametrize("row, notes, todo, stop, roll_back", [
    ("nothing happened yet", {}, ENGINES, False, []),
    ("spark-a upgraded, spark-b failed and got its old build back: roll spark-a back",
     {"spark-a": {"upgraded": True}, "spark-b": {"failed": True}}, ENGINES, True, ["spark-a"]),
    ("spark-b could not get its old build back: spark-a keeps the new one (it is the only one serving)",
     {"spark-a": {"upgraded": True}, "spark-b": {"failed": True, "restore_failed": True}}, ENGINES, True, []),
    ("every replica upgraded", {"spark-a": {"upgraded": True}, "spark-b": {"upgraded": True}}, ENGINES, False, []),
])
def test_upgrade_plan(row, notes, todo, stop, roll_back):
    replicas = {host: replica("/models/Old") for host in ENGINES}
    plan = sp.upgrade_plan(ENGINES, replicas, "/models/New", {}, INCUMBENTS, notes)
    assert (plan["todo"], plan["stop"], plan["roll_back"]) == (todo, stop, roll_back), row


@pytest.mark.parametrize("engines, todo, startup, text", [
    (ENGINES, [], {}, "Every replica already serves /models/New on image v2: nothing to do."),
    (ENGINES, ENGINES, {"replicas": 93.0},
     "Upgrading spark-a, spark-b to /models/New on image v2, one replica at a time. Each leaves the proxy for about one "
     "replica start-up (1.6 min, last measured) plus the tool-calling test; the other replica serves meanwhile. Each is "
     "compared with the build it serves now: spark-a /models/Old (build 0123456789abcdef) scores 75.0; spark-b "
     "/models/Old (build short) scores nothing stored."),
    (["spark-a"], ["spark-a"], {},
     "Upgrading spark-a to /models/New on image v2, one replica at a time. Each leaves the proxy for about one replica "
     "start-up (not measured yet here; 5 to 13 min on GB10) plus the tool-calling test; it is the only replica "
     "(switch_model_allow_outage): the model is down meanwhile, clients get 503. Each is compared with the build it "
     "serves now: spark-a /models/Old (build 0123456789abcdef) scores 75.0."),
])
def test_upgrade_announcement(engines, todo, startup, text):
    assert sp.upgrade_announcement(engines, todo, "/models/New on image v2", startup, INCUMBENTS) == text


@pytest.mark.parametrize("model, image, target", [
    ("/models/New", "", "/models/New"),
    ("", "vllm/vllm-openai:v2", "image vllm/vllm-openai:v2"),
    ("/models/New", "vllm/vllm-openai:v2", "/models/New on image vllm/vllm-openai:v2"),
    ("", "", ""),
])
def test_upgrade_target(model, image, target):
    assert sp.upgrade_target(model, image) == target


def noted(running, running_image="", model="/models/New", image="", image_id=""):
    """A replica as the model_upgrade role's check notes it: the candidate under ``candidate``."""
    return {"running": running, "running_image": running_image,
            "candidate": {"model": model, "tool_call_parser": "", "chat_template": "", "image": image, "image_id": image_id},
            "old": {"model": "/models/Old", "tool_call_parser": "", "chat_template": "", "image": "v1", "image_id": "sha256:a"}}


@pytest.mark.parametrize("row, rep, flat", [
    ("serves the candidate model (venv)", noted("/models/New"), replica("/models/New")),
    ("serves the old model", noted("/models/Old"), replica("/models/Old")),
    ("the candidate model in the candidate image", noted("/models/New", "sha256:b", image="v2", image_id="sha256:b"),
     replica("/models/New", "sha256:b", image="v2", image_id="sha256:b")),
    ("the candidate model in the old image", noted("/models/New", "sha256:a", image="v2", image_id="sha256:b"),
     replica("/models/New", "sha256:a", image="v2", image_id="sha256:b")),
    ("the candidate image is not on the host yet", noted("/models/New", "sha256:a", image="v2"),
     replica("/models/New", "sha256:a", image="v2")),
])
def test_upgrade_plan_reads_the_noted_candidate_as_the_flat_one(row, rep, flat):
    nested = sp.upgrade_plan(["spark-a"], {"spark-a": rep}, "/models/New")
    assert nested["todo"] == sp.upgrade_plan(["spark-a"], {"spark-a": flat}, "/models/New")["todo"], row


def test_upgrade_plan_gives_the_report_the_target_and_the_first_replicas_old_build():
    plan = sp.upgrade_plan(ENGINES, {host: noted("/models/Old") for host in ENGINES}, model="/models/New", image="v2")
    assert plan["target"] == "/models/New on image v2"
    assert plan["report"] == {
        "target": "/models/New on image v2", "todo": ENGINES,
        "old": {"model": "/models/Old", "tool_call_parser": "", "chat_template": "", "image": "v1", "image_id": "sha256:a"},
        "switch_model": "/models/New", "switch_image": "v2"}
    assert list(plan["report"]) == ["target", "todo", "old", "switch_model", "switch_image"]
    assert sp.upgrade_plan(ENGINES, {}, "/models/New")["report"]["old"] == {}


@pytest.mark.parametrize("row, min_score, incumbents, refused", [
    ("min_score 0, spark-b's build has no score", 0, INCUMBENTS, "spark-b"),
    ("min_score 0, every build scored", 0, {h: dict(INCUMBENTS["spark-a"]) for h in ENGINES}, ""),
    ("min_score 20", 20, INCUMBENTS, ""),
    ("not known yet", None, INCUMBENTS, ""),
])
def test_upgrade_refuses_a_gate_with_no_bar(row, min_score, incumbents, refused):
    plan = sp.upgrade_plan(ENGINES, {host: replica("/models/Old") for host in ENGINES}, "/models/New", {}, incumbents,
                           min_score=min_score)
    if not refused:
        assert plan["refusal"] == "", row
        return
    assert plan["refusal"].startswith("The tool-calling gate has no bar for the new build: tool_gate_min_score is 0 and "
                                      "there is no incumbent score to compare with (no score is stored for the build "
                                      "spark-b serves (/models/Old, build short), and it was not measured)"), row
    assert "tool_gate_topologies" not in plan["refusal"]


@pytest.mark.parametrize("playbook_dir, named", [
    (None, "factory_floor.llm.tool_gate_spread"),
    ("/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks", "factory_floor.llm.tool_gate_spread"),
    ("/srv/factory-floor/playbooks", "playbooks/tool-gate-spread.yml"),
])
def test_the_gate_bar_refusal_names_the_spread_playbook_as_the_operator_runs_it(playbook_dir, named):
    words = "(group_vars/gb10.yml; %s measures a good build's spread to choose it)" % named
    switch = sp.switch_plan("replicas", ENGINES, HEAD, units(NONE, NONE), [], True, {}, {}, None, None, min_score=0,
                            playbook_dir=playbook_dir)
    upgrade = sp.upgrade_plan(ENGINES, {host: replica("/models/Old") for host in ENGINES}, "/models/New", {}, INCUMBENTS,
                              min_score=0, playbook_dir=playbook_dir)
    assert words in switch["refusal"] and words in upgrade["refusal"]


# --- The dry run (issue 35): switch_dry_run or --check stops after the preflight and prints this plan -----

SCORED = {"build_id": "abcdef0123456789xyz", "score": 71.4}
WOULD_MEASURE = {"build_id": "abcdef0123456789xyz", "score": None, "would_measure": True, "would_send": 36}
FIRST = ("Dry run of the switch to %s: this is what a run would do. Nothing was changed, no tool-calling test was sent, "
         "no lock was taken.")
LAST = "To run it: the same command without -e switch_dry_run=true (and without --check)."


@pytest.mark.parametrize("row, topology, hosts, drains, gated, startup, score, min_score, lines", [
    ("replicas to split, gated, start-ups measured", "split", units(REPLICAS, REPLICAS), [{}], True,
     {"split": 420, "split_gate": 35}, SCORED, 60, [
         "Stops: vllm-replica.service on spark-a, spark-b (each host's replicas watchdog disabled --now first; spark-a, "
         "spark-b drained from the proxy, in-flight requests finishing, before it stops).",
         "Starts: vllm-split.service on spark-a (rank 0, serves the API) and spark-b (rank 1), rendered and checked before "
         "anything stops; its watchdog after it serves.",
         "The model is away: about 7.6 min - the split start-up last measured on these hosts (7.0 min) plus its "
         "tool-calling gate (35 s last time).",
         "Gated: yes - the tool-calling gate tests spark-a directly before it joins the proxy: it must reach "
         "tool_gate_min_score (60) and stay within tool_gate_tolerance of the incumbent's score; the incumbent build "
         "abcdef0123456789 (replicas) scores 71.4 (stored).",
         "If a new engine does not serve or fails the gate: the replicas are started again (a rollback), and the run fails."]),
    ("split to replicas, not gated, nothing measured", "replicas", units(SPLIT, SPLIT), [{}], False, {}, {}, 0, [
        "Stops: vllm-split.service on spark-a, spark-b (each host's split watchdog disabled --now first; spark-a drained "
        "from the proxy, in-flight requests finishing, before it stops).",
        "Starts: vllm-replica.service on spark-a, spark-b (one replica each), rendered and checked before anything stops; "
        "its watchdog after it serves.",
        "The model is away: one replica start-up, not measured yet on these hosts (5 to 20 min on GB10).",
        "Gated: no - replicas is not in tool_gate_topologies: the new engines take traffic untested.",
        "If a new engine does not serve: the split is started again (a rollback), and the run fails."]),
    ("split to replicas, the incumbent would be measured first (check mode)", "replicas", units(SPLIT, SPLIT),
     [{"spark-b": "ops"}], True, {"replicas": 120}, WOULD_MEASURE, 0, [
         "Stops: vllm-split.service on spark-a, spark-b (each host's split watchdog disabled --now first; spark-a drained "
         "from the proxy, in-flight requests finishing, before it stops).",
         "Starts: vllm-replica.service on spark-a, spark-b (one replica each), rendered and checked before anything "
         "stops; its watchdog after it serves.",
         "The model is away: about 2.0 min - the replica start-up last measured on these hosts (2.0 min) plus its "
         "tool-calling gate (not timed yet here).",
         # Never gated here (nothing looked up): the suite is split over both replicas (issue 37).
         "Gated: yes - the tool-calling gate tests spark-a, spark-b directly before each joins the proxy, its suite split "
         "over the 2 new engines (each case alone on its engine, about 1/2 of the time; one verdict over every case): "
         "each must reach tool_gate_min_score (0) and stay within tool_gate_tolerance of the incumbent's score; the incumbent build "
         "abcdef0123456789 (split) has no stored score: a run measures it first, while it serves (36 chat completions).",
         "If a new engine does not serve or fails the gate: the split is started again (a rollback), and the run fails.",
         "Left alone: spark-b (ops), drained by someone else."]),
    ("only spark-b runs a replica", "split", units(NONE, REPLICAS), [{}], False, {}, {}, None, [
        "Stops: vllm-replica.service on spark-b (each host's replicas watchdog disabled --now first; spark-b drained from "
        "the proxy, in-flight requests finishing, before it stops).",
        "Starts: vllm-split.service on spark-a (rank 0, serves the API) and spark-b (rank 1), rendered and checked before "
        "anything stops; its watchdog after it serves.",
        "The model is away: one split start-up, not measured yet on these hosts (5 to 20 min on GB10).",
        "Gated: no - split is not in tool_gate_topologies: the new engines take traffic untested.",
        "If a new engine does not serve: the replicas are started again (a rollback), and the run fails."]),
    ("already on the target", "replicas", units(REPLICAS, REPLICAS), [{}], True, {}, {}, 0, [
        "Stops and starts: nothing - every engine host already runs replicas (vllm-replica.service); a run checks that it "
        "serves and is in the proxy's rotation."]),
    ("finishing an interrupted switch", "replicas", units(REPLICAS, REPLICAS), [{"spark-b": "switch-to-replicas"}], True,
     {}, {}, 50, [
         "Stops and starts: nothing - every engine host already runs replicas (vllm-replica.service).",
         "Finishes an interrupted switch-to-replicas run: spark-b is drained from the proxy; the tool-calling gate tests "
         "each of them directly (against tool_gate_min_score and the build's own last passing score minus "
         "tool_gate_tolerance), and each that passes rejoins the proxy."]),
])
def test_the_dry_run_says_what_stops_what_starts_how_long_and_what_is_gated(row, topology, hosts, drains, gated, startup,
                                                                            score, min_score, lines):
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, drains, gated, startup, score, None, None, min_score=min_score)
    assert plan["dry_run"] == [FIRST % topology] + lines + [LAST], row


# Seen (issue 35): a lab inventory's vllm_split_model is another directory than vllm_model, under the same served
# name; the dry run of a switch to the split never said so.
SMOL, TINY = "/opt/models/SmolLM2-135M-Instruct", "/opt/models/tiny-random"
SPLIT_STARTS = "Starts: vllm-split.service on spark-a (rank 0, serves the API) and spark-b (rank 1)"
REPLICAS_STARTS = "Starts: vllm-replica.service on spark-a, spark-b (one replica each)"
AFTER = ", rendered and checked before anything stops; its watchdog after it serves."


@pytest.mark.parametrize("row, topology, hosts, models, name, starts", [
    ("to the split, another directory, the same name", "split", units(REPLICAS, REPLICAS),
     {"replicas": SMOL, "split": TINY}, "lab-chat",
     SPLIT_STARTS + " with /opt/models/tiny-random as lab-chat" + AFTER + " Another model: the split serves "
     "/opt/models/tiny-random (vllm_split_model), not /opt/models/SmolLM2-135M-Instruct which the replicas serve now, "
     "under the same name lab-chat: clients that ask for lab-chat get its answers."),
    ("back to the replicas, another directory, no served name given", "replicas", units(SPLIT, SPLIT),
     {"replicas": SMOL, "split": TINY}, "",
     REPLICAS_STARTS + " with /opt/models/SmolLM2-135M-Instruct" + AFTER + " Another model: the replicas serve "
     "/opt/models/SmolLM2-135M-Instruct (vllm_model), not /opt/models/tiny-random which the split serves now, under the "
     "same served model name: clients that ask for it get its answers."),
    ("to the split, the same directory (vllm_split_model not set)", "split", units(REPLICAS, REPLICAS),
     {"replicas": SMOL, "split": SMOL}, "lab-chat",
     SPLIT_STARTS + " with /opt/models/SmolLM2-135M-Instruct as lab-chat (the model directory the replicas serve now)"
     + AFTER),
    ("nothing serves now: the directory, nothing to compare", "replicas", units(NONE, NONE),
     {"replicas": SMOL, "split": TINY}, "lab-chat", REPLICAS_STARTS + " with /opt/models/SmolLM2-135M-Instruct as lab-chat" + AFTER),
    ("the incumbent's directory not given: the new one only", "split", units(REPLICAS, REPLICAS), {"split": TINY},
     "lab-chat", SPLIT_STARTS + " with /opt/models/tiny-random as lab-chat" + AFTER),
    ("no models given: the line as before", "split", units(REPLICAS, REPLICAS), {}, "lab-chat", SPLIT_STARTS + AFTER),
])
def test_the_dry_run_names_the_model_the_new_topology_serves(row, topology, hosts, models, name, starts):
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, [{}], False, {}, {}, None, None, min_score=0, models=models,
                          served_model_name=name)
    assert [line for line in plan["dry_run"] if line.startswith("Starts:")] == [starts], row


def test_on_the_target_the_dry_run_starts_nothing_whatever_the_models():
    plan = sp.switch_plan("split", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], False, {}, {}, None, None,
                          models={"replicas": SMOL, "split": TINY}, served_model_name="lab-chat")
    assert not [line for line in plan["dry_run"] if line.startswith("Starts:") or "Another model" in line]


def test_a_would_be_measured_incumbent_is_a_bar():
    # In check mode the incumbent is not measured, but a run would measure it first: a dry run is not refused for that.
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [], True, {}, WOULD_MEASURE, None, None,
                          min_score=0)
    assert plan["refusal"] == ""
    assert plan["announcement"].endswith("no score is stored for the incumbent build abcdef0123456789 (split): a run "
                                         "measures it first, while it serves. If it fails, the split is started again.")
    incumbents = {"spark-a": dict(WOULD_MEASURE, model_path="/models/Old")}
    assert sp.upgrade_plan(["spark-a"], {"spark-a": replica("/models/Old")}, "/models/New", {}, incumbents,
                           min_score=0)["refusal"] == ""


@pytest.mark.parametrize("row, engines, replicas, startup, incumbents, lines", [
    ("two replicas, one to upgrade, its build scored", ENGINES,
     {"spark-a": replica("/models/Old"), "spark-b": replica("/models/New")}, {"replicas": 300, "replicas_gate": 40},
     {"spark-a": {"build_id": "0123456789abcdef0123456789", "score": 66.7}}, [
         "Upgrades, one replica at a time, in this order: spark-a (spark-b already serves it: left as it is).",
         "Each: leaves the proxy (its in-flight requests finish, up to switch_drain_timeout), stops vllm-replica.service, "
         "starts it on /models/New, is gated, and rejoins the proxy.",
         "Each is away: about 5.7 min - the replica start-up last measured on these hosts (5.0 min) plus its tool-calling "
         "gate (40 s last time); the model stays up, the other replica serves meanwhile.",
         "Gated: yes - each candidate must reach tool_gate_min_score (50) and stay within tool_gate_tolerance of the build "
         "it replaces: spark-a's build 0123456789abcdef scores 66.7.",
         "If a replica fails: it gets its old build back, the replicas already upgraded go back too, the others are not "
         "touched, and the run fails."]),
    ("one replica (an outage), its score measured first", ["spark-a"], {"spark-a": replica("/models/Old")}, {},
     {"spark-a": WOULD_MEASURE}, [
         "Upgrades, one replica at a time, in this order: spark-a.",
         "Each: leaves the proxy (its in-flight requests finish, up to switch_drain_timeout), stops vllm-replica.service, "
         "starts it on /models/New, is gated, and rejoins the proxy.",
         "Each is away: one replica start-up, not measured yet on these hosts (5 to 20 min on GB10) plus its tool-calling "
         "gate (not timed yet here); it is the only replica (switch_model_allow_outage): the model is down meanwhile, "
         "clients get 503.",
         "Gated: yes - each candidate must reach tool_gate_min_score (50) and stay within tool_gate_tolerance of the build "
         "it replaces: spark-a's build abcdef0123456789xyz has no stored score: a run measures it first, while it serves "
         "(36 chat completions).",
         "If a replica fails: it gets its old build back, the replicas already upgraded go back too, the others are not "
         "touched, and the run fails."]),
    ("every replica serves it already", ENGINES, {h: replica("/models/New") for h in ENGINES}, {}, {}, [
        "Every replica already serves /models/New: nothing would change."]),
])
def test_the_upgrades_dry_run(row, engines, replicas, startup, incumbents, lines):
    plan = sp.upgrade_plan(engines, replicas, "/models/New", startup, incumbents, min_score=50)
    expected = ["Dry run of the upgrade to /models/New: this is what a run would do. Nothing was changed, no "
                "tool-calling test was sent, no lock was taken."] + lines
    if plan["todo"]:
        expected.append(LAST)
    assert plan["dry_run"] == expected, row


# Issue 37: a build that passed the gate on this site's engine hosts joins the proxy as soon as it serves and is gated
# after, while it serves; any other is gated before it joins.
KNOWN = {"known": True, "score": 94.4, "measured_at": "2026-12-01T10:02:11Z",
         "why": "the build 0123456789abcdef passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4"}
NEVER = {"known": False, "why": "the build 0123456789abcdef has no score stored on this site's engine hosts with this "
                                "suite (never gated here)"}


@pytest.mark.parametrize("row, plan, known, mode, why", [
    ("a known build: after admission", SWITCH, KNOWN, sp.AFTER_ADMISSION, KNOWN["why"]),
    ("a build never gated here: before", SWITCH, NEVER, sp.BEFORE_ADMISSION, NEVER["why"]),
    ("not looked up (nothing served to look it up where): before", SWITCH, {}, sp.BEFORE_ADMISSION,
     "the new build's stored scores were not looked up (nothing serves now to compare with)"),
    ("known, but finishing an interrupted switch: its drained engines are gated before", HEAL, KNOWN, sp.BEFORE_ADMISSION,
     "finishing an interrupted switch: its engines stay drained until they pass"),
    ("not gated: no gate at all", UNGATED, KNOWN, "", "the tool-calling gate is off for replicas"),
])
def test_gate_mode(row, plan, known, mode, why):
    assert sp.gate_mode(plan, known) == (mode, why), row


def after(plan):
    return dict(plan, gate_mode=sp.AFTER_ADMISSION)


@pytest.mark.parametrize("row, plan, failed, lost, passed, expected", [
    ("known build, both pass: they joined at the cut-over, nothing changes after the gate", after(SWITCH), [], [], ENGINES,
     dict(rollback=False, joined=False, undrain=[], expected_in_rotation=ENGINES,
          proxy_drain={"hosts": [], "state": "absent"})),
    ("known build, spark-b fails its gate: both leave the proxy again, then the split comes back", after(SWITCH),
     ["spark-b"], [], ["spark-a"],
     dict(rollback=True, serving_topology="split", undrain=[], expected_in_rotation=[HEAD],
          proxy_drain={"hosts": ENGINES, "state": "present"})),
    ("known build, spark-b did not start: both leave the proxy again before the rollback", after(SWITCH), ["spark-b"],
     [], [], dict(rollback=True, proxy_drain={"hosts": ENGINES, "state": "present"})),
    ("known split, rank 0 fails: both ranks leave, the replicas come back", after(SWITCH_SPLIT), [HEAD], [], [],
     dict(rollback=True, serving_topology="replicas", proxy_drain={"hosts": ENGINES, "state": "present"})),
    ("known build, the old split cannot come back without lost spark-b: spark-b leaves, spark-a serves on",
     after(SWITCH), [], ["spark-b"], ["spark-a"],
     dict(rollback=False, serving_topology="replicas", expected_in_rotation=["spark-a"],
          proxy_drain={"hosts": ["spark-b"], "state": "present"})),
    ("before admission, both pass: they join after the gate", dict(SWITCH, gate_mode=sp.BEFORE_ADMISSION), [], [],
     ENGINES, dict(joined=True, undrain=ENGINES, proxy_drain={"hosts": ENGINES, "state": "absent"})),
])
def test_after_admission_conclude(row, plan, failed, lost, passed, expected):
    found = sp.conclude(plan, ENGINES, HEAD, failed, lost, passed)
    assert {key: found[key] for key in expected} == expected, row


def test_a_known_build_is_admitted_at_the_cut_over_and_said_so():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True,
                          {"replicas": 60, "replicas_gate": 120}, {"build_id": "abc", "score": 75.0}, known_build=KNOWN,
                          min_score=80)
    assert plan["gate_mode"] == sp.AFTER_ADMISSION and plan["admit_at_cut_over"] is True
    assert plan["gate_hosts"] == ENGINES and plan["known_build"] == KNOWN
    assert plan["announcement"] == (
        "Switching to replicas. The model will be away for about one replica's start-up (1.0 min, last measured). The "
        "build 0123456789abcdef passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4: the engines join "
        "as soon as they serve, the gate runs after (120 s last time), testing each new engine directly while it serves. "
        "It must reach tool_gate_min_score and stay within tool_gate_tolerance of the incumbent build abc (split), which "
        "scores 75.0 (stored). If it fails, the new engines leave the proxy again and the split is started again.")
    assert plan["dry_run"][3] == ("The model is away: about 1.0 min - the replica start-up last measured on these hosts "
                                  "(1.0 min) (the gate runs after the engines joined the proxy).")
    assert plan["dry_run"][4] == (
        "Gated: yes, after admission - the build 0123456789abcdef passed the gate here on 2026-12-01T10:02:11Z (spark-a) "
        "with score 94.4: the engines join as soon as they serve, the gate runs after: it tests spark-a, spark-b directly "
        "while they serve, which must reach tool_gate_min_score (80) and stay within tool_gate_tolerance of the "
        "incumbent's score; the incumbent build abc (split) scores 75.0 (stored).")
    assert plan["dry_run"][5] == ("If a new engine does not serve or fails the gate: the new engines leave the proxy "
                                  "again and the split is started again (a rollback), and the run fails.")


@pytest.mark.parametrize("gated, known, admit", [(True, NEVER, False), (True, {}, False), (False, KNOWN, True)])
def test_a_build_never_gated_here_stays_drained_at_the_cut_over(gated, known, admit):
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], gated, {}, {}, known_build=known)
    assert plan["admit_at_cut_over"] is admit
    assert ("the engines join as soon as they serve" in plan["announcement"]) is False


@pytest.mark.parametrize("row, plan, hosts, split", [
    ("never gated here, two replicas: split over both", dict(SWITCH, gate_mode=sp.BEFORE_ADMISSION), ENGINES, ENGINES),
    ("one replica left to gate: the whole suite on it", dict(SWITCH, gate_mode=sp.BEFORE_ADMISSION), ["spark-b"], []),
    ("the split: one API engine, the whole suite on rank 0", dict(SWITCH_SPLIT, gate_mode=sp.BEFORE_ADMISSION), [HEAD],
     []),
    ("a known build, gated while it serves: the whole suite on each", after(SWITCH), ENGINES, []),
    ("finishing an interrupted switch: the whole suite on each", dict(HEAL, gate_mode=sp.BEFORE_ADMISSION), ENGINES, []),
    ("not gated", dict(UNGATED, gate_mode=""), ENGINES, []),
])
def test_gate_split(row, plan, hosts, split):
    assert sp.gate_split(plan, hosts) == split, row


def test_a_never_gated_build_on_two_replicas_splits_the_suite_and_says_so():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {"replicas": 60}, {},
                          known_build=NEVER)
    assert plan["gate_split"] == ENGINES and plan["gate_mode"] == sp.BEFORE_ADMISSION
    assert ("before it joins the proxy, its suite split over the 2 new engines (each case alone on its engine, about "
            "1/2 of the time; one verdict over every case) (not timed yet here)") in plan["announcement"]
    failed = sp.switch_plan("replicas", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, {}, {}, ["spark-b"],
                            known_build=NEVER)
    assert failed["gate_split"] == [] and failed["gate_hosts"] == []


@pytest.mark.parametrize("engines, head, words", [
    (["spark-a", "spark-b"], "spark-a", "spark-a (rank 0, serves the API) and spark-b (rank 1)"),
    (["spark-a", "spark-b", "spark-c"], "spark-a",
     "spark-a (rank 0, serves the API) and spark-b (rank 1), spark-c (rank 2)"),
    (["spark-a", "spark-b", "spark-c", "spark-d"], "spark-c",
     "spark-c (rank 0, serves the API) and spark-a (rank 1), spark-b (rank 2), spark-d (rank 3)"),
])
def test_the_dry_run_of_a_split_over_three_or_four_names_each_rank(engines, head, words):
    plan = sp.switch_plan("split", engines, head, {host: REPLICAS for host in engines}, (), False, None, None, None,
                          None)
    (starts,) = [line for line in plan["dry_run"] if line.startswith("Starts: ")]
    assert starts.startswith("Starts: vllm-split.service on " + words + ", rendered and checked"), starts


# Issue 37, the owed gate: a switch that admitted a known build at the cut-over and was killed before the gate's verdict
# leaves its engines serving ungated, nothing drained, and the records it never wrote naming the old topology. The
# re-run is on the target with records behind the units; with the target gated it runs the gate it owes.
BEHIND = {host: said("split", "replicas", "/m/S") for host in ENGINES}
AGREE = {host: said("replicas", "replicas", "/m/R") for host in ENGINES}
NO_RECORD = {host: said(None, "replicas") for host in ENGINES}
BEHIND_SPLIT = {host: said("replicas", "split", "/m/R") for host in ENGINES}
BOTH_DRAINED = [{"spark-a": "switch-to-replicas", "spark-b": "switch-to-replicas"}]


@pytest.mark.parametrize("row, topology, hosts, drains, records, gated, behind, owed, gate_hosts", [
    ("records behind (both name split), gated: the gate is owed", "replicas", units(REPLICAS, REPLICAS), [{}], BEHIND,
     True, True, True, ENGINES),
    # No record is no evidence of a killed switch (a site deployed before records existed): nothing owed, and no
    # rollback to a topology that site may never have run.
    ("no record on either host, gated: nothing owed", "replicas", units(REPLICAS, REPLICAS), [{}], NO_RECORD, True,
     False, False, []),
    ("one record names split, one none: nothing owed", "replicas", units(REPLICAS, REPLICAS), [{}],
     {"spark-a": said("split", "replicas"), "spark-b": said(None, "replicas")}, True, False, False, []),
    ("to split, records behind: rank 0 is gated", "split", units(SPLIT, SPLIT), [{}], BEHIND_SPLIT, True, True, True,
     [HEAD]),
    ("records behind, the gate off for the target: nothing owed (the records are written, no gate)", "replicas",
     units(REPLICAS, REPLICAS), [{}], BEHIND, False, True, False, []),
    ("records agree: nothing to do", "replicas", units(REPLICAS, REPLICAS), [{}], AGREE, True, False, False, []),
    ("one record agrees, one behind: not a killed switch's (it writes every host's), nothing owed", "replicas",
     units(REPLICAS, REPLICAS), [{}], {"spark-a": said("replicas", "replicas"), "spark-b": said("split", "replicas")},
     True, False, False, []),
    ("a host whose record could not be read: nothing owed", "replicas", units(REPLICAS, REPLICAS), [{}],
     {"spark-a": said("split", "replicas"), "spark-b": {}}, True, False, False, []),
    ("no records read: nothing owed", "replicas", units(REPLICAS, REPLICAS), [{}], None, True, False, False, []),
    ("drained by the switch: a heal, not an owed gate", "replicas", units(REPLICAS, REPLICAS), BOTH_DRAINED, BEHIND,
     True, False, False, ENGINES),
    ("off the target, records of the old topology: a switch", "replicas", units(SPLIT, SPLIT), [{}],
     {host: said("split", "split") for host in ENGINES}, True, False, False, ENGINES),
])
def test_owed_gate_decision(row, topology, hosts, drains, records, gated, behind, owed, gate_hosts):
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, drains, gated, {}, {}, None, None, min_score=20,
                          records=records)
    assert (plan["records_behind"], plan["owed_gate"]) == (behind, owed), row
    assert plan["gate_hosts"] == gate_hosts, row
    if owed:
        assert plan["gated"] is True and plan["gate_mode"] == sp.AFTER_ADMISSION, row
        assert plan["heal"] is False and plan["rollback"] is False and plan["refusal"] == "", row
        assert plan["gate_split"] == [] and plan["joined"] is False, row
    elif plan["on_target"] and not plan["heal"]:
        assert plan["gated"] is False and plan["gate_mode"] == "", row


def test_the_first_decision_does_not_know_the_gate_yet_but_says_the_records_are_behind():
    # The preflight asks tool_gate whether the target is gated (gated.yml) on the target only when the records are behind.
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], False, records=BEHIND)
    assert plan["records_behind"] is True and plan["owed_gate"] is False and plan["gated"] is False


def gate_note(passed):
    return {"gate": {"passed": passed, "score": 80.0 if passed else 10.0}, "events": {"serving": 1000.0}}


@pytest.mark.parametrize("row, topology, notes, expected", [
    ("both pass: nothing moves, the records are written", "replicas",
     {"spark-a": gate_note(True), "spark-b": gate_note(True)},
     dict(failed_hosts=[], rollback=False, serving_topology="replicas", undrain=[], joined=False,
          expected_in_rotation=ENGINES, proxy_drain={"hosts": [], "state": "absent"}, startup_records={})),
    ("spark-b fails its owed gate: both leave the proxy again, the split comes back, the run fails", "replicas",
     {"spark-a": gate_note(True), "spark-b": dict(gate_note(False), failed=True, reason="spark-b: gate failed")},
     dict(failed_hosts=["spark-b"], rollback=True, serving_topology="split", undrain=[],
          expected_in_rotation=[HEAD], proxy_drain={"hosts": ENGINES, "state": "present"})),
    ("spark-a's engine no longer serves: rolled back the same way", "replicas",
     {"spark-a": {"failed": True, "reason": "spark-a: start failed"}},
     dict(failed_hosts=["spark-a"], rollback=True, serving_topology="split", proxy_drain={"hosts": ENGINES, "state": "present"})),
    ("to split, rank 0 fails: both ranks leave, the replicas come back", "split",
     {HEAD: dict(gate_note(False), failed=True)},
     dict(rollback=True, serving_topology="replicas", expected_in_rotation=ENGINES,
          proxy_drain={"hosts": ENGINES, "state": "present"})),
])
def test_owed_gate_conclude(row, topology, notes, expected):
    hosts = units(REPLICAS, REPLICAS) if topology == "replicas" else units(SPLIT, SPLIT)
    records = BEHIND if topology == "replicas" else BEHIND_SPLIT
    plan = sp.switch_plan(topology, ENGINES, HEAD, hosts, [{}], True, {}, {}, [], notes, min_score=20, records=records)
    assert plan["owed_gate"] is True, row
    assert {key: plan[key] for key in expected} == expected, row


def test_an_owed_gate_that_passed_writes_every_record_and_a_rollback_writes_none():
    passed = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], True, min_score=20,
                            records=BEHIND, notes={host: gate_note(True) for host in ENGINES})
    assert sp.record_writes(passed, ENGINES, BEHIND, MODELS)["write"] == {
        host: {"topology": "replicas", "model": "/m/R", "note": ""} for host in ENGINES}
    rolled = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], True, min_score=20,
                            records=BEHIND, notes={"spark-b": {"failed": True}})
    # After the rollback both run split again, which their records say.
    assert rolled["rollback"] is True
    assert sp.record_writes(rolled, ENGINES, {host: said("split", "split", "/m/S") for host in ENGINES}, MODELS) == {
        "write": {}, "unrecorded": {}}


def test_the_owed_gate_is_announced_and_the_dry_run_says_what_it_would_do():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], True, min_score=20, records=BEHIND)
    assert plan["gate_mode_why"] == ("the engine hosts run replicas but their topology records still name split: the "
                                     "switch that admitted these engines was interrupted before its gate's verdict (an "
                                     "owed gate)")
    assert plan["announcement"].startswith(
        "Already on replicas, but the engine hosts' topology records still name split: the switch that admitted these "
        "engines was interrupted before its tool-calling gate's verdict, and they serve ungated. Running the gate it owes "
        "(owed gate): nothing stops or starts; the gate tests spark-a, spark-b directly while they serve, against "
        "tool_gate_min_score and the build's own last passing score minus tool_gate_tolerance. If one fails, the new "
        "engines leave the proxy again, the split is started again and the run fails; once they pass, each host records "
        "replicas. The engine hosts' topology records and what they run disagree: spark-a records split but runs "
        "replicas; spark-b records split but runs replicas.")
    assert plan["dry_run"][1:4] == [
        "Stops and starts: nothing - every engine host already runs replicas (vllm-replica.service).",
        "Owed gate: the engine hosts' topology records still name split, so the switch that admitted these engines was "
        "interrupted before its gate's verdict; the tool-calling gate tests spark-a, spark-b directly while they serve, "
        "against tool_gate_min_score (20) and the build's own last passing score minus tool_gate_tolerance. If one "
        "fails: the new engines leave the proxy again and the split is started again (a rollback), and the run fails; "
        "once they pass, each host records replicas.",
        "Records: The engine hosts' topology records and what they run disagree: spark-a records split but runs "
        "replicas; spark-b records split but runs replicas."]
    split = sp.switch_plan("split", ENGINES, HEAD, units(SPLIT, SPLIT), [{}], True, min_score=20, records=BEHIND_SPLIT)
    assert "records still name replicas" in split["announcement"]
    assert "the replicas are started again and the run fails" in split["announcement"]
    assert "tests spark-a directly while it serves" in split["dry_run"][2]
    assert "the replicas are started again (a rollback)" in split["dry_run"][2]


def test_records_behind_with_the_gate_off_stays_a_run_with_nothing_to_do():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], False, records=BEHIND)
    assert plan["announcement"].startswith("Already on replicas: checking that it serves, nothing will stop.")
    assert "Owed gate" not in " ".join(plan["dry_run"])


def test_an_owed_gate_without_a_bar_is_refused_in_its_own_words():
    plan = sp.switch_plan("replicas", ENGINES, HEAD, units(REPLICAS, REPLICAS), [{}], True, min_score=0, records=BEHIND)
    assert plan["refusal"].startswith(
        "The tool-calling gate has no bar for replicas: tool_gate_min_score is 0 and there is no incumbent score to "
        "compare with (an owed gate: the build that served before the interrupted switch is gone)")
