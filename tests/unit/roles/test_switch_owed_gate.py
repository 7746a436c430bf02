# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The owed gate's wiring in the topology_switch role (issue 37): a re-run on the target whose topology records are
behind the units (``switch_plan``'s ``records_behind``) asks tool_gate whether the target is gated; with the gate owed
(``owed_gate``) it takes the lock, runs the probe client and the gate, held to the build's own last passing score,
and stops nothing (the cut-over stays off on the target). The decision itself is tested in
tests/unit/plugins/module_utils/test_switch_plan.py; the lab runs it in extensions/molecule/switch/tasks/owed_gate.yml."""

from __future__ import annotations

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _task(tasks, words):
    [task] = [task for task in tasks if words in task.get("name", "")]
    return task


def _when(task):
    when = task.get("when", [])
    return " and ".join(when) if isinstance(when, list) else when


def test_the_preflight_reads_the_gate_when_the_records_are_behind_and_locks_for_an_owed_gate():
    tasks = _load("roles", "topology_switch", "tasks", "switch_preflight.yml")
    gated = _task(tasks, "Decide whether the new topology is gated")
    assert "vllm_switch_plan.records_behind" in _when(gated)
    lock = _task(tasks, "Take the maintenance lock")
    assert "vllm_switch_plan.owed_gate" in _when(lock)
    # Decided again once tool_gate said whether the target is gated: the owed gate is known before the lock.
    names = [task.get("name", "") for task in tasks]
    assert names.index(gated["name"]) < names.index("Decide again, knowing whether the new topology is gated and the "
                                                    "incumbent's score") < names.index(lock["name"])


def test_the_owed_gate_is_held_to_the_builds_own_score():
    tasks = _load("roles", "topology_switch", "tasks", "switch_gate.yml")
    block = _task(tasks, "Test this engine, or note the failure")["block"]
    gate = _task(block, "Run the tool-calling gate against this engine directly")
    assert gate["vars"]["tool_gate_compare_own_build"] == "{{ vllm_switch_plan.heal or vllm_switch_plan.owed_gate }}"


def test_the_owed_gate_runs_the_probe_client_and_stops_nothing():
    plays = {play["name"]: play for play in _load("playbooks", "switch.yml")}
    probe = _task(plays["Start the probe client on the proxy"]["tasks"], "Start the probe client through the proxy")
    assert "vllm_switch_plan.owed_gate" in probe["when"]
    assert "vllm_switch_plan.owed_gate" in probe["vars"]["maintenance_window_probe_start"]
    close = _load("roles", "topology_switch", "tasks", "switch_close.yml")[0]
    assert close["vars"]["maintenance_window_probe_start"] == probe["vars"]["maintenance_window_probe_start"]
    cut_over = _task(plays["Stop the old topology"]["tasks"], "Lock every engine host, disable --now the old watchdog")
    assert cut_over["when"] == "not vllm_switch_plan.on_target"
