# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_note action notes (``_maintenance_window.host_note``), one row per kind of note: the same
notes, word for word, as the former set_fact tasks built them - their Jinja (kept here as it stood in the roles,
rendered through Ansible's templar) and the filters they called (maintenance_note, rollback_reason,
switch_gate_failure, model_upgrade_note: thin entry points over ``noted``, ``truncate``, ``gate_failure`` and
``_model_upgrade``'s notes, as the filters' last version called them) - so the switch's and the upgrade's reports read
the same. The action itself: tests/unit/plugins/modules/test_maintenance_note.py."""

from __future__ import annotations

import time
from unittest import mock

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure
from ansible_collections.factory_floor.llm.tests.unit.roles.test_procedure_filters import render

HOST = "spark-b"
SO_FAR = {"events": {"drained": 10.0, "serving": 40.0}, "reason": "spark-a: tool gate failed", "health": "serving"}
LONG = "word " * 300
GATE_FAILED = {"passed": False, "message": "scored 0.50, below tool_gate_min_score 0.80"}


# The former filters, as they called module_utils (plugins/filter/*.py before the maintenance_note action).
def note_filter(host, note=None, events=None, at=None):
    return mw.noted(host, note, events or (), at)


def model_upgrade_note(event, host, failed=None, gate=None, noted=None, restored=None):
    if event == "failed":
        return mu.failed_note(str(host), failed, gate, round(time.time(), 3))
    if event == "rollback_failed":
        return mu.rollback_failed_note(str(host), failed, noted)
    return mu.restore_note(str(host), restored or {}, noted)


def rollback_reason(reason, host, message):
    return "%s; rollback failed on %s: %s" % (reason, host, mw.truncate(message, 400))


# The former rescue's reason in switch_cut_over.yml and switch_serving.yml (their default message differs).
FORMER_STEP_REASON = "{{ inventory_hostname }}: {{ ansible_failed_result.msg | default(message) | truncate(600) }}"


@pytest.mark.parametrize("failed, message", [({"msg": "unit failed"}, "stop/start failed"), ({}, "start failed"),
                                             ({"msg": LONG}, "x")])
def test_a_failed_step_notes_the_tasks_message_as_the_former_rescue_did(failed, message):
    reason = render(FORMER_STEP_REASON, inventory_hostname=HOST, ansible_failed_result=failed, message=message)
    former = note_filter(SO_FAR, {"failed": True, "health": None, "reason": reason})
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


@pytest.mark.parametrize("delta, seconds", [
    ("0:00:17.712345", 17.712345), ("1:02:03.5", 3723.5), (4, 4.0), (2.5, 2.5), ("7.25", 7.25),
    ("", None), ("soon", None), (True, None), ("-0:00:01", None), ("1:2:3:4", None),
])
def test_a_steps_duration_is_read_from_a_command_delta_or_seconds(delta, seconds):
    assert mw.seconds_of(delta) == (pytest.approx(seconds) if seconds is not None else None)


def test_an_event_after_another_is_noted_at_that_one_plus_the_steps_own_time():
    so_far = {"events": {"drained": 1000.0}}
    noted = mw.host_note(so_far, HOST, events=["old_stopped"], after={"event": "drained", "delta": "0:00:06.5"})
    assert noted["events"] == {"drained": 1000.0, "old_stopped": 1006.5}
    # Without the event before it (or a duration), the time given, else now.
    assert mw.host_note({}, HOST, events=["old_stopped"], at=5.0,
                        after={"event": "drained", "delta": "0:00:06.5"})["events"]["old_stopped"] == 5.0
    assert mw.host_note(so_far, HOST, events=["old_stopped"], at=5.0,
                        after={"event": "drained", "delta": "later"})["events"]["old_stopped"] == 5.0
