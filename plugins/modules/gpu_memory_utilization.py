#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_memory_utilization
short_description: Compute the largest safe vLLM gpu_memory_utilization for a unified-memory host
version_added: 0.1.0
description:
  - On an NVIDIA GB10 (DGX Spark) the GPU's memory is the machine's memory. vLLM takes
    device total x C(gpu_memory_utilization) out of the same C(MemTotal) as the OS, the page cache,
    databases and site builds, and refuses to start when less than that is free.
  - This module computes the largest RV(gpu_memory_utilization) that leaves room for the OS reserve,
    the co-resident workloads declared in the host's inventory (at their peak, or at their measured
    use when that is higher) and the requested headroom, and checks that the model's weights,
    activations and minimum KV cache fit in what it grants.
  - "The formula: left for vLLM = C(MemTotal) - O(os_reserve_gib) - sum(workloads) - O(headroom_gib);
    RV(gpu_memory_utilization) = floor(left for vLLM / O(device_total_gib), 0.01), at most 1.00;
    granted = O(device_total_gib) x RV(gpu_memory_utilization);
    KV cache = granted - O(weights_gib) - O(activation_gib), which must be at least O(min_kv_gib)."
  - Page cache is reclaimable and is never counted as used. It matters only at start-up, when vLLM
    compares what it asks for with free memory; RV(drop_caches_needed) says when dropping it first
    is required.
  - With O(hosts) (the split topology, one model over several hosts) every host is planned and the
    smallest result is returned, naming the host that decided it.
  - The module only reads (C(/proc/meminfo), the workloads' cgroup files, C(systemctl show)); it never
    changes anything.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  host:
    description:
      - Name of the host the figures describe, used in RV(reasoning) and RV(decided_by).
      - Defaults to this machine's host name.
      - Not used with O(hosts), where each host entry has its own O(hosts[].name).
    type: str
  meminfo:
    description:
      - The host's memory facts, instead of reading C(/proc/meminfo) on the target. For tests and
        what-if questions.
      - Either the text of C(/proc/meminfo), or a dictionary of its fields (C(MemTotal), C(MemFree),
        C(MemAvailable), C(Cached), C(Buffers)) to values in kB as the file writes them
        (an integer, or a string such as V(130023424 kB)).
      - Only C(MemTotal) is required. C(MemFree) and C(MemAvailable) (or C(Cached) and C(Buffers))
        are needed for RV(drop_caches_needed).
    type: raw
  device_total_gib:
    description:
      - Total device memory as CUDA reports it, in GiB. vLLM multiplies this by
        RV(gpu_memory_utilization) to get what it asks for.
      - On GB10, CUDA reports about V(121.7) GiB; set it to that (for example in the GB10 hosts'
        group variables).
      - When omitted, C(MemTotal) from O(meminfo) is used. Where C(MemTotal) is larger than CUDA's
        total, this yields a slightly smaller fraction than necessary, never a larger one.
    type: float
  workloads:
    description:
      - The co-resident workloads declared for this host in its inventory.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Name of the workload, used in messages.
        type: str
        required: true
      unit:
        description:
          - systemd unit that runs the workload (for example V(postgresql.service)). Its cgroup is
            read to measure its memory use (C(memory.current) minus page cache from C(memory.stat)),
            falling back to the unit's C(MemoryCurrent).
        type: str
      slice:
        description:
          - systemd slice holding the workload (for example V(site-builds.slice)). Measured like O(workloads[].unit).
          - Give O(workloads[].unit) or O(workloads[].slice), not both.
        type: str
      peak_gib:
        description:
          - The workload's declared peak memory, in GiB. For a site build, its peak while building,
            not its idle use.
          - The larger of this and the measured use is counted.
        type: float
        required: true
      priority:
        description:
          - How important it is to keep this workload on this host; higher is more important.
          - When the model does not fit, the error message names the lowest-priority workloads whose
            move would make room.
        type: int
        default: 0
      measured_gib:
        description:
          - A measured use in GiB supplied by the caller instead of reading the unit's cgroup (for
            what-if questions, or for hosts other than the target).
        type: float
  measure_workloads:
    description:
      - Read the memory use of workloads that name a O(workloads[].unit) or O(workloads[].slice)
        and have no O(workloads[].measured_gib).
      - A workload whose use cannot be measured (no systemd, cgroup v1 without memory accounting)
        counts with its declared peak.
      - Never done for O(hosts), which usually describe other machines.
    type: bool
    default: true
  os_reserve_gib:
    description:
      - Memory kept for the operating system (kernel, systemd, sshd, agents), in GiB.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 4.0
  headroom_gib:
    description:
      - Extra memory left free beyond the OS reserve and the workloads' peaks, in GiB.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 0.0
  weights_gib:
    description:
      - Memory the model's weights take once loaded, in GiB (vLLM logs it as C(Model loading took ... GiB)).
      - In the split topology, give each host its own shard (about total / O(hosts) for tensor parallelism).
      - Required, here or in every O(hosts) entry.
    type: float
  activation_gib:
    description:
      - Memory vLLM holds besides weights and KV cache, in GiB - peak activations, CUDA graphs,
        non-torch allocations, speculative-decoding (MTP) buffers.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 2.0
  min_kv_gib:
    description:
      - The smallest KV cache the service needs, in GiB (for example from M(factory_floor.llm.kv_cache_plan)).
      - Required, here or in every O(hosts) entry.
    type: float
  hosts:
    description:
      - Plan several hosts at once (the split topology). The module returns the smallest
        RV(gpu_memory_utilization) over them and the host that decided it, and checks that every
        host still fits the model at that value.
      - Options not given in an entry fall back to the top-level option of the same name.
      - Mutually exclusive with O(host), O(meminfo) and O(workloads).
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the host.
        type: str
        required: true
      meminfo:
        description: The host's C(/proc/meminfo), as for the top-level O(meminfo).
        type: raw
        required: true
      device_total_gib:
        description: As the top-level O(device_total_gib), in GiB.
        type: float
      workloads:
        description:
          - The workloads declared for this host, as the top-level O(workloads).
          - Nothing is measured here; give measurements as O(hosts[].workloads[].measured_gib).
        type: list
        elements: dict
        suboptions:
          name:
            description: Name of the workload.
            type: str
            required: true
          unit:
            description: systemd unit of the workload (informational here).
            type: str
          slice:
            description: systemd slice of the workload (informational here).
            type: str
          peak_gib:
            description: The workload's declared peak memory, in GiB.
            type: float
            required: true
          priority:
            description: How important it is to keep this workload on this host; higher is more important.
            type: int
            default: 0
          measured_gib:
            description: Measured use in GiB; counted instead of the peak when higher.
            type: float
      os_reserve_gib:
        description: As the top-level O(os_reserve_gib), in GiB.
        type: float
      headroom_gib:
        description: As the top-level O(headroom_gib), in GiB.
        type: float
      weights_gib:
        description: This host's share of the weights, in GiB.
        type: float
      activation_gib:
        description: As the top-level O(activation_gib), in GiB.
        type: float
      min_kv_gib:
        description: As the top-level O(min_kv_gib), in GiB.
        type: float
