# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.maintenance_probe``: the probe client's steps on a proxy host (the maintenance_window role's
``probe`` entry point) - stop one an interrupted run left behind, remove the last log, start this run's - and its
command line, word for word the one the role's tasks ran before the steps moved into the action plugin (issue 36)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.maintenance_probe import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw
from ansible_collections.factory_floor.llm.plugins.modules import maintenance_probe
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT

ARGS = {"unit": "factory-floor-switch-probe", "log": "/run/factory-floor/switch-probe.jsonl",
        "url": "https://gateway:8443/v1/chat/completions", "engine_host": "spark-a", "interval": 0.5,
        "concurrency": 2, "max_seconds": 7200, "lib_dir": "/usr/local/lib/factory-floor",
        "api_key_file": "/etc/factory-floor/client-api-key", "ca_file": ""}
HOSTVARS = {"spark-a": {"vllm_served_model_name": "lab-chat"}, "spark-b": {}}
# The command line the role's "Start the probe client (transient unit)" task gave systemd-run.
ARGV = ["systemd-run", "--unit=factory-floor-switch-probe", "--collect", "--property=RuntimeMaxSec=7200",
        "--setenv=PYTHONPATH=/usr/local/lib/factory-floor", "/usr/bin/python3", "-m", "_host.probe_client",
        "--url=https://gateway:8443/v1/chat/completions", "--model=lab-chat",
        "--out=/run/factory-floor/switch-probe.jsonl", "--interval=0.5", "--concurrency=2",
        "--api-key-file=/etc/factory-floor/client-api-key", "--ca-file="]


def run(args, results=None, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0,
                          action="factory_floor.llm.maintenance_probe")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict((results or {}).get(len(calls) - 1, {"changed": True}))

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars={"hostvars": HOSTVARS}), calls


def test_a_leftover_client_is_stopped_the_log_removed_and_this_runs_client_started():
    result, calls = run(ARGS)
    assert calls == [("ansible.legacy.command", {"argv": ["systemctl", "stop", "factory-floor-switch-probe.service"]}),
                     ("ansible.legacy.file", {"path": ARGS["log"], "state": "absent"}),
                     ("ansible.legacy.command", {"argv": ARGV})]
    assert result["changed"] is True and result["started"] == {"changed": True} and not result.get("failed")


def test_a_ca_file_and_a_given_model():
    _result, calls = run(dict(ARGS, ca_file="/etc/ssl/lab-ca.pem", model="other", engine_host="spark-b"))
    argv = calls[-1][1]["argv"]
    assert argv[-1] == "--ca-file=/etc/ssl/lab-ca.pem" and "--model=other" in argv


def test_without_start_only_the_leftover_is_stopped_and_no_model_is_read():
    result, calls = run(dict(ARGS, start=False, engine_host="spark-b"))
    assert [call[0] for call in calls] == ["ansible.legacy.command"] and calls[0][1]["argv"][1] == "stop"
    assert result["changed"] is False and result["started"] is None


def test_a_leftover_that_cannot_be_stopped_is_no_failure():
    result, _calls = run(ARGS, {0: {"failed": True, "rc": 5, "msg": "Unit factory-floor-switch-probe.service not loaded."}})
    assert not result.get("failed") and result["changed"] is True


def test_a_start_that_fails_fails_with_what_systemd_run_said():
    failed = {"failed": True, "rc": 1, "msg": "non-zero return code", "stderr": "Failed to start transient service unit"}
    result, calls = run(ARGS, {2: failed})
    assert len(calls) == 3 and result["failed"] is True
    assert result["msg"] == "non-zero return code" and result["stderr"] == failed["stderr"]


def test_check_mode_stops_and_starts_nothing():
    result, calls = run(ARGS, check_mode=True)
    assert calls == [("ansible.legacy.file", {"path": ARGS["log"], "state": "absent"})]
    assert result["changed"] is True and result["started"] is None


def test_an_engine_host_without_a_served_model_name_is_named():
    with pytest.raises(AnsibleActionFail, match="the engine host 'spark-b' serves .its vllm_served_model_name., which "
                                                "is not defined there"):
        run(dict(ARGS, engine_host="spark-b"))


def test_the_steps_in_check_mode_and_not():
    args = dict(ARGS, start=True, model="m")
    assert [step[0] for step in mw.probe_steps(args, False)] == ["command", "file", "command"]
    assert [step[2] for step in mw.probe_steps(args, False)] == [False, True, True]
    assert mw.probe_steps(dict(args, start=False), True) == []


def test_the_documentation_matches_the_argument_spec():
    documented = yaml.safe_load(maintenance_probe.DOCUMENTATION)["options"]
    assert set(documented) == set(ARGUMENT_SPEC)
    for name, spec in ARGUMENT_SPEC.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name
        assert bool(documented[name].get("required")) == bool(spec.get("required")), name


def test_the_role_gives_every_option_but_the_model():
    with open(os.path.join(ROOT, "roles", "maintenance_window", "tasks", "probe.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    [probe] = [task["factory_floor.llm.maintenance_probe"] for task in tasks if "factory_floor.llm.maintenance_probe" in task]
    assert set(probe) == set(ARGUMENT_SPEC) - {"model"}
