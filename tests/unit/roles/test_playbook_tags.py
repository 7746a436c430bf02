# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The roles' tags, reachable from the playbooks (issue 35).

``deploy.yml`` imports the proxy, keepalived and the engines' steps (``import_role``: ``--list-tasks``
shows them, ``--tags`` reaches the roles' own tags); the engine role of the topology is chosen at run
time (``include_role``), so its include carries its steps' tags and applies them to what it runs. An
include's tags alone reach the include, not what it includes: each include that has tags applies them
(``apply: tags``), or ``--tags`` would run it and skip its contents - the checks among them. The
checks, the lock, the drains' release, the unlock and the wait for the rotation always run; a switch
refuses ``--tags`` (it runs every step or none).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
INCLUDES = ("ansible.builtin.include_role", "ansible.builtin.include_tasks")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def walk(tasks):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if "hosts" in task:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from walk(task.get(key))
            continue
        for key in ("block", "rescue", "always"):
            yield from walk(task.get(key))
        yield task


FILES = sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))
               + glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))


@pytest.mark.parametrize("path", FILES)
def test_an_include_with_tags_applies_them_to_what_it_includes(path):
    wrong = []
    for task in walk(_load(path)):
        for key in INCLUDES:
            if key in task and task.get("tags"):
                args = task[key] if isinstance(task[key], dict) else {}
                applied = (args.get("apply") or {}).get("tags") or []
                if not applied or not set(applied) <= set(task["tags"]):
                    wrong.append(task.get("name"))
    assert wrong == []


def _rescue_and_plays(plays):
    always = []
    for play in plays:
        for task in play.get("tasks") or []:
            for rescue in task.get("rescue") or []:
                always.append(("rescue of " + play["name"], rescue))
    return always


# The plays of deploy.yml that run whatever --tags says (checks, the lock and its release, the drains, the rotation).
ALWAYS_PLAYS = [
    "Layout (reads the inventory only; contacts no host, changes nothing)",
    "Read the addresses of the proxy hosts --limit leaves out (reads only)",
    "Preflight (nothing changes on any host unless every check passes)",
    "Preflight of the proxies' floating address (two or more proxy hosts; reads only)",
    "Take the maintenance lock on every engine host",
    "Put back in rotation the replicas an interrupted deploy.yml left drained",
    "Release the maintenance lock",
    "Wait until every serving engine is in the proxy's rotation",
    "Say which proxy host holds the floating address",
]


def test_deploy_always_runs_its_checks_the_lock_and_the_rotation():
    plays = _load("playbooks", "deploy.yml")
    by_name = {play["name"]: play for play in plays}
    for name in ALWAYS_PLAYS:
        for task in by_name[name]["tasks"]:
            assert task.get("tags") == ["always"], (name, task.get("name"))
    for where, task in _rescue_and_plays(plays):
        assert task.get("tags") == ["always"], where
        assert task["ansible.builtin.include_role"]["apply"]["tags"] == ["always"], where


def test_deploy_imports_the_roles_whose_tags_reach():
    imported = {}
    for task in walk(_load("playbooks", "deploy.yml")):
        role = task.get("ansible.builtin.import_role")
        if role:
            imported[role["name"]] = role.get("tasks_from", "main")
    assert imported == {"factory_floor.llm.nginx_proxy": "main", "factory_floor.llm.keepalived": "main",
                        "factory_floor.llm.site_deploy": "deploy_engines"}
    tasks = _load("roles", "site_deploy", "tasks", "deploy_engines.yml")
    engines = {task.get("ansible.builtin.import_role", {}).get("name") for task in tasks}
    assert {"factory_floor.llm.memory_guard", "factory_floor.llm.vllm_watchdog"} <= engines


@pytest.mark.parametrize("name", ["switch.yml", "switch_model.yml"])
def test_a_switch_refuses_tags_as_its_first_step(name):
    # After the inventory's check, play 0 (test_playbook_inventory.py), which runs whatever --tags says.
    first = _load("playbooks", name)[1]["tasks"][0]
    assert first["tags"] == ["always"] and "ansible.builtin.assert" in first