notes:
  - The start-up check (RV(fits_now), RV(drop_caches_needed)) describes the host as it is now. Run the
    module before vLLM starts; while vLLM runs, its own memory shows as used.
  - Measured workload use subtracts the cgroup's page cache (C(file) in C(memory.stat)); C(memory.peak)
    includes page cache and is therefore not compared with the declared peak.
seealso:
  - module: factory_floor.llm.kv_cache_plan
"""

EXAMPLES = r"""
- name: Compute this host's share for vLLM from what else runs on it
  factory_floor.llm.gpu_memory_utilization:
    device_total_gib: 121.7
    weights_gib: 71
    activation_gib: 2
    min_kv_gib: 8
    headroom_gib: 9
    workloads:
      - name: postgresql
        unit: postgresql.service
        peak_gib: 8
        priority: 10
      - name: site builds
        slice: site-builds.slice
        peak_gib: 12
  register: __vllm_memory

- name: Fail early when vLLM would not start
  ansible.builtin.assert:
    that: not __vllm_memory.drop_caches_needed
    fail_msg: "{{ __vllm_memory.reasoning | join('\n') }}"

- name: What-if for the split topology, the tighter host decides
  factory_floor.llm.gpu_memory_utilization:
    device_total_gib: 121.7
    weights_gib: 36
    min_kv_gib: 20
    hosts:
      - name: spark-a
        meminfo: "{{ hostvars['spark-a'].__meminfo.content | b64decode }}"
        workloads:
          - name: postgresql
            peak_gib: 8
      - name: spark-b
        meminfo:
          MemTotal: 130023424
  delegate_to: localhost
  run_once: true
  register: __split_memory
