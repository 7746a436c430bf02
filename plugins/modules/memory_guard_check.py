#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: memory_guard_check
short_description: The memory guard's preflight refusals, and this host's share for vLLM with a pin checked against it
version_added: 0.1.0
description:
  - "The decisions of the C(factory_floor.llm.memory_guard) role. The module reads the role's variables itself, as the
    task sees them (the inventory, the role's defaults and vars, the model's figures its C(model) step registered), on
    the controller."
  - "O(check=preflight) refuses, before anything changes, naming the variable: model figures (C(memory_guard_weights_gib),
    C(memory_guard_min_kv_gib)) that are unknown or negative, negative reserves (GiB), a C(memory_guard_device_total_gib)
    that is not above 0 GiB nor null; a C(memory_guard_slice) that is not a slice of its own, a
    C(memory_guard_memory_high_ratio) outside (0, 1], a negative C(memory_guard_start_floor_gib) (GiB) or
    C(memory_guard_start_wait) (seconds), a C(memory_guard_start_need_gib) that is not null nor above 0 GiB; a watch
    interval not above 0 s or a negative floor, resume margin (GiB) or settle time (s); each declared workload without a
    name or a C(peak_gib) above 0 GiB, with both C(unit) and C(slice), a unit that is not a C(.service) or is a vLLM
    engine unit, a slice that is systemd's own or C(memory_guard_slice) itself, a C(memory_high_gib) outside
    (0, C(peak_gib)], an C(action) other than C(stop) or C(pause); and a workload name declared twice. It runs nothing
    on the host."
  - "O(check=compute) reads what vLLM printed about its memory at the engines' last start here (the later of the engine
    units' journals, C(journalctl); nothing when no engine has run here) unless O(engine_log) gives it, then runs
    M(factory_floor.llm.gpu_memory_utilization) on the host with the role's figures (the running engine's share kept
    within C(memory_guard_share_hysteresis_gib), what vLLM measured) and returns its result. It reads only, also in
    check mode."
  - "O(check=share) does the same, then decides what the share gives (RV(share)): a plan whose problems say it does
    not describe the host (a device total far above C(MemTotal)) is refused, and so is a C(vllm_gpu_memory_utilization)
    the inventory pins above what the host allows, computed again at the pin; else the share the engines get (at most
    0.99, the engine roles' limit) and what the start check counts. The role's tasks set the facts and fail with
    RV(share.refusal)."
  - "O(check=outside) names the workload services that run outside C(memory_guard_slice) now (RV(units)), from
    C(systemctl show --property=Slice --property=ActiveState <unit>) run on the host per workload service (or O(where));
    C(Slice=) moves a service only when it starts. It reads only, also in check mode; a C(systemctl) that fails fails
    the task with its message."
  - "O(check=stale) names the workload drop-ins the role wrote (a C(find) on the host under C(/etc/systemd/system), or
    O(found)) that belong to no declared workload's unit or slice any more (RV(paths)), for the role to remove."
  - "O(check=installed) names every file the role wrote (its workloads' and the engines' start check's drop-ins, found
    the same way, and the workloads' slice, RV(paths)), for the role to remove with C(memory_guard_enabled) false."
  - "O(check=files) plans the unit files of O(files) the role writes and removes under C(/etc/systemd/system):
    RV(dirs), RV(write) (each with its template, path and C(systemd-analyze verify) command) and RV(remove). For
    V(workloads), the slice C(memory_guard_slice) (removed when nothing is declared inside it), a drop-in per workload
    service (C(Slice=) and its limits) and per declared slice (its limits), and the drop-ins of workloads no longer
    declared (found as O(check=stale) does); for V(start_check), the engines' C(ExecStartPre=) drop-ins, removed with
    C(memory_guard_start_check) false."
  - "O(check=status) is what the role's C(status) entry point notes as C(memory_guard_status), read only and never
    failing: C(memory_guard_enabled) (RV(enabled)), C(systemctl show) of the watch's unit (RV(unit)), the text of the
    watch's status file (RV(watch), C(/run/factory-floor/memory-guard.json)) and O(plan) (RV(share)); a read that
    fails is noted as empty."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description: Which decision.
    type: str
    required: true
    choices: [preflight, compute, share, outside, stale, installed, files, status]
  engine_log:
    description:
      - What the engines' journal said at their last start on this host (the lines about vLLM's memory), for
        O(check=compute) and O(check=share); empty when no engine has run here. Default, read on the host with the
        role's C(_memory_guard_engine_log_cmd).
    type: str
  where:
    description:
      - For O(check=outside), the registered loop of C(systemctl show --property=Slice --property=ActiveState <unit>)
        over the workloads that name a unit (each result's C(item) the workload). Default, run on the host.
    type: dict
  found:
    description:
      - For O(check=stale) and O(check=installed), the registered C(ansible.builtin.find) of the role's drop-ins under
        the unit directory. Default, run on the host.
    type: dict
  files:
    description:
      - For O(check=files), which files - the workloads' slice and drop-ins, or the engines' start check drop-ins.
    type: str
    choices: [workloads, start_check]
  plan:
    description:
      - For O(check=status), this host's share as O(check=compute) returned it, or why it could not be computed
        (C(failed), C(msg)); RV(share) as given, C({}) without it.
    type: dict
seealso:
  - module: factory_floor.llm.gpu_memory_utilization
"""

EXAMPLES = r"""
# What the memory_guard role's preflight does, after reading the model's figures.
- name: Refuse settings the memory guard cannot work with, naming the variable
  factory_floor.llm.memory_guard_check:
    check: preflight

- name: Compute this host's share for vLLM, and check a pinned one against it
  factory_floor.llm.memory_guard_check:
    check: share
  register: __memory_guard_plan
"""

RETURN = r"""
changed:
  description: Always false; the checks only read.
  returned: always
  type: bool
  sample: false
errors:
  description:
    - O(check=preflight)'s refusals, in the order checked; empty when there is none. On failure C(msg) holds the same
      messages (numbered when there are several).
  returned: when O(check=preflight)
  type: list
  elements: dict
  contains:
    check:
      description: Which refusal - V(figures), V(slice), V(watch), V(workload), V(workload_names).
      type: str
      sample: workload
    variables:
      description: Variables to change.
      type: list
      elements: str
      sample: [memory_guard_workloads]
    message:
      description: What is refused and what to change.
      type: str
      sample: "memory_guard_workloads on spark-a declares a name twice: ['db', 'db']."
units:
  description: O(check=outside)'s workload services that run outside C(memory_guard_slice), in declared order.
  returned: when O(check=outside)
  type: list
  elements: str
  sample: [postgresql.service]
message:
  description:
    - O(check=outside)'s line naming them, to print; empty when there is none or C(memory_guard_restart_workloads)
      restarts them now.
  returned: when O(check=outside)
  type: str
paths:
  description:
    - O(check=stale)'s drop-ins of workloads no longer declared, to remove.
    - O(check=installed)'s files the role wrote, to remove (the workloads' slice last, whether it exists or not).
  returned: when O(check=stale) or O(check=installed)
  type: list
  elements: str
  sample: [/etc/systemd/system/mysql.service.d/60-factory-floor-memory-guard.conf]
