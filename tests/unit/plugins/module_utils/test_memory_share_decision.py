# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the engine gets, and a plan that does not describe its host (issue 35, an operator's first day).

1. The share followed MemAvailable: a first deploy computed 0.08 (the host as it was then was the
   tighter test), the next one 0.09 because a little more memory was free - and wanted to restart a
   healthy, serving engine for one step (/tmp/trial/check3.log). Now the share the engine of this
   run's topology runs with is kept while it is safe and the largest safe share would add at most
   ``hysteresis_gib``; a running share above the largest safe one is still lowered.
2. A device total of 121.7 GiB (GB10's) on a host whose MemTotal is 23.54 GiB planned on memory the
   host does not have, and nothing said so. Now it is a problem of the plan, named first.
"""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import GIB, MemoryPlanError, requested_bytes
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import (
    COMPUTED,
    KEPT,
    LOWERED,
    RAISED,
    plan_hosts,
    running_share_of,
    share_decision,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_report import reasoning_lines, summary

KIB = 1024
DEVICE = 121.7                 # CUDA's total on GB10 (nvtop and CUDA both read 121.69 GiB there)
STEP = requested_bytes(int(round(DEVICE * GIB)), 1)   # one hundredth: 1.22 GiB
# spark-2 of inventory/example: postgresql 8 + site builds 12 at their peaks, 1.4 GiB headroom,
# the example model's 48 GiB of weights and 12 GiB of KV cache (two full-context requests).
SPARK2 = dict(name="spark-2", device_total_gib=DEVICE, weights_gib=48, min_kv_gib=12, headroom_gib=1.4,
              workloads=[{"name": "postgresql", "peak_gib": 8}, {"name": "site builds", "peak_gib": 12}])
UNIT = "vllm-replica.service"


def meminfo(total_gib, available_gib):
    total = int(round(total_gib * GIB)) // KIB
    available = int(round(available_gib * GIB)) // KIB
    return "MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n" % (total, available, available)


def held_gib(share):
    """What an engine running at ``share`` holds on this host: vLLM's request + 5.6 GiB outside its share."""
    return requested_bytes(int(round(DEVICE * GIB)), int(round(share * 100))) / GIB + 5.6


def deploy(available_gib, running=None, hysteresis_gib=4.0, total_gib=DEVICE, **overrides):
    """One deploy's share on spark-2: MemAvailable now, the share its replica runs with (None: none runs)."""
    host = dict(SPARK2, meminfo=meminfo(total_gib, available_gib),
                engines_held_gib=held_gib(running) if running else 0)
    host.update(overrides)
    return plan_hosts([host], running_gpu_memory_utilization=running, hysteresis_gib=hysteresis_gib,
                      running_unit=UNIT)


# --------------------------------------------------------------- 1. the running share


def test_a_share_that_moved_one_step_with_memavailable_keeps_the_running_engine():
    """The trial's case on GB10 figures: 0.1 GiB more MemAvailable moves the largest share one step up."""
    first = deploy(95.17)                            # nothing runs yet; the host as it is now is the tighter test
    assert first["gpu_memory_utilization"] == 0.71 and first["hosts"][0]["limited_by"] == "now"
    assert first["decision"]["case"] == COMPUTED
    # The next deploy: the replica runs with 0.71 (and gives its memory back to a restart), 0.1 GiB more is free.
    second = deploy(95.27 - held_gib(0.71), running=0.71)
    assert second["max_gpu_memory_utilization"] == 0.72          # what the old code handed the engine: a restart
    assert second["gpu_memory_utilization"] == 0.71
    assert second["decision"]["case"] == KEPT
    line = second["decision"]["line"]
    assert line.startswith("share kept: the running engine (vllm-replica.service) runs with 0.71")
    assert "0.72 would add 1.22 GiB, not more than hysteresis_gib 4.00: not worth a restart" in line
    # Everything the plan says is at the share the engine keeps.
    plan = summary(second["hosts"][0])
    assert plan["gpu_memory_utilization"] == 0.71 and plan["fits_now"] is True
    assert any(text.startswith("gpu_memory_utilization = 0.71 (max for this host 0.72")
               for text in reasoning_lines(second["hosts"][0]))


def test_without_hysteresis_the_largest_share_is_taken_and_the_case_says_raised():
    result = deploy(95.27 - held_gib(0.71), running=0.71, hysteresis_gib=0)
    assert result["gpu_memory_utilization"] == 0.72
    assert result["decision"]["case"] == RAISED
    assert "adds 1.22 GiB, more than hysteresis_gib 0.00: it restarts with 0.72" in result["decision"]["line"]


def test_a_large_drop_of_memavailable_lowers_the_running_share_whatever_the_hysteresis():
    """Something took 10 GiB since the last deploy: the replica's 0.72 no longer leaves the floor after a start."""
    result = deploy(95.27 - held_gib(0.72) - 10, running=0.72, hysteresis_gib=100)
    assert result["hosts"][0]["limited_by"] == "now"
    assert result["gpu_memory_utilization"] == result["max_gpu_memory_utilization"] == 0.63
    assert result["decision"]["case"] == LOWERED
    assert result["decision"]["line"].startswith(
        "share lowered: the running engine (vllm-replica.service) runs with 0.72, above 0.63, the largest safe share "
        "as it is now")
    assert result["hosts"][0]["fits_now"] is True


def test_a_workload_that_now_declares_more_lowers_the_running_share():
    """The guard's point: postgresql's peak raised from 8 to 16 GiB takes the memory back from the model."""
    workloads = [{"name": "postgresql", "peak_gib": 16}, {"name": "site builds", "peak_gib": 12}]
    result = deploy(100 - held_gib(0.72), running=0.72, workloads=workloads)
    assert result["hosts"][0]["limited_by"] == "declared"
    assert result["gpu_memory_utilization"] == 0.66      # floor((121.70 - 4 - 28 - 1.4 - 2 - 5.6) / 121.70, 0.01)
    assert result["decision"]["case"] == LOWERED
    assert "the largest safe share as declared" in result["decision"]["line"]


def test_a_gain_beyond_the_hysteresis_raises_the_share():
    """A site build moved off the host: 12 GiB more for the model is worth a restart."""
    result = deploy(110 - held_gib(0.62), running=0.62, workloads=[{"name": "postgresql", "peak_gib": 8}])
    assert result["gpu_memory_utilization"] == result["max_gpu_memory_utilization"] == 0.82
    assert result["decision"]["case"] == RAISED
    assert result["decision"]["gain_bytes"] == requested_bytes(int(round(DEVICE * GIB)), 82) - requested_bytes(
        int(round(DEVICE * GIB)), 62)


def test_the_running_share_that_is_the_largest_is_kept_without_a_restart():
    result = deploy(100 - held_gib(0.72), running=0.72)
    assert result["gpu_memory_utilization"] == 0.72 and result["decision"]["case"] == KEPT
    assert "0.72, the largest safe share (as declared): no restart" in result["decision"]["line"]


def test_a_running_share_whose_kv_cache_is_now_too_small_is_raised_even_within_the_hysteresis():
    """min_kv_gib raised to 14 GiB: the share the replica runs with no longer holds it."""
    # 0.54 grants 65.72 GiB: 48 + 2 + 1.7 + 0.5 inside leaves 13.52 GiB of KV cache; 0.55 leaves 14.74.
    result = deploy(100 - held_gib(0.54), running=0.54, min_kv_gib=14, hysteresis_gib=50)
    assert result["decision"]["case"] == RAISED
    assert result["gpu_memory_utilization"] == 0.72
    assert "whose KV cache is now below min_kv_gib" in result["decision"]["line"]


def test_a_share_started_by_hand_counts_as_the_hundredth_below_it():
    result = deploy(95.27 - held_gib(0.71), running=0.715)
    assert result["decision"]["running_hundredths"] == 71 and result["gpu_memory_utilization"] == 0.71


def test_nothing_running_and_a_pin_decide_nothing_to_keep():
    assert deploy(100)["decision"]["case"] == COMPUTED
    assert "no engine of this topology (vllm-replica.service) runs" in deploy(100)["decision"]["line"]
    pinned = plan_hosts([dict(SPARK2, meminfo=meminfo(DEVICE, 100), engines_held_gib=0)],
                        gpu_memory_utilization=0.70, running_gpu_memory_utilization=0.71, hysteresis_gib=4)
    assert pinned["decision"] is None and pinned["gpu_memory_utilization"] == 0.70


def test_the_split_keeps_its_common_running_share_over_both_hosts():
    hosts = [dict(SPARK2, name=name, weights_gib=24, meminfo=meminfo(DEVICE, 100 - held_gib(0.70)),
                  engines_held_gib=held_gib(0.70)) for name in ("spark-a", "spark-b")]
    result = plan_hosts(hosts, running_gpu_memory_utilization=0.70, hysteresis_gib=4.0, running_unit="vllm-split.service")
    assert result["max_gpu_memory_utilization"] == 0.72
    assert result["gpu_memory_utilization"] == 0.70 and result["decision"]["case"] == KEPT
    assert [plan["gpu_memory_utilization"] for plan in result["hosts"]] == [0.70, 0.70]


@pytest.mark.parametrize("hysteresis", [-1, None])
def test_a_hysteresis_that_is_not_a_size_is_refused(hysteresis):
    with pytest.raises(MemoryPlanError, match="hysteresis_gib must be a number of GiB, 0 or more"):
        deploy(100, running=0.70, hysteresis_gib=hysteresis)


# A model that does not fit at the largest share (fit > largest) is refused by the plan before any decision.
@pytest.mark.parametrize("running, largest, fit, hysteresis_steps", [
    case for case in itertools.product([None, 1, 30, 69, 70, 71, 72, 73, 74, 100], [1, 40, 70, 72, 100], [1, 50, 71],
                                       [0, 1, 2.5, 3, 200]) if case[2] <= case[1]])
def test_the_decision_never_exceeds_the_largest_share_and_keeps_only_within_the_hysteresis(
        running, largest, fit, hysteresis_steps):
    device = int(round(DEVICE * GIB))
    decision = share_decision(largest, running, fit, device, int(hysteresis_steps * STEP))
    assert decision["hundredths"] <= largest
    assert decision["hundredths"] >= fit
    if running is None:
        assert decision["case"] == COMPUTED and decision["hundredths"] == largest
    elif running > largest:
        assert decision["case"] == LOWERED and decision["hundredths"] == largest
    elif decision["case"] == KEPT:
        assert decision["hundredths"] == running
        assert requested_bytes(device, largest) - requested_bytes(device, running) <= hysteresis_steps * STEP
    else:
        assert decision["case"] == RAISED and decision["hundredths"] == largest
        assert running < fit or requested_bytes(device, largest) - requested_bytes(device, running) > int(
            hysteresis_steps * STEP)


def test_the_running_share_is_the_one_of_this_runs_unit():
    engines = [{"unit": "vllm-split.service", "gpu_memory_utilization": 0.6},
               {"unit": "vllm-replica.service", "gpu_memory_utilization": None}]   # the CPU build: no flag
    assert running_share_of(engines, "vllm-split.service") == 0.6
    assert running_share_of(engines, "vllm-replica.service") is None
    assert running_share_of([], "vllm-replica.service") is None


# ------------------------------------------------- 2. a device total the host does not have


def test_gb10s_device_total_on_a_smaller_host_is_a_problem_named_first():
    """The trial's engine hosts: lab containers with MemTotal 23.54 GiB, memory_guard_device_total_gib 121.7."""
    result = plan_hosts([dict(name="spark-a", meminfo=meminfo(23.54, 18.12), device_total_gib=121.7,
                              weights_gib=0.26, min_kv_gib=0.09, engines_held_gib=0)])
    assert [p["host"] for p in result["problems"]] == ["spark-a"]
    what, fix = result["problems"][0]["what"], result["problems"][0]["fix"]
    assert what.startswith("device total 121.70 GiB (device_total_gib) is 5.2 times host spark-a's MemTotal "
                           "23.54 GiB (/proc/meminfo)")
    assert "grants memory the host does not have" in what
    assert "set device_total_gib to what CUDA reports on this host" in fix and "leave it out" in fix
    lines = reasoning_lines(result["hosts"][0])
    assert lines[1] == "problem: " + what
    assert summary(result["hosts"][0])["problems"] == result["problems"]


@pytest.mark.parametrize("mem_total_gib", [
    121.69,                       # MemTotal as nvtop reads it on a DGX Spark
    128501256192 / GIB,           # 119.68 GiB: the total gpud read from sysinfo on a GB10
    124.0,                        # inventory/example's assumption
])
def test_gb10s_own_memory_is_not_a_problem(mem_total_gib):
    result = plan_hosts([dict(SPARK2, meminfo=meminfo(mem_total_gib, 100), engines_held_gib=0)])
    assert result["problems"] == []
    assert not any(line.startswith("problem:") for line in reasoning_lines(result["hosts"][0]))


def test_memtotal_as_the_device_total_is_never_a_problem():
    result = plan_hosts([dict(name="spark-a", meminfo=meminfo(23.54, 18.12), device_total_gib=None,
                              weights_gib=0.26, min_kv_gib=0.09, engines_held_gib=0)])
    assert result["problems"] == []


def test_every_host_of_the_split_is_judged():
    hosts = [dict(SPARK2, name="spark-a", weights_gib=24, meminfo=meminfo(DEVICE, 100), engines_held_gib=0),
             dict(SPARK2, name="spark-b", weights_gib=24, workloads=[], meminfo=meminfo(64, 50), engines_held_gib=0)]
    result = plan_hosts(hosts)
    assert [p["host"] for p in result["problems"]] == ["spark-b"]
    assert "1.9 times host spark-b's MemTotal 64.00 GiB" in result["problems"][0]["what"]
