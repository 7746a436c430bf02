# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.systemd_reload``: systemd reloaded when it has not loaded the units as they are on disk (an
interrupted run wrote them) or this run changed one, the units started, never restarted; the rule
(``_systemd_reload``) and the action plugin's steps on the host. The roles' calls: tests/unit/roles/test_unit_freshness.py."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.factory_floor.llm.plugins.action.systemd_reload import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _systemd_reload as sr
from ansible_collections.factory_floor.llm.tests.unit.plugins import action_task

FRESH = {"changed": False, "need_daemon_reload": False, "restart": []}
STALE = {"changed": False, "need_daemon_reload": True, "restart": ["nginx.service"]}


@pytest.mark.parametrize("info, reload, expected", [
    (STALE, False, True),   # an interrupted run wrote a file systemd has not read
    (FRESH, True, True),    # this run changed one (check mode predicts it so)
    (FRESH, False, False),  # systemd runs what is on disk
    (None, False, False),
])
def test_the_reload_rule(info, reload, expected):
    assert sr.reloads(info, reload) is expected


@pytest.mark.parametrize("units, start, info, reload, expected", [
    (["a.slice", "b.service"], False, STALE, False, [{"daemon_reload": True}]),
    (["a.slice", "b.service"], False, FRESH, False, []),
    (["nginx.service"], True, STALE, False,
     [{"name": "nginx.service", "state": "started", "enabled": True, "daemon_reload": True}]),
    (["nginx.service"], True, FRESH, False,
     [{"name": "nginx.service", "state": "started", "enabled": True, "daemon_reload": False}]),
    (["a.service", "b.service"], True, FRESH, True,
     [{"name": "a.service", "state": "started", "enabled": True, "daemon_reload": True},
      {"name": "b.service", "state": "started", "enabled": True, "daemon_reload": False}]),
])
def test_the_steps_reload_once_start_and_never_restart(units, start, info, reload, expected):
    steps = sr.steps(units, start, info, reload)
    assert steps == expected
    assert not [step for step in steps if step.get("state") in ("restarted", "reloaded", "stopped")]


def run(args, results, check_mode=False):
    return action_task.run_action_answering(ActionModule, "systemd_reload", args, {}, results, check_mode=check_mode)


def test_reads_then_reloads_and_starts():
    started = {"changed": True, "name": "nginx.service"}
    result, calls = run({"units": ["nginx.service"], "start": True}, [STALE, started])
    assert calls == [("factory_floor.llm.systemd_unit_info", {"units": ["nginx.service"]}),
                     ("ansible.legacy.systemd_service", {"name": "nginx.service", "state": "started", "enabled": True,
                                                         "daemon_reload": True})]
    assert result["changed"] is True and result["reloaded"] is True and result["steps"] == [started]


def test_nothing_to_do_changes_nothing():
    result, calls = run({"units": ["a.slice"]}, [FRESH])
    assert len(calls) == 1 and result["changed"] is False and result["reloaded"] is False and result["steps"] == []


def test_the_read_is_real_in_check_mode():
    action_mode = []
    action = action_task.action_plugin(ActionModule, "systemd_reload", {"units": ["a.slice"]}, {}, check_mode=True)

    def execute(module_name, module_args, task_vars):
        action_mode.append((module_name, action._task.check_mode))
        return dict(STALE) if module_name.endswith("systemd_unit_info") else {"changed": True}

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        result = action.run(task_vars={})
    assert action_mode == [("factory_floor.llm.systemd_unit_info", False), ("ansible.legacy.systemd_service", True)]
    assert result["changed"] is True and action._task.check_mode is True


@pytest.mark.parametrize("results, message", [
    ([{"failed": True, "msg": "systemctl show failed"}], "systemctl show failed"),
    ([STALE, {"failed": True, "msg": "Unable to start service nginx.service: Job failed"}],
     "Unable to start service nginx.service: Job failed"),
])
def test_a_step_that_fails_fails_the_task_with_its_message(results, message):
    result, calls = run({"units": ["nginx.service"], "start": True}, results)
    assert result["failed"] is True and result["msg"] == message and len(calls) == len(results)


def test_documents_the_spec():
    action_task.assert_documents_the_spec("systemd_reload", ARGUMENT_SPEC)
