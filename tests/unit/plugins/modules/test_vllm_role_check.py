# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.vllm_role_check`` through its action plugin: the variables it reads as a task sees them
(Ansible's own templar, the roles' templated defaults), an undefined one named, its documentation against its argument
spec. The refusals themselves are tests/unit/plugins/module_utils/test_vllm_role_check.py's."""

from __future__ import annotations

import base64

import os
from unittest import mock

import pytest
import yaml

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.vllm_role_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_role_check as rc
from ansible_collections.factory_floor.llm.plugins.modules import vllm_role_check as module
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import run_action

SPLIT = {"inventory_hostname": "spark-1", "groups": {"gb10": ["spark-1", "spark-2"]}, "site_engine_group": "gb10",
         # As the role's defaults and vars have them: templates, read when the check reads them.
         "vllm_split_group": trust_as_template("{{ site_engine_group }}"),
         "_vllm_split_hosts": trust_as_template("{{ groups[vllm_split_group] }}"),
         "vllm_split_head": trust_as_template("{{ groups[vllm_split_group] | first }}"),
         "vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 1,
         "vllm_link_interface": "enp1s0f0np0", "vllm_link_address": "10.10.10.1",
         "vllm_model": "/models/q", "vllm_split_model": trust_as_template("{{ vllm_model }}")}


def run(args, variables, check_mode=False):
    return run_action(ActionModule, "vllm_role_check", args, variables, check_mode=check_mode)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_split_check_reads_the_roles_templated_settings(check_mode):
    assert run({"check": "split", "model_config": {"skipped": True}}, SPLIT, check_mode) == {
        "changed": False, "errors": []}
    variables = dict(SPLIT, groups={"gb10": ["spark-1"]})
    result = run({"check": "split", "model_config": {"skipped": True}}, variables, check_mode)
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("The split runs one model over two or more machines, one rank each, but group "
                                    "'gb10' (vllm_split_group) has 1: spark-1.")
    variables = dict(SPLIT, groups={"gb10": ["spark-1", "spark-2", "spark-3"]}, vllm_split_tensor_parallel_size=3)
    assert run({"check": "split", "model_config": {"skipped": True}}, variables, check_mode) == {
        "changed": False, "errors": []}


@pytest.mark.parametrize("model, read, heads_refused", [
    ("/models/q", {"content": base64.b64encode(b'{"num_attention_heads": 7}').decode()}, True),
    ("/models/q", {"failed": True, "msg": "file not found"}, False),   # not read: not checked
    ("Qwen/Qwen3-8B", None, False),                                    # a hub name: nothing to read
])
def test_the_split_check_reads_the_models_config_itself(model, read, heads_refused):
    task = mock.MagicMock(args={"check": "split"}, check_mode=True, async_val=0, action="factory_floor.llm.vllm_role_check")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    variables = dict(SPLIT, vllm_model=model)
    templar = Templar(loader=DataLoader(), variables=variables)
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), templar, None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args), task.check_mode))
        return dict(read)

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        result = action.run(task_vars=variables)
    assert calls == ([("ansible.legacy.slurp", {"src": model + "/config.json"}, False)] if read is not None else [])
    assert task.check_mode is True
    assert [error["check"] for error in result["errors"]] == (["split_heads"] if heads_refused else [])


def test_an_undefined_variable_is_named():
    variables = {key: value for key, value in SPLIT.items() if key != "vllm_link_interface"}
    with pytest.raises(AnsibleActionFail, match="vllm_role_check split reads vllm_link_interface"):
        run({"check": "split", "model_config": {}}, variables)


def test_the_watchdog_split_settings_are_optional_for_replicas():
    variables = {name: 1 for name in rc.VARIABLES["watchdog"] if name not in rc.OPTIONAL}
    variables.update(inventory_hostname="spark-1", vllm_watchdog_topology="replicas", vllm_served_model_name="m")
    assert run({"check": "watchdog"}, variables)["errors"] == []


def test_the_documentation_matches_the_argument_spec():
    options = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(options) == set(ARGUMENT_SPEC)
    assert options["check"]["choices"] == list(rc.CHECKS) == ARGUMENT_SPEC["check"]["choices"]
    for name, spec in ARGUMENT_SPEC.items():
        assert options[name]["type"] == spec["type"]


def test_the_roles_call_it_with_checks_it_knows():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    seen = set()
    for role in ("vllm", "vllm_split", "vllm_watchdog"):
        folder = os.path.join(root, "roles", role, "tasks")
        for name in os.listdir(folder):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                for task in yaml.safe_load(handle) or []:
                    args = task.get("factory_floor.llm.vllm_role_check")
                    if args:
                        assert set(args) <= set(ARGUMENT_SPEC) and args["check"] in rc.CHECKS
                        seen.add(args["check"])
    assert seen == set(rc.CHECKS)
