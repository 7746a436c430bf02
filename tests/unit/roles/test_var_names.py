# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""No task-level variable of a role shares its name with a variable a task registers.

A registered variable outranks task vars in Ansible's precedence: once any task of the
play has registered the name, a later task's ``vars:`` value of that name is ignored.
(The container runtime's model mount was lost that way: plan.yml's task var
__vllm_model_dir was shadowed by the stat result preflight.yml registers.)
"""

from __future__ import annotations

import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks"):
            if key in node:
                yield from _tasks(node[key])


def _names(paths):
    registered, task_vars = {}, {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            content = yaml.safe_load(handle) or []
        for task in _tasks(content):
            if isinstance(task.get("register"), str):
                registered.setdefault(task["register"], path)
            if isinstance(task.get("vars"), dict) and ("name" in task or "block" in task):
                for name in task["vars"]:
                    task_vars.setdefault(name, path)
    return registered, task_vars


def test_no_task_var_is_shadowed_by_a_registered_one():
    paths = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
                   + glob.glob(os.path.join(ROOT, "playbooks", "tasks", "*.yml")))
    registered, task_vars = _names(paths)
    clashes = {name: (task_vars[name], registered[name]) for name in task_vars if name in registered}
    assert not clashes, clashes
