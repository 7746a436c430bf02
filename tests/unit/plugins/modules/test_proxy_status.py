# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.proxy_status`` through its action plugin: the nginx_proxy role's variables read as the task sees
them (Ansible's own templar over the role's defaults and vars), the checker's state and the units read on the host for
real also in check mode, and ``nginx_proxy_status`` as ``site_status`` reads it; what is noted per outcome
(``_proxy_status``)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.proxy_status import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_status as ps
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import action_plugin, assert_documents_the_spec
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

ROTATION = {"changed": False, "rotation": {"mode": "replicas", "in_rotation": ["spark-a"], "drained": []}}
SHOWN = {"changed": False, "rc": 0, "stdout": "Id=factory-floor-upstream.service\nActiveState=active\n\nId=nginx.service"}


def run(results, check_mode=False, **inventory):
    """The action plugin's run over the nginx_proxy role's variables on gateway; the modules answer ``results``;
    returns the result and the calls (module, arguments, whether in check mode)."""
    variables = role_variables("nginx_proxy")
    variables.update(inventory_hostname="gateway", **inventory)
    templar = with_filters(Templar(loader=DataLoader(), variables=variables))
    action = action_plugin(ActionModule, "proxy_status", {}, variables, check_mode=check_mode, templar=templar)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args), action._task.check_mode))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars=variables), calls


def test_reads_the_checker_state_and_the_units_for_real_in_check_mode():
    result, calls = run([ROTATION, SHOWN], check_mode=True)
    assert calls == [
        ("factory_floor.llm.proxy_rotation", {"state_file": "/run/factory-floor/upstream.json", "expect_in_rotation": [],
                                              "wait_for": "any", "timeout": 30}, False),
        ("ansible.legacy.command", {"argv": ["systemctl", "show", "-p", ps.PROPERTIES, "--",
                                             "factory-floor-upstream.service", "nginx.service"]}, False)]
    assert result == {"host": "gateway", "reachable": True, "rotation": ROTATION["rotation"], "checker": SHOWN["stdout"],
                      "changed": False}


@pytest.mark.parametrize("rotation, shown, expected", [
    (ROTATION, SHOWN, {"host": "gateway", "reachable": True, "rotation": ROTATION["rotation"], "checker": SHOWN["stdout"]}),
    # No checker state yet, systemctl failing: noted as empty.
    ({"changed": False, "rotation": {}}, {"failed": True, "rc": 1, "msg": "no systemctl"},
     {"host": "gateway", "reachable": True, "rotation": {}, "checker": ""}),
])
def test_what_is_noted(rotation, shown, expected):
    variables = {"inventory_hostname": "gateway"}
    assert ps.status(variables, rotation, shown) == expected


def test_waits_for_the_engines_expected_in_rotation():
    _result, calls = run([ROTATION, SHOWN], nginx_proxy_expect_in_rotation=["spark-a"], nginx_proxy_rotation_timeout="5")
    assert calls[0][1]["expect_in_rotation"] == ["spark-a"] and calls[0][1]["timeout"] == 5


def test_a_checker_state_that_cannot_be_read_fails_with_its_message():
    result, calls = run([{"failed": True, "msg": "/run/factory-floor/upstream.json is not JSON"}])
    assert result["failed"] is True and result["msg"] == "/run/factory-floor/upstream.json is not JSON"
    assert len(calls) == 1


def test_documents_the_spec():
    assert_documents_the_spec("proxy_status", ARGUMENT_SPEC)
