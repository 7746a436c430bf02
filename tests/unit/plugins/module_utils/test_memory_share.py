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
110.83 GiB < 110.69 GiB asked for + the 2 GiB floor the check keeps for the host.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._memory import (
    GIB,
    memory_facts,
    parse_meminfo,
    plan_host,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_guard import START, start_decision

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


@pytest.mark.xfail(strict=True, reason="reproduces issue 19: the start check refuses the recommended share")
def test_published_two_spark_report_recommended_share_starts():
    meminfo = assumed_meminfo(REPORT_TOTAL_GIB, OS_RESERVE_GIB + REPORT_SERVICES_GIB)
    plan = plan_host("spark-head", meminfo, device_total_gib=REPORT_TOTAL_GIB,
                     workloads=[{"name": "resident services", "peak_gib": REPORT_SERVICES_GIB}],
                     weights_gib=REPORT_WEIGHTS_GIB, min_kv_gib=8.0)
    # What roles/memory_guard passes to the start check: device total x share, and its floor.
    need = int(round(round(plan["device_total_bytes"] * plan["gpu_memory_utilization"] / GIB + 0.005, 2) * GIB))
    decision = start_decision(memory_facts(parse_meminfo(meminfo)), need, int(ROLE_FLOOR_GIB * GIB))
    assert decision["action"] == START, (plan["gpu_memory_utilization"], decision["message"])
