# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Issue 35, item 1: a switch's dry run refuses where the run would, without load.

A trial switch refused because the incumbent could not be scored (its engine answered 401: it ran with
another key than the inventory's), while the dry run before it, which sends no tool-calling test, had
foreseen nothing. Before the incumbent is measured, the tool_gate role now asks its engine once for
``/v1/models`` with the gate's key and model (``tasks/reach.yml``, no chat completion), in check mode too;
a failure there goes to the switch's rescue (``vllm_check`` ``switch_incumbent``), whose refusal names the
setting and, with ``tool_gate_min_score`` at 0, both settings a switch without the incumbent's score takes.

Run here for real: ``ansible-playbook`` with a local connection against a loopback stand-in of vLLM
(``fake_vllm.FakeVLLM``), the probe as the role has it and the rescue task as ``switch_preflight.yml`` has it,
read from those files. The refusals' words are ``tests/unit/plugins/module_utils/test_vllm_check.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
KEY = "lab-key-7f3e9a2c41d86b05"
OTHER_KEY = "new-key-0b1c2d3e4f5a6978"

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _incumbent_block():
    [block] = [task for task in _load("roles", "topology_switch", "tasks", "switch_preflight.yml")
               if task.get("name") == "Make sure the incumbent build has a tool-calling score to compare with"]
    return block


def _incumbent_tasks():
    return _load("roles", "tool_gate", "tasks", "incumbent.yml")


def test_the_probe_comes_before_the_score_and_runs_in_check_mode():
    names = [task["name"] for task in _incumbent_tasks()]
    [reach] = [task for task in _incumbent_tasks() if task.get("ansible.builtin.import_tasks") == "reach.yml"]
    [score] = [task for task in _incumbent_tasks()
               if (task.get("factory_floor.llm.tool_gate_run") or {}).get("step") == "incumbent"]
    assert names.index(reach["name"]) < names.index(score["name"])
    # Probed exactly when the plan says the incumbent is measured (no stored score), whatever the mode.
    assert reach["when"] == "__tool_gate_plan.measure"
    [probe] = _load("roles", "tool_gate", "tasks", "reach.yml")
    # A read with no chat completion: it runs in check mode (vllm_health supports it; nothing skips it there).
    assert probe["factory_floor.llm.vllm_health"]["probe"] == "models"
    assert probe["factory_floor.llm.vllm_health"]["timeout"] == 0
    assert "when" not in probe and "check_mode" not in probe
    assert "ansible_check_mode" not in str(reach["when"])


def test_the_bar_is_noted_before_anything_can_fail():
    tasks = _incumbent_tasks()
    assert tasks[0]["ansible.builtin.import_tasks"] == "bar.yml"


def test_the_rescue_hands_the_failed_result_to_the_refusal():
    [rescue] = _incumbent_block()["rescue"]
    assert rescue["factory_floor.llm.vllm_check"] == {
        "check": "switch_incumbent", "failure": "{{ ansible_failed_result.msg | default('') }}",
        "serving": "{{ ansible_failed_result }}"}


@pytest.fixture
def fake():
    server = FakeVLLM().start()
    server.models = ["lab-chat"]
    server.api_key = KEY
    yield server
    server.stop()


def _run(tmp_path, fake_url, extra, check):
    """The probe as reach.yml has it, in a block whose rescue is switch_preflight.yml's, on one local host."""
    [rescue] = _incumbent_block()["rescue"]
    variables = {"tool_gate_url": fake_url, "tool_gate_api_key": KEY, "tool_gate_model": "lab-chat",
                 "vllm_switch_plan": {"incumbent": {"host": "spark-t", "topology": "split"}},
                 "site_engine_group": "gb10"}
    variables.update(extra)
    play = [{"name": "The incumbent's probe and the switch's refusal", "hosts": "spark-t", "gather_facts": False,
             "vars": variables, "tasks": [
                 {"name": "Note the gate's bar", "ansible.builtin.include_role": {
                     "name": "factory_floor.llm.tool_gate", "tasks_from": "bar"}},
                 {"name": "Probe, or refuse", "block": [{"name": "Probe the incumbent", "ansible.builtin.include_role": {
                     "name": "factory_floor.llm.tool_gate", "tasks_from": "reach"}}], "rescue": [rescue]}]}]
    (tmp_path / "inventory.yml").write_text(json.dumps({"gb10": {"hosts": {"spark-t": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    (tmp_path / "play.yml").write_text(json.dumps(play, indent=1))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    argv = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")]
    done = subprocess.run(argv + (["--check"] if check else []), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@needs_tools
@pytest.mark.parametrize("check", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("extra, words", [
    ({"tool_gate_api_key": OTHER_KEY},
     ["Could not score the tool calling of the split serving now on spark-t: its engine at http://127.0.0.1:",
      "rejects the key the gate sends (tool_gate_api_key, by default vllm_api_key; HTTP 401 or 403): it was started "
      "with another key. Nothing was changed.",
      "-e tool_gate_measure_incumbent=false -e tool_gate_min_score=N. tool_gate_min_score is 0 (its default)"]),
    ({"tool_gate_api_key": OTHER_KEY, "tool_gate_min_score": 20},
     ["rejects the key the gate sends", "-e tool_gate_measure_incumbent=false; the new topology must then reach "
      "tool_gate_min_score (20) only."]),
    ({"tool_gate_model": "renamed-chat"},
     ["does not serve the model the gate asks for (tool_gate_model, by default vllm_served_model_name): its "
      "/v1/models lists lab-chat. Nothing was changed."]),
], ids=["key-rejected", "key-rejected-min-score-set", "model-not-served"])
def test_a_dry_run_refuses_as_the_run_does_and_sends_no_chat_completion(tmp_path, fake, extra, words, check):
    rc, output = _run(tmp_path, fake.url, extra, check)
    assert rc != 0, output[-3000:]
    for word in words:
        assert word in output, (word, output[-3000:])
    assert OTHER_KEY not in output and KEY not in output
    # The probe read /health and /v1/models; no chat completion (no load) in either run.
    assert [path for method, path, _headers, _body in fake.requests if method == "POST"] == []
    assert "/v1/models" in [path for _method, path, _headers, _body in fake.requests]


@needs_tools
@pytest.mark.parametrize("check", [True, False], ids=["dry-run", "run"])
def test_an_incumbent_that_answers_goes_on(tmp_path, fake, check):
    rc, output = _run(tmp_path, fake.url, {}, check)
    assert rc == 0, output[-3000:]
    assert "Could not score" not in output
