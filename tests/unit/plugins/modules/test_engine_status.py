# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_status's action plugin: the status reads on an engine host, each kept failed or not."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.engine_status import ActionModule

UNITS = ["vllm-replica.service", "vllm-split.service"]
ARGS = {"units": UNITS, "topology": "replicas", "record_path": "/var/lib/factory-floor/topology.json",
        "endpoint": {"url": "http://127.0.0.1:8000", "api_key": "", "model": "m"}, "runtime": "container",
        "container_engine": "/usr/bin/podman", "containers": ["vllm-replica", "vllm-split"]}


def run(args, answers, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.engine_status")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader(), variables={}),
                          None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args, action._task.check_mode))
        return dict(answers.get(module_name, {}))

    with mock.patch.object(ActionModule, "_execute_module", side_effect=execute):
        return action.run(task_vars={}), calls


@pytest.mark.parametrize("check_mode", [False, True])
def test_every_read_in_order_systemctl_also_in_check_mode(check_mode):
    answers = {"ansible.legacy.command": {"stdout": "Id=vllm-replica.service\nActiveState=active"},
               "factory_floor.llm.topology_record": {"state": "agrees", "recorded": "replicas"},
               "factory_floor.llm.vllm_health": {"status": "serving", "models": ["m"]},
               "factory_floor.llm.vllm_engine_info": {"running": True, "args_now": ["/models/m"]},
               "factory_floor.llm.container_image_info": {"containers": {"vllm-replica": {"running": True}}}}
    result, calls = run(ARGS, answers, check_mode)
    assert [(name, mode) for name, _args, mode in calls] == [
        ("ansible.legacy.command", False), ("factory_floor.llm.topology_record", check_mode),
        ("factory_floor.llm.vllm_health", check_mode), ("factory_floor.llm.vllm_engine_info", check_mode),
        ("factory_floor.llm.vllm_engine_info", check_mode), ("factory_floor.llm.container_image_info", check_mode)]
    assert calls[0][1] == {"argv": ["systemctl", "show", "-p", "Id,LoadState,ActiveState,SubState,Result,UnitFileState,"
                                    "NRestarts", "--"] + UNITS}
    # Any model, no key when there is none, one probe.
    assert calls[2][1] == {"url": "http://127.0.0.1:8000", "probe": "models", "timeout": 0}
    assert result["changed"] is False
    assert result["units"] == "Id=vllm-replica.service\nActiveState=active"
    assert result["record"]["recorded"] == "replicas" and result["health"]["status"] == "serving"
    assert [(e["item"], e["running"]) for e in result["engine"]] == [(UNITS[0], True), (UNITS[1], True)]
    assert result["containers"] == {"vllm-replica": {"running": True}}


def test_a_read_that_fails_is_kept_as_registered_with_failed_when_false():
    answers = {"factory_floor.llm.vllm_health": {"failed": True, "msg": "connection refused", "reason": "config_error",
                                                 "exception": "Traceback", "invocation": {"module_args": {}}},
               "factory_floor.llm.topology_record": {"failed": True, "msg": "systemctl: not found"}}
    result, calls = run(dict(ARGS, runtime="venv", endpoint={"url": "http://h:8000", "api_key": "k"}), answers)
    assert calls[2][1] == {"url": "http://h:8000", "api_key": "k", "probe": "models", "timeout": 0}
    assert "factory_floor.llm.container_image_info" not in [name for name, _args, _mode in calls]
    assert result["health"] == {"changed": False, "failed": False, "failed_when_result": False, "msg": "connection refused",
                                "reason": "config_error", "failed_when_suppressed_exception": "Traceback"}
    assert result["record"]["msg"] == "systemctl: not found" and result["record"]["failed"] is False
    assert (result["units"], result["containers"], result["runtime"]) == ("", {}, "venv")
