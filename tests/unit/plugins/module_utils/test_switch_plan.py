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


@pytest.mark.parametrize("row, plan, failed, gate_hosts, expected", [
    ("switch, every engine serves: all gated, all join", SWITCH, [], ENGINES,
     dict(rollback=False, serving_topology="replicas", joined=True, undrain=ENGINES, heal_ready=[], heal_left=[],
          expected_in_rotation=ENGINES)),
    ("switch to split: rank 0 is gated, both ranks join", SWITCH_SPLIT, [], [HEAD],
     dict(rollback=False, joined=True, undrain=ENGINES, expected_in_rotation=[HEAD])),
    ("switch, one engine did not start: no gate, roll back", SWITCH, ["spark-b"], [],
     dict(rollback=True, serving_topology="split", joined=False, undrain=[], expected_in_rotation=[HEAD])),
    ("switch to split failed: the replicas come back", SWITCH_SPLIT, ["spark-a"], [],
     dict(rollback=True, serving_topology="replicas", expected_in_rotation=ENGINES)),
    ("ungated switch: no gate, joined already at the cut-over", UNGATED, [], [],
     dict(rollback=False, joined=False, undrain=[], expected_in_rotation=ENGINES)),
    ("nothing to do", ON_TARGET, [], [],
     dict(rollback=False, joined=False, undrain=[], heal_ready=[], heal_left=[], expected_in_rotation=ENGINES)),
    ("nothing to do, spark-b drained by an operator: not expected in rotation", ON_TARGET_OPS_DRAIN, [], [],
     dict(rollback=False, undrain=[], expected_in_rotation=["spark-a"])),
    ("switch with spark-b drained by an operator: the cut-over's drain replaces it, both join", SWITCH_OPS_DRAIN, [],
     ENGINES, dict(rollback=False, joined=True, undrain=ENGINES, expected_in_rotation=ENGINES)),
    ("interrupted switch finished: both pass and rejoin", HEAL, [], ENGINES,
     dict(rollback=False, joined=False, undrain=ENGINES, heal_ready=ENGINES, heal_left=[], expected_in_rotation=ENGINES)),
    ("interrupted switch, spark-b fails its gate: it stays drained, no rollback", HEAL, ["spark-b"], ["spark-a"],
     dict(rollback=False, serving_topology="replicas", undrain=["spark-a"], heal_ready=["spark-a"], heal_left=["spark-b"],
          expected_in_rotation=["spark-a"])),
    ("interrupted switch, only spark-b drained: only it is gated", HEAL_ONE, [], ["spark-b"],
     dict(undrain=["spark-b"], heal_ready=["spark-b"], heal_left=[], expected_in_rotation=ENGINES)),
    ("interrupted switch to split, rank 0 passes: both ranks rejoin", HEAL_SPLIT, [], [HEAD],
     dict(rollback=False, undrain=ENGINES, heal_ready=ENGINES, heal_left=[], expected_in_rotation=[HEAD])),
    ("interrupted switch to split, rank 0 fails: both stay drained", HEAL_SPLIT, [HEAD], [],
     dict(rollback=False, serving_topology="split", undrain=[], heal_ready=[], heal_left=ENGINES, expected_in_rotation=[])),
    ("interrupted switch, gate off: they rejoin untested", HEAL_UNGATED, [], [],
     dict(rollback=False, undrain=["spark-a"], heal_ready=["spark-a"], heal_left=[])),
])
def test_gate_and_conclude(row, plan, failed, gate_hosts, expected):
    assert sp.gate_hosts(plan, ENGINES, HEAD, failed) == gate_hosts, row
    result = sp.conclude(plan, ENGINES, HEAD, failed)
    assert {key: result[key] for key in expected} == expected, row


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
    assert plan["gate_hosts"] == ENGINES and plan["rollback"] is False and plan["expected_in_rotation"] == ENGINES


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
    """A replica as the vllm_replica role's upgrade_check notes it: the candidate under ``candidate``."""
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
