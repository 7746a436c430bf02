# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""playbooks/site_check.yml (site-check.yml imports it) changes nothing on any host (issue 35), read without Ansible.

Every task it runs - its own and, through every include_role / include_tasks / import_tasks,
the roles' entry points it reuses - is a read: one of Ansible's modules that only read or note
(ping, setup, set_fact, debug, assert, fail, meta), a module of this collection documented
read-only (the READ_ONLY fragment), or a command that reports no change and runs in check mode
(``changed_when: false``, ``check_mode: false``). A writing task anywhere in that tree fails here.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "site_check.yml")
READS = {"ansible.builtin.ping", "ansible.builtin.setup", "ansible.builtin.set_fact", "ansible.builtin.debug",
         "ansible.builtin.assert", "ansible.builtin.fail", "ansible.builtin.meta", "ansible.builtin.slurp"}
INCLUDES = {"ansible.builtin.include_role", "ansible.builtin.import_role", "ansible.builtin.include_tasks",
            "ansible.builtin.import_tasks"}
COMMANDS = {"ansible.builtin.command", "ansible.builtin.shell"}
TASK_KEYS = {"name", "when", "register", "vars", "tags", "loop", "loop_control", "changed_when", "failed_when",
             "check_mode", "become", "run_once", "delegate_to", "ignore_errors", "ignore_unreachable", "block",
             "rescue", "always", "no_log", "args", "until", "retries", "delay", "environment", "notify",
             "listen", "any_errors_fatal", "delegate_facts", "timeout", "throttle"}


def read_only_modules():
    names = set()
    folder = os.path.join(ROOT, "plugins", "modules")
    for name in os.listdir(folder):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                text = handle.read()
            doc = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))
            if "factory_floor.llm.attributes.READ_ONLY" in (doc.get("extends_documentation_fragment") or []):
                names.add("factory_floor.llm." + name[:-3])
    return names


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


def walk(tasks, role, where, seen):
    """Every task reached from ``tasks``: ``(where, task, action)``, following includes into the roles."""
    for task in tasks or []:
        if "hosts" in task:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from walk(task.get(key), role, where, seen)
            assert not task.get("roles"), "a play of %s runs a whole role" % where
            continue
        for key in ("block", "rescue", "always"):
            yield from walk(task.get(key), role, where, seen)
        if "block" in task:
            continue
        action = [key for key in task if key not in TASK_KEYS][0]
        yield where, task, action
        if action not in INCLUDES:
            continue
        args = task[action]
        if action.endswith("_role"):
            target_role = args["name"].split(".")[-1]
            path = os.path.join(ROOT, "roles", target_role, "tasks", args.get("tasks_from", "main") + ".yml")
        else:
            target_role = role
            name = args if isinstance(args, str) else args.get("file")
            path = os.path.join(ROOT, "roles", role, "tasks", name.replace("{{ role_path }}/tasks/", ""))
        if path not in seen:
            seen.add(path)
            yield from walk(_load(path), target_role, os.path.relpath(path, ROOT), seen)


def every_task():
    return list(walk(_load(PLAYBOOK), None, "playbooks/site_check.yml", set()))


def test_it_reuses_the_roles_checks():
    reached = {where for where, _task, _action in every_task()}
    assert {"roles/vllm/tasks/image_check.yml", "roles/memory_guard/tasks/share.yml",
            "roles/memory_guard/tasks/model.yml", "roles/vllm_split/tasks/link_check.yml"} <= reached


@pytest.mark.parametrize("where, task, action", every_task(),
                         ids=lambda value: value.get("name", "") if isinstance(value, dict) else None)
def test_every_task_is_a_read(where, task, action):
    if action in READS | INCLUDES:
        return
    if action in COMMANDS:
        assert task.get("changed_when") is False, "%s: %s may report a change" % (where, task.get("name"))
        assert task.get("check_mode") is False, "%s: %s is skipped under --check" % (where, task.get("name"))
        return
    assert action in read_only_modules(), "%s: %s runs %s, which may change the host" % (where, task.get("name"), action)


def test_it_runs_deploys_inventory_checks():
    # deploy.yml's first checks - the layout and every inventory variable - through the same entry point.
    reached = {where for where, _task, _action in every_task()}
    assert "roles/site/tasks/layout.yml" in reached
    [include] = [task[action] for where, task, action in every_task() if action == "ansible.builtin.include_role"
                 and task[action].get("tasks_from") == "layout"]
    assert include["rolespec_validate"] is False, include


def test_it_reads_what_the_hosts_run_as_deploy_does():
    # The same module and arguments as deploy.yml's topology check: one reading of "what runs".
    deploy = _load(os.path.join(ROOT, "roles", "site_deploy", "tasks", "deploy_preflight.yml"))
    # deploy_topology_check runs topology_record on the host with its own arguments, then decides.
    [theirs] = [task["factory_floor.llm.deploy_topology_check"] for task in deploy
                if "factory_floor.llm.deploy_topology_check" in task]
    ours = [task for where, task, action in every_task()
            if where == "playbooks/site_check.yml" and action == "factory_floor.llm.topology_record"]
    assert len(ours) == 1 and ours[0]["factory_floor.llm.topology_record"] == theirs
    assert ours[0]["failed_when"] is False


def test_the_checkouts_name_imports_it():
    plays = _load(os.path.join(ROOT, "playbooks", "site-check.yml"))
    assert plays == [{"name": "Site check", "ansible.builtin.import_playbook": "site_check.yml"}]


def test_it_ends_by_failing_when_a_host_has_a_problem():
    last = _load(PLAYBOOK)[-1]["tasks"][-1]
    assert last["ansible.builtin.assert"]["that"] == "site_check_verdict.ok"
