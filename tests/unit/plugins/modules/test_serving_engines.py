# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.serving_engines' action plugin: each engine that serves, on its own address, read from the
inventory on the controller (site_view's observe entry point)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.serving_engines import ActionModule

HOSTVARS = {
    "spark-a": {"metrics_address": "10.0.0.21", "nginx_proxy_backend_address": "10.0.0.11", "ansible_host": "a.lab",
                "vllm_port": 8001},
    "spark-b": {"nginx_proxy_backend_address": "10.0.0.12", "ansible_host": "b.lab", "vllm_split_head": "spark-b"},
    "spark-c": {"ansible_host": "c.lab", "vllm_listen_host": "10.0.0.13", "vllm_port": "8002"},
    "spark-d": {},
}
ON = "active"
OFF = "inactive"


def run(args, engines=("spark-a", "spark-b", "spark-c", "spark-d"), hostvars=None, topology="replicas", check_mode=False):
    variables = {"groups": {"gb10": list(engines)}, "site_engine_group": "gb10", "hostvars": hostvars or HOSTVARS}
    if topology is not None:
        variables["topology"] = topology
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.serving_engines")
    templar = Templar(loader=DataLoader(), variables=variables)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), DataLoader(), templar, None)
    return action.run(task_vars=variables)


@pytest.mark.parametrize("check_mode", [False, True])
def test_replicas_are_every_engine_host_on_its_own_address(check_mode):
    result = run({"units": [{"item": "spark-a", "stdout_lines": [ON, OFF]}]}, topology="split", check_mode=check_mode)
    assert (result["changed"], result["topology"], result["topology_source"]) == (
        False, "replicas", "the engine units active now")
    assert result["engines"] == [
        {"name": "spark-a", "address": "10.0.0.21", "port": 8001, "url": "http://10.0.0.21:8001"},
        {"name": "spark-b", "address": "10.0.0.12", "port": 8000, "url": "http://10.0.0.12:8000"},
        {"name": "spark-c", "address": "c.lab", "port": 8002, "url": "http://c.lab:8002"},
        {"name": "spark-d", "address": "spark-d", "port": 8000, "url": "http://spark-d:8000"},
    ]


@pytest.mark.parametrize("engines, head", [(["spark-b", "spark-a"], "spark-b"), (["spark-a", "spark-b"], "spark-a")])
def test_a_split_is_its_head_only(engines, head):
    result = run({"topology": "split"}, engines=engines)
    assert [engine["name"] for engine in result["engines"]] == [head]
    assert result["topology_source"] == "metrics_topology"


def test_nothing_runs_the_inventorys_topology():
    result = run({"units": [{"item": "spark-a", "stdout_lines": [OFF, OFF]}, {"item": "spark-b", "skipped": True}]},
                 topology=None)
    assert (result["topology"], result["topology_source"]) == ("replicas", "the inventory (no engine unit is active)")
    assert run({}, engines=())["engines"] == []


def test_refusals():
    result = run({"topology": "both"})
    assert result["failed"] is True
    assert result["msg"] == "metrics_topology (or the inventory's topology) must be replicas or split, not 'both'."
    result = run({}, engines=["x"], hostvars={"x": {"vllm_port": "eighty"}})
    assert result["failed"] is True and "vllm_port" in result["msg"]
