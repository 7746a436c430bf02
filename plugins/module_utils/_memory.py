# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How much of a unified-memory host vLLM may take: ``gpu_memory_utilization``.

Pure logic, standard library only: no Ansible imports, so it can also be
installed on a host next to the daemons it describes. Reading files and running
``systemctl`` are passed in as callables, so every function here is testable
with plain tables.

The model. On a GB10 the GPU's memory *is* the machine's memory. vLLM asks for
``device_total x gpu_memory_utilization`` where ``device_total`` is what CUDA
reports (about 121.7 GiB on GB10), and that share comes out of the same
``MemTotal`` as the OS, databases and builds. So::

    left for vLLM  = MemTotal - os_reserve - sum(workloads) - headroom
    utilization    = floor(left for vLLM / device_total, 0.01), at most 1.00
    granted        = device_total x utilization
    left for others = MemTotal - granted
    kv cache       = granted - weights - activations     (must be >= min_kv)

A workload counts with its declared peak (a site build's peak, not what it uses
right now), or with its measured usage when that is higher. Page cache is
reclaimable and never counted as used: measurements subtract the cgroup's
``file`` pages, and the budget starts from ``MemTotal``, not from ``MemFree``.

All sizes are bytes (int) inside, GiB (float, 1 GiB = 2**30 bytes) at the edges.
"""

from __future__ import annotations

GIB = 1024 ** 3
KIB = 1024

#: What CUDA reports as total memory on an NVIDIA GB10 (DGX Spark), in GiB.
GB10_DEVICE_TOTAL_GIB = 121.7
DEFAULT_OS_RESERVE_GIB = 4.0
DEFAULT_HEADROOM_GIB = 0.0
DEFAULT_ACTIVATION_GIB = 2.0

#: systemd prints this for an unset 64-bit property (``MemoryCurrent``).
_UINT64_MAX = 2 ** 64 - 1


class MemoryPlanError(ValueError):
    """The inputs are unusable, or the model cannot fit next to the workloads."""


# ---------------------------------------------------------------- conversions


def to_bytes(gib):
    """GiB (float) to bytes (int), rounded to the nearest byte."""
    return int(round(float(gib) * GIB))


def to_gib(n_bytes, digits=2):
    """Bytes to GiB, rounded for display and return values."""
    return round(n_bytes / GIB, digits)


def _fmt(n_bytes):
    return "%.2f" % (n_bytes / GIB)


# ------------------------------------------------------------------- meminfo


def parse_meminfo(source):
    """Parse ``/proc/meminfo`` into ``{field: bytes}``.

    ``source`` is either the file's text or a mapping of field names to values
    the way the file writes them: an int in kB, or a string such as
    ``"130023424 kB"``. Fields without a unit (``HugePages_Total``) are kept
    as plain counts.
    """
    if isinstance(source, dict):
        items = source.items()
    elif isinstance(source, str):
        items = []
        for line in source.splitlines():
            if ":" not in line:
                continue
            key, value = line.split(":", 1)
            items.append((key, value))
    else:
        raise MemoryPlanError(
            "meminfo must be the text of /proc/meminfo or a mapping of its fields "
            "to kB values, got %s" % type(source).__name__)
    result = {}
    for key, value in items:
        key = str(key).strip()
        text = str(value).strip()
        parts = text.split()
        if not parts:
            continue
        try:
            number = int(float(parts[0]))
        except ValueError:
            raise MemoryPlanError(
                "meminfo field %s: expected a number of kB, got %r" % (key, value)) from None
        unit = parts[1].lower() if len(parts) > 1 else ("kb" if isinstance(value, (int, float)) else "")
        result[key] = number * KIB if unit == "kb" else number
    return result


def memory_facts(meminfo):
    """The figures the plan needs from parsed meminfo, in bytes.

    ``available`` is ``MemAvailable`` (the kernel's estimate, page cache
    included) or, on kernels without it, ``MemFree + Buffers + Cached``.
    """
    if "MemTotal" not in meminfo:
        raise MemoryPlanError(
            "meminfo has no MemTotal; fields seen: %s" % (", ".join(sorted(meminfo)) or "none"))
    free = meminfo.get("MemFree")
    cached = meminfo.get("Cached", 0) + meminfo.get("Buffers", 0)
    available = meminfo.get("MemAvailable")
    if available is None and free is not None:
        available = free + cached
    return {
        "total": meminfo["MemTotal"],
        "free": free,
        "available": available,
        "page_cache": cached,
    }


# --------------------------------------------------------------- measurement


def _int_or_none(text):
    text = (text or "").strip()
    if not text or text in ("[not set]", "max", "infinity"):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value == _UINT64_MAX else value


def read_cgroup_memory(cgroup_dir, read_text):
    """Usage of one cgroup v2 directory, or None when it cannot be read.

    ``read_text(path)`` returns a file's text or raises ``OSError``.
    ``used`` is ``memory.current`` minus the cgroup's ``file`` pages from
    ``memory.stat`` (page cache is reclaimable, not counted as used).
    ``peak`` (``memory.peak``, kernel >= 5.19) includes page cache and is
    returned for information only.
    """
    try:
        current = _int_or_none(read_text(cgroup_dir + "/memory.current"))
    except OSError:
        return None
    if current is None:
        return None
    file_bytes = 0
    try:
        for line in read_text(cgroup_dir + "/memory.stat").splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[0] == "file":
                file_bytes = int(fields[1])
                break
    except (OSError, ValueError):
        file_bytes = 0
    try:
        peak = _int_or_none(read_text(cgroup_dir + "/memory.peak"))
    except OSError:
        peak = None
    return {
        "used": max(current - file_bytes, 0),
        "current": current,
        "file": file_bytes,
        "peak": peak,
        "source": "%s/memory.current - file" % cgroup_dir,
    }


def unit_memory(unit, show_property, read_text, cgroup_root="/sys/fs/cgroup"):
    """Measured usage of a systemd unit or slice, or None when not measurable.

    ``show_property(unit, name)`` returns ``systemctl show -p NAME --value UNIT``
    (or None when systemctl fails). The unit's cgroup files are read first;
    when they are not readable, the unit's ``MemoryCurrent`` is used (it
    includes page cache, so it can only overstate). ``[not set]`` - as on
    cgroup v1 hosts without memory accounting - means no measurement.
    """
    cgroup = (show_property(unit, "ControlGroup") or "").strip()
    if cgroup:
        measured = read_cgroup_memory(cgroup_root.rstrip("/") + cgroup, read_text)
        if measured is not None:
            return measured
    current = _int_or_none(show_property(unit, "MemoryCurrent"))
    if current is None:
        return None
    return {
        "used": current,
        "current": current,
        "file": None,
        "peak": None,
        "source": "systemctl show -p MemoryCurrent %s" % unit,
    }


# ----------------------------------------------------------------- workloads


def resolve_workloads(workloads, measure=None):
    """Normalise declared workloads and decide what each one counts for.

    ``workloads`` is a list of dicts with ``name``, ``peak_gib`` and optionally
    ``unit`` or ``slice``, ``priority`` (int, higher = more important to keep on
    this host, default 0) and ``measured_gib`` (a measurement supplied by the
    caller). ``measure(unit)`` returns the dict of :func:`unit_memory` or None;
    it is only asked for workloads that name a unit and carry no
    ``measured_gib``.

    Returns ``(resolved, warnings)``. Each resolved workload has ``counted``
    bytes: the declared peak, or the measured usage when that is higher.
    """
    resolved = []
    warnings = []
    seen = set()
    for index, item in enumerate(workloads or []):
        name = item.get("name")
        if not name:
            raise MemoryPlanError("workload #%d has no name: %r" % (index + 1, item))
        if name in seen:
            raise MemoryPlanError("workload %s is declared twice" % name)
        seen.add(name)
        if item.get("peak_gib") is None:
            raise MemoryPlanError(
                "workload %s has no peak_gib: declare its peak memory in GiB "
                "(for a build, its peak while building, not its idle use)" % name)
        peak = to_bytes(item["peak_gib"])
        if peak < 0:
            raise MemoryPlanError("workload %s: peak_gib must not be negative, got %s"
                                  % (name, item["peak_gib"]))
        unit = item.get("unit") or item.get("slice")
        measured = None
        source = None
        if item.get("measured_gib") is not None:
            measured = to_bytes(item["measured_gib"])
            source = "given"
        elif unit and measure is not None:
            reading = measure(unit)
            if reading is not None:
                measured = reading["used"]
                source = reading["source"]
        counted = peak
        basis = "declared peak"
        if measured is not None and measured > peak:
            counted = measured
            basis = "measured"
            warnings.append(
                "workload %s: measured %s GiB (%s) is above its declared peak %s GiB; "
                "counting the measured value. Raise peak_gib for %s in the host's inventory."
                % (name, _fmt(measured), source, _fmt(peak), name))
        resolved.append({
            "name": name,
            "unit": unit,
            "priority": int(item.get("priority") or 0),
            "peak": peak,
            "measured": measured,
            "measured_source": source,
            "counted": counted,
            "basis": basis,
        })
    return resolved, warnings


# ---------------------------------------------------------------------- plan


def utilization_hundredths(budget_bytes, device_total_bytes):
    """``floor(budget / device_total, 0.01)`` as an int in 0..100, exactly."""
    if device_total_bytes <= 0:
        raise MemoryPlanError("device total must be positive, got %d bytes" % device_total_bytes)
    if budget_bytes <= 0:
        return 0
    return min(100, (budget_bytes * 100) // device_total_bytes)


def plan_host(name, meminfo, weights_gib, min_kv_gib, activation_gib=DEFAULT_ACTIVATION_GIB,
              device_total_gib=None, workloads=None, os_reserve_gib=DEFAULT_OS_RESERVE_GIB,
              headroom_gib=DEFAULT_HEADROOM_GIB, measure=None):
    """Largest safe ``gpu_memory_utilization`` for one host.

    ``meminfo`` is text or a mapping (see :func:`parse_meminfo`);
    ``device_total_gib`` is CUDA's total (None: ``MemTotal``). Raises
    :class:`MemoryPlanError` when the model with its minimum KV cache cannot
    fit next to the declared workloads; the message names the numbers.

    Returns a dict with byte figures (``*_bytes``), GiB figures (``*_gib``)
    and ``gpu_memory_utilization`` as a fraction 0-1.
    """
    for label, value in (("weights_gib", weights_gib), ("min_kv_gib", min_kv_gib),
                         ("activation_gib", activation_gib), ("os_reserve_gib", os_reserve_gib),
                         ("headroom_gib", headroom_gib)):
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
    workloads_total = sum(w["counted"] for w in resolved)
    reserved = os_reserve + headroom + workloads_total
    budget = mem_total - reserved
    hundredths = utilization_hundredths(budget, device_total)
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
        "workloads": resolved,
        "workloads_bytes": workloads_total,
        "reserved_bytes": reserved,
        "budget_bytes": budget,
        "weights_bytes": to_bytes(weights_gib),
        "activation_bytes": to_bytes(activation_gib),
        "min_kv_bytes": to_bytes(min_kv_gib),
        "max_hundredths": hundredths,
        "warnings": warnings,
    }
    at_utilization(plan, hundredths)
    if not plan["fits"]:
        raise MemoryPlanError(no_fit_message(plan))
    return plan


def at_utilization(plan, hundredths):
    """Fill ``plan`` with the figures for ``gpu_memory_utilization = hundredths/100``."""
    granted = plan["device_total_bytes"] * hundredths // 100
    model = plan["weights_bytes"] + plan["activation_bytes"]
    kv = granted - model
    free = plan["mem_free_bytes"]
    available = plan["mem_available_bytes"]
    plan.update({
        "hundredths": hundredths,
        "gpu_memory_utilization": hundredths / 100.0,
        "granted_bytes": granted,
        "left_bytes": plan["mem_total_bytes"] - granted,
        "spare_bytes": plan["mem_total_bytes"] - granted - plan["reserved_bytes"] + plan["headroom_bytes"],
        "kv_cache_bytes": kv,
        "fits": hundredths > 0 and kv >= plan["min_kv_bytes"],
        # vLLM refuses to start when the device's free memory is below what it
        # asks for; on unified memory page cache is not "free" until dropped.
        "fits_now": available is not None and available >= granted,
        "drop_caches_needed": (free is not None and available is not None
                               and free < granted <= available),
    })
    return plan


def no_fit_message(plan):
    """Why the model does not fit on this host, with every number."""
    need = plan["weights_bytes"] + plan["activation_bytes"] + plan["min_kv_bytes"]
    parts = ["OS reserve %s" % _fmt(plan["os_reserve_bytes"])]
    if plan["headroom_bytes"]:
        parts.append("headroom %s" % _fmt(plan["headroom_bytes"]))
    parts.extend("%s %s" % (w["name"], _fmt(w["counted"])) for w in plan["workloads"])
    msg = (
        "Computing gpu_memory_utilization for host %s: the model needs weights %s + activations %s "
        "+ minimum KV cache %s = %s GiB, but after %s GiB reserved (%s) only %s of %s GiB MemTotal "
        "is left, and gpu_memory_utilization %.2f of the device's %s GiB grants %s GiB (KV cache %s GiB). "
        % (plan["host"], _fmt(plan["weights_bytes"]), _fmt(plan["activation_bytes"]),
           _fmt(plan["min_kv_bytes"]), _fmt(need), _fmt(plan["reserved_bytes"]), ", ".join(parts),
           _fmt(max(plan["budget_bytes"], 0)), _fmt(plan["mem_total_bytes"]),
           plan["gpu_memory_utilization"], _fmt(plan["device_total_bytes"]),
           _fmt(plan["granted_bytes"]), _fmt(plan["kv_cache_bytes"])))
    short = need - plan["granted_bytes"]
    # Which workloads, least important first, would have to leave for the model
    # to fit? Recomputed with the same rounding, not estimated.
    movable = sorted(plan["workloads"], key=lambda w: (w["priority"], -w["counted"]))
    freed = 0
    moved = []
    enough = False
    for workload in movable:
        freed += workload["counted"]
        moved.append(workload["name"])
        hundredths = utilization_hundredths(plan["budget_bytes"] + freed, plan["device_total_bytes"])
        granted = plan["device_total_bytes"] * hundredths // 100
        if hundredths > 0 and granted >= need:
            enough = True
            break
    hint = "Lower min_kv_gib, use a smaller checkpoint, reduce headroom_gib, "
    if enough:
        hint += "move %s (lowest priority first) off this host, " % ", ".join(moved)
    else:
        hint += "move workloads off this host, "
    hint += "or split the model over two hosts (tensor parallelism)."
    return msg + "Short by %s GiB. %s" % (_fmt(short), hint)


def plan_hosts(hosts, measure=None):
    """Plan several hosts (the split topology); the tighter host decides.

    ``hosts`` is a list of keyword dicts for :func:`plan_host` (each with
    ``name``). Every host is then re-evaluated at the common (smallest)
    utilization and must still fit. Returns ``{"gpu_memory_utilization",
    "decided_by", "hosts": [plan, ...]}``.
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
    common = decider["max_hundredths"]
    for plan in plans:
        at_utilization(plan, common)
        if not plan["fits"]:
            errors.append(no_fit_message(plan) + " (at the common gpu_memory_utilization %.2f set by host %s)"
                          % (common / 100.0, decider["host"]))
    if errors:
        raise MemoryPlanError(" | ".join(errors))
    return {
        "gpu_memory_utilization": common / 100.0,
        "decided_by": decider["host"],
        "hosts": plans,
    }