@pytest.mark.parametrize("name", ["switch.yml", "switch_model.yml"])
@pytest.mark.parametrize("args, refused", [([], False), (["--tags", "vllm"], True), (["--skip-tags", "gate"], True),
                                           (["--tags", "all"], False)])
def test_a_switch_refuses_tags_and_runs_without_them(tmp_path, name, args, refused):
    """The playbook's own refusal, run by ansible-playbook (ansible_run_tags is a tuple on 2.19+, not a list)."""
    if not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"):
        pytest.skip("ansible-playbook not installed next to this Python")
    first = _load("playbooks", name)[1]["tasks"][0]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [first]}]
    path = tmp_path / "refuse.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(path)] + args,
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert (done.returncode != 0) is refused, output
    assert ("A switch runs every step or none" in output) is refused, output


# ------------------------------------------------------------------ what ansible-playbook lists

needs_ansible_playbook = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                            reason="ansible-playbook not installed next to this Python")


def listed(*args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(ROOT, "inventory", "example"),
                           os.path.join(ROOT, "playbooks", "deploy.yml")] + list(args),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# One step of each role deploy.yml runs, as --list-tasks names it.
STEPS = [
    "factory_floor.llm.nginx_proxy : Write nginx.conf (checked with nginx -t and the balancer's init before it is installed)"
    "\tTAGS: [configure, proxy]",
    "factory_floor.llm.keepalived : Write keepalived.conf (checked with keepalived -t before it is installed)"
    "\tTAGS: [configure, keepalived]",
    "factory_floor.llm.memory_guard : Compute this host's share for vLLM from what else runs on it and what vLLM measured"
    " at its last start here\tTAGS: [memory_guard, plan]",
    "factory_floor.llm.vllm : Record the topology, who, when, the playbook and the run\tTAGS: [vllm]",
    "factory_floor.llm.vllm_watchdog : Disable --now the watchdog of topology {{ vllm_watchdog_topology }}"
    "\tTAGS: [service, vllm, watchdog]",
    "Run the wanted topology (replicas)\tTAGS: [firewall, health, preflight, service, vllm]",
    "Run the wanted topology (split)\tTAGS: [firewall, health, preflight, service, vllm]",
    # An include_role (the site role's host_programs) is listed without its role's name.
    "Install the watchdog\tTAGS: [install, watchdog]",
]


@needs_ansible_playbook
def test_list_tasks_shows_the_role_steps():
    lines = [line.strip() for line in listed("--list-tasks").splitlines()]
    for step in STEPS:
        assert step in lines, step


@needs_ansible_playbook
def test_list_tags_shows_the_roles_tags():
    tags = set()
    for found in re.findall(r"TASK TAGS: \[([^\]]*)\]", listed("--list-tags")):
        tags.update(tag.strip() for tag in found.split(",") if tag.strip())
    assert {"proxy", "keepalived", "memory_guard", "watchdog", "vllm", "preflight", "install", "configure", "run",
            "firewall", "service", "health", "plan", "workloads", "watch"} <= tags


@needs_ansible_playbook
def test_tags_select_a_roles_steps_and_keep_the_checks():
    text = listed("--list-tasks", "--tags", "proxy")
    assert "factory_floor.llm.nginx_proxy : Write nginx.conf" in text
    assert "factory_floor.llm.memory_guard : Compute this host's share" not in text
    assert "factory_floor.llm.keepalived : Write keepalived.conf" not in text
    for always in ("Check the topology, the lock, the memory shares, the engines and which replicas restart",
                   "Take the maintenance lock on every engine host, or on none",
                   "Release this run's maintenance lock on every engine host (another run's stays)",
                   "Wait for the engines of the topology, naming any another holder drained"):
        assert always in text, always
