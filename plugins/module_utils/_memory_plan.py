# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host's share of unified memory: the plan of one host and of all of them. Pure logic.

Built on ``_memory`` (conversions, ``/proc/meminfo``, measured workloads, the start
decision), which the hosts' start check and memory guard load on their own; this part
runs only on the controller (the gpu_memory_utilization module).
"""

from __future__ import annotations

import math

from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import (
    DEFAULT_ACTIVATION_GIB,
    DEFAULT_CUDA_CONTEXT_GIB,
    DEFAULT_CUDA_GRAPH_GIB,
    DEFAULT_FLOOR_GIB,
    DEFAULT_HEADROOM_GIB,
    DEFAULT_NON_TORCH_GIB,
    DEFAULT_OS_RESERVE_GIB,
    DROP_CACHES,
    GIB,
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

#: How far the device total a plan uses may exceed the host's MemTotal. On unified memory (GB10)
#: CUDA's total is the memory the kernel manages: 121.69 GiB from CUDA on a DGX Spark whose
#: MemTotal reads 119.7-121.7 GiB across DGX OS kernels; more than 5 % above MemTotal is not
#: that host's memory.
DEVICE_TOTAL_ABOVE_MEMTOTAL = 0.05

#: What the engine gets (share_decision's ``case``).
COMPUTED = "computed"
KEPT = "kept"
LOWERED = "lowered"
RAISED = "raised"


def plan_host(name, meminfo, weights_gib, min_kv_gib, activation_gib=DEFAULT_ACTIVATION_GIB,
              device_total_gib=None, workloads=None, os_reserve_gib=DEFAULT_OS_RESERVE_GIB,
              headroom_gib=DEFAULT_HEADROOM_GIB, measure=None, cuda_graph_gib=DEFAULT_CUDA_GRAPH_GIB,
              non_torch_gib=DEFAULT_NON_TORCH_GIB, cuda_context_gib=DEFAULT_CUDA_CONTEXT_GIB,
              floor_gib=DEFAULT_FLOOR_GIB, engines=None, engines_held_gib=None,
              reference_gpu_memory_utilization=None):
    """Largest safe ``gpu_memory_utilization`` for one host.

    ``meminfo`` is text or a mapping (see :func:`parse_meminfo`);
    ``device_total_gib`` is CUDA's total (None: ``MemTotal``). Raises
    :class:`MemoryPlanError` when the model with its minimum KV cache cannot
    fit next to the declared workloads, or in what the host has available now;
    the message names the numbers and, in one line, which declared reserve
    makes the difference (:func:`difference_line`).

    The share is the largest that passes two tests, each the start check
    (:func:`start_decision`) once the engine holds its share and what it takes
    outside it (``cuda_context``):

    - on the host as declared: ``MemAvailable = MemTotal - os_reserve -
      workloads`` must cover the share, ``cuda_context``, ``floor`` and
      ``headroom``;
    - on the host as it is now: ``MemAvailable`` from ``meminfo``, plus what
      the engines running here now hold (a restart gives it back:
      ``engines`` or ``engines_held_gib``, see :func:`engines_held_bytes`),
      must cover the share, ``cuda_context`` and ``floor``. Skipped when
      ``meminfo`` has no ``MemAvailable``.

    ``reference_gpu_memory_utilization`` (a fraction, e.g. the share an engine
    runs with now; default: the largest share of the running ``engines``) is
    compared with the result: ``difference`` says in one line what keeps this
    host below it.

    Returns a dict with byte figures (``*_bytes``), GiB figures (``*_gib``)
    and ``gpu_memory_utilization`` as a fraction 0-1.
    """
    for label, value in (("weights_gib", weights_gib), ("min_kv_gib", min_kv_gib),
                         ("activation_gib", activation_gib), ("os_reserve_gib", os_reserve_gib),
                         ("headroom_gib", headroom_gib), ("cuda_graph_gib", cuda_graph_gib),
                         ("non_torch_gib", non_torch_gib), ("cuda_context_gib", cuda_context_gib),
                         ("floor_gib", floor_gib), ("engines_held_gib", 0 if engines_held_gib is None else engines_held_gib)):
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
    problems = device_total_problems(name, device_total, mem_total, device_total_source)
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
    running = resolve_engines(engines, device_total, cuda_context)
    if engines_held_gib is not None:
        held = to_bytes(engines_held_gib)
        held_source = "engines_held_gib"
    else:
        held = sum(engine["held_bytes"] for engine in running)
        held_source = "engines" if running else "none running"
    reference = reference_source = None
    if reference_gpu_memory_utilization is not None:
        reference = fraction_hundredths(reference_gpu_memory_utilization,
                                        "host %s: reference_gpu_memory_utilization" % name)
        reference_source = "reference_gpu_memory_utilization"
    else:
        shares = [engine["gpu_memory_utilization"] for engine in running
                  if engine["gpu_memory_utilization"] is not None]
        if shares:
            # Whatever the engine was started with (0.745 by hand): the hundredth at or below it.
            reference = int(math.floor(max(shares) * 100 + 1e-9))
            reference_source = "running engine"
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
        "engines": running,
        "engines_held_bytes": held,
        "engines_held_source": held_source,
        # MemAvailable once the engines running here now are stopped: what a (re)start finds.
        "now_available_bytes": None if facts["available"] is None else facts["available"] + held,
        "reference_hundredths": reference,
        "reference_source": reference_source,
        "warnings": warnings,
        "problems": problems,
    }
    plan["max_hundredths_declared"] = largest_starting_hundredths(plan)
    plan["max_hundredths_now"] = largest_fitting_now_hundredths(plan)
    plan["max_hundredths"] = plan["max_hundredths_declared"]
    plan["limited_by"] = "declared"
    if plan["max_hundredths_now"] is not None and plan["max_hundredths_now"] < plan["max_hundredths_declared"]:
        plan["max_hundredths"] = plan["max_hundredths_now"]
        plan["limited_by"] = "now"
    at_utilization(plan, plan["max_hundredths"])
    if not plan["fits"]:
        raise MemoryPlanError(no_fit_message(plan))
    return plan


def device_total_problems(name, device_total, mem_total, source):
    """What is wrong with the device total the plan uses: ``[{"host", "what", "fix"}]`` (empty when nothing).

    On unified memory the share comes out of ``MemTotal``: a declared device total well
    above it (more than :data:`DEVICE_TOTAL_ABOVE_MEMTOTAL`) is memory the host does not
    have - another machine's figure (GB10's 121.7 GiB on a smaller host) or a GPU with
    memory of its own, which this plan does not describe - so every share and GiB figure
    of the plan is fiction. ``MemTotal`` itself (``source`` ``"MemTotal"``) never is.
    """
    if source == "MemTotal" or device_total <= mem_total * (1 + DEVICE_TOTAL_ABOVE_MEMTOTAL):
        return []
    return [{
        "host": name,
        "what": "device total %s GiB (%s) is %.1f times host %s's MemTotal %s GiB (/proc/meminfo): on unified "
                "memory (GB10) the GPU's memory is the host's memory and CUDA reports about MemTotal, so this plan "
                "grants memory the host does not have and none of its figures hold"
                % (_fmt(device_total), source, device_total / float(mem_total), name, _fmt(mem_total)),
        "fix": "set device_total_gib to what CUDA reports on this host (about its MemTotal on GB10), or leave it out "
               "to plan on MemTotal; on a host without a GPU (vLLM's CPU build) also turn off setting the share "
               "(memory_guard_set_gpu_memory_utilization: false) and set the CUDA figures to 0 "
               "(memory_guard_cuda_context_gib, memory_guard_cuda_graph_gib, memory_guard_non_torch_gib), as "
               "roles/memory_guard/README.md says; on a host whose GPU has memory of its own (not a GB10) this plan "
               "does not apply",
    }]


def running_share_of(engines, unit):
    """The ``--gpu-memory-utilization`` the engine ``unit`` runs with now (a fraction), or None.

    ``engines`` as the module reads them (``unit``, ``gpu_memory_utilization``): None when
    ``unit`` does not run, or runs without the flag (vLLM's CPU build).
    """
    for engine in engines or []:
        if engine.get("unit") == unit and engine.get("gpu_memory_utilization") is not None:
            return engine["gpu_memory_utilization"]
    return None


def share_decision(largest, running, smallest_fit, device_total, hysteresis):
    """What the engine gets: the largest safe share, or the share it runs with now. Pure.

    ``largest``: the largest safe share now (hundredths); ``running``: the share the engine
    of this run's topology runs with now (hundredths, None when none runs with one);
    ``smallest_fit``: the smallest share whose KV cache still reaches the minimum
    (hundredths); ``device_total`` and ``hysteresis`` in bytes.

    A new share restarts the engine, so the running one is kept while it is still safe -
    not above ``largest`` and not short of the minimum KV cache - and what the largest
    would add (vLLM's request at ``largest`` less at ``running``) is at most
    ``hysteresis``: a share that follows ``MemAvailable`` by one step is not worth a
    restart. Above ``largest`` it is lowered: the other workloads need the memory now.

    Returns ``{"case", "hundredths", "running_hundredths", "largest_hundredths",
    "gain_bytes", "hysteresis_bytes"}``; ``case`` is :data:`COMPUTED` (nothing runs with
    a share), :data:`KEPT`, :data:`LOWERED` or :data:`RAISED`.
    """
    decision = {"case": COMPUTED, "hundredths": largest, "running_hundredths": running,
                "largest_hundredths": largest, "gain_bytes": None, "hysteresis_bytes": hysteresis}
    if running is None:
        return decision
    gain = requested_bytes(device_total, largest) - requested_bytes(device_total, running)
    decision["gain_bytes"] = gain
    if running > largest:
        decision["case"] = LOWERED
    elif running < smallest_fit or gain > hysteresis:
        decision["case"] = RAISED
    else:
        decision.update(case=KEPT, hundredths=running)
    return decision


def decision_line(decision, unit=None, limited_by="declared"):
    """The share decision (:func:`share_decision`) in one line, naming its case."""
    largest = decision["largest_hundredths"] / 100.0
    running = decision["running_hundredths"]
    engine = "the running engine%s" % (" (%s)" % unit if unit else "")
    where = "as it is now" if limited_by == "now" else "as declared"
    if decision["case"] == COMPUTED:
        return "share computed: %.2f, the largest safe share (%s); no engine of this topology%s runs with a " \
               "--gpu-memory-utilization to keep" % (largest, where, " (%s)" % unit if unit else "")
    running = running / 100.0
    gain = _fmt(abs(decision["gain_bytes"]))
    hysteresis = _fmt(decision["hysteresis_bytes"])
    if decision["case"] == LOWERED:
        return ("share lowered: %s runs with %.2f, above %.2f, the largest safe share %s: the rest of the host "
                "needs %s GiB of what it asks; it restarts with %.2f" % (engine, running, largest, where, gain, largest))
    if decision["case"] == KEPT:
        if decision["running_hundredths"] == decision["largest_hundredths"]:
            return "share kept: %s runs with %.2f, the largest safe share (%s): no restart" % (engine, running, where)
        return ("share kept: %s runs with %.2f, safe (the largest safe share %s is %.2f); %.2f would add %s GiB, "
                "not more than hysteresis_gib %s: not worth a restart" % (engine, running, where, largest, largest,
                                                                          gain, hysteresis))
    if decision["gain_bytes"] <= decision["hysteresis_bytes"]:
        return ("share raised: %s runs with %.2f, whose KV cache is now below min_kv_gib: it restarts with %.2f, "
                "the largest safe share (%s)" % (engine, running, largest, where))
    return ("share raised: %s runs with %.2f; %.2f, the largest safe share (%s), adds %s GiB, more than "
            "hysteresis_gib %s: it restarts with %.2f" % (engine, running, largest, where, gain, hysteresis, largest))


def fraction_hundredths(value, label):
    """A share given as a fraction 0-1 in steps of 0.01, as hundredths (int)."""
    hundredths = int(round(float(value) * 100))
    if not 0 < hundredths <= 100 or abs(hundredths - float(value) * 100) > 1e-6:
        raise MemoryPlanError("%s must be a fraction in (0, 1] in steps of 0.01, got %s" % (label, value))
    return hundredths


def running_share(words):
    """The ``--gpu-memory-utilization`` a running engine was started with (a fraction), or None.

    ``words`` is the engine's command line (``/proc/PID/cmdline`` split at NUL, or
    ``docker run ... serve ...`` for a container). vLLM takes the flag as
    ``--gpu-memory-utilization 0.74``, ``--gpu-memory-utilization=0.74`` and with
    underscores; the last one given counts, as in vLLM's parser.
    """
    found = None
    words = [str(word) for word in words or []]
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag.replace("_", "-") != "--gpu-memory-utilization":
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) else ""
        try:
            share = float(value)
        except ValueError:
            continue
        if 0 < share <= 1:
            found = share
    return found


def engines_held_bytes(share, measured, device_total, cuda_context):
    """What one running engine holds now, in bytes, and how that was found.

    With ``share`` (its ``--gpu-memory-utilization``): what vLLM asked for at it,
    ``ceil(device_total x share)``, plus ``cuda_context`` outside it - the memory
    the start check admitted it with (on GB10 the share is allocated whole at
    start, for the KV cache), or its measured use when that is higher. Without a
    share (vLLM's CPU build takes none): its measured use (``measured``, the
    cgroup's memory without page cache), or 0 when it cannot be measured.
    """
    if share is not None:
        admitted = int(math.ceil(device_total * share)) + cuda_context
        if measured is not None and measured > admitted:
            return measured, "measured"
        return admitted, "its --gpu-memory-utilization %.2f + cuda_context_gib" % share
    if measured is not None:
        return measured, "measured"
    return 0, "not measurable"


def resolve_engines(engines, device_total, cuda_context):
    """The engines running on the host now (dicts with ``unit``, ``gpu_memory_utilization``, ``measured_bytes``).

    Returns them with ``held_bytes`` and ``held_basis`` (:func:`engines_held_bytes`);
    a restart gives that memory back, so a start finds MemAvailable plus it.
    """
    resolved = []
    for engine in engines or []:
        share = engine.get("gpu_memory_utilization")
        held, basis = engines_held_bytes(share, engine.get("measured_bytes"), device_total, cuda_context)
        resolved.append({
            "unit": engine.get("unit"),
            "gpu_memory_utilization": share,
            "measured_bytes": engine.get("measured_bytes"),
            "held_bytes": held,
            "held_basis": basis,
        })
    return resolved


def declared_available_bytes(plan):
    """MemAvailable on the host as declared: the OS at its reserve, every workload at its peak."""
    return plan["mem_total_bytes"] - plan["in_use_bytes"]


def starts_as_declared(plan, hundredths):
    """Would the start check let the engine start at this share, on the host as declared, keeping the headroom?"""
    need = start_need_bytes(requested_bytes(plan["device_total_bytes"], hundredths), plan["cuda_context_bytes"])
    return declared_available_bytes(plan) - plan["headroom_bytes"] >= need + plan["floor_bytes"]


def fits_now(plan, hundredths):
    """Once started at this share, does the host as it is now keep its floor? None when MemAvailable is unknown.

    A start finds MemAvailable plus what the engines running now hold (they stop first);
    the engine then takes its share and what it holds outside it.
    """
    if plan["now_available_bytes"] is None:
        return None
    need = start_need_bytes(requested_bytes(plan["device_total_bytes"], hundredths), plan["cuda_context_bytes"])
    return plan["now_available_bytes"] - need >= plan["floor_bytes"]


def largest_fitting_now_hundredths(plan):
    """The largest share (hundredths, 0-100) that fits the host as it is now (:func:`fits_now`), or None."""
    if plan["now_available_bytes"] is None:
        return None
    room = plan["now_available_bytes"] - plan["floor_bytes"] - plan["cuda_context_bytes"]
    hundredths = utilization_hundredths(max(room, 0), plan["device_total_bytes"])
    while hundredths > 0 and not fits_now(plan, hundredths):
        hundredths -= 1
    while hundredths < 100 and fits_now(plan, hundredths + 1):
        hundredths += 1
    return hundredths


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
    held = plan["engines_held_bytes"]
    # What a (re)start finds: the engines running now have stopped and given their memory back.
    facts = {"free": None if plan["mem_free_bytes"] is None else plan["mem_free_bytes"] + held,
             "available": plan["now_available_bytes"]}
    now = start_decision(facts, need, plan["floor_bytes"])
    after = None if plan["now_available_bytes"] is None else plan["now_available_bytes"] - need
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
        # After the start, on the memory as it is now: MemAvailable (with what the engines
        # running now give back) less the share and what vLLM holds outside it.
        "available_after_start_bytes": after,
        "fits_now": hundredths > 0 and after is not None and now["action"] != REFUSE,
        "drop_caches_needed": now["action"] == DROP_CACHES,
        "start_now": now,
        "difference": "",
    })
    reference = plan.get("reference_hundredths")
    if reference is not None and reference > hundredths:
        plan["difference"] = difference_line(plan, reference)
    return plan


_RESERVES = (
    ("os_reserve_gib", "os_reserve_bytes"),
    ("cuda_context_gib", "cuda_context_bytes"),
    ("floor_gib", "floor_bytes"),
    ("headroom_gib", "headroom_bytes"),
)


def shortfall_bytes(plan, hundredths):
    """How far this share is from passing: ``(as declared, now)`` in bytes, > 0 when short; now is None when unknown."""
    need = start_need_bytes(requested_bytes(plan["device_total_bytes"], hundredths), plan["cuda_context_bytes"])
    declared = need + plan["floor_bytes"] + plan["headroom_bytes"] - declared_available_bytes(plan)
    now = None
    if plan["now_available_bytes"] is not None:
        now = need + plan["floor_bytes"] - plan["now_available_bytes"]
    return declared, now


def _gib_down(n_bytes):
    """Bytes to GiB text rounded *down* to 0.01: a reserve lowered to this figure is enough."""
    return "%.2f" % (math.floor(max(n_bytes, 0) * 100 / GIB) / 100.0)


def difference_line(plan, hundredths):
    """One line: what keeps this host from ``gpu_memory_utilization = hundredths / 100``; "" when it passes.

    As declared: the GiB missing, and which declared reserve (``os_reserve_gib``,
    ``cuda_context_gib``, ``floor_gib``, ``headroom_gib``) alone makes the difference,
    with the value it would need - or, when none alone does, all of them with their sum.
    Now: the GiB ``MemAvailable`` (with what the running engines give back) is short.
    """
    declared, now = shortfall_bytes(plan, hundredths)
    share = hundredths / 100.0
    granted = requested_bytes(plan["device_total_bytes"], hundredths)
    parts = []
    if declared > 0:
        text = (
            "%s GiB more than its declarations leave (it takes %s GiB + %s outside its share (cuda_context_gib) and "
            "keeps floor_gib %s + headroom_gib %s free = %s GiB, where MemTotal %s - os_reserve_gib %s - workloads %s "
            "= %s GiB)"
            % (_fmt(declared), _fmt(granted), _fmt(plan["cuda_context_bytes"]),
               _fmt(plan["floor_bytes"]), _fmt(plan["headroom_bytes"]),
               _fmt(declared + declared_available_bytes(plan)), _fmt(plan["mem_total_bytes"]),
               _fmt(plan["os_reserve_bytes"]), _fmt(plan["workloads_bytes"]), _fmt(declared_available_bytes(plan))))
        alone = [(option, plan[key]) for option, key in _RESERVES if plan[key] >= declared]
        if alone:
            text += "; %s alone make%s the difference (%s)" % (
                " or ".join(option for option, _value in alone), "s" if len(alone) == 1 else "",
                ", ".join("%s %s instead of %s" % (option, _gib_down(value - declared), _fmt(value))
                          for option, value in alone))
        else:
            total = sum(plan[key] for _option, key in _RESERVES)
            text += "; no declared reserve alone makes the difference: together %s hold %s GiB, %s GiB of it would have to go" % (
                " + ".join("%s %s" % (option, _fmt(plan[key])) for option, key in _RESERVES), _fmt(total),
                _fmt(declared))
        parts.append(text)
    # The host as it is now, when that is tighter than as declared (which also keeps the headroom).
    if now is not None and now > 0 and (declared <= 0 or now > declared - plan["headroom_bytes"]):
        held = plan["engines_held_bytes"]
        parts.append(
            "MemAvailable now %s GiB%s is %s GiB short of the %s GiB it needs with floor_gib %s "
            "(memory in use now beyond the declarations: a workload above its peak, or something undeclared)"
            % (_fmt(plan["now_available_bytes"] - held),
               " + %s the running engines give back" % _fmt(held) if held else "",
               _fmt(now), _fmt(now + plan["now_available_bytes"]), _fmt(plan["floor_bytes"])))
    if not parts:
        return ""
    return "gpu_memory_utilization %.2f on host %s: %s" % (share, plan["host"], "; and ".join(parts))


def kv_hundredths(plan):
    """The smallest share (hundredths) whose KV cache reaches ``min_kv``, or None when even 1.00 does not."""
    inside = plan["weights_bytes"] + plan["activation_bytes"] + plan["cuda_graph_bytes"] + plan["non_torch_bytes"]
    for hundredths in range(1, 101):
        if requested_bytes(plan["device_total_bytes"], hundredths) - inside >= plan["min_kv_bytes"]:
            return hundredths
    return None


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
    if plan["limited_by"] == "now":
        hint = "Free memory on this host now, l" + hint[1:]
    if enough:
        hint += "move %s (lowest priority first) off this host, " % ", ".join(moved)
    else:
        hint += "move workloads off this host, "
    hint += "or split the model over two hosts (tensor parallelism)."
    if plan["limited_by"] == "now":
        msg += ("The host as it is now allows less: MemAvailable %s GiB%s leaves room for %.2f at most "
                "(%.2f as declared). " % (
                    _fmt(plan["now_available_bytes"] - plan["engines_held_bytes"]),
                    " + %s the running engines give back" % _fmt(plan["engines_held_bytes"])
                    if plan["engines_held_bytes"] else "",
                    plan["max_hundredths_now"] / 100.0, plan["max_hundredths_declared"] / 100.0))
    needed = kv_hundredths(plan)
    if needed is not None:
        # The same comparison the result gives for a reference share: which reserve is in the way.
        hint += " min_kv_gib %s needs %s." % (_fmt(plan["min_kv_bytes"]), difference_line(plan, needed))
    reference = plan.get("reference_hundredths")
    if reference is not None and reference != needed and reference > plan["max_hundredths"]:
        hint += " The %s: %s." % (
            "share an engine runs with now" if plan["reference_source"] == "running engine"
            else "reference share", difference_line(plan, reference))
    return msg + "Short by %s GiB. %s" % (_fmt(short), hint)


def plan_hosts(hosts, measure=None, gpu_memory_utilization=None, running_gpu_memory_utilization=None,
               hysteresis_gib=0.0, running_unit=None):
    """Plan several hosts (the split topology); the tighter host decides.

    ``hosts`` is a list of keyword dicts for :func:`plan_host` (each with
    ``name``). Every host is then re-evaluated at the common (smallest)
    utilization and must still fit. ``gpu_memory_utilization`` (a fraction,
    e.g. a share the inventory pins) evaluates every host at that share
    instead, and fails when it is above what a host allows.

    Without a pin, ``running_gpu_memory_utilization`` (a fraction: the share the
    engine this run configures runs with now, ``running_unit``) is kept while it is
    safe and the largest share would add at most ``hysteresis_gib`` GiB
    (:func:`share_decision`). Returns ``{"gpu_memory_utilization",
    "max_gpu_memory_utilization", "decided_by", "decision", "problems", "hosts": [plan, ...]}``:
    ``decision`` is :func:`share_decision`'s with its ``line`` (None when pinned),
    ``problems`` every host's (:func:`device_total_problems`).
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
    decision = None
    if gpu_memory_utilization is None:
        if hysteresis_gib is None or hysteresis_gib < 0:
            raise MemoryPlanError("hysteresis_gib must be a number of GiB, 0 or more, got %s" % hysteresis_gib)
        running = None
        if running_gpu_memory_utilization is not None:
            # Whatever it was started with (0.745 by hand): the hundredth at or below it.
            running = int(math.floor(float(running_gpu_memory_utilization) * 100 + 1e-9))
            if not 0 < running <= 100:
                raise MemoryPlanError("running_gpu_memory_utilization must be a fraction in (0, 1], got %s"
                                      % running_gpu_memory_utilization)
        decision = share_decision(largest, running, max(kv_hundredths(p) or 101 for p in plans),
                                  decider["device_total_bytes"], to_bytes(hysteresis_gib))
        decision["line"] = decision_line(decision, running_unit, decider["limited_by"])
        common = decision["hundredths"]
    if gpu_memory_utilization is not None:
        common = fraction_hundredths(gpu_memory_utilization, "gpu_memory_utilization")
        if common > largest:
            at_utilization(decider, common)
            raise MemoryPlanError(
                "gpu_memory_utilization %.2f is above %.2f, the largest share host %s's memory and declared "
                "workloads allow%s: %s. At %.2f vLLM asks %s GiB and holds %s GiB outside it, and the start check "
                "needs MemAvailable %s GiB (with the %s GiB floor) where the host as declared has %s GiB (MemTotal %s - "
                "OS reserve %s - workloads %s) and keeps %s GiB of headroom%s. Lower it, or correct the declared "
                "workloads and reserves." % (
                    common / 100.0, largest / 100.0, decider["host"],
                    " with the memory it has available now" if decider["limited_by"] == "now" else "",
                    difference_line(decider, common),
                    common / 100.0, _fmt(decider["granted_bytes"]),
                    _fmt(decider["cuda_context_bytes"]), _fmt(decider["start_need_bytes"] + decider["floor_bytes"]),
                    _fmt(decider["floor_bytes"]), _fmt(declared_available_bytes(decider)),
                    _fmt(decider["mem_total_bytes"]), _fmt(decider["os_reserve_bytes"]),
                    _fmt(decider["workloads_bytes"]), _fmt(decider["headroom_bytes"]),
                    "" if decider["now_available_bytes"] is None else
                    ", and now has %s GiB for a start" % _fmt(decider["now_available_bytes"])))
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
        "decision": decision,
        "problems": [problem for plan in plans for problem in plan["problems"]],
        "hosts": plans,
    }
