# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_drain_check's action plugin, as deploy_in_rotation runs it on a proxy host."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.deploy_drain_check import ActionModule


def run(args, check_mode=False):
    variables = {"inventory_hostname": "gateway", "playbook_dir": "/src/ff/playbooks"}
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.deploy_drain_check")
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), DataLoader(), Templar(loader=DataLoader(),
                                                                                          variables=variables), None)
    return action.run(task_vars=variables)


@pytest.mark.parametrize("check_mode", [False, True])
def test_an_engine_drained_by_another_holder_stops_the_run(check_mode):
    result = run({"drained": {"spark-b": "switch-to-split", "spark-a": "deploy"}, "expected": ["spark-a", "spark-b"]},
                 check_mode=check_mode)
    assert result["failed"] is True and result["changed"] is False
    assert result["drained_other"] == {"spark-b": "switch-to-split"}
    assert result["msg"].startswith("Drained from the proxy on gateway, so not in its rotation: spark-b (drained by: "
                                    "switch-to-split). ")
    assert result["msg"].endswith("(--check changed nothing)." if check_mode else "Everything else is deployed.")


def test_drained_by_deploy_goes_on():
    result = run({"drained": {"spark-a": "deploy"}, "expected": ["spark-a"]})
    assert not result.get("failed") and result["drained_other"] == {}
