# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's memory plan (``_memory.plan_host``) for people and for the start check: a table of
text lines and a summary dict. Pure logic, used by the gpu_memory_utilization module.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import (
    DROP_CACHES,
    GIB,
    START,
    _fmt,
    to_gib,
    utilization_hundredths,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import (
    declared_available_bytes,
)


def reasoning_lines(plan):
    """The plan of one host as a table of text lines (GiB)."""
    row = "  {:<2}{:<48}{:>9} GiB{}"
    lines = [
        "host %s: MemTotal %s GiB (/proc/meminfo), device total %s GiB (%s)"
        % (plan["host"], _fmt(plan["mem_total_bytes"]), _fmt(plan["device_total_bytes"]),
           plan["device_total_source"]),
    ]
    # First, so that no one reads the figures below as if they held.
    lines.extend("problem: %s" % problem["what"] for problem in plan.get("problems") or [])
    lines += [
        row.format("", "MemTotal", _fmt(plan["mem_total_bytes"]), ""),
        row.format("-", "OS reserve", _fmt(plan["os_reserve_bytes"]), ""),
    ]
    for w in plan["workloads"]:
        note = ""
        if w["measured"] is not None:
            note = "  (declared peak %s, measured %s)" % (_fmt(w["peak"]), _fmt(w["measured"]))
        label = "%s [%s]" % (w["name"], w["basis"])
        lines.append(row.format("-", label[:48], _fmt(w["counted"]), note))
    lines.append(row.format("-", "headroom", _fmt(plan["headroom_bytes"]), ""))
    lines.append(row.format("-", "start floor (MemAvailable kept)", _fmt(plan["floor_bytes"]), ""))
    lines.append(row.format("-", "vLLM outside its share (CUDA context, procs)", _fmt(plan["cuda_context_bytes"]), ""))
    lines.append(row.format("=", "left for vLLM's share", _fmt(plan["budget_bytes"]), ""))
    lines.append(
        "largest share whose start check passes with the host as declared = %.2f (floor(%s / %s, 0.01) = %.2f)"
        % (plan["max_hundredths_declared"] / 100.0, _fmt(max(plan["budget_bytes"], 0)),
           _fmt(plan["device_total_bytes"]),
           utilization_hundredths(max(plan["budget_bytes"], 0), plan["device_total_bytes"]) / 100.0))
    if plan["now_available_bytes"] is None:
        lines.append("the host as it is now: not judged (no MemAvailable given)")
    else:
        held = plan["engines_held_bytes"]
        lines.append(
            "largest share that fits the host as it is now = %.2f: MemAvailable %s GiB%s - floor %s - outside the "
            "share %s = %s GiB for the share"
            % (plan["max_hundredths_now"] / 100.0, _fmt(plan["now_available_bytes"] - held),
               (" + %s the running engines give back (%s)" % (_fmt(held), ", ".join(
                   "%s: %s" % (e["unit"], e["held_basis"]) for e in plan["engines"]) or plan["engines_held_source"]))
               if held else "",
               _fmt(plan["floor_bytes"]), _fmt(plan["cuda_context_bytes"]),
               _fmt(max(plan["now_available_bytes"] - plan["floor_bytes"] - plan["cuda_context_bytes"], 0))))
    lines.append(
        "gpu_memory_utilization = %.2f (max for this host %.2f, %s) -> vLLM asks ceil(%s x %.2f) = %s GiB"
        % (plan["gpu_memory_utilization"], plan["max_hundredths"] / 100.0,
           "as it is now" if plan["limited_by"] == "now" else "as declared",
           _fmt(plan["device_total_bytes"]), plan["gpu_memory_utilization"], _fmt(plan["granted_bytes"])))
    lines.append(
        "start check: MemAvailable >= %s (share + outside it, rounded up) + %s floor = %s GiB; the host as declared "
        "has %s GiB available"
        % (_fmt(plan["start_need_bytes"]), _fmt(plan["floor_bytes"]),
           _fmt(plan["start_need_bytes"] + plan["floor_bytes"]), _fmt(declared_available_bytes(plan))))
    lines.append(
        "left for everything else: %s - %s - %s = %s GiB (spare beyond OS reserve, workloads and floor: %s GiB)"
        % (_fmt(plan["mem_total_bytes"]), _fmt(plan["granted_bytes"]), _fmt(plan["cuda_context_bytes"]),
           _fmt(plan["left_bytes"]), _fmt(plan["spare_bytes"])))
    lines.append(
        "inside the share: weights %s + peak activation %s + CUDA graphs %s + non-torch %s = %s GiB; "
        "KV cache %s GiB (minimum %s)"
        % (_fmt(plan["weights_bytes"]), _fmt(plan["activation_bytes"]), _fmt(plan["cuda_graph_bytes"]),
           _fmt(plan["non_torch_bytes"]),
           _fmt(plan["weights_bytes"] + plan["activation_bytes"] + plan["cuda_graph_bytes"]
                + plan["non_torch_bytes"]),
           _fmt(plan["kv_cache_bytes"]), _fmt(plan["min_kv_bytes"])))
    free, available = plan["mem_free_bytes"], plan["mem_available_bytes"]
    if free is not None and available is not None:
        now = plan["start_now"]
        held = plan["engines_held_bytes"]
        verdict = {DROP_CACHES: "the start check drops the page cache, then vLLM can start",
                   START: "vLLM can start now"}.get(now["action"], "the start check would refuse it")
        lines.append("after start, on the memory as it is now: MemAvailable %s%s - %s it takes = %s GiB %s the "
                     "%s floor (MemFree %s) -> %s"
                     % (_fmt(available), " + %s given back" % _fmt(held) if held else "",
                        _fmt(plan["start_need_bytes"]), _fmt(plan["available_after_start_bytes"]),
                        ">=" if plan["fits_now"] else "<", _fmt(plan["floor_bytes"]), _fmt(free), verdict))
    if plan["difference"]:
        lines.append(plan["difference"])
    return lines


def summary(plan):
    """Machine-readable view of one host's plan (GiB floats, fraction 0-1)."""
    def gib_or_none(value):
        return None if value is None else to_gib(value)

    return {
        "host": plan["host"],
        "gpu_memory_utilization": plan["gpu_memory_utilization"],
        "max_gpu_memory_utilization": plan["max_hundredths"] / 100.0,
        "mem_total_gib": to_gib(plan["mem_total_bytes"]),
        "mem_free_gib": gib_or_none(plan["mem_free_bytes"]),
        "mem_available_gib": gib_or_none(plan["mem_available_bytes"]),
        "device_total_gib": to_gib(plan["device_total_bytes"]),
        "device_total_source": plan["device_total_source"],
        "os_reserve_gib": to_gib(plan["os_reserve_bytes"]),
        "headroom_gib": to_gib(plan["headroom_bytes"]),
        "floor_gib": to_gib(plan["floor_bytes"]),
        "cuda_context_gib": to_gib(plan["cuda_context_bytes"]),
        "workloads": [
            {
                "name": w["name"],
                "unit": w["unit"],
                "priority": w["priority"],
                "peak_gib": to_gib(w["peak"]),
                "measured_gib": gib_or_none(w["measured"]),
                "measured_source": w["measured_source"],
                "counted_gib": to_gib(w["counted"]),
                "basis": w["basis"],
            }
            for w in plan["workloads"]
        ],
        "workloads_gib": to_gib(plan["workloads_bytes"]),
        "budget_gib": to_gib(plan["budget_bytes"]),
        "granted_gib": to_gib(plan["granted_bytes"]),
        # Exactly the 0.01 GiB value start_need_bytes was made from (the role renders it '%.2f').
        "start_need_gib": round(plan["start_need_bytes"] / GIB, 2),
        "left_gib": to_gib(plan["left_bytes"]),
        "spare_gib": to_gib(plan["spare_bytes"]),
        "weights_gib": to_gib(plan["weights_bytes"]),
        "activation_gib": to_gib(plan["activation_bytes"]),
        "cuda_graph_gib": to_gib(plan["cuda_graph_bytes"]),
        "non_torch_gib": to_gib(plan["non_torch_bytes"]),
        "min_kv_gib": to_gib(plan["min_kv_bytes"]),
        "kv_cache_gib": to_gib(plan["kv_cache_bytes"]),
        "fits_now": plan["fits_now"],
        "drop_caches_needed": plan["drop_caches_needed"],
        "max_gpu_memory_utilization_declared": plan["max_hundredths_declared"] / 100.0,
        "max_gpu_memory_utilization_now": (None if plan["max_hundredths_now"] is None
                                           else plan["max_hundredths_now"] / 100.0),
        "limited_by": plan["limited_by"],
        "engines_held_gib": to_gib(plan["engines_held_bytes"]),
        "engines": [
            {
                "unit": e["unit"],
                "gpu_memory_utilization": e["gpu_memory_utilization"],
                "measured_gib": gib_or_none(e["measured_bytes"]),
                "held_gib": to_gib(e["held_bytes"]),
                "held_basis": e["held_basis"],
            }
            for e in plan["engines"]
        ],
        "available_after_start_gib": gib_or_none(plan["available_after_start_bytes"]),
        "reference_gpu_memory_utilization": (None if plan["reference_hundredths"] is None
                                             else plan["reference_hundredths"] / 100.0),
        "difference": plan["difference"],
        "problems": list(plan.get("problems") or []),
    }
