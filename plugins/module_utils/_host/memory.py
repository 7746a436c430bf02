# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How much of a unified-memory host vLLM may take: ``gpu_memory_utilization``.

Pure logic, standard library only: no Ansible imports, so it can also be
installed on a host next to the daemons it describes. Reading files and running
``systemctl`` are passed in as callables, so every function here is testable
with plain tables.

The model. On a GB10 the GPU's memory *is* the machine's memory. vLLM asks for
``ceil(device_total x gpu_memory_utilization)`` (``request_memory`` in vLLM 0.32's
``vllm/v1/worker/utils.py``) where ``device_total`` is what CUDA reports (about
121.7 GiB on GB10), and that share comes out of the same ``MemTotal`` as the OS,
databases and builds. One computation (:func:`plan_host`, :func:`start_decision`)
serves the recommendation, the preflight and the start check::

    inside the share (vLLM 0.32 ``determine_available_memory``):
      kv cache   = granted - weights - peak activation - CUDA graphs - non-torch (NCCL buffers)
    outside the share (taken before vLLM's own start-up snapshot, which on unified
    memory reads MemAvailable: ``MemorySnapshot.measure`` in ``vllm/utils/mem_utils.py``):
      CUDA context and the engine's processes (API server, EngineCore, worker)
    start check:  MemAvailable >= granted + CUDA context + floor
    plan:         largest share whose start check passes on the host as declared -
                  the OS at its reserve, every workload at its peak, headroom kept:
      MemTotal - os_reserve - sum(workloads) - headroom >= granted + CUDA context + floor

so a recommended share always starts on the host it was computed for, and once the
engine holds its share the host keeps ``floor`` + ``headroom`` available.

A workload counts with its declared peak (a site build's peak, not what it uses
right now), or with its measured usage when that is higher. Page cache is
reclaimable and never counted as used: measurements subtract the cgroup's
``file`` pages, and the budget starts from ``MemTotal``, not from ``MemFree``.

