# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's decisions around the share computation: its preflight refusals and what the share gives.

Pure logic. Behind ``factory_floor.llm.memory_guard_check``, whose action plugin reads, on the
controller, the variables named in ``VARIABLES`` as the role's task sees them (inventory, the
role's defaults and vars, the registered ``__memory_guard_model``) and, for the share, runs
``factory_floor.llm.gpu_memory_utilization`` on the host with ``module_args``.

* ``preflight(v)``: every setting the role cannot work with - the model's figures, the slice and
  start check, the watch, each declared workload, a name declared twice - as errors naming the
  variable (``check``, ``variables``, ``message``);
* ``outside(v, where)``: the workload services that run outside the slice (``Slice=`` moves a service only when it
  starts), from ``systemctl show`` of each, and the line that says so unless they are restarted now;
* ``stale(v, found)``: the workload drop-ins the role wrote for a workload no longer declared;
* ``pinned(v)``: the share the inventory pins (a ``vllm_gpu_memory_utilization`` this role did not set);
* ``status(v, unit, watch, plan)``: what the status entry point notes - the watch's unit, its last look, the share
  computed (or why it could not be) - from the reads ``status_args`` names, each read that failed noted as empty;
* ``share(v, plan, pinned_plan)``: the refusal of a plan that does not describe the host or of a pin
  above what the host allows, else the share the engines get, what the start check counts and the
  line that says so.

