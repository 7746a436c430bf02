# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the switch's steps note for the report (the fact ``maintenance_window_host``, set with the
``factory_floor.llm.maintenance_note`` action), as ansible-playbook renders the role's own tasks: the same reasons,
in the same words, as the former ``note`` entry point's Jinja gave them. The switch's cut-over notes are in
test_vllm_cut_over.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode import ROOT, walk

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")

# The former rescue's reason, word for word (roles/topology_switch/tasks/switch_gate.yml before issue 36's move).
FORMER_GATE_REASON = (
    "{{ inventory_hostname }}: {{ (tool_gate_result.message if not (tool_gate_result | default({})).passed | default(true)"
    " else ('the tool-calling test took longer than tool_gate_run_timeout' if ansible_failed_result.timedout is defined"
    " else 'the tool-calling gate could not test it') ~ ': ' ~ (ansible_failed_result.msg | default('no message')))"
    " | truncate(900) }}")


def _task(path, name):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        found = [task for task, _whens in walk(yaml.safe_load(handle)) if task.get("name") == name]
    assert len(found) == 1, (path, name)
    return found[0]


def _noted(tmp_path, task, variables, seen):
    """Run ``task`` on localhost with ``variables``, after noting the events ``seen`` (a play variable would outrank
    the action's facts); the fact maintenance_window_host after it, and the former reason rendered with the same
    variables."""
    out = tmp_path / "noted.json"
    keep = {"name": "Keep what it noted", "ansible.builtin.copy": {
        "content": "{{ {'noted': ansible_facts.maintenance_window_host, 'former': former_reason} | to_json }}",
        "dest": str(out), "mode": "0644"}}
    play = [{"name": "One task of a role", "hosts": "localhost", "gather_facts": False,
             "vars": dict(variables, former_reason=FORMER_GATE_REASON),
             "tasks": [{"name": "Noted before", "factory_floor.llm.maintenance_note": {"note": {"events": seen}}},
                       task, keep]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e",
                           "ansible_python_interpreter=" + sys.executable, str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


@needs_tools
@pytest.mark.parametrize("variables", [
    {"ansible_failed_result": {"msg": "assertion failed"},
     "tool_gate_result": {"passed": False, "message": "scored 0.50, below tool_gate_min_score 0.80"}},
    {"ansible_failed_result": {"msg": "async task did not complete", "timedout": {"period": 600}}},
    {"ansible_failed_result": {"msg": "x " * 600}, "tool_gate_result": {"passed": True}},
])
def test_a_gate_failure_is_noted_in_the_former_words(tmp_path, variables):
    name = "Note the failure for the rollback (the engines are still out of the proxy)"
    task = _task("roles/topology_switch/tasks/switch_gate.yml", name)
    before = time.time()
    got = _noted(tmp_path, task, variables, {"serving": 1.0})
    noted = got["noted"]
    assert noted["reason"] == got["former"]
    assert noted["failed"] is True and noted["gate"] == variables.get("tool_gate_result", {})
    assert noted["events"]["serving"] == 1.0 and before <= noted["events"]["gate_done"] <= time.time()
