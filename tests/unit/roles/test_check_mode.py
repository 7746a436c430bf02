# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``--check`` on a deployed site (issue 35): every task says what it does in check mode.

Ansible skips, in check mode, a module that cannot predict - ``command`` and ``shell`` (unless
``creates``/``removes``), ``uri``, ``wait_for`` - and registers ``{"skipped": true}``: a later task
that reads the result's ``stdout``, ``rc`` or ``status`` then fails (``deploy.yml --check`` did, in
the vllm role's preflight), or, worse, decides on nothing (the switch's plan read no running unit).
So each such task here says which it is:

- a read runs in check mode too: ``check_mode: false`` (and reports no change);
- a change, or a check of what this run changed (a wait, a probe), is skipped explicitly there:
  ``not ansible_check_mode`` in its ``when`` (its own or a block's).

A ``command`` that changes (``changed_when`` true or left to the module) is Ansible's own skip in
check mode and reports itself as skipped; none of those is read in a run that --check or a dry run
reaches. Checked without Ansible, on every task file and playbook.
"""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Modules Ansible skips in check mode (no check mode support, or command's partial one).
NO_CHECK_MODE = {"ansible.builtin.uri", "ansible.builtin.wait_for", "ansible.builtin.raw", "ansible.builtin.script"}
COMMANDS = {"ansible.builtin.command", "ansible.builtin.shell"}


def task_files():
    files = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
    return [os.path.relpath(path, ROOT) for path in files]


def _whens(task):
    when = task.get("when")
    if when is None:
        return []
    return [str(item) for item in (when if isinstance(when, list) else [when])]


def walk(tasks, whens=()):
    """Every task of a task list (blocks, rescue, always, plays' tasks), with its parents' whens."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        mine = list(whens) + _whens(task)
        if "hosts" in task:  # a play
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from walk(task.get(key), mine)
            continue
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from walk(task[key], mine)
        if not any(key in task for key in ("block", "rescue", "always")):
            yield task, mine


def module_of(task):
    for key in task:
        if key.startswith(("ansible.builtin.", "factory_floor.llm.", "community.", "ansible.posix.")):
            return key
    return None


def says_check_mode(task, whens):
    return task.get("check_mode") is False or any("not ansible_check_mode" in when for when in whens)


def offenders(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle) or []
    found = []
    for task, whens in walk(tasks):
        module = module_of(task)
        reads = module in COMMANDS and task.get("changed_when") is False
        if (reads or module in NO_CHECK_MODE) and not says_check_mode(task, whens):
            found.append(task.get("name"))
    return found


@pytest.mark.parametrize("path", task_files())
def test_every_task_check_mode_would_skip_says_what_it_does_there(path):
    assert offenders(path) == []


def test_the_rule_sees_what_broke_deploy_check():
    # The vllm role's preflight as it was: "Find who listens on the API port", a command that reads, run without
    # check_mode: false, was skipped by --check and the next task's __vllm_port.stdout failed.
    tasks = [{"name": "Find who listens on the API port", "ansible.builtin.command": {"argv": ["ss"]},
              "register": "__vllm_port", "changed_when": False},
             {"name": "Wait for it", "ansible.builtin.uri": {"url": "http://x"}, "when": "x"},
             {"name": "A read", "ansible.builtin.command": {"argv": ["cat"]}, "changed_when": False, "check_mode": False},
             {"name": "Checks", "when": ["not ansible_check_mode"],
              "block": [{"name": "A probe", "ansible.builtin.uri": {"url": "http://x"}}]}]
    found = [task.get("name") for task, whens in walk(tasks)
             if ((module_of(task) in COMMANDS and task.get("changed_when") is False) or module_of(task) in NO_CHECK_MODE)
             and not says_check_mode(task, whens)]
    assert found == ["Find who listens on the API port", "Wait for it"]