Values are read the way the tasks' Jinja read them before (``| float``, ``| int``, ``| bool``,
``default(none, true)``, ``match``): what was refused is refused, word for word.
"""

from __future__ import annotations

import base64
import math
import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int

CHECKS = ("preflight", "compute", "share", "outside", "stale", "installed", "files", "status")
# What O(check=files) plans: the workloads' slice and drop-ins, or the engines' start check drop-ins.
FILES = ("workloads", "start_check")

_FIGURES = ("inventory_hostname", "_memory_guard_weights_gib", "_memory_guard_min_kv_gib", "memory_guard_activation_gib",
            "memory_guard_os_reserve_gib", "memory_guard_headroom_gib", "memory_guard_device_total_gib",
            "memory_guard_cuda_graph_gib", "memory_guard_non_torch_gib", "memory_guard_cuda_context_gib",
            "memory_guard_start_floor_gib", "memory_guard_engine_units")
# The variables each check reads, as the task sees them. OPTIONAL ones may be undefined there.
VARIABLES = {
    "preflight": _FIGURES + ("_memory_guard_weights_source", "_memory_guard_min_kv_source", "memory_guard_slice",
                             "memory_guard_memory_high_ratio", "memory_guard_start_wait", "memory_guard_start_need_gib",
                             "memory_guard_watch_interval", "memory_guard_watch_floor_gib",
                             "memory_guard_watch_resume_gib", "memory_guard_watch_settle", "memory_guard_workloads",
                             "_memory_guard_slice_prefix"),
    "compute": _FIGURES + ("memory_guard_workloads", "_memory_guard_running_unit",
                           "memory_guard_share_hysteresis_gib", "_memory_guard_engine_log_cmd"),
    "share": _FIGURES + ("memory_guard_workloads", "_memory_guard_running_unit",
                         "memory_guard_share_hysteresis_gib", "vllm_gpu_memory_utilization", "__memory_guard_applied",
                         "memory_guard_set_gpu_memory_utilization", "memory_guard_start_need_gib",
                         "_memory_guard_engine_log_cmd"),
    "outside": ("memory_guard_slice", "memory_guard_restart_workloads", "_memory_guard_unit_workloads"),
    "stale": ("memory_guard_workloads", "_memory_guard_unit_dir", "_memory_guard_dropin"),
    "files": ("memory_guard_workloads", "_memory_guard_unit_dir", "_memory_guard_dropin", "_memory_guard_start_dropin",
              "memory_guard_slice", "_memory_guard_unit_workloads", "_memory_guard_slice_workloads",
              "_memory_guard_inside", "_memory_guard_validate_slice", "_memory_guard_validate_service_dropin",
              "_memory_guard_validate_slice_dropin", "memory_guard_engine_units", "memory_guard_start_check"),
    "installed": ("_memory_guard_unit_dir", "_memory_guard_dropin", "_memory_guard_start_dropin", "memory_guard_slice"),
    "status": ("memory_guard_enabled", "_memory_guard_watch_unit", "_memory_guard_watch_status"),
}
OPTIONAL = frozenset(("vllm_gpu_memory_utilization", "__memory_guard_applied"))

# The keys of a workload that factory_floor.llm.gpu_memory_utilization takes.
MODULE_KEYS = ("name", "unit", "slice", "peak_gib", "priority")
SYSTEMD_SLICES = ("-.slice", "system.slice", "user.slice", "machine.slice")
# The engine roles take a fraction strictly below 1 (the vllm role's preflight).
ENGINE_MAX_SHARE = 0.99


def _text(value):
    """A value as a template renders it inside a sentence (None renders as nothing)."""
    return "" if value is None else str(value)


def _given(value):
    """``default(none, true)``: a value that is set and not empty, else None."""
    return value if value else None


def _error(check, variables, message):
    return {"check": check, "variables": list(variables), "message": message}


def _figures(v):
    ok = (v["_memory_guard_weights_gib"] is not None and jinja_float(v["_memory_guard_weights_gib"]) >= 0
          and v["_memory_guard_min_kv_gib"] is not None and jinja_float(v["_memory_guard_min_kv_gib"]) >= 0
          and jinja_float(v["memory_guard_activation_gib"]) >= 0 and jinja_float(v["memory_guard_os_reserve_gib"]) >= 0
          and jinja_float(v["memory_guard_headroom_gib"]) >= 0
          and (v["memory_guard_device_total_gib"] is None or jinja_float(v["memory_guard_device_total_gib"]) > 0))
    if ok:
        return []
    return [_error("figures", ["memory_guard_weights_gib", "memory_guard_min_kv_gib", "memory_guard_activation_gib",
                               "memory_guard_os_reserve_gib", "memory_guard_headroom_gib",
                               "memory_guard_device_total_gib"],
                   "memory_guard_weights_gib (GiB the weights take once loaded; vLLM logs \"Model loading took ... "
                   "GiB\") and memory_guard_min_kv_gib (the smallest KV cache the service needs, GiB) must be >= 0 for "
                   "%s (null reads them from the model's files), and memory_guard_activation_gib, "
                   "memory_guard_os_reserve_gib, memory_guard_headroom_gib >= 0 and memory_guard_device_total_gib > 0 "
                   "or null. Now: weights %s (%s), min KV %s (%s), activations %s, OS reserve %s, headroom %s, device "
                   "total %s."
                   % tuple(_text(v[name]) for name in (
                       "inventory_hostname", "_memory_guard_weights_gib", "_memory_guard_weights_source",
                       "_memory_guard_min_kv_gib", "_memory_guard_min_kv_source", "memory_guard_activation_gib",
                       "memory_guard_os_reserve_gib", "memory_guard_headroom_gib",
                       "memory_guard_device_total_gib")))]


def _slice_settings(v):
    name = _text(v["memory_guard_slice"])
    ok = (re.match(r"^[A-Za-z0-9_.:-]+\.slice$", name) and name not in SYSTEMD_SLICES
          and 0 < jinja_float(v["memory_guard_memory_high_ratio"]) <= 1 and jinja_float(v["memory_guard_start_floor_gib"]) >= 0
          and jinja_int(v["memory_guard_start_wait"]) >= 0
          and (v["memory_guard_start_need_gib"] is None or jinja_float(v["memory_guard_start_need_gib"]) > 0))
    if ok:
        return []
    return [_error("slice", ["memory_guard_slice", "memory_guard_memory_high_ratio", "memory_guard_start_floor_gib",
                             "memory_guard_start_wait", "memory_guard_start_need_gib"],
                   "memory_guard_slice must be a slice of its own (a name ending in .slice, not one of systemd's: now "
                   "%s); memory_guard_memory_high_ratio a fraction in (0, 1] (now %s); memory_guard_start_floor_gib >= "
                   "0 GiB (now %s); memory_guard_start_wait >= 0 s (now %s); memory_guard_start_need_gib null or > 0 "
                   "GiB (now %s)."
                   % tuple(_text(v[name]) for name in (
                       "memory_guard_slice", "memory_guard_memory_high_ratio", "memory_guard_start_floor_gib",
                       "memory_guard_start_wait", "memory_guard_start_need_gib")))]


def _watch(v):
    if (jinja_float(v["memory_guard_watch_interval"]) > 0 and jinja_float(v["memory_guard_watch_floor_gib"]) >= 0
            and jinja_float(v["memory_guard_watch_resume_gib"]) >= 0 and jinja_float(v["memory_guard_watch_settle"]) >= 0):
        return []
    return [_error("watch", ["memory_guard_watch_interval", "memory_guard_watch_floor_gib",
                             "memory_guard_watch_resume_gib", "memory_guard_watch_settle"],
                   "The watch needs memory_guard_watch_interval > 0 s (now %s), memory_guard_watch_floor_gib >= 0 GiB "
                   "(now %s), memory_guard_watch_resume_gib >= 0 GiB (now %s) and memory_guard_watch_settle >= 0 s "
                   "(now %s)."
                   % tuple(_text(v[name]) for name in (
                       "memory_guard_watch_interval", "memory_guard_watch_floor_gib", "memory_guard_watch_resume_gib",
                       "memory_guard_watch_settle")))]


def workload_ok(item, slice_name, engine_units):
    """Whether one declared workload is one the role can place and limit."""
    unit, slice_ = _given(item.get("unit")), _given(item.get("slice"))
    high = _given(item.get("memory_high_gib"))
    return bool(len(_text(item.get("name"))) > 0
                and "peak_gib" in item and jinja_float(item["peak_gib"]) > 0
                and not (unit and slice_)
                and (unit is None or re.match(r"^[A-Za-z0-9_.@:\-]+\.service$", _text(unit)))
                and (unit is None or unit not in engine_units)
                and (slice_ is None or re.match(r"^[A-Za-z0-9_.:\-]+\.slice$", _text(slice_)))
                and (slice_ is None or slice_ != slice_name)
                and (slice_ is None or slice_ not in SYSTEMD_SLICES)
                and (high is None or 0 < jinja_float(high) <= jinja_float(item.get("peak_gib")))
                and (_given(item.get("action")) or "stop") in ("stop", "pause"))


def _workloads(v):
    errors = []
    workloads = v["memory_guard_workloads"] or []
    engine_units = list(v["memory_guard_engine_units"] or [])
    for item in workloads:
        item = item if isinstance(item, dict) else {}
        if workload_ok(item, v["memory_guard_slice"], engine_units):
            continue
        errors.append(_error(
            "workload", ["memory_guard_workloads"],
            "memory_guard_workloads on %s: workload %s must have a name and peak_gib > 0 (GiB, its peak - a build's "
            "peak while building), at most one of unit (a .service) and slice (a .slice other than memory_guard_slice "
            "%s itself and systemd's own; name it %s<name>.slice to place it inside), never a vLLM engine unit (%s: "
            "the model is never a co-resident workload), memory_high_gib, when given, in (0, peak_gib], and action, "
            "when given, stop or pause. Seen: %s."
            % (_text(v["inventory_hostname"]), _text(item.get("name", "(no name)")), _text(v["memory_guard_slice"]),
               _text(v["_memory_guard_slice_prefix"]), ", ".join(str(unit) for unit in engine_units), item)))
    names = [item.get("name") for item in workloads if isinstance(item, dict)]
    if not errors and len(names) != len(set(map(str, names))):
        errors.append(_error("workload_names", ["memory_guard_workloads"],
                             "memory_guard_workloads on %s declares a name twice: %s."
                             % (_text(v["inventory_hostname"]), names)))
    return errors


def preflight(v):
    """Every refusal of the role's preflight, in the order the role checked them."""
    return _figures(v) + _slice_settings(v) + _watch(v) + _workloads(v)