"""

RETURN = r"""
gpu_memory_utilization:
  description:
    - The largest safe value for vLLM's C(--gpu-memory-utilization), a fraction 0-1 rounded down to 0.01.
    - With O(hosts), the smallest over the hosts.
  returned: success
  type: float
  sample: 0.74
decided_by:
  description: The host whose memory decided RV(gpu_memory_utilization).
  returned: success
  type: str
  sample: spark-a
granted_gib:
  description: What vLLM asks for at RV(gpu_memory_utilization) on the deciding host, device total x fraction, in GiB.
  returned: success
  type: float
  sample: 90.06
left_gib:
  description: C(MemTotal) minus RV(granted_gib) on the deciding host, in GiB - what is left for everything else.
  returned: success
  type: float
  sample: 33.94
kv_cache_gib:
  description: RV(granted_gib) minus weights and activations on the deciding host - the KV cache vLLM will get, in GiB.
  returned: success
  type: float
  sample: 17.06
drop_caches_needed:
  description:
    - True when C(MemFree) is below RV(granted_gib) but C(MemAvailable) is enough, on any host - vLLM
      would refuse to start until the page cache is dropped (C(sync; echo 3 > /proc/sys/vm/drop_caches)).
  returned: success
  type: bool
  sample: false
fits_now:
  description: True when C(MemAvailable) on every host is at least what vLLM will ask for there.
  returned: success
  type: bool
  sample: true
reasoning:
  description: The computation as a table, one line per step, in GiB, for every host.
  returned: success
  type: list
  elements: str
  sample:
    - "host spark-a: MemTotal 124.00 GiB (/proc/meminfo), device total 121.70 GiB (device_total_gib)"
    - "gpu_memory_utilization = floor(91.00 / 121.70, 0.01) = 0.74 (max for this host 0.74) -> grants 90.06 GiB"
