# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host's share of unified memory: the plan of one host and of all of them. Pure logic.

Built on ``_memory`` (conversions, ``/proc/meminfo``, measured workloads, the start
decision), which the hosts' start check and memory guard load on their own; this part
runs only on the controller (the gpu_memory_utilization module).
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._memory import (
    DEFAULT_ACTIVATION_GIB,
    DEFAULT_CUDA_CONTEXT_GIB,
    DEFAULT_CUDA_GRAPH_GIB,
    DEFAULT_FLOOR_GIB,
    DEFAULT_HEADROOM_GIB,
    DEFAULT_NON_TORCH_GIB,
    DEFAULT_OS_RESERVE_GIB,
    DROP_CACHES,
    KIB,
    MemoryPlanError,
    REFUSE,
    _fmt,
    memory_facts,
    parse_meminfo,
    requested_bytes,
    resolve_workloads,
    start_decision,
    start_need_bytes,
    to_bytes,
    utilization_hundredths,
)


def plan_host(name, meminfo, weights_gib, min_kv_gib, activation_gib=DEFAULT_ACTIVATION_GIB,
              device_total_gib=None, workloads=None, os_reserve_gib=DEFAULT_OS_RESERVE_GIB,
              headroom_gib=DEFAULT_HEADROOM_GIB, measure=None, cuda_graph_gib=DEFAULT_CUDA_GRAPH_GIB,
              non_torch_gib=DEFAULT_NON_TORCH_GIB, cuda_context_gib=DEFAULT_CUDA_CONTEXT_GIB,
              floor_gib=DEFAULT_FLOOR_GIB):
    """Largest safe ``gpu_memory_utilization`` for one host.

    ``meminfo`` is text or a mapping (see :func:`parse_meminfo`);
    ``device_total_gib`` is CUDA's total (None: ``MemTotal``). Raises
    :class:`MemoryPlanError` when the model with its minimum KV cache cannot
    fit next to the declared workloads; the message names the numbers.

    The share is the largest whose start check (:func:`start_decision`) passes
    on the host as declared: ``MemAvailable = MemTotal - os_reserve -
    workloads`` must cover the share, ``cuda_context``, ``floor`` and
    ``headroom``.

    Returns a dict with byte figures (``*_bytes``), GiB figures (``*_gib``)
    and ``gpu_memory_utilization`` as a fraction 0-1.
    """
    for label, value in (("weights_gib", weights_gib), ("min_kv_gib", min_kv_gib),
                         ("activation_gib", activation_gib), ("os_reserve_gib", os_reserve_gib),
                         ("headroom_gib", headroom_gib), ("cuda_graph_gib", cuda_graph_gib),
                         ("non_torch_gib", non_torch_gib), ("cuda_context_gib", cuda_context_gib),
                         ("floor_gib", floor_gib)):
        if value is None:
            raise MemoryPlanError("host %s: %s is required" % (name, label))
        if value < 0:
            raise MemoryPlanError("host %s: %s must not be negative, got %s" % (name, label, value))
    facts = memory_facts(parse_meminfo(meminfo))
    mem_total = facts["total"]
    if device_total_gib is None:
        device_total = mem_total
        device_total_source = "MemTotal"
    else:
        if device_total_gib <= 0:
            raise MemoryPlanError("host %s: device_total_gib must be positive, got %s"
                                  % (name, device_total_gib))
        device_total = to_bytes(device_total_gib)
        device_total_source = "device_total_gib"
    resolved, warnings = resolve_workloads(workloads, measure)
    os_reserve = to_bytes(os_reserve_gib)
    headroom = to_bytes(headroom_gib)
    floor = to_bytes(floor_gib)
    cuda_context = to_bytes(cuda_context_gib)
    workloads_total = sum(w["counted"] for w in resolved)
    # The kernel counts in kB: the host as declared has at most this much available.
    in_use = -(-(os_reserve + workloads_total) // KIB) * KIB
    reserved = in_use + headroom + floor + cuda_context
    budget = mem_total - reserved
    plan = {
        "host": name,
        "mem_total_bytes": mem_total,
        "mem_free_bytes": facts["free"],
        "mem_available_bytes": facts["available"],
        "page_cache_bytes": facts["page_cache"],
        "device_total_bytes": device_total,
        "device_total_source": device_total_source,
        "os_reserve_bytes": os_reserve,
        "headroom_bytes": headroom,
        "floor_bytes": floor,
        "cuda_context_bytes": cuda_context,
        "workloads": resolved,
        "workloads_bytes": workloads_total,
        "in_use_bytes": in_use,
        "reserved_bytes": reserved,
        "budget_bytes": budget,
        "weights_bytes": to_bytes(weights_gib),
        "activation_bytes": to_bytes(activation_gib),
        "cuda_graph_bytes": to_bytes(cuda_graph_gib),
        "non_torch_bytes": to_bytes(non_torch_gib),
        "min_kv_bytes": to_bytes(min_kv_gib),
        "warnings": warnings,
    }
    plan["max_hundredths"] = largest_starting_hundredths(plan)
    at_utilization(plan, plan["max_hundredths"])
    if not plan["fits"]:
        raise MemoryPlanError(no_fit_message(plan))
    return plan


def declared_available_bytes(plan):
    """MemAvailable on the host as declared: the OS at its reserve, every workload at its peak."""
    return plan["mem_total_bytes"] - plan["in_use_bytes"]


def starts_as_declared(plan, hundredths):
    """Would the start check let the engine start at this share, on the host as declared, keeping the headroom?"""
    need = start_need_bytes(requested_bytes(plan["device_total_bytes"], hundredths), plan["cuda_context_bytes"])
    return declared_available_bytes(plan) - plan["headroom_bytes"] >= need + plan["floor_bytes"]


def largest_starting_hundredths(plan):
    """The largest share (hundredths, 0-100) whose start check passes on the host as declared."""
    hundredths = utilization_hundredths(max(plan["budget_bytes"], 0), plan["device_total_bytes"])
    # ceil() in vLLM's request and the 0.01 GiB rounding of the need can cost one step.
    while hundredths > 0 and not starts_as_declared(plan, hundredths):
        hundredths -= 1
    while hundredths < 100 and starts_as_declared(plan, hundredths + 1):
        hundredths += 1
    return hundredths


def at_utilization(plan, hundredths):
    """Fill ``plan`` with the figures for ``gpu_memory_utilization = hundredths/100``."""
    granted = requested_bytes(plan["device_total_bytes"], hundredths) if hundredths > 0 else 0
    inside = plan["weights_bytes"] + plan["activation_bytes"] + plan["cuda_graph_bytes"] + plan["non_torch_bytes"]
    kv = granted - inside
    need = start_need_bytes(granted, plan["cuda_context_bytes"])
    facts = {"free": plan["mem_free_bytes"], "available": plan["mem_available_bytes"]}
    now = start_decision(facts, need, plan["floor_bytes"])
    left = plan["mem_total_bytes"] - granted - plan["cuda_context_bytes"]
    plan.update({
        "hundredths": hundredths,
        "gpu_memory_utilization": hundredths / 100.0,
        "granted_bytes": granted,
        "start_need_bytes": need,
        "left_bytes": left,
        "spare_bytes": left - plan["in_use_bytes"] - plan["floor_bytes"],
        "kv_cache_bytes": kv,
        "fits": hundredths > 0 and kv >= plan["min_kv_bytes"],
        "starts_as_declared": hundredths > 0 and starts_as_declared(plan, hundredths),
        # The start check on the memory as it is now (vLLM 0.32 on unified memory reads
        # MemAvailable; the check drops the page cache first when MemFree is short).
        "fits_now": plan["mem_free_bytes"] is not None and now["action"] != REFUSE,
        "drop_caches_needed": now["action"] == DROP_CACHES,
        "start_now": now,
    })
    return plan


def no_fit_message(plan):
    """Why the model does not fit on this host, with every number."""
    inside = plan["weights_bytes"] + plan["activation_bytes"] + plan["cuda_graph_bytes"] + plan["non_torch_bytes"]
    need = inside + plan["min_kv_bytes"]
    parts = ["OS reserve %s" % _fmt(plan["os_reserve_bytes"])]
    parts.extend("%s %s" % (w["name"], _fmt(w["counted"])) for w in plan["workloads"])
    if plan["headroom_bytes"]:
        parts.append("headroom %s" % _fmt(plan["headroom_bytes"]))
    parts.append("start floor %s" % _fmt(plan["floor_bytes"]))
    parts.append("vLLM outside its share (CUDA context, processes) %s" % _fmt(plan["cuda_context_bytes"]))
    msg = (
        "Computing gpu_memory_utilization for host %s: the model needs weights %s + activations %s "
        "+ CUDA graphs %s + non-torch %s + minimum KV cache %s = %s GiB inside its share, but after %s GiB "
        "reserved (%s) only %s of %s GiB MemTotal is left, and gpu_memory_utilization %.2f of the device's "
        "%s GiB grants %s GiB (KV cache %s GiB). "
        % (plan["host"], _fmt(plan["weights_bytes"]), _fmt(plan["activation_bytes"]),
           _fmt(plan["cuda_graph_bytes"]), _fmt(plan["non_torch_bytes"]),
           _fmt(plan["min_kv_bytes"]), _fmt(need), _fmt(plan["reserved_bytes"]), ", ".join(parts),
           _fmt(max(plan["budget_bytes"], 0)), _fmt(plan["mem_total_bytes"]),
           plan["gpu_memory_utilization"], _fmt(plan["device_total_bytes"]),
           _fmt(plan["granted_bytes"]), _fmt(plan["kv_cache_bytes"])))
    short = need - plan["granted_bytes"]
    # Which workloads, least important first, would have to leave for the model
    # to fit? Recomputed with the same start check, not estimated.
    movable = sorted(plan["workloads"], key=lambda w: (w["priority"], -w["counted"]))
    freed = 0
    moved = []
    enough = False
    for workload in movable:
        freed += workload["counted"]
        moved.append(workload["name"])
        trial = dict(plan, in_use_bytes=-(-(plan["os_reserve_bytes"] + plan["workloads_bytes"] - freed) // KIB) * KIB)
        trial["budget_bytes"] = plan["budget_bytes"] + plan["in_use_bytes"] - trial["in_use_bytes"]
        hundredths = largest_starting_hundredths(trial)
        if hundredths > 0 and requested_bytes(plan["device_total_bytes"], hundredths) >= need:
            enough = True
            break
    hint = "Lower min_kv_gib, use a smaller checkpoint, reduce headroom_gib, "
    if enough:
        hint += "move %s (lowest priority first) off this host, " % ", ".join(moved)
    else:
        hint += "move workloads off this host, "
    hint += "or split the model over two hosts (tensor parallelism)."
    return msg + "Short by %s GiB. %s" % (_fmt(short), hint)


def plan_hosts(hosts, measure=None, gpu_memory_utilization=None):
    """Plan several hosts (the split topology); the tighter host decides.

    ``hosts`` is a list of keyword dicts for :func:`plan_host` (each with
    ``name``). Every host is then re-evaluated at the common (smallest)
    utilization and must still fit. ``gpu_memory_utilization`` (a fraction,
    e.g. a share the inventory pins) evaluates every host at that share
    instead, and fails when it is above what a host allows. Returns
    ``{"gpu_memory_utilization", "max_gpu_memory_utilization", "decided_by",
    "hosts": [plan, ...]}``.
    """
    if not hosts:
        raise MemoryPlanError("hosts is empty: give at least one host")
    plans = []
    errors = []
    for host in hosts:
        kwargs = dict(host)
        kwargs.setdefault("measure", measure)
        try:
            plans.append(plan_host(**kwargs))
        except MemoryPlanError as exc:
            errors.append(str(exc))
    if errors:
        raise MemoryPlanError(" | ".join(errors))
    decider = min(plans, key=lambda p: p["max_hundredths"])
    largest = decider["max_hundredths"]
    common = largest
    if gpu_memory_utilization is not None:
        common = int(round(gpu_memory_utilization * 100))
        if not 0 < common <= 100 or abs(common - gpu_memory_utilization * 100) > 1e-6:
            raise MemoryPlanError("gpu_memory_utilization must be a fraction in (0, 1] in steps of 0.01, got %s"
                                  % gpu_memory_utilization)
        if common > largest:
            at_utilization(decider, common)
            raise MemoryPlanError(
                "gpu_memory_utilization %.2f is above %.2f, the largest share host %s's memory and declared "
                "workloads allow: at %.2f vLLM asks %s GiB and holds %s GiB outside it, and the start check needs "
                "MemAvailable %s GiB (with the %s GiB floor) where the host as declared has %s GiB (MemTotal %s - "
                "OS reserve %s - workloads %s) and keeps %s GiB of headroom. Lower it, or correct the declared "
                "workloads." % (
                    common / 100.0, largest / 100.0, decider["host"], common / 100.0, _fmt(decider["granted_bytes"]),
                    _fmt(decider["cuda_context_bytes"]), _fmt(decider["start_need_bytes"] + decider["floor_bytes"]),
                    _fmt(decider["floor_bytes"]), _fmt(declared_available_bytes(decider)),
                    _fmt(decider["mem_total_bytes"]), _fmt(decider["os_reserve_bytes"]),
                    _fmt(decider["workloads_bytes"]), _fmt(decider["headroom_bytes"])))
    for plan in plans:
        at_utilization(plan, common)
        if not plan["fits"]:
            errors.append(no_fit_message(plan) + " (at the common gpu_memory_utilization %.2f set by %s)"
                          % (common / 100.0, "host %s" % decider["host"] if gpu_memory_utilization is None
                             else "gpu_memory_utilization"))
    if errors:
        raise MemoryPlanError(" | ".join(errors))
    return {
        "gpu_memory_utilization": common / 100.0,
        "max_gpu_memory_utilization": largest / 100.0,
        "decided_by": decider["host"],
        "hosts": plans,
    }
