# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A dry run of every switch (issue 35): ``-e switch_dry_run=true`` or ``--check`` runs the preflight in
check mode, prints the plan (``switch_plan``'s ``dry_run``, tested in
tests/unit/plugins/module_utils/test_switch_plan.py) and ends the playbook there, successfully, having
changed nothing. Checked on the playbooks' structure, without hosts; the lab runs it for real
(extensions/molecule/switch/tasks/preview.yml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DRY = "switch_dry_run | default(false) | bool or ansible_check_mode"
# playbook -> the preflight plays (by name), which run in check mode on a dry run
PREFLIGHTS = {
    "switch.yml": ["Switch preflight (nothing stops unless every check passes)"],
    "switch_model.yml": ["Model upgrade preflight (nothing changes unless every check passes)",
                         "Score the build each replica serves, and announce the plan"],
}
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", sorted(PREFLIGHTS))
def test_the_preflight_runs_in_check_mode_and_every_later_play_ends_at_once(name):
    plays = _load("playbooks", name)
    names = [play["name"] for play in plays]
    last = max(names.index(preflight) for preflight in PREFLIGHTS[name])
    for play in plays[:last + 1]:
        if play["name"] in PREFLIGHTS[name]:
            assert play["check_mode"] == "{{ %s }}" % DRY, play["name"]
        else:
            # Before the preflight: reads the inventory only (the layout), no host is touched.
            assert play["gather_facts"] is False and "check_mode" not in play, play["name"]
    assert last < len(plays) - 1
    for play in plays[last + 1:]:
        first = play["tasks"][0]
        assert first.get("ansible.builtin.meta") == "end_play", play["name"]
        assert first["when"] == DRY, play["name"]


def _tasks_named(tasks, words):
    return [task for task in tasks if words in task.get("name", "")]


def test_the_switch_prints_the_plan_and_takes_no_lock_on_a_dry_run():
    tasks = _load("roles", "topology_switch", "tasks", "switch_preflight.yml")
    [printed] = _tasks_named(tasks, "Print the dry run's plan")
    assert printed["ansible.builtin.debug"]["msg"] == "{{ vllm_switch_plan.dry_run }}" and printed["when"] == DRY
    [announced] = _tasks_named(tasks, "Announce the outage")
    assert announced["when"] == "not (%s)" % DRY
    [lock] = _tasks_named(tasks, "Take the maintenance lock")
    assert "not (%s)" % DRY in lock["when"]
    # The lock is the last thing the preflight does: nothing after it, so the dry run ends before any change.
    assert tasks[-1] is lock


def test_the_switch_plan_gets_the_models_the_records_get_and_the_served_name():
    """The dry run names the model directory the new topology serves (issue 35): the same models, by topology, as
    the topology records are written with."""
    [decide] = _load("roles", "topology_switch", "tasks", "switch_plan.yml")[:1]
    [record] = _tasks_named(_load("roles", "topology_switch", "tasks", "switch_record.yml"), "Decide every engine host's record")
    # Neither task gives them: the action plugin reads both from one table (tests/unit/plugins/modules/test_switch_plan.py).
    from ansible_collections.factory_floor.llm.plugins.action.switch_plan import MODELS, STANDING

    assert decide["factory_floor.llm.switch_plan"] == {"read_hosts": True}
    assert record["factory_floor.llm.switch_plan"] == {"procedure": "record", "read_hosts": True}
    assert MODELS == {"replicas": "_vllm_topologies.replicas.model", "split": "_vllm_topologies.split.model"}
    assert STANDING["switch"]["served_model_name"] == "vllm_served_model_name"


def test_the_upgrade_prints_the_plan_on_a_dry_run():
    plays = _load("playbooks", "switch_model.yml")
    play = next(p for p in plays if p["name"] == PREFLIGHTS["switch_model.yml"][-1])
    [printed] = _tasks_named(play["tasks"], "Print the dry run's plan")
    assert printed["ansible.builtin.debug"]["msg"] == "{{ switch_model_plan.dry_run }}" and printed["when"] == DRY
    assert play["tasks"][-1] is printed


@pytest.mark.parametrize("role, entry_point", [("topology_switch", "switch_preflight"), ("model_upgrade", "check")])
def test_switch_dry_run_is_declared(role, entry_point):
    option = _load("roles", role, "meta", "argument_specs.yml")["argument_specs"][entry_point]["options"]["switch_dry_run"]
    assert option["type"] == "bool" and option["default"] is False


needs_ansible_playbook = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                            reason="ansible-playbook not installed next to this Python")


@needs_ansible_playbook
@pytest.mark.parametrize("name", ["switch-to-split.yml", "switch-to-replicas.yml", "switch-model.yml"])
def test_the_playbooks_parse_with_the_dry_run(name):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(ROOT, "inventory", "example"), "--syntax-check",
                           os.path.join(ROOT, "playbooks", name), "-e", "switch_dry_run=true"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
