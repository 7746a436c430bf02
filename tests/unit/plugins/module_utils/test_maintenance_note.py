# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_note action notes (``_maintenance_window.host_note``), one row per kind of note: the same
notes, word for word, as the former set_fact tasks built with the maintenance_note, rollback_reason,
switch_gate_failure and model_upgrade_note filters (so the switch's and the upgrade's reports read the same); and the
action itself, run with recorded host variables."""

from __future__ import annotations

import time
from unittest import mock

import pytest

from ansible_collections.factory_floor.llm.plugins.action import maintenance_note as action_plugin
from ansible_collections.factory_floor.llm.plugins.filter.maintenance_note import maintenance_note as note_filter
from ansible_collections.factory_floor.llm.plugins.filter.model_upgrade_note import model_upgrade_note
from ansible_collections.factory_floor.llm.plugins.filter.rollback_reason import rollback_reason
from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure

HOST = "spark-b"
SO_FAR = {"events": {"drained": 10.0, "serving": 40.0}, "reason": "spark-a: tool gate failed", "health": "serving"}
LONG = "word " * 300
GATE_FAILED = {"passed": False, "message": "scored 0.50, below tool_gate_min_score 0.80"}


def _jinja_truncate(text, length):
    return mw.truncate(text, length)


@pytest.mark.parametrize("failed, message", [({"msg": "unit failed"}, "stop/start failed"), ({}, "start failed"),
                                             ({"msg": LONG}, "x")])
def test_a_failed_step_notes_the_tasks_message_as_the_former_rescue_did(failed, message):
    former = note_filter(SO_FAR, {"failed": True, "health": None,
                                  "reason": "%s: %s" % (HOST, _jinja_truncate(failed.get("msg", message), 600))})
    assert mw.host_note(SO_FAR, HOST, note={"health": None}, failure="step", failed=failed, message=message) == former


@pytest.mark.parametrize("failed, gate", [({"msg": "assertion failed"}, GATE_FAILED),
                                          ({"msg": "async task did not complete", "timedout": {}}, {}),
                                          ({"msg": LONG}, {"passed": True})])
def test_a_gate_failure_notes_the_verdict_and_why_as_the_former_rescue_did(failed, gate):
    with mock.patch.object(time, "time", return_value=50.0):
        former = note_filter(SO_FAR, {"failed": True, "gate": gate, "reason": "%s: %s" % (HOST, gate_failure(failed, gate))},
                             ["gate_done"])
        got = mw.host_note(SO_FAR, HOST, note={"gate": gate}, events=["gate_done"], failure="switch_gate", failed=failed)
    assert got == former and got["events"]["gate_done"] == 50.0


@pytest.mark.parametrize("so_far", [SO_FAR, {}])
def test_a_failed_switch_rollback_adds_to_the_reason_as_the_former_rescue_did(so_far):
    failed = {"msg": LONG}
    former = note_filter(so_far, {"rollback_failed": True,
                                  "reason": rollback_reason(so_far.get("reason", ""), HOST, failed["msg"])})
    assert mw.host_note(so_far, HOST, failure="switch_rollback", failed=failed) == former


@pytest.mark.parametrize("gate", [GATE_FAILED, {}])
def test_a_failed_upgrade_notes_its_time_and_reason_as_the_former_rescue_did(gate):
    failed = {"msg": "the engine did not serve in 900 s"}
    with mock.patch.object(time, "time", return_value=60.0):
        former = note_filter(SO_FAR, model_upgrade_note("failed", HOST, failed, gate), ["failed"])
        got = mw.host_note(SO_FAR, HOST, note={"gate": gate}, failure="upgrade", failed=failed)
    assert got == former and got["events"]["failed"] == 60.0


def test_an_upgrade_rollback_that_could_not_start_as_the_former_rescue_did():
    failed = {"msg": "lock taken by another run"}
    former = note_filter(SO_FAR, model_upgrade_note("rollback_failed", HOST, failed, noted=SO_FAR))
    assert mw.host_note(SO_FAR, HOST, failure="upgrade_rollback", failed=failed) == former


@pytest.mark.parametrize("restored", [{"ok": True, "at": 70.0, "msg": ""}, {"ok": False, "at": 0, "msg": LONG}])
def test_a_restore_notes_when_it_served_or_why_not_as_the_former_task_did(restored):
    for so_far in (SO_FAR, {}):
        former = note_filter(so_far, model_upgrade_note("restore", HOST, noted=so_far, restored=restored))
        assert mw.host_note(so_far, HOST, restored=restored) == former


def test_events_are_noted_at_the_time_given_else_now_and_a_note_merges_recursively():
    assert mw.host_note(SO_FAR, HOST, note={"upgraded": True}, events=["in_rotation"], at=80.0) == dict(
        SO_FAR, upgraded=True, events={"drained": 10.0, "serving": 40.0, "in_rotation": 80.0})
    with mock.patch.object(time, "time", return_value=90.0):
        assert mw.host_note(None, HOST, events=["drained"]) == {"events": {"drained": 90.0}}
    assert mw.host_note({}, HOST) == {}


def test_an_unknown_failure_is_refused_with_the_kinds_to_use():
    with pytest.raises(ValueError, match="failure must be one of step, switch_gate, switch_rollback, upgrade, "
                                         "upgrade_rollback, got 'gate'"):
        mw.failure_note("gate", HOST, {}, {})


def _action(args, task_vars):
    task = mock.MagicMock(args=args, check_mode=True, async_val=0)
    task.get_validated_value.side_effect = lambda *a, **k: None
    plugin = action_plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                        shared_loader_obj=None)
    with mock.patch("ansible.plugins.action.ActionBase.run", return_value={}):
        return plugin.run(task_vars=task_vars)


def test_the_action_reads_the_notes_host_and_failed_result_from_the_hosts_variables():
    task_vars = {"maintenance_window_host": SO_FAR, "inventory_hostname": HOST,
                 "ansible_failed_result": {"msg": "unit failed"}}
    result = _action({"failure": "step", "message": "stop/start failed"}, task_vars)
    assert result["changed"] is False
    assert result["ansible_facts"]["maintenance_window_host"] == dict(SO_FAR, failed=True, reason="spark-b: unit failed")


def test_the_action_notes_from_nothing_when_the_host_noted_nothing_yet():
    result = _action({"events": ["drained"], "at": 5}, {"inventory_hostname": HOST})
    assert result["ansible_facts"] == {"maintenance_window_host": {"events": {"drained": 5.0}}}