dirs:
  description: O(check=files)'s drop-in directories to create (root's, C(0755)).
  returned: when O(check=files)
  type: list
  elements: str
  sample: [/etc/systemd/system/postgresql.service.d]
write:
  description:
    - O(check=files)'s files to write, each with C(src) (the role's template), C(dest), C(validate) (the
      C(systemd-analyze verify) command, C(%s) the file), C(label), and what the template reads as C(item) (the
      workload's keys, or C(unit) for the start check).
  returned: when O(check=files)
  type: list
  elements: dict
remove:
  description: O(check=files)'s files to remove.
  returned: when O(check=files)
  type: list
  elements: str
share:
  description:
    - What the share gives (O(check=share)); the rest of the result is M(factory_floor.llm.gpu_memory_utilization)'s.
    - With O(check=status), O(plan) as given (C({}) without it); the keys below do not apply.
  returned: when O(check=share) and the computation succeeded, or O(check=status)
  type: dict
  contains:
    refusal:
      description: Why the plan or the inventory's pin is refused, naming what to change; empty when neither is.
      type: str
    applied:
      description:
        - The share to set as C(vllm_gpu_memory_utilization) (fraction 0-1, at most 0.99); null with a pin or with
          C(memory_guard_set_gpu_memory_utilization) false.
      type: float
      sample: 0.79
    pinned:
      description: The share the inventory pins (fraction 0-1), null when it pins none.
      type: float
    need_gib:
      description:
        - GiB the start check counts the engine to take - C(memory_guard_start_need_gib), else the computation's
          C(start_need_gib) at the engines' share, else device total x share + C(memory_guard_cuda_context_gib), else
          (no share) the model's figures summed, rounded up to 0.01 GiB.
      type: float
      sample: 95.31
    need_source:
      description: Where RV(share.need_gib) comes from, in words.
      type: str
    message:
      description: The line the role prints - the largest safe share, what the engines get, what the start check counts.
      type: str
enabled:
  description: O(check=status)'s C(memory_guard_enabled).
  returned: when O(check=status)
  type: bool
unit:
  description:
    - O(check=status)'s C(systemctl show -p Id,LoadState,ActiveState,SubState,Result,UnitFileState) of the watch's
      unit, as text; empty when it could not be read.
  returned: when O(check=status)
  type: str
watch:
  description: O(check=status)'s text of the watch's status file (its last look - C(MemAvailable), the floor, each workload); empty when there is none.
  returned: when O(check=status)
  type: str
"""
