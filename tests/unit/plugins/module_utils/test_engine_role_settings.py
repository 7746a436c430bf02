# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engine roles' derived settings (_split_settings, _watchdog_settings, _engine_settings) without Ansible.
tests/unit/roles/test_engine_vars_filters.py compares them with the Jinja they replace."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_settings as es
from ansible_collections.factory_floor.llm.plugins.module_utils import _split_settings as ss
from ansible_collections.factory_floor.llm.plugins.module_utils import _watchdog_settings as ws


HOSTVARS = {"set": {"vllm_link_address": "10.10.0.2"},
            "facts": {"vllm_link_interface": "eth9", "ansible_facts": {"eth9": {"ipv4": {"address": "10.9.0.1"}}}},
            "none": {}}


@pytest.mark.parametrize("host,interface,expected", [
    ("set", "eth0", "10.10.0.2"), ("facts", "eth0", "10.9.0.1"), ("none", "eth0", ""), ("", "eth0", ""),
    ("absent", "eth0", ""),
])
def test_link_address(host, interface, expected):
    assert ss.link_address(HOSTVARS, host, interface) == expected


@pytest.mark.parametrize("values,expected", [
    ([0.8, 0.75], 0.75), ([0.8, None], 0.8), ([None, None], 0.9), ([0, 0.7], 0.9), (["0.6", 0.7], 0.6),
])
def test_tightest_gpu_memory_utilization(values, expected):
    hostvars = {"a": {"vllm_gpu_memory_utilization": values[0]}, "b": {"vllm_gpu_memory_utilization": values[1]}}
    assert ss.tightest_gpu_memory_utilization(hostvars, ["a", "b"], 0.9) == expected


def test_link_ports_only_on_the_head():
    assert ss.link_ports("29501", 29600, False) == []
    assert [p["port"] for p in ss.link_ports("29501", 29600, True)] == [29501, 29600]


BASE = {"runtime": "container", "rdma": "auto", "image_nccl_library": "/image/libnccl.so.2", "container_run_args": [],
        "link_address": "10.10.0.1", "link_interface": "enp1", "nccl_debug": "INFO", "env": {}, "env_host": {},
        "link": {"hca": ["rocep1s0f1"], "device_nodes": ["/dev/infiniband/uverbs0"], "nccl_library": "/host/libnccl.so.2"}}