def format_errors(errors):
    """One message: the single error's, or each numbered."""
    if len(errors) == 1:
        return errors[0]["message"]
    return " ".join("(%d) %s" % (number, error["message"]) for number, error in enumerate(errors, 1))


def module_workloads(workloads):
    """The declared workloads with only the keys ``gpu_memory_utilization`` takes (the watch's own keys left out)."""
    return [{key: value for key, value in item.items() if key in MODULE_KEYS} for item in workloads or []]


def module_args(v, engine_log="", gpu_memory_utilization=None):
    """``factory_floor.llm.gpu_memory_utilization``'s arguments: this host's share (with the running engine's share
    kept and what vLLM measured at its last start), or, with ``gpu_memory_utilization``, what the engine takes at
    that share."""
    args = dict(host=v["inventory_hostname"], workloads=module_workloads(v["memory_guard_workloads"]),
                os_reserve_gib=v["memory_guard_os_reserve_gib"], headroom_gib=v["memory_guard_headroom_gib"],
                weights_gib=v["_memory_guard_weights_gib"], activation_gib=v["memory_guard_activation_gib"],
                cuda_graph_gib=v["memory_guard_cuda_graph_gib"], non_torch_gib=v["memory_guard_non_torch_gib"],
                cuda_context_gib=v["memory_guard_cuda_context_gib"], floor_gib=v["memory_guard_start_floor_gib"],
                min_kv_gib=v["_memory_guard_min_kv_gib"], engine_units=v["memory_guard_engine_units"])
    if v["memory_guard_device_total_gib"] is not None:
        args["device_total_gib"] = v["memory_guard_device_total_gib"]
    if gpu_memory_utilization is not None:
        args["gpu_memory_utilization"] = gpu_memory_utilization
        return args
    args.update(running_unit=v["_memory_guard_running_unit"], hysteresis_gib=v["memory_guard_share_hysteresis_gib"])
    if engine_log:
        args["engine_log"] = engine_log
    return args


