# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.tool_gate_note`` through its action plugin: the role's variables read as a task sees them
(Ansible's own templar), each note's value and sentence, the verdict as ``_tool_gate_verdict`` gives it. The
sentences themselves are tests/unit/plugins/module_utils/test_tool_gate_notes.py's."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.tool_gate_note import ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_notes as tn

BUILD = {"id": "0123456789abcdef0123456789", "parts": {}}
RUN = {"score": 20.0, "passed_count": 4, "total": 18, "suite_digest": "d" * 64, "failed_cases": [], "repeat": 1,
       "run_scores": [20.0], "flipped_cases": [], "results": [], "elapsed": 3}


def variables(**changes):
    found = dict(inventory_hostname="spark-a", tool_gate_topology="replicas", tool_gate_topologies=["replicas"],
                 # As the role's vars/main.yml has them: templates, read when the plugin reads them.
                 _tool_gate_topology_gated=trust_as_template(
                     "{{ tool_gate_topology | length == 0 or tool_gate_topology in tool_gate_topologies }}"),
                 _tool_gate_id_chars=16, tool_gate_build=BUILD, tool_gate_model_path="/models/m",
                 tool_gate_url="http://127.0.0.1:8000", tool_gate_min_score=30, tool_gate_tolerance=5,
                 tool_gate_incumbent_build_id="", tool_gate_concurrency=1, tool_gate_store_dir="/store",
                 _tool_gate_record_file=trust_as_template("{{ tool_gate_store_dir }}/x.json"),
                 _tool_gate_failed_dir=trust_as_template("{{ tool_gate_store_dir }}/failed"), __tool_gate_run=RUN)
    found.update(changes)
    return found


def run(note, task_vars, check_mode=False):
    task = mock.MagicMock(args={"note": note}, check_mode=check_mode, async_val=0, action="factory_floor.llm.tool_gate_note")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    templar = Templar(loader=DataLoader(), variables=task_vars)
    return ActionModule(task, connection, mock.MagicMock(), DataLoader(), templar, None).run(task_vars=task_vars)


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_verdict_below_the_minimum_fails_and_is_kept_apart(check_mode):
    result = run("verdict", variables(), check_mode=check_mode)
    assert result["changed"] is False and result["value"]["passed"] is False
    assert result["value"]["record_file"].startswith("/store/failed/x.")
    assert result["message"] == result["value"]["message"]
    assert result["message"].startswith("Tool-calling gate on spark-a (http://127.0.0.1:8000): candidate build "
                                        "0123456789abcdef (/models/m) scored 20.0 (4/18 cases)")


def test_the_incumbent_reads_the_stored_score_when_there_is_one():
    assert run("incumbent", variables())["value"] == tn.incumbent(BUILD["id"], "/models/m", "replicas", None)
    stored = run("incumbent", variables(__tool_gate_found={"score": 40.0}))["value"]
    assert stored["score"] == 40.0 and stored["measured_now"] is False


def test_the_measured_score_and_why_none_is_measured():
    assert run("measured", variables())["value"] == {"score": 20.0, "measured_now": True}
    message = run("not_measured", variables(tool_gate_topology="split"))["message"]
    assert "not measured: its topology is not in tool_gate_topologies (replicas)." in message


def test_a_candidate_the_gate_leaves_out_and_the_spread():
    assert run("not_gated", variables(tool_gate_topology="split"))["value"]["gated"] is False
    assert run("spread", variables())["value"]["run_scores"] == [20.0]


def test_a_variable_the_note_needs_is_named_when_missing():
    task_vars = variables()
    del task_vars["__tool_gate_run"]
    with pytest.raises(AnsibleActionFail, match="tool_gate_note reads __tool_gate_run"):
        run("measured", task_vars)
