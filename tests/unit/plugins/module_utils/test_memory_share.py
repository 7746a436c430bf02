# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One computation for the share: what the module recommends, the start check lets start.

The published two-Spark report (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks issue #118,
"Shared head node: no published GPU_MEM_UTIL/MAX_MODEL_LEN pair boots; UMA accounting
omits ~5.6 GiB host-side + graphs"): GB10 with 121.63 GiB of unified memory per node,
about 6.8 GiB of resident services on the head, a TP=2 model of 164 GB (about 76.4 GiB
of weights per rank). The recommended share there was refused at start: vLLM's worker
found 105.08 GiB free where it asked for 105.82 GiB.

Fed the same numbers - the host as the plan itself assumes it (the OS at its reserve,
the services at their declared peak, the rest free) - the module recommended 0.91
(110.69 GiB) and its own start check, run on that very memory, refused it: MemAvailable
110.83 GiB < 110.69 GiB asked for + the 2 GiB floor the check keeps for the host. The
plan had budgeted neither the check's floor nor what vLLM takes outside its share (the
report's ~5.6 GiB host-side), and vLLM itself would have refused it as well.

Now the share is the largest one the start check (the same function) passes on that
host; the property test below holds it over a grid of hosts.
"""

from __future__ import annotations

import pytest

import itertools

from ansible_collections.factory_floor.llm.plugins.module_utils._host import memory_guard as guard
from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import (
    GIB,
    MemoryPlanError,
    memory_facts,
    parse_meminfo,
    requested_bytes,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import (
    plan_host,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_report import summary

KIB = 1024

REPORT_TOTAL_GIB = 121.63        # "GB10, 121.63 GiB UMA per node"
REPORT_SERVICES_GIB = 6.8        # "~6.8 GiB of resident services on the head"
REPORT_WEIGHTS_GIB = 76.4        # 164 GB of weights over TP=2, per rank
ROLE_FLOOR_GIB = 2.0             # roles/memory_guard: memory_guard_start_floor_gib
OS_RESERVE_GIB = 4.0             # the module's default os_reserve_gib


def assumed_meminfo(total_gib, reserved_gib):
    """``/proc/meminfo`` of the host as the plan assumes it: ``reserved_gib`` in use, the rest free."""
    total_kb = int(round(total_gib * GIB)) // KIB
    free_kb = total_kb - int(round(reserved_gib * GIB)) // KIB
    return "MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 0 kB\nCached: 0 kB\n" % (
        total_kb, free_kb, free_kb)


def start_check_on(meminfo, plan_summary, require_free=False):
    """Run the guard's start check as the role installs it: GiB on the command line, meminfo as text.

    The page cache drop turns MemFree into MemAvailable (what a drop frees on the host as declared).
    """
    state = {"meminfo": meminfo}
    lines = []

    def drop():
        facts = memory_facts(parse_meminfo(state["meminfo"]))
        state["meminfo"] = state["meminfo"].replace(
            "MemFree: %d kB" % (facts["free"] // KIB), "MemFree: %d kB" % (facts["available"] // KIB))

    # The role renders '%.2f' of the module's start_need_gib and of its floor.
    need = int(round(float("%.2f" % plan_summary["start_need_gib"]) * GIB))
    floor = int(round(float("%.2f" % plan_summary["floor_gib"]) * GIB))
    status = guard.run_start_check(lambda: state["meminfo"], drop, lines.append, need, floor,
                                   require_free=require_free, wait=0, sleep=lambda s: None, clock=lambda: 0.0)
    return status, lines


def report_plan(**overrides):
    kwargs = dict(device_total_gib=REPORT_TOTAL_GIB,
                  workloads=[{"name": "resident services", "peak_gib": REPORT_SERVICES_GIB}],
                  weights_gib=REPORT_WEIGHTS_GIB, min_kv_gib=8.0)
    kwargs.update(overrides)
    meminfo = assumed_meminfo(REPORT_TOTAL_GIB, OS_RESERVE_GIB + REPORT_SERVICES_GIB)
    return meminfo, plan_host("spark-head", meminfo, **kwargs)


def test_published_two_spark_report_recommended_share_starts():
    meminfo, plan = report_plan()
    # 121.63 - 4 - 6.8 (services) - 2 (floor) - 5.6 (outside the share) = 103.23 GiB for the share:
    # 0.84 asks ceil(121.63 x 0.84) = 102.17 GiB; 0.85 would ask 103.39.
    assert plan["gpu_memory_utilization"] == 0.84
    assert round(plan["granted_bytes"] / GIB, 2) == 102.17
    status, lines = start_check_on(meminfo, summary(plan))
    assert status == 0, lines
    assert plan["fits_now"] is True
    assert plan["starts_as_declared"] is True
    # What vLLM's own check sees once its processes hold the ~5.6 GiB outside the share.
    vllm_free = memory_facts(parse_meminfo(meminfo))["available"] - plan["cuda_context_bytes"]
    assert vllm_free >= requested_bytes(plan["device_total_bytes"], 84)
    # The report's own 0.87 is refused, by the plan (above its largest share) as by vLLM.
    assert plan["max_hundredths"] < 87


def test_report_share_one_step_up_is_refused_by_the_same_check():
    meminfo, plan = report_plan()
    from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import at_utilization
    at_utilization(plan, plan["max_hundredths"] + 1)
    status, lines = start_check_on(meminfo, summary(plan))
    assert status == guard.EXIT_REFUSED
    assert "would wedge the host" in lines[-1]


# A grid over what an operator declares: MemTotal (GB10 as Linux reports it, a box with
# more carve-out, and one where CUDA's total is above MemTotal), workloads, OS reserve,
# headroom, floor, what vLLM holds outside its share, and page cache on the host.
GRID = list(itertools.product(
    [(121.63, 121.63), (124.0, 121.7), (119.5, 121.7)],   # (MemTotal, device total) GiB
    [0.0, 6.8, 20.0, 37.3],                                # workloads at their peaks, GiB
    [0.0, 4.0],                                            # os_reserve_gib
    [0.0, 0.37, 9.0],                                      # headroom_gib
    [0.0, 1.0, 2.0],                                       # floor_gib
    [0.0, 1.3, 5.6],                                       # cuda_context_gib
    [0.0, 0.5],                                            # share of MemAvailable held in page cache
))


@pytest.mark.parametrize("totals, workload_gib, os_reserve, headroom, floor, context, cached", GRID)
def test_recommended_share_is_never_refused_by_the_start_check(totals, workload_gib, os_reserve, headroom,
                                                               floor, context, cached):
    mem_total, device_total = totals
    available_gib = mem_total - os_reserve - workload_gib
    total_kb = int(round(mem_total * GIB)) // KIB
    # The OS at its reserve and the workload at its peak, each declared in GiB; the kernel counts kB.
    in_use_kb = -(-(int(round(os_reserve * GIB)) + int(round(workload_gib * GIB))) // KIB)
    available_kb = total_kb - in_use_kb
    free_kb = int(available_kb * (1 - cached))
    meminfo = ("MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 0 kB\nCached: %d kB\n"
               % (total_kb, free_kb, available_kb, available_kb - free_kb))
    workloads = [{"name": "w", "peak_gib": workload_gib}] if workload_gib else []
    try:
        plan = plan_host("h", meminfo, weights_gib=20.0, min_kv_gib=1.0, device_total_gib=device_total,
                         workloads=workloads, os_reserve_gib=os_reserve, headroom_gib=headroom,
                         floor_gib=floor, cuda_context_gib=context)
    except MemoryPlanError:
        # No share fits: then nothing is recommended, and nothing can be refused.
        assert available_gib - headroom - floor - context < 20.0 + 2.0 + 1.7 + 0.5 + 1.0 + 0.02
        return
    for require_free in (False, True):
        status, lines = start_check_on(meminfo, summary(plan), require_free=require_free)
        assert status == 0, (plan["gpu_memory_utilization"], lines)
    assert plan["fits_now"] and plan["starts_as_declared"]
    # The next hundredth up would not start, or would not keep the headroom: the share is the largest.
    if plan["max_hundredths"] < 100:
        from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import starts_as_declared
        assert not starts_as_declared(plan, plan["max_hundredths"] + 1)
    # Once the engine holds its share and what it takes outside it, the declared host keeps its floor + headroom.
    assert plan["spare_bytes"] >= plan["headroom_bytes"]