def pinned(v):
    """The share the inventory pins: a ``vllm_gpu_memory_utilization`` other than the one this role set earlier in
    the run (``__memory_guard_applied``), else None."""
    value = v.get("vllm_gpu_memory_utilization")
    if value is None or jinja_float(value) == jinja_float(v.get("__memory_guard_applied", -1)):
        return None
    return jinja_float(value)


def plan_refusal(host, plan):
    """The refusal of a plan on memory the host does not have (a device total far above MemTotal), or None."""
    problems = plan.get("problems") or []
    if not problems:
        return None
    return ("%s: the memory plan does not describe this host: %s. Set memory_guard_device_total_gib to what CUDA "
            "reports on this host (on GB10 about its MemTotal), or to null to plan on MemTotal; on a host without a "
            "GPU (vLLM's CPU build) null, and also memory_guard_set_gpu_memory_utilization: false (the CPU build takes "
            "no share) and 0 for the CUDA figures (memory_guard_cuda_context_gib, memory_guard_cuda_graph_gib, "
            "memory_guard_non_torch_gib; roles/memory_guard/README.md, \"Backends without a share\"). On a host that is "
            "not a GB10 (a GPU with memory of its own) the memory guard does not apply: memory_guard_enabled: false."
            % (_text(host), "; ".join(_text(problem.get("what")) for problem in problems)))