@pytest.mark.parametrize("change,run_args,env_keys", [
    ({}, ["--device=/dev/infiniband/uverbs0", "--cap-add=IPC_LOCK", "--ulimit=memlock=-1",
          "--volume=/host/libnccl.so.2:/image/libnccl.so.2:ro"],
     ["VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS",
      "VLLM_NCCL_SO_PATH"]),
    ({"container_run_args": ["--ulimit=memlock=-1:-1"], "nccl_debug": ""},
     ["--device=/dev/infiniband/uverbs0", "--cap-add=IPC_LOCK", "--volume=/host/libnccl.so.2:/image/libnccl.so.2:ro"],
     ["VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "VLLM_NCCL_SO_PATH"]),
    ({"rdma": "disabled", "link": {}}, [],
     ["VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"]),
    ({"runtime": "venv"}, [],
     ["VLLM_HOST_IP", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS",
      "VLLM_NCCL_SO_PATH", "LD_PRELOAD"]),
])
def test_rank_settings(change, run_args, env_keys):
    settings = ss.rank_settings(dict(BASE, **change))
    assert settings["run_args"] == run_args
    assert list(settings["env"]) == env_keys
    assert "VLLM_HOST_IP" not in settings["collective_env"]
    assert settings["collective_env"]["NCCL_DEBUG"] == "INFO"


def test_rank_settings_keeps_only_the_collective_settings_of_vllm_env():
    settings = ss.rank_settings(dict(BASE, env={"HF_TOKEN": "secret", "NCCL_P2P_LEVEL": "NVL"},
                                     env_host={"UCX_TLS": "tcp", "NCCL_P2P_LEVEL": "SYS"}))
    assert "HF_TOKEN" not in settings["collective_env"]
    assert settings["collective_env"]["NCCL_P2P_LEVEL"] == "SYS"
    assert settings["collective_env"]["UCX_TLS"] == "tcp"


WATCHDOG = {"topology": "split", "host": "s1", "split_head": "s1", "split_hosts": ["s1", "s2", "s3"],
            "runtime": "container", "container_engine_path": "/usr/bin/docker", "engine_unit": "vllm-split.service",
            "interval": 5, "probe_timeout": 15, "request_timeout": 5, "pair_ack_timeout": 60}


@pytest.mark.parametrize("change,role,peers,bound", [
    ({}, "head", ["s2", "s3"], 420),
    ({"host": "s2"}, "worker", ["s1"], 400),
    ({"topology": "replicas", "host": "s2"}, "replica", ["s1"], 400),
    ({"interval": 1, "probe_timeout": 1, "request_timeout": 1, "pair_ack_timeout": 1}, "head", ["s2", "s3"], 300),
])
def test_watchdog_settings(change, role, peers, bound):
    settings = ws.watchdog_settings(dict(WATCHDOG, **change))
    assert (settings["role"], settings["peers"], settings["self_bound"]) == (role, peers, bound)


def test_watchdog_kills_the_container_first_and_only_in_a_container():
    settings = ws.watchdog_settings(WATCHDOG)
    assert settings["kill_commands"][0] == ["/usr/bin/docker", "kill", "--signal", "KILL", "vllm-split"]
    assert settings["container"] == {"engine": "/usr/bin/docker", "name": "vllm-split"}
    venv = ws.watchdog_settings(dict(WATCHDOG, runtime="venv"))
    assert venv["kill_commands"] == [["/usr/bin/systemctl", "kill", "--signal=SIGKILL", "vllm-split.service"]]
    assert venv["container"] is None


@pytest.mark.parametrize("engine,gpus,ipc,shm,expected", [
    ("docker", "all", "host", "", ["--gpus=all", "--ipc=host"]),
    ("podman", "nvidia.com/gpu=all", "", "16g", ["--device=nvidia.com/gpu=all", "--shm-size=16g"]),
    ("docker", "", "", "", []),
])
def test_container_resource_args(engine, gpus, ipc, shm, expected):
    assert es.container_resource_args(engine, gpus, ipc, shm) == expected


def test_default_ipv4_addresses_leave_out_hosts_without_one():
    hostvars = {"a": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.1"}}}, "b": {"ansible_facts": {}},
                "c": {}, "d": {"ansible_facts": None}}
    assert es.default_ipv4_addresses(hostvars, ["a", "b", "c", "d"]) == ["10.0.0.1"]


@pytest.mark.parametrize("topology,host,expected", [
    ("replicas", "b", 1), ("split", "a", 1), ("split", "b", 0), ("", "b", 0),
])
def test_prometheus_targets(topology, host, expected):
    found = es.prometheus_targets(topology, host, "a", "10.0.0.1", 8000)
    assert len(found) == expected
    if found:
        assert found[0] == {"targets": ["10.0.0.1:8000"], "labels": {"host": host, "topology": topology}}


@pytest.mark.parametrize("facts,interface,expected", [
    ({"enp1": {"ipv4": {"address": "10.10.0.1"}}, "default_ipv4": {"address": "192.0.2.1"}}, "enp1", "10.10.0.1"),
    ({"enp1": {"ipv4": {"address": "10.10.0.1"}}, "default_ipv4": {"address": "192.0.2.1"}}, "", "192.0.2.1"),
    ({"default_ipv4": {"address": "192.0.2.1"}}, "enp9", "192.0.2.1"),
    ({}, "", ""),
])
def test_link_interface_address(facts, interface, expected):
    assert es.link_interface_address(facts, interface) == expected


def test_link_interface_address_of_an_interface_without_ipv4_is_an_error():
    with pytest.raises(es.EngineSettingsError, match="vllm_link_interface enp1 has no IPv4 address"):
        es.link_interface_address({"enp1": {"ipv6": []}}, "enp1")


def test_engine_images_by_unit():
    info = {"image": {"id": "sha256:1"}, "containers": {"vllm-replica": {"exists": True}, "vllm-split": {"exists": False}}}
    assert es.engine_images(info, ["vllm-replica.service", "vllm-split.service"]) == {
        "image": {"id": "sha256:1"},
        "running": {"vllm-replica.service": {"exists": True}, "vllm-split.service": {"exists": False}}}
