# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's judge (``_memory_guard_judge``): its configuration and its decisions, on tables.

The host of the tables is the lab's molecule scenario, scaled: a "database" (priority
10, peak 0.30 GiB, holds 0.20 GiB) and a "site build" (priority 0, peak 0.30 GiB, grows
to 0.60 GiB) next to vLLM, floor 2 GiB. ``config`` and ``actions`` serve the watch's
tests too (test_memory_guard_watch.py).
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import memory_guard_judge as judge
from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import GIB

MIB = 1024 ** 2
ENGINES = ["vllm-replica.service", "vllm-split.service"]


def config(**overrides):
    data = {
        "interval": 5,
        "floor_gib": 2.0,
        "resume_gib": 1.0,
        "settle": 15,
        "engine_units": ENGINES,
        "workloads": [
            {"name": "database", "unit": "mg-database.service", "peak_gib": 0.3, "priority": 10},
            {"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3, "priority": 0},
        ],
        "status_file": "",
    }
    data.update(overrides)
    return judge.load_config(data)


def reading(used_mib, state="active", invocation="i1", pids=(100,)):
    return {"state": state, "invocation": invocation, "used": None if used_mib is None else int(used_mib * MIB),
            "pids": list(pids), "cgroup": "/system.slice/x.service", "source": "test"}


def actions(events):
    return [(e["action"], e["workload"], e["reason"]) for e in events if "action" in e]


# ------------------------------------------------------------------ configuration


def test_config_defaults_and_bytes():
    cfg = config()
    assert cfg["floor"] == 2 * GIB and cfg["resume"] == GIB
    assert [(w["name"], w["target"], w["action"], w["priority"]) for w in cfg["workloads"]] == [
        ("database", "mg-database.service", "stop", 10), ("site build", "mg-site-build.service", "stop", 0)]
    assert cfg["workloads"][0]["peak"] == int(round(0.3 * GIB))
    assert cfg["own_unit"] == "factory-floor-memory-guard.service"


@pytest.mark.parametrize("workload, message", [
    ({"name": "model", "unit": "vllm-replica.service", "peak_gib": 80}, "never acts on"),
    ({"name": "me", "unit": "factory-floor-memory-guard.service", "peak_gib": 1}, "never acts on"),
    ({"name": "both", "unit": "a.service", "slice": "b.slice", "peak_gib": 1}, "one unit"),
    ({"name": "neither", "peak_gib": 1}, "one unit"),
    ({"name": "everything", "slice": "system.slice", "peak_gib": 1}, "systemd's own slice"),
    ({"name": "odd", "unit": "a.socket", "peak_gib": 1}, "must be a .service"),
    ({"name": "zero", "unit": "a.service", "peak_gib": 0}, "peak_gib must be a number > 0"),
    ({"name": "kill", "unit": "a.service", "peak_gib": 1, "action": "kill"}, "action must be one of stop, pause"),
    ({"name": "p", "unit": "a.service", "peak_gib": 1, "priority": "high"}, "priority must be an integer"),
])
def test_config_refuses(workload, message):
    with pytest.raises(judge.ConfigError, match=message):
        judge.load_config({"workloads": [workload]})


def test_config_refuses_duplicates_unknown_keys_and_bad_numbers():
    twice = {"name": "a", "unit": "a.service", "peak_gib": 1}
    with pytest.raises(judge.ConfigError, match="declared twice"):
        judge.load_config({"workloads": [twice, dict(twice, unit="b.service")]})
    with pytest.raises(judge.ConfigError, match="unknown keys: flor_gib"):
        judge.load_config({"flor_gib": 1})
    with pytest.raises(judge.ConfigError, match="interval must be > 0"):
        judge.load_config({"interval": 0})
    with pytest.raises(judge.ConfigError, match="floor_gib must be a number >= 0"):
        judge.load_config({"floor_gib": -1})


# ------------------------------------------------------------------------ decisions


def test_a_workload_above_its_peak_is_stopped_whatever_memavailable_says():
    cfg, state = config(), judge.new_state()
    events = judge.decide(cfg, 10 * GIB, {"database": reading(200), "site build": reading(420)}, state, 100.0)
    assert actions(events) == [("stop", "site build", "peak")]
    line = events[0]["message"]
    assert line.startswith("memory guard: stopping site build (mg-site-build.service, priority 0): uses 0.41 GiB, "
                           "declared peak 0.30 GiB [test]: above its declared peak by 0.11 GiB")
    assert "MemAvailable 10.00 GiB, floor 2.00 GiB; the engines (vllm-replica.service, vllm-split.service) " \
           "are never touched" in line
    assert events[0]["priority"] == judge.WARNING
    assert state["acted"]["site build"]["action"] == "stopped"
    # Still stopping (active, same invocation) at the next look: not stopped twice.
    assert actions(judge.decide(cfg, 10 * GIB, {"database": reading(200), "site build": reading(450)},
                                state, 105.0)) == []


def test_a_workload_declared_pause_is_paused_and_stays_paused():
    cfg = config(workloads=[{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3,
                             "action": "pause"}])
    state = judge.new_state()
    events = judge.decide(cfg, 10 * GIB, {"site build": reading(400)}, state, 100.0)
    assert actions(events) == [("pause", "site build", "peak")]
    assert "SIGSTOP to its processes, until its unit runs again" in events[0]["message"]
    # Memory is plentiful, but a workload paused for its peak is not resumed: it would grow again.
    assert actions(judge.decide(cfg, 50 * GIB, {"site build": reading(400)}, state, 200.0)) == []
    # It is restarted (a new invocation): watched again, and within its peak now.
    events = judge.decide(cfg, 50 * GIB, {"site build": reading(50, invocation="i2")}, state, 300.0)
    assert actions(events) == [] and "site build" not in state["acted"]
    assert "watching it again" in events[0]["message"]


def test_below_the_floor_the_lowest_priority_workload_goes_first_one_at_a_time():
    cfg, state = config(), judge.new_state()
    within = {"database": reading(200), "site build": reading(250)}
    events = judge.decide(cfg, int(1.5 * GIB), within, state, 100.0)
    assert actions(events) == [("stop", "site build", "floor")]
    assert events[0]["message"] == "memory guard: MemAvailable 1.50 GiB is below the floor 2.00 GiB"
    assert "the lowest-priority workload still running; next: database (priority 10)" in events[1]["message"]
    # Still below 5 s later, the build still stopping: nothing more (one at a time, settle 15 s).
    assert actions(judge.decide(cfg, int(1.5 * GIB), within, state, 105.0)) == []
    # After the settle time, while the build is still stopping: the database still waits.
    assert actions(judge.decide(cfg, int(1.5 * GIB), within, state, 120.0)) == []
    # The build has stopped, MemAvailable is still below: now the database.
    gone = {"database": reading(200), "site build": reading(0, state="inactive")}
    events = judge.decide(cfg, int(1.5 * GIB), gone, state, 125.0)
    assert actions(events) == [("stop", "database", "floor")]
    assert "nothing else is left to act on" in events[0]["message"]
    # Nothing left: said once, at priority err; the engines are never named as a target.
    nothing = {"database": reading(0, state="inactive"), "site build": reading(0, state="inactive")}
    events = judge.decide(cfg, int(1.5 * GIB), nothing, state, 145.0)
    assert actions(events) == [] and [e["priority"] for e in events] == [judge.ERR]
    assert "no declared workload is left to act on; the engines (vllm-replica.service, vllm-split.service) " \
           "are never stopped by the guard" in events[0]["message"]
    assert judge.decide(cfg, int(1.5 * GIB), nothing, state, 150.0) == []


def test_priority_ties_go_to_the_larger_user_first():
    cfg = config(workloads=[{"name": "a", "unit": "a.service", "peak_gib": 1},
                            {"name": "b", "unit": "b.service", "peak_gib": 1}])
    events = judge.decide(cfg, GIB, {"a": reading(100), "b": reading(600)}, judge.new_state(), 0.0)
    assert actions(events) == [("stop", "b", "floor")]


def test_a_peak_action_below_the_floor_is_the_step():
    cfg, state = config(), judge.new_state()
    events = judge.decide(cfg, GIB, {"database": reading(200), "site build": reading(600)}, state, 0.0)
    # The build is over its peak and is the one step; the database waits for the settle time.
    assert actions(events) == [("stop", "site build", "peak")]
    assert state["last_step"] == 0.0


def test_paused_for_the_floor_then_stopped_when_not_enough_then_others_resumed():
    cfg = config(workloads=[
        {"name": "database", "unit": "mg-database.service", "peak_gib": 0.3, "priority": 10, "action": "pause"},
        {"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3, "priority": 0, "action": "pause"},
    ])
    state = judge.new_state()
    both = {"database": reading(200), "site build": reading(250)}
    assert actions(judge.decide(cfg, GIB, both, state, 0.0)) == [("pause", "site build", "floor")]
    # Still below after the settle time: pausing was not enough, so the same build is stopped.
    events = judge.decide(cfg, GIB, both, state, 20.0)
    assert actions(events) == [("stop", "site build", "floor")]
    assert "still below the floor 20 s after it was paused" in events[0]["message"]
    # Then the database is paused.
    gone = {"database": reading(200), "site build": reading(0, state="inactive")}
    assert actions(judge.decide(cfg, GIB, gone, state, 40.0)) == [("pause", "database", "floor")]
    # Back above the floor, but not by the resume margin: stays paused.
    assert actions(judge.decide(cfg, int(2.5 * GIB), gone, state, 60.0)) == []
    # At floor + 1 GiB: resumed.
    events = judge.decide(cfg, 3 * GIB, gone, state, 65.0)
    assert actions(events) == [("resume", "database", "recovered")]
    assert events[0]["priority"] == judge.NOTICE and "database" not in state["acted"]


def test_a_failed_reading_does_not_forget_a_pause():
    cfg = config(workloads=[{"name": "b", "unit": "b.service", "peak_gib": 0.3, "action": "pause"}])
    state = judge.new_state()
    assert actions(judge.decide(cfg, 10 * GIB, {"b": reading(400)}, state, 0.0)) == [("pause", "b", "peak")]
    # systemctl did not answer: the state is unknown, not "stopped".
    assert judge.decide(cfg, 10 * GIB, {"b": reading(None, state="unknown", invocation="")}, state, 5.0) == []
    assert state["acted"]["b"]["action"] == "paused"


def test_a_floor_pause_that_grows_past_its_peak_is_not_resumed():
    cfg = config(workloads=[{"name": "b", "unit": "b.service", "peak_gib": 0.3, "action": "pause"}])
    state = judge.new_state()
    assert actions(judge.decide(cfg, GIB, {"b": reading(200)}, state, 0.0)) == [("pause", "b", "floor")]
    judge.decide(cfg, GIB, {"b": reading(400)}, state, 5.0)
    assert state["acted"]["b"]["reason"] == "peak"
    assert actions(judge.decide(cfg, 10 * GIB, {"b": reading(400)}, state, 100.0)) == []


def test_unreadable_memavailable_still_enforces_peaks():
    events = judge.decide(config(), None, {"database": reading(200), "site build": reading(400)},
                          judge.new_state(), 0.0)
    assert actions(events) == [("stop", "site build", "peak")]
    assert events[-1]["priority"] == judge.ERR and "cannot read MemAvailable" in events[-1]["message"]


def test_unmeasurable_workloads_are_not_judged_on_their_peak():
    assert judge.decide(config(), 10 * GIB, {"database": reading(None), "site build": reading(None)},
                        judge.new_state(), 0.0) == []
