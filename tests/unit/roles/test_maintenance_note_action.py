# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The precedence the maintenance_note action relies on, shown by a real ansible-playbook run on localhost: its notes
are host facts (``ansible_facts`` of an action other than set_fact), so they accumulate from task to task and play to
play and are noted in check mode too; an inventory host variable of the name is where a host's first note starts from
(as ``maintenance_window_host | default({})`` did). Top-level, a ``set_fact`` of ``maintenance_window_host`` would
outrank them (and ansible-core stops injecting facts as top-level variables in 2.24): so every reader takes them from
``ansible_facts.maintenance_window_host``, which nothing else can hide, and no set_fact of the name remains in the
collection's YAML (the last test)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode import ROOT

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")
NOTE = "factory_floor.llm.maintenance_note"


def _run(tmp_path, plays, host_vars=None, check=False):
    """Run ``plays`` on localhost (an inventory host variable maintenance_window_host when ``host_vars``); what each
    task named ``Keep`` wrote, in order."""
    out = tmp_path / "out"
    out.mkdir()
    count = 0
    for play in plays:
        for task in play["tasks"]:
            if task.get("name") == "Keep":
                count += 1
                task["ansible.builtin.copy"] = {"content": "{{ ansible_facts.maintenance_window_host | default({}) | to_json }}",
                                                "dest": str(out / ("%02d.json" % count)), "mode": "0644"}
                task["check_mode"] = False
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    inventory = {"all": {"hosts": {"localhost": dict(host_vars or {}, ansible_connection="local",
                                                     ansible_python_interpreter=sys.executable)}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")]
                          + (["--check"] if check else []),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads((out / ("%02d.json" % index)).read_text()) for index in range(1, count + 1)]


def _play(tasks):
    return {"name": "Notes", "hosts": "localhost", "gather_facts": False, "tasks": tasks}


@needs_tools
@pytest.mark.parametrize("check", [False, True])
def test_notes_accumulate_across_tasks_and_plays_from_the_inventorys(tmp_path, check):
    plays = [_play([{"name": "Seen", NOTE: {"events": ["drained"], "at": 1.0}}, {"name": "Keep"},
                    {"name": "Failed", "block": [{"name": "Fail", "ansible.builtin.fail": {"msg": "it broke"}}],
                     "rescue": [{"name": "Note", NOTE: {"failure": "step", "note": {"health": "down"}}}]}]),
             _play([{"name": "Served", NOTE: {"events": ["serving"], "at": 2.0}}, {"name": "Keep"}])]
    first, last = _run(tmp_path, plays, {"maintenance_window_host": {"events": {"old": 0.5}}}, check)
    assert first == {"events": {"old": 0.5, "drained": 1.0}}
    assert last == {"events": {"old": 0.5, "drained": 1.0, "serving": 2.0}, "health": "down", "failed": True,
                    "reason": "localhost: it broke"}


@needs_tools
def test_a_set_fact_of_the_name_hides_the_notes_top_level_but_not_in_ansible_facts(tmp_path):
    plays = [_play([{"name": "Set", "ansible.builtin.set_fact": {"maintenance_window_host": {"events": {"a": 1}}}},
                    {"name": "Noted", NOTE: {"events": ["drained"], "at": 1.0}}, {"name": "Keep"},
                    {"name": "Top level", "ansible.builtin.copy": {
                        "content": "{{ maintenance_window_host | to_json }}", "dest": str(tmp_path / "top.json"),
                        "mode": "0644"}}])]
    assert _run(tmp_path, plays) == [{"events": {"a": 1, "drained": 1.0}}]
    assert json.loads((tmp_path / "top.json").read_text()) == {"events": {"a": 1}}


def test_nothing_in_the_collection_sets_the_notes_but_the_action():
    found = []
    for top in ("roles", "playbooks", "extensions"):
        for folder, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml")):
                    with open(os.path.join(folder, name), encoding="utf-8") as handle:
                        text = handle.read()
                    if re.search(r"^\s*maintenance_window_host\s*:", text, re.M):
                        found.append(os.path.join(folder, name))
    assert not found, "set maintenance_window_host only with factory_floor.llm.maintenance_note: %s" % found