def pin_refusal(host, pin, pinned_plan):
    """The refusal of a pin above what the host allows (the computation at the pin returned no share), or None."""
    if pin is None or "gpu_memory_utilization" in pinned_plan:
        return None
    return ("%s pins vllm_gpu_memory_utilization %s in the inventory: %s Lower the pin or remove it (the memory guard "
            "then sets the share), or correct memory_guard_workloads and the reserves (memory_guard_os_reserve_gib, "
            "memory_guard_cuda_context_gib, memory_guard_start_floor_gib, memory_guard_headroom_gib)."
            % (_text(host), pin, _text(pinned_plan.get("msg", ""))))


def _ceil2(value):
    """Jinja's ``round(2, 'ceil')``, without rounding up a sum's float noise: 23.67 + ... + 5.6 is 39.470000000000006
    on Python 3.11 and 39.47 on 3.12 (whose ``sum`` compensates), and either is 39.47 GiB."""
    return math.ceil(round(value * 100, 6)) / 100


def share(v, plan, pinned_plan=None):
    """What the share gives: ``refusal`` (a message, empty when there is none), ``applied`` (the share to set as
    ``vllm_gpu_memory_utilization``, or None), ``need_gib`` and ``need_source`` (what the start check counts and why)
    and ``message`` (the line the role prints)."""
    host = v["inventory_hostname"]
    pin = pinned(v)
    pinned_plan = pinned_plan or {}
    refusal = plan_refusal(host, plan) or pin_refusal(host, pin, pinned_plan) or ""
    computed = jinja_float(plan.get("gpu_memory_utilization"))
    set_share = boolean(v["memory_guard_set_gpu_memory_utilization"], strict=False)
    applied = min(computed, ENGINE_MAX_SHARE) if set_share and pin is None else None
    engines_share = pin if pin is not None else (min(computed, ENGINE_MAX_SHARE) if set_share else None)
    # The start check is for what the engines get: the computed plan only when they get its share unchanged.
    share_plan = pinned_plan if pin is not None else (plan if computed <= ENGINE_MAX_SHARE else None)
    context = v["memory_guard_cuda_context_gib"]
    figures = [v["_memory_guard_weights_gib"], v["memory_guard_activation_gib"], v["memory_guard_cuda_graph_gib"],
               v["memory_guard_non_torch_gib"], v["_memory_guard_min_kv_gib"], context]
    if v["memory_guard_start_need_gib"] is not None:
        need, source = jinja_float(v["memory_guard_start_need_gib"]), "memory_guard_start_need_gib"
    elif engines_share is not None:
        if share_plan is not None:
            need = jinja_float(share_plan.get("start_need_gib"))
        else:
            device_total = (plan.get("hosts") or [{}])[0].get("device_total_gib")
            need = _ceil2(jinja_float(device_total) * engines_share + jinja_float(context))
        source = ("what vLLM asks at gpu_memory_utilization %s%s + %s GiB outside its share "
                  "(memory_guard_cuda_context_gib)"
                  % (engines_share, " (pinned in the inventory)" if pin is not None else " (computed)", _text(context)))
    else:
        need = _ceil2(sum(jinja_float(figure) for figure in figures))
        source = ("no gpu_memory_utilization: weights %s + activations %s + CUDA graphs %s + non-torch %s + minimum KV "
                  "cache %s + outside the share %s GiB" % tuple(_text(figure) for figure in figures))
    if pin is not None:
        engines_get = "%s (pinned in the inventory)" % pin
    elif set_share:
        engines_get = "%s (computed)" % applied
    else:
        engines_get = "not set (memory_guard_set_gpu_memory_utilization is false)"
    decision = plan.get("decision")
    measured = [line for line in plan.get("reasoning") or [] if re.match("measured at the last start", line)]
    message = ("%s: largest safe gpu_memory_utilization %s; %s vllm_gpu_memory_utilization for the engines: %s; the "
               "start check counts %.2f GiB (%s) and keeps %.2f GiB. %s"
               % (_text(host), _text(plan.get("max_gpu_memory_utilization")),
                  (_text(decision.get("line")) + ";") if decision is not None else "", engines_get, need, source,
                  jinja_float(v["memory_guard_start_floor_gib"]),
                  ("Declared beside what vLLM measured at its last start here: " + "; ".join(measured))
                  if plan.get("declared_vs_measured") else
                  "No engine start in the journal yet to compare the declared figures with."))
    return {"refusal": refusal, "applied": applied, "pinned": pin, "need_gib": need, "need_source": source,
            "message": message}


