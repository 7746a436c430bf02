# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The controller-side checks (an action plugin whose module file holds its documentation only), as their tests
run them: ``run_action`` runs the plugin as a task would (``run_action_answering`` with the modules it runs
answered), ``documented_options`` reads the module file's options for
the test that holds them to the plugin's ``ARGUMENT_SPEC``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from unittest import mock

import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def action_plugin(action_module, name, args, variables, check_mode=False, templar=None):
    """``action_module`` (the plugin's class) as the task ``factory_floor.llm.<name>`` with ``args`` has it, the task's
    variables ``variables`` read through Ansible's own templar (or ``templar``)."""
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm." + name)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    templar = templar or Templar(loader=DataLoader(), variables=variables)
    return action_module(task, connection, mock.MagicMock(), DataLoader(), templar, None)


def run_action(action_module, name, args, variables, check_mode=False, templar=None):
    """The task's result: :func:`action_plugin` run."""
    return action_plugin(action_module, name, args, variables, check_mode, templar).run(task_vars=variables)


def run_action_answering(action_module, name, args, variables, results, check_mode=False, templar=None):
    """:func:`run_action` with the modules the plugin runs answering ``results`` in turn; returns the task's result
    and the calls (module name, arguments)."""
    action = action_plugin(action_module, name, args, variables, check_mode, templar)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars=variables), calls


def documented_options(name):
    """The options plugins/modules/<name>.py documents, and the file's text."""
    with open(os.path.join(ROOT, "plugins", "modules", name + ".py"), encoding="utf-8") as handle:
        text = handle.read()
    return yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))["options"], text


def assert_documents_the_spec(name, argument_spec):
    """plugins/modules/<name>.py documents exactly ``argument_spec``'s options - each one's type, whether it is
    required, its choices and its default - and holds no code (the action plugin is the module)."""
    options, text = documented_options(name)
    assert sorted(options) == sorted(argument_spec)
    for option, spec in argument_spec.items():
        assert options[option]["type"] == spec["type"], option
        assert bool(options[option].get("required")) == bool(spec.get("required")), option
        assert options[option].get("choices") == spec.get("choices"), option
        assert options[option].get("default") == spec.get("default"), option
    assert "def main" not in text


def run_playbook(tmp_path, inventory, play):
    """Run ``play`` (a playbook's text) with ``ansible-playbook`` next to this Python against ``inventory`` (a
    mapping, written as YAML) and the built collection; the finished process (stdout, stderr, returncode)."""
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(play)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                           str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
