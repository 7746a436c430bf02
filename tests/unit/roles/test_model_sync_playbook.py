# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The structure of playbooks/model_sync.yml and the model_sync role (its main): every refusal comes
before anything is copied or created on a target, rsync runs with the plan's argv on the source, and the copies
are compared with the source's afterwards. (The decisions themselves: tests/unit/plugins/module_utils/test_model_sync.py;
the real copy: extensions/molecule/model_sync.)"""

from __future__ import annotations

import os

import yaml

from ansible_collections.factory_floor.llm.plugins.action.model_sync_check import PLAN_VARIABLES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


TASKS = _load("roles", "model_sync", "tasks", "main.yml")
NAMES = [task["name"] for task in TASKS]


def _index(words):
    return next(i for i, name in enumerate(NAMES) if words in name)


def _module(task):
    return next(key for key in task if key.startswith(("ansible.builtin.", "factory_floor.llm.")))


def test_the_playbook_and_its_checkout_name_run_the_entry_point():
    (inventory, play) = _load("playbooks", "model_sync.yml")
    assert inventory["tasks"][0]["ansible.builtin.include_role"]["tasks_from"] == "inventory"
    assert play["hosts"] == "gb10" and play["any_errors_fatal"] is True
    (task,) = play["tasks"]
    assert task["ansible.builtin.include_role"] == {"name": "factory_floor.llm.model_sync"}
    (alias,) = _load("playbooks", "model-sync.yml")
    assert alias["ansible.builtin.import_playbook"] == "model_sync.yml"
    assert "main" in _load("roles", "model_sync", "meta", "argument_specs.yml")["argument_specs"]


def test_every_refusal_comes_before_the_first_change_on_a_target():
    first_change = min(_index("Create the model directory"), _index("Copy the model"))
    for words in ("refusing one that cannot be planned or leaves out a target",
                  "Refuse a source without the model directory", "Refuse targets without the room",
                  "Refuse targets the source cannot reach"):
        assert _index(words) < first_change, words
    # The room is judged from what the targets hold and their filesystems' free space (model_manifest reads
    # both: statvfs at the path's nearest directory, which a container's overlay root has and mount facts lack).
    listing = TASKS[_index("List what each target already holds")]
    assert listing["factory_floor.llm.model_manifest"]["path"] == "{{ __model_sync.path }}"
    assert _index("List what each target already holds") < _index("Refuse targets without the room")
    room = TASKS[_index("Refuse targets without the room")]
    # The plugin reads each target's listing (what it holds, its filesystem's free space) from hostvars.
    assert room["factory_floor.llm.model_sync_check"]["check"] == "space"
    assert room["factory_floor.llm.model_sync_check"]["listing"] == listing["register"] == "__model_sync_before"


def test_rsync_runs_on_the_source_with_the_plans_argv_and_reports_its_changes():
    task = TASKS[_index("Copy the model")]
    assert task["ansible.builtin.command"] == {"argv": "{{ item.argv }}"}
    assert task["delegate_to"] == "{{ __model_sync.source_host }}" and task["run_once"] is True
    # Without become: the connecting user's own SSH key (or forwarded agent) reaches the targets.
    assert task["become"] is False
    # Runs in check mode too: the plan's argv then carries --dry-run (the plan takes ansible_check_mode).
    plan = TASKS[_index("Plan the copy")]["factory_floor.llm.model_sync_check"]
    assert TASKS[_index("Plan the copy")]["register"] == "__model_sync" and plan["check"] == "plan"
    # The plugin reads the model_sync_* variables itself (tests/unit/plugins/modules/test_model_sync_check.py).
    assert task["check_mode"] is False and set(plan) == {"check"}
    assert PLAN_VARIABLES["dry_run"] == ("ansible_check_mode", False)
    assert "model_sync_result" in task["changed_when"]
    # Deletion only when asked.
    assert PLAN_VARIABLES["delete"] == ("model_sync_delete", False)


def test_the_copies_are_compared_with_the_source_after_the_copy():
    compare = _index("Refuse copies that differ from the source")
    assert compare > _index("Copy the model")
    check = TASKS[compare]["factory_floor.llm.model_sync_check"]
    assert check["check"] == "copies" and check["listing"] == TASKS[_index("List each target's copy")]["register"]
    hashed = "{{ model_sync_manifest_checksum | default('all') }}"
    task = TASKS[_index("List each target's copy, hashed")]
    assert _module(task) == "factory_floor.llm.model_manifest" and task["factory_floor.llm.model_manifest"]["checksum"] == hashed
    # The check lists the source's copy again itself, hashed the same way, on the source.
    assert check["manifest_checksum"] == hashed and TASKS[compare]["delegate_to"] == "{{ __model_sync.source_host }}"
    for words in ("Refuse a source without the model directory", "Refuse targets the source cannot reach"):
        assert TASKS[_index(words)]["delegate_to"] == "{{ __model_sync.source_host }}"
    # The SSH probes run in check mode too, as the connecting user (not become), as rsync will.
    reach = TASKS[_index("Refuse targets the source cannot reach")]
    assert reach["check_mode"] is False and reach["become"] is False
    # A controller source's rsync is checked in check mode too (the source check runs rsync --version there).
    assert TASKS[_index("Refuse a source without the model directory")]["check_mode"] is False


def test_every_model_sync_variable_the_tasks_read_is_declared():
    import re
    text = open(os.path.join(ROOT, "roles", "model_sync", "tasks", "main.yml"), encoding="utf-8").read()
    used = set(re.findall(r"\b(model_sync_[a-z_]+)\b", text)) - {"model_sync_check", "model_sync_result"}
    declared = set(_load("roles", "model_sync", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"])
    assert used <= declared, used - declared
