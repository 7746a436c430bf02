# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.gpu_memory_utilization`` on a host whose engine runs (issue 35): the share it
runs with comes from its command line and is kept while safe; a device total the host does not have
is a problem of the plan."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import gpu_memory_utilization as module

KB_PER_GIB = 1024 * 1024
# spark-2 of inventory/example on a GB10 (MemTotal 121.7 GiB): the largest safe share is 0.72.
HOST = {
    "host": "spark-2",
    "device_total_gib": 121.7,
    "weights_gib": 48,
    "min_kv_gib": 12,
    "headroom_gib": 1.4,
    "measure_workloads": False,
    "workloads": [{"name": "postgresql", "peak_gib": 8}, {"name": "site builds", "peak_gib": 12}],
    "engine_units": ["vllm-replica.service", "vllm-split.service"],
    "hysteresis_gib": 4.0,
}


def meminfo(total_gib, available_gib):
    return "MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n" % (
        total_gib * KB_PER_GIB, available_gib * KB_PER_GIB, available_gib * KB_PER_GIB)


@pytest.fixture
def host(memory_host):
    """The target: /proc/meminfo, and vllm-replica.service running ``docker run ... --gpu-memory-utilization``."""
    files, properties = memory_host
    files["/proc/meminfo"] = meminfo(121.7, 12)
    properties.update({("vllm-replica.service", "MainPID"): "4242", ("vllm-split.service", "MainPID"): "0"})

    def running(share):
        files["/proc/4242/cmdline"] = "\0".join([
            "docker", "run", "--rm", "vllm-gb10:0.32.0", "serve", "/models/m", "--gpu-memory-utilization", share,
            "--port", "8000", ""])

    return files, running


def test_the_running_replicas_share_is_kept_within_the_hysteresis(run_module, host):
    files, running = host
    running("0.71")
    result = run_module(module, dict(HOST, running_unit="vllm-replica.service")).result
    assert result["max_gpu_memory_utilization"] == 0.72
    assert result["gpu_memory_utilization"] == 0.71
    assert result["decision"] == {
        "case": "kept", "gpu_memory_utilization": 0.71, "running_gpu_memory_utilization": 0.71,
        "max_gpu_memory_utilization": 0.72, "gain_gib": 1.22, "hysteresis_gib": 4.0,
        "line": "share kept: the running engine (vllm-replica.service) runs with 0.71, safe (the largest safe share "
                "as declared is 0.72); 0.72 would add 1.22 GiB, not more than hysteresis_gib 4.00: not worth a restart"}
    assert result["decision"]["line"] in result["reasoning"]
    assert result["problems"] == []


def test_a_switch_computes_the_largest_share_for_its_target_which_does_not_run(run_module, host):
    files, running = host
    running("0.71")
    result = run_module(module, dict(HOST, running_unit="vllm-split.service")).result
    assert result["gpu_memory_utilization"] == 0.72
    assert result["decision"]["case"] == "computed" and result["decision"]["running_gpu_memory_utilization"] is None


def test_a_running_share_above_the_safe_one_is_lowered(run_module, host):
    files, running = host
    running("0.80")
    result = run_module(module, dict(HOST, running_unit="vllm-replica.service")).result
    assert result["gpu_memory_utilization"] == 0.72
    assert result["decision"]["case"] == "lowered" and result["decision"]["gain_gib"] < 0
    # The line that says what keeps the host below the share the engine runs with follows.
    assert result["difference"].startswith("gpu_memory_utilization 0.80 on host spark-2:")


def test_without_running_unit_nothing_is_kept(run_module, host):
    files, running = host
    running("0.71")
    assert run_module(module, HOST).result["gpu_memory_utilization"] == 0.72


def test_a_what_if_running_share(run_module, host):
    result = run_module(module, dict(HOST, engines_held_gib=92.01, running_gpu_memory_utilization=0.71)).result
    assert result["gpu_memory_utilization"] == 0.71 and result["decision"]["case"] == "kept"
    refused = run_module(module, dict(HOST, running_unit="vllm-replica.service",
                                      running_gpu_memory_utilization=0.71)).result
    assert refused["failed"] is True and "mutually exclusive" in refused["msg"]


def test_a_device_total_the_host_does_not_have_is_returned_as_a_problem(run_module, host):
    files, running = host
    files["/proc/meminfo"] = meminfo(23.54, 18)
    result = run_module(module, dict(HOST, weights_gib=0.26, min_kv_gib=0.09, workloads=[], headroom_gib=0,
                                     engines_held_gib=0)).result
    assert result.get("failed") is not True           # the figures are returned; the memory guard refuses them
    assert [p["host"] for p in result["problems"]] == ["spark-2"]
    assert result["reasoning"][1] == "problem: " + result["problems"][0]["what"]
    assert result["hosts"][0]["problems"] == result["problems"]
