# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.engine_service``: the engine's start, its restart on another configuration, the reload of a
unit systemd has not read, the check after a (re)start and the note of an engine left on its old configuration - the
steps (``_engine_service``) and the action plugin running them on the host."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.engine_service import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_service as es
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec

UNIT = "vllm-replica.service"
PENDING = {"restart_pending": True, "change": "--max-num-seqs 12 -> 10"}
CURRENT = {"restart_pending": False, "change": ""}


@pytest.mark.parametrize("state, pending, restart, reload, expected", [
    ("started", True, True, False, [("restart", False), ("start", False)]),
    ("started", True, True, True, [("restart", True), ("start", False)]),    # reloaded once, by the restart
    ("started", True, False, True, [("start", True)]),                        # left on its old configuration
    ("started", False, True, True, [("start", True)]),
    ("started", False, True, False, [("start", False)]),
    ("present", True, True, True, [("reload", True)]),                        # staged: systemd reads it, no start
    ("present", True, True, False, []),
])
def test_the_steps(state, pending, restart, reload, expected):
    steps = es.steps(state, UNIT, pending, restart, reload)
    assert [(step, args["daemon_reload"]) for step, args in steps] == expected
    for step, args in steps:
        if step != "reload":
            assert args["name"] == UNIT and args["enabled"] is True
            assert args["state"] == {"restart": "restarted", "start": "started"}[step]


def test_the_plan_after_a_restart_has_nothing_pending():
    assert es.plan_after(PENDING, {"restart": {"changed": True}}) == dict(PENDING, restart_pending=False)
    assert es.plan_after(PENDING, {"start": {"changed": False}}) == PENDING


def test_the_note_of_an_engine_left_on_its_old_configuration():
    assert es.note("started", PENDING, False, UNIT, "spark-a") == (
        "vllm-replica.service on spark-a runs another configuration than the one just rendered "
        "(--max-num-seqs 12 -> 10); not restarted now (vllm_service_restart is false).")
    assert es.note("started", PENDING, True, UNIT, "spark-a") == ""
    assert es.note("started", CURRENT, False, UNIT, "spark-a") == ""
    assert es.note("present", PENDING, False, UNIT, "spark-a") == ""


def run(args, results, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0,
                          action="factory_floor.llm.engine_service")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars={"inventory_hostname": "spark-a"}), calls


ARGS = {"unit": UNIT, "plan": PENDING, "reload": True, "argv": ["vllm", "serve"], "fingerprint": "f"}


def test_a_restart_is_checked_against_the_configuration_rendered():
    result, calls = run(ARGS, [{"changed": True}, {"changed": False}, {"running": True}])
    assert [call[0] for call in calls] == ["ansible.legacy.systemd_service"] * 2 + ["factory_floor.llm.vllm_engine_info"]
    assert calls[2][1] == {"unit": UNIT, "argv": ["vllm", "serve"], "fingerprint": "f", "require_match": True}
    assert result["changed"] is True and result["plan"]["restart_pending"] is False and result["note"] == ""


def test_an_engine_on_its_configuration_is_only_started_and_not_checked():
    result, calls = run(dict(ARGS, plan=CURRENT, reload=False), [{"changed": False}])
    assert len(calls) == 1 and result["changed"] is False and result["checked"] is None


def test_check_mode_predicts_the_restart_and_checks_nothing():
    result, calls = run(ARGS, [{"changed": True}, {"changed": False}], check_mode=True)
    assert len(calls) == 2 and result["plan"]["restart_pending"] is False


def test_an_engine_left_on_its_old_configuration_is_named():
    result, calls = run(dict(ARGS, restart=False), [{"changed": False}])
    assert len(calls) == 1 and result["plan"]["restart_pending"] is True
    assert result["note"].startswith("vllm-replica.service on spark-a runs another configuration")


@pytest.mark.parametrize("results", [
    [{"failed": True, "msg": "Unable to restart service vllm-replica.service"}],
    [{"changed": True}, {"changed": False}, {"failed": True, "msg": "vllm-replica.service runs another command line"}],
])
def test_a_failed_step_fails_with_its_message(results):
    result, calls = run(ARGS, results)
    assert result["failed"] is True and result["msg"] == results[-1]["msg"] and len(calls) == len(results)


def test_the_module_documents_the_plugins_options():
    assert_documents_the_spec("engine_service", ARGUMENT_SPEC)