All sizes are bytes (int) inside, GiB (float, 1 GiB = 2**30 bytes) at the edges.
"""

from __future__ import annotations

import math

GIB = 1024 ** 3
KIB = 1024

#: What CUDA reports as total memory on an NVIDIA GB10 (DGX Spark), in GiB.
GB10_DEVICE_TOTAL_GIB = 121.7
DEFAULT_OS_RESERVE_GIB = 4.0
DEFAULT_HEADROOM_GIB = 0.0
#: vLLM's peak activation inside its share (its log: "... GiB for peak activation").
DEFAULT_ACTIVATION_GIB = 2.0
#: CUDA graph memory inside the share, as vLLM 0.32 deducts it (estimated since v0.21;
#: "... GiB for CUDAGraph memory"). A published GB10 start-up log (Qwen3.6-27B NVFP4,
#: AEON-7/vllm-ultimate-dgx-spark#9) captured about 1.7 GiB. 0 with --enforce-eager.
DEFAULT_CUDA_GRAPH_GIB = 1.7
#: Non-torch memory inside the share: NCCL buffers and other allocations made after
#: vLLM's start-up snapshot (its log: consumed memory minus weights). A margin for
#: the split's NCCL buffers over the link, not a GB10 measurement: read the measured
#: figure after a start (parse_engine_log) and declare that.
DEFAULT_NON_TORCH_GIB = 0.5
#: Memory the engine takes outside its share before vLLM's start-up check reads
#: MemAvailable: the CUDA context and the host memory of its processes (API server,
#: EngineCore, worker). The published two-Spark report (MiaAI-Lab/GLM-5.3-Flash-
#: EXL3-2x-DGX-Sparks#118) measured about 5.6 GiB of host-side memory on GB10 that
#: vLLM's own accounting omits.
DEFAULT_CUDA_CONTEXT_GIB = 5.6
#: MemAvailable the start check keeps for the rest of the host once the engine has
#: its memory (roles/memory_guard: memory_guard_start_floor_gib).
DEFAULT_FLOOR_GIB = 2.0

#: Start-check actions (see start_decision).
START = "start"
DROP_CACHES = "drop_caches"
REFUSE = "refuse"

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


def gib_ceil(n_bytes):
    """Bytes to GiB rounded *up* to 0.01: a figure passed on as text never shrinks."""
    return math.ceil(n_bytes * 100 / GIB) / 100.0


def requested_bytes(device_total_bytes, hundredths):
    """What vLLM asks for at ``gpu_memory_utilization = hundredths / 100``.

    vLLM 0.32 ``request_memory``: ``math.ceil(total_memory * gpu_memory_utilization)``,
    with the fraction as the float vLLM parses from its flag.
    """
    return int(math.ceil(device_total_bytes * (hundredths / 100.0)))


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


def start_need_bytes(granted, cuda_context):
    """What the start check compares with MemAvailable: the share plus what vLLM takes outside it.

    Rounded up to 0.01 GiB, the precision the role hands the check (``--need-gib``),
    so the check never asks for less than the plan counted.
    """
    return to_bytes(gib_ceil(granted + cuda_context))


def start_decision(facts, need, floor, require_free=False, dropped=False):
    """What to do before an engine that takes ``need`` bytes starts.

    ``facts`` is :func:`memory_facts` of ``/proc/meminfo`` (bytes:
    ``free`` = MemFree, ``available`` = MemAvailable). ``floor`` is what must
    stay available to everything else once the engine has its memory.
    ``require_free``: the engine needs ``need`` bytes *free*, not just
    available. vLLM 0.32 on unified memory (GB10) compares its request with
    MemAvailable (``MemorySnapshot.measure`` takes ``psutil``'s available
    memory on integrated GPUs), so this is off by default; older builds that
    compared with ``cudaMemGetInfo``'s free memory need it. ``dropped``: the
    page cache has just been dropped (or could not be), so dropping again will
    not help.

    Returns a dict: ``action`` (``start``, ``drop_caches`` or ``refuse``),
    ``reason`` (a short key), ``message`` (one line with the numbers), and
    the numbers in bytes.

    ============================================  ===========================
    MemAvailable < need + floor                   refuse (would wedge the host)
    MemFree >= need                               start
    MemFree < need, not yet dropped               drop_caches
    MemFree < need after a drop, require_free     refuse (vLLM would fail)
    MemFree < need after a drop, not required     start
    ============================================  ===========================
    """
    free = facts.get("free")
    available = facts.get("available")
    decision = {"free": free, "available": available, "need": need, "floor": floor}
    if free is None or available is None:
        decision.update(
            action=REFUSE, reason="unreadable",
            message="/proc/meminfo has no MemFree/MemAvailable; cannot tell whether %s GiB fit" % _fmt(need))
        return decision
    if available < need + floor:
        decision.update(
            action=REFUSE, reason="available",
            message="MemAvailable %s GiB < %s GiB it asks for + %s GiB floor for the rest of the host = %s GiB "
                    "(MemFree %s GiB); starting it would wedge the host"
                    % (_fmt(available), _fmt(need), _fmt(floor), _fmt(need + floor), _fmt(free)))
        return decision
    if free >= need:
        decision.update(
            action=START, reason="free",
            message="MemFree %s GiB >= %s GiB it asks for; MemAvailable %s GiB leaves %s GiB (floor %s GiB)"
                    % (_fmt(free), _fmt(need), _fmt(available), _fmt(available - need), _fmt(floor)))
        return decision
    if not dropped:
        decision.update(
            action=DROP_CACHES, reason="page_cache",
            message="MemFree %s GiB < %s GiB it asks for, but MemAvailable %s GiB is enough (floor %s GiB): "
                    "dropping the page cache"
                    % (_fmt(free), _fmt(need), _fmt(available), _fmt(floor)))
        return decision
    if require_free:
        decision.update(
            action=REFUSE, reason="free_after_drop",
            message="after dropping the page cache MemFree %s GiB is still below the %s GiB it asks for "
                    "(MemAvailable %s GiB); an engine that counts free memory would fail. "
                    "Memory a drop cannot free: dirty pages, tmpfs and shared memory"
                    % (_fmt(free), _fmt(need), _fmt(available)))
        return decision
    decision.update(
        action=START, reason="available",
        message="MemFree %s GiB < %s GiB it asks for, MemAvailable %s GiB is enough and the engine takes "
                "reclaimable memory as it allocates (--require-free off); MemAvailable leaves %s GiB (floor %s GiB)"
                % (_fmt(free), _fmt(need), _fmt(available), _fmt(available - need), _fmt(floor)))
    return decision