def outside(v, where):
    """The workload services that run (active, reloading, activating) outside ``memory_guard_slice``, from the
    registered loop ``where`` of ``systemctl show --property=Slice --property=ActiveState <unit>``: ``units``, and
    ``message`` - what the role prints, empty when there is none or ``memory_guard_restart_workloads`` restarts them."""
    slice_name = _text(v["memory_guard_slice"])
    units = [result["item"]["unit"] for result in (where or {}).get("results") or []
             if re.search(r"(?m)^ActiveState=(active|reloading|activating)$", result.get("stdout") or "")
             and not re.search(r"(?m)^Slice=%s$" % re.escape(slice_name), result.get("stdout") or "")]
    message = ""
    if units and not boolean(v["memory_guard_restart_workloads"], strict=False):
        message = ("Running outside %s until their next restart: %s. Their own MemoryHigh=/MemoryMax= apply already. "
                   "Set memory_guard_restart_workloads to restart them now." % (slice_name, ", ".join(units)))
    return {"units": units, "message": message}


def stale(v, found):
    """The paths of ``found`` (a registered ``find`` of the role's workload drop-ins) that belong to no declared
    workload's unit or slice: a workload taken out of the inventory loses its drop-in."""
    declared = {"%s/%s.d/%s" % (v["_memory_guard_unit_dir"], _given(item.get("unit")) or _given(item.get("slice")),
                                v["_memory_guard_dropin"])
                for item in v["memory_guard_workloads"] or [] if _given(item.get("unit")) or _given(item.get("slice"))}
    return [entry["path"] for entry in (found or {}).get("files") or [] if entry["path"] not in declared]


def engine_log_args(v):
    """``ansible.builtin.shell``'s arguments that read what vLLM printed about its memory at the engines' last start
    here (``_memory_guard_engine_log_cmd``: the lines of the later of the engine units' journals)."""
    return {"_raw_params": v["_memory_guard_engine_log_cmd"], "_uses_shell": True, "executable": "/bin/bash"}


def where_args(v):
    """Per workload service, ``command``'s arguments that read where it runs (``systemctl show``), for ``outside``."""
    return [(item, {"argv": ["systemctl", "show", "--property=Slice", "--property=ActiveState", item["unit"]]})
            for item in v["_memory_guard_unit_workloads"] or []]


def find_args(v, check):
    """``find``'s arguments for the drop-ins the role wrote: its workloads' (``stale``), or with the engines' start
    check's too (``installed``)."""
    patterns = [v["_memory_guard_dropin"]] + ([v["_memory_guard_start_dropin"]] if check == "installed" else [])
    return {"paths": [v["_memory_guard_unit_dir"]], "patterns": patterns, "recurse": True, "depth": 2}


def installed(v, found):
    """Everything the role wrote under the unit directory (``found``: a ``find`` of its drop-ins) and its workloads'
    slice, for the role to remove when ``memory_guard_enabled`` is false."""
    return ([entry["path"] for entry in (found or {}).get("files") or []]
            + ["%s/%s" % (v["_memory_guard_unit_dir"], v["memory_guard_slice"])])


def _file(v, template, path, validate, label, **item):
    """One file to write: the template, its path under the unit directory, its check, the loop's label, and what the
    template reads as ``item``."""
    return dict(item, src=template, validate=v[validate], label=label,
                dest="%s/%s" % (v["_memory_guard_unit_dir"], path))


