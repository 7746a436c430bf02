# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A task file a role loads with include_tasks must not name other task files by a relative path.

Found in the lab (2026-12-06, the faults scenario): ansible-core resolves a relative
``import_tasks``/``include_tasks`` inside a file that was itself loaded by ``include_tasks``
against ``tasks/`` under the working directory first. A switch started from a directory holding
``tasks/run.yml`` ran that file inside the tool-calling gate in place of the tool_gate role's own
``run.yml``; an operator's project with a ``tasks/`` directory is exposed the same way. Reproduced
in ``test_ansible_resolves_a_nested_relative_import_against_the_working_directory``. Such files
name the others from ``role_path`` (``"{{ role_path }}/tasks/run.yml"``), which resolves the same
from wherever the playbook runs.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
INCLUDE = ("ansible.builtin.include_tasks", "include_tasks")
IMPORT = ("ansible.builtin.import_tasks", "import_tasks")


def _walk(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _walk(task.get(key))


def _target(task, keys):
    for key in keys:
        if key in task:
            value = task[key]
            return value.get("file") if isinstance(value, dict) else value
    return None


def exposed(loaded=None):
    found = []
    for role in sorted(glob.glob(os.path.join(ROOT, "roles", "*"))):
        files = {}
        for path in glob.glob(os.path.join(role, "tasks", "*.yml")):
            with open(path, encoding="utf-8") as handle:
                files[os.path.basename(path)] = yaml.safe_load(handle) or []
        loaded_dynamically = {target for tasks in files.values() for task in _walk(tasks)
                              for target in [_target(task, INCLUDE)] if target and "{{" not in target}
        if loaded is not None:
            loaded.update("%s/tasks/%s" % (os.path.basename(role), name) for name in loaded_dynamically)
        for name in sorted(loaded_dynamically):
            for task in _walk(files.get(name)):
                target = _target(task, INCLUDE + IMPORT)
                if target and "{{" not in target and not target.startswith("/"):
                    found.append("%s/tasks/%s -> %s" % (os.path.basename(role), name, target))
    return found


def test_the_scan_reads_the_roles():
    loaded = set()
    exposed(loaded)
    assert {"tool_gate/tasks/main.yml", "vllm/tasks/service_run.yml", "vllm_split/tasks/preflight.yml"} <= loaded


def test_no_relative_include_in_a_dynamically_included_file():
    assert exposed() == []


@pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="ansible-playbook not next to this Python")
def test_ansible_resolves_a_nested_relative_import_against_the_working_directory(tmp_path):
    role = tmp_path / "project" / "roles" / "gate" / "tasks"
    role.mkdir(parents=True)
    (role / "run.yml").write_text("- ansible.builtin.debug:\n    msg: the role's own run.yml\n")
    (role / "candidate.yml").write_text("- ansible.builtin.include_tasks: main.yml\n")
    (role / "main.yml").write_text("- block:\n    - ansible.builtin.import_tasks: run.yml\n")
    playbook = tmp_path / "project" / "play.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n"
                        "        name: gate\n        tasks_from: candidate\n")
    elsewhere = tmp_path / "elsewhere" / "tasks"
    elsewhere.mkdir(parents=True)
    (elsewhere / "run.yml").write_text("- ansible.builtin.debug:\n    msg: a file of the working directory\n")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0")
    runs = {}
    for cwd in (tmp_path / "project", tmp_path / "elsewhere"):
        done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(playbook)], cwd=str(cwd),
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        runs[cwd.name] = done.stdout
    assert "the role's own run.yml" in runs["project"]
    assert "a file of the working directory" in runs["elsewhere"]
