# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Under ``--check`` nothing is written, so no message may say it was (issue 35).

``deploy.yml --check`` on a site whose replica had a new configuration refused its restart saying "spark-a keeps
its old configuration and serves (its new unit is in place)" and "This run's maintenance lock was given back on
spark-a, spark-b" - neither unit nor lock had been written. Every message of the roles and playbooks that says
something was put in place says, under ``ansible_check_mode``, what a real run would do instead: a rule over every
task file, and the messages themselves rendered by ansible-playbook on this machine, with and without ``--check``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode import ROOT, task_files, walk

# What a message may claim was written on a host. "Nothing was written" is true in either mode, and so is "restarted
# after the other engines are in place" (what a run will do).
CLAIMS = re.compile(r"\bis in\s+place\b|\bwas\s+given\s+back\b|\bis\s+deployed\b"
                    r"|(?<!nothing )\b(?:was|were)\s+(?:written|installed|placed)\b", re.IGNORECASE)
MESSAGES = {"ansible.builtin.fail": ("msg",), "ansible.builtin.assert": ("fail_msg", "success_msg"),
            "ansible.builtin.debug": ("msg",)}


def texts(value):
    """Every string in a task's value (a message, a vars mapping), nested ones included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


def claims_without_check_mode(tasks):
    """The names of the tasks whose message (or its vars) claims something was written, and never asks
    ``ansible_check_mode``."""
    found = []
    for task, _whens in walk(tasks):
        found_texts = list(texts(task.get("vars") or {}))
        for module, keys in MESSAGES.items():
            found_texts += [text for key in keys for text in texts((task.get(module) or {}).get(key))]
        if any(CLAIMS.search(" ".join(text.split())) for text in found_texts) and not any(
                "ansible_check_mode" in text for text in found_texts):
            found.append(task.get("name"))
    return found


@pytest.mark.parametrize("path", task_files())
def test_no_message_claims_a_write_that_check_mode_did_not_make(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        assert claims_without_check_mode(yaml.safe_load(handle) or []) == []


def test_the_rule_sees_the_messages_of_the_trial():
    tasks = [{"name": "Refuse", "ansible.builtin.fail": {"msg": "{{ h }} keeps its old configuration (its new unit is "
                                                                "in\n place)."}},
             {"name": "Abort", "ansible.builtin.fail": {"msg": "{{ why }}"},
              "vars": {"why": "This run's maintenance lock was given back on {{ hosts }}."}},
             {"name": "Said both ways", "ansible.builtin.fail": {
                 "msg": "{{ 'nothing written' if ansible_check_mode else 'its new unit is in place' }}"}},
             {"name": "Nothing", "ansible.builtin.fail": {"msg": "No level met the target, so nothing was written."}}]
    assert claims_without_check_mode(tasks) == ["Refuse", "Abort"]


# ------------------------------------------------------------ the messages, as ansible-playbook renders them

def _task(path, name):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        found = [task for task, _whens in walk(yaml.safe_load(handle)) if task.get("name") == name]
    assert len(found) == 1, (path, name)
    return {key: value for key, value in found[0].items() if key != "when"}


def _run(tmp_path, task, variables, check):
    """Run ``task`` (a role's, without its when) on localhost with ``variables``; the message it failed with."""
    play = [{"name": "One task of a role", "hosts": "localhost", "gather_facts": False, "vars": variables,
             "tasks": [task]}]
    (tmp_path / "playbooks").mkdir(exist_ok=True)
    (tmp_path / "playbooks" / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    # The engine hosts are only named (groups), never contacted.
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost: {ansible_connection: local}\n"
                                        "gb10:\n  hosts:\n    spark-a:\n    spark-b:\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
            "-e", "ansible_python_interpreter=" + sys.executable, str(tmp_path / "playbooks" / "play.yml")]
    done = subprocess.run(argv + (["--check"] if check else []), cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    found = re.search(r'fatal: \[localhost\]: FAILED! => (\{.*\})', output)
    assert found, output
    return " ".join(yaml.safe_load(found.group(1))["msg"].split())


# The rolling restart's refusal is worded by rolling_restart_plan (_restart_plan) now: its --check rows are in
# tests/unit/plugins/module_utils/test_restart_plan.py.


ABORT = dict(maintenance_window_abort_note="", site_engine_group="gb10",
             maintenance_window_unlocked={"spark-a": {"released": True}, "spark-b": {"released": True}},
             ansible_failed_result={"msg": "Not restarting spark-a for its new configuration."})


@pytest.mark.parametrize("check, says", [
    (True, "Not restarting spark-a for its new configuration. --check took no maintenance lock, so none was given back "
           "(a real run takes it on spark-a, spark-b before it changes anything, and gives it back here)."),
    (False, "Not restarting spark-a for its new configuration. This run's maintenance lock was given back on spark-a, "
            "spark-b."),
])
def test_the_abort_says_whether_a_lock_was_given_back(tmp_path, check, says):
    assert _run(tmp_path, _task("roles/maintenance_window/tasks/abort.yml", "Stop here, with what failed"), ABORT,
                check) == says
