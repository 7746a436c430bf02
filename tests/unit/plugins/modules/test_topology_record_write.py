# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.topology_record_write``: the record written only when it changes (a ``deploy.yml`` re-run
changes nothing), always when told, with the fields in the file's order - the rule and the content
(``_topology_record_write``) and the action plugin reading the role's variables and writing on the host."""

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible_collections.factory_floor.llm.plugins.action.topology_record_write import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record_write as trw
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import action_plugin, assert_documents_the_spec

AGREES = {"state": "agrees", "model_state": "agrees"}


@pytest.mark.parametrize("record, always, model, written", [
    (AGREES, False, "", False),                                       # a deploy.yml re-run
    (AGREES, False, "/models/a", False),
    ({"state": "absent", "model_state": "absent"}, False, "", True),   # a first deploy
    ({"state": "differs", "model_state": "absent"}, False, "", True),
    ({"state": "agrees", "model_state": "differs"}, False, "/models/b", True),   # switch-model.yml's new model
    ({"state": "agrees", "model_state": "absent"}, False, "", False),   # no model given: the model is not compared
    (AGREES, True, "", True),                                         # a switch records where it ends, always
    (AGREES, "false", "", False),
    (AGREES, "yes", "", True),
])
def test_the_record_is_written_only_when_it_changes(record, always, model, written):
    assert trw.writes(record, always, model) is written


def test_the_content_keeps_the_files_order_and_since_is_seconds():
    found = trw.content({"topology": "split", "since": "1765084800.25", "playbook": "switch-to-split.yml",
                         "by": "op@ctl", "run": "r1"})
    assert list(found) == ["topology", "since", "by", "playbook", "run", "note", "model"]
    assert found["since"] == 1765084800.25 and found["note"] == "" and found["model"] == ""
    assert trw.content({"topology": "split", "since": "soon", "playbook": "p"})["since"] == 0.0


VARIABLES = {"vllm_topology_record_topology": "replicas", "vllm_topology_record_playbook": "deploy.yml",
             "vllm_topology_record_since": 1765084800.25, "vllm_topology_record_by": "me@ctl",
             "vllm_topology_record_run": "r1", "vllm_topology_record_model": "/models/a"}
PATH = "/var/lib/factory-floor/topology.json"


def run(record, variables=None, check_mode=False):
    variables = dict(VARIABLES, **(variables or {}))
    action = action_plugin(ActionModule, "topology_record_write", {"path": PATH, "record": record}, variables,
                           check_mode=check_mode)
    calls = []
    with mock.patch.object(action, "_execute_module", side_effect=lambda **kw: calls.append(kw) or {"changed": True}), \
            mock.patch.object(action, "copy", side_effect=lambda args, task_vars: calls.append(args) or
                              {"changed": True, "dest": PATH}):
        return action.run(task_vars=variables), calls


def test_a_changed_record_is_written_with_the_roles_variables():
    result, calls = run({"state": "absent"})
    assert calls[0]["module_name"] == "ansible.legacy.file"
    assert calls[0]["module_args"] == {"path": "/var/lib/factory-floor", "state": "directory", "owner": "root",
                                       "group": "root", "mode": "0755"}
    assert calls[1]["dest"] == PATH and (calls[1]["owner"], calls[1]["group"], calls[1]["mode"]) == ("root", "root",
                                                                                                     "0644")
    # The bytes the role's copy of "{{ record | to_json }}" wrote before, so an existing record is not rewritten.
    assert calls[1]["content"] == ('{"topology": "replicas", "since": 1765084800.25, "by": "me@ctl", "playbook": '
                                   '"deploy.yml", "run": "r1", "note": "", "model": "/models/a"}')
    assert json.loads(calls[1]["content"])["topology"] == "replicas"
    assert result["written"] is True and result["changed"] is True


def test_who_and_which_run_default_to_the_maintenance_windows():
    window = {"maintenance_window_run": {"by": "ops@ctl", "id": "20261207T060000Z-1a2b3c", "start": 1.0}}
    unset = ("vllm_topology_record_by", "vllm_topology_record_run")
    variables = {key: value for key, value in VARIABLES.items() if key not in unset}
    action = action_plugin(ActionModule, "topology_record_write", {"path": PATH, "record": {}}, dict(variables, **window))
    assert (action.values()["by"], action.values()["run"]) == ("ops@ctl", "20261207T060000Z-1a2b3c")
    # Set ones win; without a window, empty.
    action = action_plugin(ActionModule, "topology_record_write", {"path": PATH, "record": {}}, dict(VARIABLES, **window))
    assert (action.values()["by"], action.values()["run"]) == ("me@ctl", "r1")
    action = action_plugin(ActionModule, "topology_record_write", {"path": PATH, "record": {}}, variables)
    assert (action.values()["by"], action.values()["run"]) == ("", "")


def test_a_record_that_agrees_is_left_as_it_is():
    result, calls = run(AGREES)
    assert calls == [] and result["written"] is False and result["changed"] is False


def test_always_writes_it_again():
    result, calls = run(AGREES, {"vllm_topology_record_always": True})
    assert len(calls) == 2 and result["written"] is True


def test_check_mode_runs_the_same_steps_which_predict_the_write():
    result, calls = run({"state": "differs"}, check_mode=True)
    assert len(calls) == 2 and result["written"] is True


def test_the_module_documents_the_plugins_options():
    assert_documents_the_spec("topology_record_write", ARGUMENT_SPEC)


def test_a_group_moves_record_holds_the_grouping_the_group_and_the_rank():
    found = trw.content({"topology": "split", "since": 1.0, "playbook": "move-groups.yml",
                         "grouping": [["spark-a", "spark-b"], ["spark-c"]], "group": ["spark-a", "spark-b"], "rank": "1"})
    assert list(found)[-3:] == ["grouping", "group", "rank"]
    assert found["group"] == ["spark-a", "spark-b"] and found["rank"] == 1
    # Without a grouping (deploy, the two-topology switch) the record is as it always was.
    assert "grouping" not in trw.content({"topology": "split", "since": 1.0, "playbook": "p", "grouping": None})
