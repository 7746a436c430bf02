# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The metrics_engines filter: each engine that serves, on its own address (site_view's observe entry point)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.metrics_engines import metrics_engines

HOSTVARS = {
    "spark-a": {"metrics_address": "10.0.0.21", "nginx_proxy_backend_address": "10.0.0.11", "ansible_host": "a.lab",
                "vllm_port": 8001},
    "spark-b": {"nginx_proxy_backend_address": "10.0.0.12", "ansible_host": "b.lab", "vllm_split_head": "spark-b"},
    "spark-c": {"ansible_host": "c.lab", "vllm_listen_host": "10.0.0.13", "vllm_port": "8002"},
    "spark-d": {},
}


def test_replicas_are_every_engine_host_on_its_own_address():
    assert metrics_engines(["spark-a", "spark-b", "spark-c", "spark-d"], HOSTVARS, "replicas") == [
        {"name": "spark-a", "address": "10.0.0.21", "port": 8001, "url": "http://10.0.0.21:8001"},
        {"name": "spark-b", "address": "10.0.0.12", "port": 8000, "url": "http://10.0.0.12:8000"},
        {"name": "spark-c", "address": "c.lab", "port": 8002, "url": "http://c.lab:8002"},
        {"name": "spark-d", "address": "spark-d", "port": 8000, "url": "http://spark-d:8000"},
    ]


@pytest.mark.parametrize("engines, head", [(["spark-b", "spark-a"], "spark-b"), (["spark-a", "spark-b"], "spark-a")])
def test_a_split_is_its_head_only(engines, head):
    assert [engine["name"] for engine in metrics_engines(engines, HOSTVARS, "split")] == [head]


def test_refusals():
    assert metrics_engines([], HOSTVARS, "replicas") == []
    with pytest.raises(AnsibleFilterError, match="expects host names"):
        metrics_engines("spark-a", HOSTVARS, "replicas")
    with pytest.raises(AnsibleFilterError, match="vllm_port"):
        metrics_engines(["x"], {"x": {"vllm_port": "eighty"}}, "replicas")
