# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.unit_disable``: the steps (``_unit_disable``), the action plugin's runs on the host, check mode,
its documentation, and the roles' calls (the vllm role's disabled engine, the other topology's watchdog), their
arguments evaluated with Ansible's templating as a run would."""

from __future__ import annotations

import os
import re
from unittest import mock

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.unit_disable import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _unit_disable as ud
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT

UNIT = "vllm-split-watchdog.service"
PROM = "/var/lib/node_exporter/textfile/factory_floor_watchdog_vllm-split.prom"
STOP = ("ansible.legacy.systemd_service", {"name": UNIT, "state": "stopped", "enabled": False})
REMOVE = ("ansible.legacy.file", {"path": PROM, "state": "absent"})
RESET = ("ansible.legacy.command", {"argv": ["systemctl", "reset-failed", UNIT]})


@pytest.mark.parametrize("present, check_mode, expected", [
    (True, False, [STOP, REMOVE, RESET]),
    (True, True, [STOP, REMOVE]),         # the stop predicted: nothing to clear
    (False, False, [REMOVE]),             # never installed here: left alone, a leftover verdict still goes
])
def test_the_steps(present, check_mode, expected):
    assert ud.steps(present, UNIT, [PROM], check_mode) == expected


def test_reset_failed_neither_fails_nor_changes():
    assert ud.counts("ansible.legacy.command", {"rc": 1, "failed": True, "changed": True}) == (False, False)
    assert ud.counts("ansible.legacy.systemd_service", {"changed": True}) == (False, True)
    assert ud.counts("ansible.legacy.file", {"failed": True, "msg": "x"}) == (True, False)
    assert ud.unit_file(UNIT, "/etc/systemd/system/") == "/etc/systemd/system/" + UNIT


def run(args, results, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.unit_disable")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars={}), calls


def test_a_unit_that_runs_is_disabled_cleared_and_its_verdict_removed():
    result, calls = run({"unit": UNIT, "remove": [PROM]},
                        [{"stat": {"exists": True}}, {"changed": True}, {"changed": True}, {"rc": 1, "failed": True}])
    assert calls == [("ansible.legacy.stat", {"path": "/etc/systemd/system/" + UNIT}), STOP, REMOVE, RESET]
    assert result["changed"] is True and result["present"] is True and result["removed"] == [PROM]
    assert not result.get("failed")


def test_a_unit_never_installed_is_left_alone():
    result, calls = run({"unit": UNIT, "unit_dir": "/etc/x"}, [{"stat": {"exists": False}}], check_mode=True)
    assert calls == [("ansible.legacy.stat", {"path": "/etc/x/" + UNIT})]
    assert result["changed"] is False and result["present"] is False


def test_a_failed_stop_fails_with_its_message():
    result, _calls = run({"unit": UNIT}, [{"stat": {"exists": True}}, {"failed": True, "msg": "Unit not found"}])
    assert result["failed"] is True and result["msg"] == "Unit not found"


def test_the_documentation_is_the_argument_spec():
    with open(os.path.join(ROOT, "plugins", "modules", "unit_disable.py"), encoding="utf-8") as handle:
        text = handle.read()
    options = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))["options"]
    assert sorted(options) == sorted(ARGUMENT_SPEC)
    for name, spec in ARGUMENT_SPEC.items():
        assert (options[name]["type"], options[name].get("default")) == (spec["type"], spec.get("default")), name
    assert "def main" not in text


def _calls(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return [task for task in yaml.safe_load(handle) if "factory_floor.llm.unit_disable" in task]


def _evaluate(task, variables):
    variables = dict(variables, **{key: trust_as_template(value) for key, value in (task.get("vars") or {}).items()})
    templar = Templar(loader=DataLoader(), variables=variables)
    return {key: templar.template(trust_as_template(value)) for key, value in
            task["factory_floor.llm.unit_disable"].items()}


WATCHDOG = {"_vllm_watchdog_unit_dir": "/etc/systemd/system", "vllm_watchdog_topology": "split",
            "_vllm_watchdog_other_topology": "replicas",
            "_vllm_watchdog_units": {"replicas": "vllm-replica-watchdog.service", "split": UNIT},
            "vllm_watchdog_textfile_dir": "/var/lib/node_exporter/textfile"}


def _watchdog_vars(**changes):
    with open(os.path.join(ROOT, "roles", "vllm_watchdog", "vars", "main.yml"), encoding="utf-8") as handle:
        role_vars = yaml.safe_load(handle)
    return dict(WATCHDOG, **{name: trust_as_template(role_vars[name]) for name in
                             ("_vllm_watchdog_stop_verdict", "_vllm_watchdog_stop_verdicts")}, **changes)


@pytest.mark.parametrize("path, unit, verdict", [
    ("roles/vllm_watchdog/tasks/disable.yml", UNIT, PROM),
    ("roles/vllm_watchdog/tasks/main.yml", "vllm-replica-watchdog.service",
     "/var/lib/node_exporter/textfile/factory_floor_watchdog_vllm-replica.prom"),
], ids=["disable", "other-topology"])
def test_the_watchdogs_are_disabled_with_their_last_verdict(path, unit, verdict):
    (task,) = _calls(path)
    assert _evaluate(task, _watchdog_vars()) == {"unit": unit, "unit_dir": "/etc/systemd/system", "remove": [verdict]}
    # No textfile directory: nothing to remove.
    assert _evaluate(task, _watchdog_vars(vllm_watchdog_textfile_dir=""))["remove"] == []


def test_the_engine_is_disabled_when_the_other_topology_runs():
    (task,) = _calls("roles/vllm/tasks/service.yml")
    assert task["when"] == "vllm_service_state == 'disabled'"
    assert _evaluate(task, {"vllm_service_name": "vllm-split.service", "_vllm_unit_dir": "/etc/systemd/system"}) == {
        "unit": "vllm-split.service", "unit_dir": "/etc/systemd/system"}