hosts:
  description: The machine-readable plan of every host (one entry without O(hosts)), at the returned fraction.
  returned: success
  type: list
  elements: dict
  contains:
    host:
      description: Host name.
      type: str
      sample: spark-a
    gpu_memory_utilization:
      description: The fraction (0-1) applied to this host - the common RV(gpu_memory_utilization).
      type: float
      sample: 0.74
    max_gpu_memory_utilization:
      description: The largest fraction (0-1) this host alone would allow.
      type: float
      sample: 0.74
    mem_total_gib:
      description: C(MemTotal) from C(/proc/meminfo), in GiB.
      type: float
      sample: 124.0
    mem_free_gib:
      description: C(MemFree), in GiB; null when not given.
      type: float
      sample: 20.0
    mem_available_gib:
      description: C(MemAvailable) (or C(MemFree + Buffers + Cached)), in GiB; null when not given.
      type: float
      sample: 100.0
    device_total_gib:
      description: The device total used, in GiB.
      type: float
      sample: 121.7
    device_total_source:
      description: Where the device total came from, V(device_total_gib) or V(MemTotal).
      type: str
      sample: device_total_gib
    os_reserve_gib:
      description: OS reserve, in GiB.
      type: float
      sample: 4.0
    headroom_gib:
      description: Headroom, in GiB.
      type: float
      sample: 9.0
    workloads:
      description: Each workload with its declared peak, measurement and the GiB counted.
      type: list
      elements: dict
      sample:
        - name: postgresql
          unit: postgresql.service
          priority: 10
          peak_gib: 8.0
          measured_gib: 6.2
          measured_source: /sys/fs/cgroup/system.slice/postgresql.service/memory.current - file
          counted_gib: 8.0
          basis: declared peak
    workloads_gib:
      description: Sum of the workloads' counted memory, in GiB.
      type: float
      sample: 20.0
    budget_gib:
      description: C(MemTotal) minus OS reserve, workloads and headroom - what vLLM may take, in GiB.
      type: float
      sample: 91.0
    granted_gib:
      description: Device total x fraction, in GiB.
      type: float
      sample: 90.06
    left_gib:
      description: C(MemTotal) minus RV(hosts[].granted_gib), in GiB.
      type: float
      sample: 33.94
    spare_gib:
      description: RV(hosts[].left_gib) minus OS reserve and workloads, in GiB (at least the headroom).
      type: float
      sample: 9.94
    weights_gib:
      description: Weights, in GiB.
      type: float
      sample: 71.0
    activation_gib:
      description: Activations and other non-KV memory of vLLM, in GiB.
      type: float
      sample: 2.0
    min_kv_gib:
      description: The minimum KV cache asked for, in GiB.
      type: float
      sample: 8.0
    kv_cache_gib:
      description: Granted minus weights and activations, in GiB.
      type: float
      sample: 17.06
    fits_now:
      description: C(MemAvailable) is at least RV(hosts[].granted_gib).
      type: bool
      sample: true
    drop_caches_needed:
      description: C(MemFree) is below RV(hosts[].granted_gib) and C(MemAvailable) is not.
      type: bool
      sample: false
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._memory import (
    MemoryPlanError,
    plan_hosts,
    reasoning_lines,
    summary,
    unit_memory,
)

MEMINFO_PATH = "/proc/meminfo"
CGROUP_ROOT = "/sys/fs/cgroup"

_WORKLOAD_SPEC = dict(
    name=dict(type="str", required=True),
    unit=dict(type="str"),
    slice=dict(type="str"),
    peak_gib=dict(type="float", required=True),
    priority=dict(type="int", default=0),
    measured_gib=dict(type="float"),
)

_HOST_DEFAULTED = ("device_total_gib", "os_reserve_gib", "headroom_gib", "weights_gib",
                   "activation_gib", "min_kv_gib")


def read_text(path):
    """Read a small text file (``/proc``, ``/sys``)."""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def systemctl_show(module):
    """A ``show_property(unit, name)`` callable backed by ``systemctl show``."""
    systemctl = module.get_bin_path("systemctl")

    def show_property(unit, name):
        if systemctl is None:
            return None
        rc, out, dummy = module.run_command([systemctl, "show", "-p", name, "--value", unit])
        return out.strip() if rc == 0 else None

    return show_property


def measure_with(module):
    """A ``measure(unit)`` callable reading the unit's cgroup, or None when disabled."""
    if not module.params["measure_workloads"]:
        return None
    show_property = systemctl_show(module)

    def measure(unit):
        return unit_memory(unit, show_property, read_text, CGROUP_ROOT)

    return measure


