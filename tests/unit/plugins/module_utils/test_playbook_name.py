# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A message names a playbook the way its reader runs playbooks (issue 35).

An operator who installed the built collection ran ``ansible-playbook factory_floor.llm.switch_to_replicas`` and
was told to run ``playbooks/switch-to-replicas.yml``, a file they do not have. ``_playbook_name`` decides the form
from the running playbook's directory, for the filter (the roles' tasks) and the Python checks alike; no message
anywhere names a playbook file by itself any more."""

from __future__ import annotations

import ast
import glob
import os
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.playbook_name import FilterModule
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import PLAYBOOKS, playbook_name
from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode import walk
from ansible_collections.factory_floor.llm.tests.unit.roles.test_check_mode_messages import texts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HOME = "/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks"


@pytest.mark.parametrize("playbook_dir, expected", [
    # ansible-playbook factory_floor.llm.switch_to_replicas, from a user's or the system's collections path
    (HOME, "factory_floor.llm.switch_to_replicas"),
    ("/usr/share/ansible/collections/ansible_collections/factory_floor/llm/playbooks/", "factory_floor.llm.switch_to_replicas"),
    # ansible-playbook playbooks/switch-to-replicas.yml in a checkout
    ("/home/op/src/factory-floor/playbooks", "playbooks/switch-to-replicas.yml"),
    ("/home/op/src/factory-floor/playbooks/", "playbooks/switch-to-replicas.yml"),
    # an operator's own playbook that includes the roles, or nothing known: what runs from anywhere
    ("/home/op/site", "factory_floor.llm.switch_to_replicas"),
    ("/home/op/.ansible/collections/ansible_collections/acme/site/playbooks", "factory_floor.llm.switch_to_replicas"),
    ("", "factory_floor.llm.switch_to_replicas"),
    (None, "factory_floor.llm.switch_to_replicas"),
])
def test_the_form_follows_where_the_running_playbook_is(playbook_dir, expected):
    assert playbook_name("switch-to-replicas.yml", playbook_dir) == expected


def test_every_name_runs_both_ways():
    files = {os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))}
    # Every playbook a message may name, and no other: the files without an underscore (a hyphenated one imports
    # its underscore file, the playbook that factory_floor.llm.NAME runs).
    assert set(PLAYBOOKS) == {name for name in files if "_" not in name}
    for name in PLAYBOOKS:
        assert playbook_name(name, "/srv/ff/playbooks") == "playbooks/" + name
        fqcn = playbook_name(name, HOME)
        assert fqcn.startswith("factory_floor.llm.") and fqcn.rsplit(".", 1)[1] + ".yml" in files, name


def test_a_name_that_is_not_a_playbook_is_an_error():
    with pytest.raises(ValueError, match="'deploy' is not one of the collection's playbooks"):
        playbook_name("deploy", HOME)
    with pytest.raises(AnsibleFilterError, match="playbook_name: 'swich-model.yml' is not one"):
        FilterModule().filters()["playbook_name"]("swich-model.yml", HOME)
    assert FilterModule().filters()["playbook_name"]("deploy.yml", HOME) == "factory_floor.llm.deploy"


# ------------------------------------------------------------------ no message names a playbook file itself

NAMED = re.compile(r"(?<![\w/.%-])(?:playbooks/)?(?:" + "|".join(re.escape(name[:-len(".yml")]) for name in PLAYBOOKS)
                   + r"|switch-to-%s)\.yml\b")
# The filter's own input: 'deploy.yml' | factory_floor.llm.playbook_name(playbook_dir)
FILTERED = re.compile(r"'[\w-]+\.yml'\s*\|\s*factory_floor\.llm\.playbook_name")


def named_in_text(text):
    """A playbook file a sentence names by itself (a value that is only a file name is an argument, not a message)."""
    text = FILTERED.sub("", text)
    return NAMED.findall(text) if re.search(r"\s", text.strip()) else []


def task_messages(path):
    with open(path, encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle) or []
    for task, _whens in walk(tasks):
        for module in ("ansible.builtin.fail", "ansible.builtin.assert", "ansible.builtin.debug"):
            for key in ("msg", "fail_msg", "success_msg"):
                yield from texts((task.get(module) or {}).get(key))
        yield from texts(task.get("vars") or {})


def python_messages(path):
    """The string literals of a Python file that are not documentation (docstrings, a plugin's DOCUMENTATION,
    EXAMPLES and RETURN)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
        if isinstance(node, ast.Assign) and any(isinstance(target, ast.Name) and target.id in (
                "DOCUMENTATION", "EXAMPLES", "RETURN") for target in node.targets):
            docstrings.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


def _named(paths, messages):
    found = {}
    for path in paths:
        for text in messages(path):
            for name in named_in_text(" ".join(text.split())):
                found.setdefault(os.path.relpath(path, ROOT), []).append(name)
    return found


def test_no_task_message_names_a_playbook_file():
    paths = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))
                   + glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
    assert _named(paths, task_messages) == {}


def test_no_python_message_names_a_playbook_file():
    paths = sorted(glob.glob(os.path.join(ROOT, "plugins", "*", "*.py")))
    paths = [path for path in paths if os.path.basename(os.path.dirname(path)) != "modules"]  # documentation
    assert _named(paths, python_messages) == {}


def test_no_entry_point_banner_names_a_playbook_file():
    # ansible-core prints each entry point's short_description in the banner of its argument check, every run.
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path, encoding="utf-8") as handle:
            specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
        for entry, spec in specs.items():
            named = named_in_text(str(spec.get("short_description", "")))
            if named:
                found["%s %s" % (os.path.relpath(path, ROOT), entry)] = named
    assert found == {}


def test_the_rule_sees_what_the_trial_was_told():
    assert named_in_text("To go to replicas: ansible-playbook -i inv playbooks/switch-to-replicas.yml (drained)") == [
        "playbooks/switch-to-replicas.yml"]
    assert named_in_text("then run deploy.yml again.") == ["deploy.yml"]
    assert named_in_text("then run switch-to-%s.yml again") == ["switch-to-%s.yml"]
    assert named_in_text("then run {{ 'deploy.yml' | factory_floor.llm.playbook_name(playbook_dir) }} again.") == []
    assert named_in_text("deploy.yml") == []  # an argument, not a sentence
    assert named_in_text("Fix the variable named in host_vars/spark-a.yml or group_vars/gb10.yml.") == []