# ----------------------------------------------------------------- reporting


def reasoning_lines(plan):
    """The plan of one host as a table of text lines (GiB)."""
    row = "  {:<2}{:<40}{:>9} GiB{}"
    lines = [
        "host %s: MemTotal %s GiB (/proc/meminfo), device total %s GiB (%s)"
        % (plan["host"], _fmt(plan["mem_total_bytes"]), _fmt(plan["device_total_bytes"]),
           plan["device_total_source"]),
        row.format("", "MemTotal", _fmt(plan["mem_total_bytes"]), ""),
        row.format("-", "OS reserve", _fmt(plan["os_reserve_bytes"]), ""),
    ]
    for w in plan["workloads"]:
        note = ""
        if w["measured"] is not None:
            note = "  (declared peak %s, measured %s)" % (_fmt(w["peak"]), _fmt(w["measured"]))
        label = "%s [%s]" % (w["name"], w["basis"])
        lines.append(row.format("-", label[:40], _fmt(w["counted"]), note))
    lines.append(row.format("-", "headroom", _fmt(plan["headroom_bytes"]), ""))
    lines.append(row.format("=", "left for vLLM", _fmt(plan["budget_bytes"]), ""))
    lines.append(
        "gpu_memory_utilization = floor(%s / %s, 0.01) = %.2f (max for this host %.2f) -> grants %s GiB"
        % (_fmt(plan["budget_bytes"]), _fmt(plan["device_total_bytes"]), plan["gpu_memory_utilization"],
           plan["max_hundredths"] / 100.0, _fmt(plan["granted_bytes"])))
    lines.append(
        "left for everything else: %s - %s = %s GiB (spare beyond OS reserve and workloads: %s GiB)"
        % (_fmt(plan["mem_total_bytes"]), _fmt(plan["granted_bytes"]), _fmt(plan["left_bytes"]),
           _fmt(plan["spare_bytes"])))
    lines.append(
        "model: weights %s + activations %s = %s GiB; KV cache %s GiB (minimum %s)"
        % (_fmt(plan["weights_bytes"]), _fmt(plan["activation_bytes"]),
           _fmt(plan["weights_bytes"] + plan["activation_bytes"]), _fmt(plan["kv_cache_bytes"]),
           _fmt(plan["min_kv_bytes"])))
    free, available = plan["mem_free_bytes"], plan["mem_available_bytes"]
    if free is not None and available is not None:
        if plan["drop_caches_needed"]:
            verdict = "drop page cache before starting vLLM"
        elif plan["fits_now"]:
            verdict = "vLLM can start now"
        else:
            verdict = "not enough available memory now (is vLLM or a workload already running?)"
        lines.append("start: vLLM asks %s GiB; MemFree %s, MemAvailable %s GiB -> %s"
                     % (_fmt(plan["granted_bytes"]), _fmt(free), _fmt(available), verdict))
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
        "left_gib": to_gib(plan["left_bytes"]),
        "spare_gib": to_gib(plan["spare_bytes"]),
        "weights_gib": to_gib(plan["weights_bytes"]),
        "activation_gib": to_gib(plan["activation_bytes"]),
        "min_kv_gib": to_gib(plan["min_kv_bytes"]),
        "kv_cache_gib": to_gib(plan["kv_cache_bytes"]),
        "fits_now": plan["fits_now"],
        "drop_caches_needed": plan["drop_caches_needed"],
    }
