# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The maintenance_note action, run with recorded host variables: it reads the notes so far, the host's name and the
failed task's result itself and returns the notes as the fact maintenance_window_host, the same in check mode (a dry
run predicts the report from them). What it notes, kind by kind: tests/unit/plugins/module_utils/test_maintenance_note.py;
the precedence of its facts in a real run: tests/unit/roles/test_maintenance_note_action.py."""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.action import maintenance_note as action_plugin

SO_FAR = {"events": {"drained": 10.0, "serving": 40.0}, "reason": "spark-a: tool gate failed", "health": "serving"}


def run(args, task_vars, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.maintenance_note")
    plugin = action_plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                        shared_loader_obj=None)
    with mock.patch("ansible.plugins.action.ActionBase.run", return_value={}):
        return plugin.run(task_vars=task_vars)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_action_reads_the_notes_host_and_failed_result_from_the_hosts_variables(check_mode):
    task_vars = {"maintenance_window_host": SO_FAR, "inventory_hostname": "spark-b",
                 "ansible_failed_result": {"msg": "unit failed"}}
    result = run({"failure": "step", "message": "stop/start failed"}, task_vars, check_mode=check_mode)
    assert result["changed"] is False and not result.get("failed")
    assert result["ansible_facts"]["maintenance_window_host"] == dict(SO_FAR, failed=True, reason="spark-b: unit failed")


def test_the_action_notes_from_nothing_when_the_host_noted_nothing_yet():
    result = run({"events": ["drained"], "at": 5}, {"inventory_hostname": "spark-b"})
    assert result["ansible_facts"] == {"maintenance_window_host": {"events": {"drained": 5.0}}}


def test_an_unknown_failure_is_refused_with_the_kinds_to_use():
    with pytest.raises(AnsibleActionFail, match="failure must be one of: step, switch_gate, switch_rollback, upgrade, "
                                                "upgrade_rollback, got: gate"):
        run({"failure": "gate"}, {"inventory_hostname": "spark-b"})