def _check_workloads(module, workloads, where):
    for item in workloads:
        if item.get("unit") and item.get("slice"):
            module.fail_json(
                msg="Reading workload %s in %s: it names both unit %s and slice %s; give one of them."
                % (item.get("name"), where, item["unit"], item["slice"]))


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            meminfo=dict(type="raw"),
            device_total_gib=dict(type="float"),
            workloads=dict(type="list", elements="dict", default=[], options=_WORKLOAD_SPEC),
            measure_workloads=dict(type="bool", default=True),
            os_reserve_gib=dict(type="float", default=4.0),
            headroom_gib=dict(type="float", default=0.0),
            weights_gib=dict(type="float"),
            activation_gib=dict(type="float", default=2.0),
            min_kv_gib=dict(type="float"),
            hosts=dict(
                type="list",
                elements="dict",
                options=dict(
                    name=dict(type="str", required=True),
                    meminfo=dict(type="raw", required=True),
                    device_total_gib=dict(type="float"),
                    workloads=dict(type="list", elements="dict", options=_WORKLOAD_SPEC),
                    os_reserve_gib=dict(type="float"),
                    headroom_gib=dict(type="float"),
                    weights_gib=dict(type="float"),
                    activation_gib=dict(type="float"),
                    min_kv_gib=dict(type="float"),
                ),
            ),
        ),
        mutually_exclusive=[("hosts", "host"), ("hosts", "meminfo"), ("hosts", "workloads")],
        supports_check_mode=True,
    )
    params = module.params

    if params["hosts"]:
        entries = []
        for entry in params["hosts"]:
            kwargs = {"name": entry["name"], "meminfo": entry["meminfo"],
                      "workloads": entry["workloads"] or []}
            for key in _HOST_DEFAULTED:
                kwargs[key] = entry[key] if entry[key] is not None else params[key]
            _check_workloads(module, kwargs["workloads"], "host %s" % entry["name"])
            entries.append(kwargs)
        measure = None
    else:
        meminfo = params["meminfo"]
        if meminfo is None:
            try:
                meminfo = read_text(MEMINFO_PATH)
            except OSError as exc:
                module.fail_json(
                    msg="Reading %s on the target to plan gpu_memory_utilization failed: %s. "
                    "Pass the host's memory facts as meminfo." % (MEMINFO_PATH, exc))
        _check_workloads(module, params["workloads"], "workloads")
        kwargs = {"name": params["host"] or socket.gethostname(), "meminfo": meminfo,
                  "workloads": params["workloads"]}
        for key in _HOST_DEFAULTED:
            kwargs[key] = params[key]
        entries = [kwargs]
        measure = measure_with(module)

    for kwargs in entries:
        for key in ("weights_gib", "min_kv_gib"):
            if kwargs[key] is None:
                module.fail_json(
                    msg="Planning gpu_memory_utilization for host %s: %s is not set. Give the model's %s "
                    "in GiB, at the top level or in the host's entry of hosts."
                    % (kwargs["name"], key, "weights" if key == "weights_gib" else "minimum KV cache"))

    try:
        result = plan_hosts(entries, measure=measure)
    except MemoryPlanError as exc:
        module.fail_json(msg=str(exc))

    plans = result["hosts"]
    decider = next(p for p in plans if p["host"] == result["decided_by"])
    reasoning = []
    warnings = []
    for plan in plans:
        reasoning.extend(reasoning_lines(plan))
        warnings.extend(plan["warnings"])
    if len(plans) > 1:
        reasoning.append("split: gpu_memory_utilization = min over hosts = %.2f, decided by %s"
                         % (result["gpu_memory_utilization"], result["decided_by"]))
    for warning in warnings:
        module.warn(warning)

    decider_summary = summary(decider)
    module.exit_json(
        changed=False,
        gpu_memory_utilization=result["gpu_memory_utilization"],
        decided_by=result["decided_by"],
        granted_gib=decider_summary["granted_gib"],
        left_gib=decider_summary["left_gib"],
        kv_cache_gib=decider_summary["kv_cache_gib"],
        drop_caches_needed=any(p["drop_caches_needed"] for p in plans),
        fits_now=all(p["fits_now"] for p in plans),
        reasoning=reasoning,
        hosts=[summary(p) for p in plans],
    )


def main():
    run_module()


if __name__ == "__main__":
    main()
