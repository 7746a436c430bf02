# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_topology_check's action plugin: topology_record's read on the host, then the verdict with
the overrides as the task sees them."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.deploy_topology_check import ActionModule

ARGS = {"path": "/var/lib/factory-floor/topology.json", "topology": "replicas", "model": "/models/b",
        "units": ["vllm-replica.service", "vllm-split.service"]}
DIFFERS = {"changed": False, "state": "differs", "runs": "split", "recorded": "split", "message": "refused: split runs",
           "model_state": "agrees", "model_message": ""}


def run(seen, check_mode=False, **variables):
    variables.setdefault("inventory_hostname", "spark-a")
    task = mock.MagicMock(args=dict(ARGS), check_mode=check_mode, async_val=0, action="factory_floor.llm.deploy_topology_check")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader(), variables=variables),
                          None)
    with mock.patch.object(ActionModule, "_execute_module", return_value=dict(seen)) as execute:
        result = action.run(task_vars=variables)
    execute.assert_called_once()
    assert execute.call_args.kwargs["module_name"] == "factory_floor.llm.topology_record"
    # What the task leaves out is read from its variables (here none: the module's defaults' values).
    assert execute.call_args.kwargs["module_args"] == dict(ARGS, inventory_sources=[], playbook_dir="")
    return result


def test_what_the_task_leaves_out_is_read_from_its_variables():
    variables = {"inventory_hostname": "spark-a", "topology": "replicas", "playbook_dir": "/srv/ff/playbooks",
                 "_vllm_topology_record_file": "/srv/ff/state/topology.json",
                 "ansible_inventory_sources": ["/srv/ff/inventory/site"]}
    task = mock.MagicMock(args={"units": ARGS["units"], "model": "/models/b"}, check_mode=False, async_val=0,
                          action="factory_floor.llm.deploy_topology_check")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader(), variables=variables),
                          None)
    with mock.patch.object(ActionModule, "_execute_module", return_value=dict(DIFFERS, state="agrees", message="")) as execute:
        action.run(task_vars=variables)
    assert execute.call_args.kwargs["module_args"] == {
        "units": ARGS["units"], "model": "/models/b", "topology": "replicas", "path": "/srv/ff/state/topology.json",
        "inventory_sources": ["/srv/ff/inventory/site"], "playbook_dir": "/srv/ff/playbooks"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_host_on_the_other_topology_is_refused_with_the_modules_message(check_mode):
    # The read runs on the host in check mode too (the module only reads): a dry run is refused the same way.
    result = run(DIFFERS, check_mode=check_mode)
    assert (result["failed"], result["msg"], result["notes"]) == (True, "refused: split runs", [])


@pytest.mark.parametrize("told", [True, "true", "yes"])
def test_told_to_it_goes_on_saying_so(told):
    result = run(DIFFERS, vllm_deploy_topology_change=told)
    assert not result.get("failed")
    assert result["notes"] == ["vllm_deploy_topology_change=true: spark-a is on split; this run brings it to replicas "
                               "with no drain and no tool-calling gate (an outage of one start-up)."]


def test_a_refusal_after_a_note_warns_it():
    result = run(dict(DIFFERS, model_state="differs", model_message="refused: model", record={"model": "/models/a"}),
                 vllm_deploy_topology_change=True)
    assert (result["failed"], result["msg"]) == (True, "refused: model")
    assert result["warnings"] == result["notes"] and len(result["notes"]) == 1


def test_a_failed_read_is_the_result():
    result = run({"failed": True, "msg": "systemctl: no such file"})
    assert result["msg"] == "systemctl: no such file" and "notes" not in result