def files(v, which, found=None):
    """The files ``which`` (``FILES``) the role writes and removes: ``dirs`` to create, ``write`` (each a template,
    its ``dest``, its systemd-analyze ``validate`` command, a ``label``, and what the template reads as ``item``),
    ``remove``. ``workloads``: the slice (removed when nothing is declared inside it), a drop-in per workload service
    (Slice= and its limits) and per declared slice (its limits), and the drop-ins of workloads no longer declared
    (``found``, a ``find`` of them). ``start_check``: the engines' ExecStartPre= drop-ins, removed with
    ``memory_guard_start_check`` false."""
    unit_dir, slice_name = v["_memory_guard_unit_dir"], _text(v["memory_guard_slice"])
    plan = {"dirs": [], "write": [], "remove": []}
    if which == "start_check":
        units = list(v["memory_guard_engine_units"] or [])
        paths = ["%s.d/%s" % (unit, v["_memory_guard_start_dropin"]) for unit in units]
        if not boolean(v["memory_guard_start_check"], strict=False):
            plan["remove"] = ["%s/%s" % (unit_dir, path) for path in paths]
            return plan
        plan["dirs"] = ["%s/%s.d" % (unit_dir, unit) for unit in units]
        plan["write"] = [_file(v, "engine-start-check.conf.j2", path, "_memory_guard_validate_service_dropin", unit,
                               unit=unit) for unit, path in zip(units, paths)]
        return plan
    if v["_memory_guard_inside"]:
        plan["write"].append(_file(v, "workloads.slice.j2", slice_name, "_memory_guard_validate_slice", slice_name))
    else:
        plan["remove"].append("%s/%s" % (unit_dir, slice_name))
    for item in v["_memory_guard_unit_workloads"] or []:
        plan["dirs"].append("%s/%s.d" % (unit_dir, item["unit"]))
        plan["write"].append(_file(v, "workload-service.conf.j2", "%s.d/%s" % (item["unit"], v["_memory_guard_dropin"]),
                                   "_memory_guard_validate_service_dropin", "%s (%s)" % (item["name"], item["unit"]),
                                   **item))
    for item in v["_memory_guard_slice_workloads"] or []:
        plan["dirs"].append("%s/%s.d" % (unit_dir, item["slice"]))
        plan["write"].append(_file(v, "workload-slice.conf.j2", "%s.d/%s" % (item["slice"], v["_memory_guard_dropin"]),
                                   "_memory_guard_validate_slice_dropin", "%s (%s)" % (item["name"], item["slice"]),
                                   **item))
    plan["remove"] += stale(v, found)
    return plan


# What O(check=status) reads of the watch's unit (systemctl show).
STATUS_PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,UnitFileState"


def status_args(v):
    """The reads of the status: ``command``'s arguments for ``systemctl show`` of the watch's unit, and ``slurp``'s for
    the watch's status file (its last look)."""
    return {"unit": {"argv": ["systemctl", "show", "-p", STATUS_PROPERTIES, "--", v["_memory_guard_watch_unit"]]},
            "watch": {"src": v["_memory_guard_watch_status"]}}


def status(v, unit, watch, plan):
    """What the status entry point notes: ``enabled``, ``unit`` (``systemctl show`` as text; empty when it could not
    be read), ``watch`` (the status file's text, from ``slurp``'s base64; empty when there is none) and ``share`` (the
    computation ``plan``, or why it could not be made; ``{}`` without one). Never fails."""
    text = ""
    if watch and not watch.get("failed") and watch.get("content"):
        text = base64.b64decode(watch["content"]).decode("utf-8", "replace")
    return {"enabled": boolean(v["memory_guard_enabled"], strict=False),
            "unit": (unit or {}).get("stdout") or "", "watch": text, "share": plan or {}}
