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
  - This module computes the largest RV(gpu_memory_utilization) whose start check passes on the host as
    declared - the OS at O(os_reserve_gib), every co-resident workload at its peak (or at its measured
    use when that is higher) - while keeping O(headroom_gib), and that also fits the host as it is now
    (C(MemAvailable), plus what the engines running there now give back when they stop), and checks that the model's weights,
    activations, CUDA graphs, non-torch memory and minimum KV cache fit in what it grants. The same
    computation (C(plugins/module_utils/_host/memory.py)) is the memory guard's start check on the host, so a
    share this module recommends is one that check lets start.
  - "The rules follow vLLM 0.32: vLLM asks for ceil(device total x RV(gpu_memory_utilization)) (C(request_memory))
    and, on unified memory, compares it with C(MemAvailable) taken after its own processes and CUDA context
    exist (C(MemorySnapshot.measure)); its KV cache is that request minus weights, peak activation, CUDA graph
    memory and non-torch memory (C(determine_available_memory))."
  - "The formula: the start check needs C(MemAvailable) >= granted + O(cuda_context_gib) (rounded up to 0.01 GiB)
    + O(floor_gib); on the host as declared C(MemAvailable) = C(MemTotal) - O(os_reserve_gib) - sum(workloads);
    RV(gpu_memory_utilization) is the largest hundredth for which that holds with O(headroom_gib) to spare
    (about floor((C(MemTotal) - O(os_reserve_gib) - sum(workloads) - O(headroom_gib) - O(floor_gib)
    - O(cuda_context_gib)) / O(device_total_gib), 0.01));
    KV cache = granted - O(weights_gib) - O(activation_gib) - O(cuda_graph_gib) - O(non_torch_gib), which must be
    at least O(min_kv_gib)."
  - "The host as it is now: a start finds C(MemAvailable) plus what the engines of O(engine_units) running now hold
    (they stop first: a restart, or the other topology's engine in a switch); after the start that less granted and
    O(cuda_context_gib) must still be at least O(floor_gib). The share is the smaller of the two
    (RV(max_gpu_memory_utilization_declared), RV(max_gpu_memory_utilization_now); RV(limited_by) says which), so a
    recommended share never leaves the host under its floor once vLLM holds its memory. RV(fits_now) is that test at
    the returned share: after the start, not before."
  - When the result is below a share an engine runs with now (or O(reference_gpu_memory_utilization)), or a pinned
    O(gpu_memory_utilization), or the share O(min_kv_gib) needs, one line (RV(difference), and in the failure message)
    says what keeps the host from it - which declared reserve (O(os_reserve_gib), O(cuda_context_gib), O(floor_gib),
    O(headroom_gib)) alone makes the difference and the value it would need, or the GiB C(MemAvailable) is short now.
  - "A new share restarts the engine. With O(running_unit) (or O(running_gpu_memory_utilization)) the share that engine
    runs with now is kept while it is still safe - not above the largest safe share and its KV cache not below
    O(min_kv_gib) - and the largest safe share would add at most O(hysteresis_gib) GiB to what vLLM asks; above the
    largest safe share it is lowered (the other workloads need the memory now), beyond O(hysteresis_gib) raised.
    RV(decision) and a line of RV(reasoning) say which case applied."
  - A device total (O(device_total_gib)) more than 5% above the host's C(MemTotal) is returned in RV(problems) and
    named first in RV(reasoning) - on unified memory CUDA reports about C(MemTotal) (121.69 GiB on a DGX Spark), so
    such a plan grants memory the host does not have. The module still returns the figures; the memory guard refuses
    the plan.
  - Page cache is reclaimable and is never counted as used. It matters only at start-up; RV(drop_caches_needed)
    says when the start check will drop it first.
  - With O(engine_log) (the engine's journal after a start), the figures vLLM measured - model weights, peak
    activation, non-torch memory, CUDA graph memory, KV cache size - are returned in RV(measured) and beside the
    declared ones in RV(declared_vs_measured).
  - With O(hosts) (the split topology, one model over several hosts) every host is planned and the
    smallest result is returned, naming the host that decided it.
  - The module only reads (C(/proc/meminfo), the workloads' and engines' cgroup files, the engines' command lines,
    C(systemctl show)); it never changes anything.
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
      - vLLM's peak activation memory inside its share, in GiB (vLLM logs it, with the CUDA graph estimate added
        in, as C(... GiB for peak activation)). Include speculative-decoding (MTP) buffers here.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 2.0
  cuda_graph_gib:
    description:
      - "CUDA graph memory inside vLLM's share, in GiB. vLLM 0.32 deducts its estimate from the KV cache
        (C(Estimated CUDA graph memory: ... GiB total)). V(0) with C(--enforce-eager)."
      - The default is what a published GB10 start-up log captured (about 1.7 GiB, Qwen3.6-27B NVFP4).
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 1.7
  non_torch_gib:
    description:
      - Non-torch memory inside vLLM's share, in GiB - NCCL buffers for tensor parallelism and other allocations
        made after vLLM's start-up snapshot (vLLM logs them with the weights as C(consumed memory (weights +
        non-torch))).
      - The default is a margin for the split's NCCL buffers over the link, not a GB10 measurement; replace it with
        the C(non_torch_gib) in RV(measured) after a start.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 0.5
  cuda_context_gib:
    description:
      - Memory the engine takes outside its share, in GiB - the CUDA context and the host memory of its processes
        (API server, EngineCore, worker). vLLM takes it before its own start-up check reads C(MemAvailable), so it
        is never part of RV(gpu_memory_utilization) but must be free too.
      - The default is what the published two-Spark report measured on GB10 (about 5.6 GiB host-side that vLLM's
        accounting omits).
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 5.6
  floor_gib:
    description:
      - C(MemAvailable) the start check keeps for the rest of the host once the engine has its memory, in GiB (the
        memory guard's C(memory_guard_start_floor_gib)). The share leaves it free.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
    default: 2.0
  gpu_memory_utilization:
    description:
      - Evaluate this share (a fraction 0-1 in steps of 0.01, for example one the inventory pins) instead of the
        largest; the module fails, naming the numbers, when it is above the largest safe share.
    type: float
  reference_gpu_memory_utilization:
    description:
      - A share to compare the result with (a fraction 0-1 in steps of 0.01), for example the one the operators ran
        by hand. When the result is below it, RV(difference) says in one line which declared reserve makes the
        difference and by how much.
      - Default - the largest share an engine of O(engine_units) runs with now.
      - With O(hosts), the default for hosts that do not set their own.
    type: float
  running_unit:
    description:
      - The engine unit this run configures (for example V(vllm-replica.service)), one of O(engine_units). The
        C(--gpu-memory-utilization) it runs with now (its main process's command line) is kept while safe and within
        O(hysteresis_gib) (see RV(decision)). Nothing is kept when it does not run, or runs without the flag.
      - Not used with O(running_gpu_memory_utilization), O(engines_held_gib) (nothing is read then) or O(hosts).
    type: str
  running_gpu_memory_utilization:
    description:
      - The share (fraction 0-1) the engine this run configures runs with now, instead of reading O(running_unit) -
        for tests, what-if questions and O(hosts) (the split's engines run with one share).
    type: float
  hysteresis_gib:
    description:
      - The most the largest safe share may add to what vLLM asks, in GiB, before the running engine's share
        (O(running_unit)) is given up for it - a new share restarts the engine. V(0) always takes the largest.
      - Never keeps a share above the largest safe one.
    type: float
    default: 0.0
  engine_units:
    description:
      - The systemd units of the vLLM engines on this host (both topologies'). Each one that runs now is read - its
        main process's command line for C(--gpu-memory-utilization), its cgroup for its memory - and what it holds
        counts as available to a start, which stops it first.
      - An engine started with C(--gpu-memory-utilization) holds ceil(O(device_total_gib) x its share) +
        O(cuda_context_gib) (its measured use when that is higher); one without (vLLM's CPU build) its measured use
        (C(memory.current) less page cache), or nothing when that cannot be measured.
      - Not used with O(engines_held_gib) or O(hosts).
    type: list
    elements: str
    default: []
  engines_held_gib:
    description:
      - What the engines running on this host now hold, in GiB, instead of reading O(engine_units) - for tests and
        what-if questions (V(0) - nothing runs).
    type: float
  engine_log:
    description:
      - The engine's log after a start (for example C(journalctl -u vllm-replica.service) since its last start).
        The figures vLLM 0.32 printed about its memory are returned in RV(measured) and compared with the declared
        ones in RV(declared_vs_measured). Only the last start in the text counts.
    type: str
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
      cuda_graph_gib:
        description: As the top-level O(cuda_graph_gib), in GiB.
        type: float
      non_torch_gib:
        description: As the top-level O(non_torch_gib), in GiB.
        type: float
      cuda_context_gib:
        description: As the top-level O(cuda_context_gib), in GiB.
        type: float
      floor_gib:
        description: As the top-level O(floor_gib), in GiB.
        type: float
      min_kv_gib:
        description: As the top-level O(min_kv_gib), in GiB.
        type: float
      engines_held_gib:
        description:
          - What the engines running on this host now hold, in GiB (see the top-level O(engines_held_gib)); default
            V(0).
        type: float
      reference_gpu_memory_utilization:
        description: As the top-level O(reference_gpu_memory_utilization), a fraction 0-1.
        type: float
notes:
  - The start-up check (RV(fits_now), RV(drop_caches_needed)) describes a start on the host as it is now, once the
    engines running there have stopped (O(engine_units), or O(engines_held_gib)); a C(meminfo) without
    C(MemAvailable) is not judged (RV(fits_now) false, RV(max_gpu_memory_utilization_now) null).
  - The rules follow vLLM 0.32.0 (C(vllm/v1/worker/utils.py) C(request_memory), C(vllm/v1/worker/gpu_worker.py)
    C(determine_available_memory), C(vllm/utils/mem_utils.py) C(MemorySnapshot)); the log lines read from
    O(engine_log) are that version's.
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
    # Running engines give their memory back to the next start (both topologies' units).
    engine_units: [vllm-replica.service, vllm-split.service]
  register: __vllm_memory

- name: Why the computed share is below the 0.74 the operators ran by hand, in one line
  ansible.builtin.debug:
    msg: "{{ __vllm_memory.difference or 'nothing: it is not below it' }}"

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
start_need_gib:
  description:
    - What the start check compares with C(MemAvailable) on the deciding host, in GiB - what vLLM asks for
      (RV(granted_gib)) plus what it holds outside its share (O(cuda_context_gib)), rounded up to 0.01. The
      memory guard passes it to the check as C(--need-gib).
  returned: success
  type: float
  sample: 95.66
floor_gib:
  description: C(MemAvailable) the start check keeps for the rest of the host (O(floor_gib)), in GiB.
  returned: success
  type: float
  sample: 2.0
max_gpu_memory_utilization:
  description:
    - The largest safe share (fraction 0-1); differs from RV(gpu_memory_utilization) only with O(gpu_memory_utilization)
      or when a running engine's share is kept or lowered to it (RV(decision)).
  returned: success
  type: float
  sample: 0.74
max_gpu_memory_utilization_declared:
  description: On the deciding host, the largest share (fraction 0-1) whose start check passes on the host as declared.
  returned: success
  type: float
  sample: 0.74
max_gpu_memory_utilization_now:
  description:
    - On the deciding host, the largest share (fraction 0-1) that keeps O(floor_gib) of C(MemAvailable) after a start
      on the host as it is now (what the running engines hold counted back). Null without C(MemAvailable).
  returned: success
  type: float
  sample: 0.82
limited_by:
  description: Which test decided the deciding host's largest share - V(declared) or V(now).
  returned: success
  type: str
  sample: declared
available_after_start_gib:
  description:
    - On the deciding host, C(MemAvailable) after the engine starts at RV(gpu_memory_utilization), in GiB - now plus
      RV(engines_held_gib), less RV(start_need_gib). At least RV(floor_gib) when RV(fits_now). Null without
      C(MemAvailable).
  returned: success
  type: float
  sample: 12.87
engines_held_gib:
  description: What the engines running on the deciding host hold now, in GiB (O(engine_units) or O(engines_held_gib)).
  returned: success
  type: float
  sample: 95.66
difference:
  description:
    - One line per host whose share is below its reference share (O(reference_gpu_memory_utilization), or the share
      an engine runs with now) - which declared reserve makes the difference and the value it would need, or how
      many GiB C(MemAvailable) is short now. Empty otherwise.
  returned: success
  type: str
  sample: >-
    gpu_memory_utilization 0.74 on host spark-b: 8.76 GiB more than its declarations leave (...); floor_gib alone
    makes the difference (floor_gib 0.24 instead of 9.00)
measured:
  description:
    - What vLLM printed about its memory at its last start in O(engine_log) (vLLM 0.32's log lines), GiB unless
      named otherwise; a figure vLLM did not print is null. Null without O(engine_log).
    - C(weights_gib) (C(Model loading took)), C(kv_cache_gib) (C(Available KV cache memory), or the CPU build's
      C(Explicitly set)/C(Auto set ... GiB for KV cache)), C(consumed_gib) and C(non_torch_gib) (consumed minus
      weights), C(peak_activation_gib) (logged peak activation less the CUDA graph estimate vLLM adds into it),
      C(cuda_graph_gib) (captured pool), C(cuda_graph_estimated_gib) (deducted from the KV cache),
      C(free_at_start_gib), C(requested_gib), C(device_total_gib), C(kv_cache_tokens) and C(max_concurrency)
      (C(KV cache size), tokens and a factor), C(lines) (the log lines read).
  returned: success
  type: dict
  sample:
    weights_gib: 71.2
    peak_activation_gib: 1.62
    non_torch_gib: 0.31
    cuda_graph_estimated_gib: 1.71
    kv_cache_gib: 14.9
    kv_cache_tokens: 760000
declared_vs_measured:
  description:
    - Each declared figure beside the one vLLM measured, in GiB - C(name) (the option), C(declared_gib),
      C(measured_gib), C(measured_as) (the key in RV(measured)) and C(difference_gib) (measured - declared;
      positive means vLLM took more than was budgeted). Empty without O(engine_log).
  returned: success
  type: list
  elements: dict
  sample:
    - {name: activation_gib, declared_gib: 2.0, measured_gib: 1.62, measured_as: peak_activation_gib, difference_gib: -0.38}
gpu_memory_utilization:
  description:
    - The value for vLLM's C(--gpu-memory-utilization), a fraction 0-1 in steps of 0.01 - the largest safe one
      (RV(max_gpu_memory_utilization)), or the running engine's while it is safe and within O(hysteresis_gib)
      (RV(decision)), or a pinned O(gpu_memory_utilization).
    - With O(hosts), the smallest over the hosts.
  returned: success
  type: float
  sample: 0.74
decision:
  description:
    - Why RV(gpu_memory_utilization) is what it is, without a pinned O(gpu_memory_utilization) (null then).
    - C(case) - V(computed) (no engine of O(running_unit) runs with a share, so the largest safe share), V(kept) (the
      running share is safe and the largest would add at most O(hysteresis_gib)), V(lowered) (the running share is
      above the largest safe share) or V(raised) (the largest adds more than O(hysteresis_gib), or the running share's
      KV cache is below O(min_kv_gib)); C(running_gpu_memory_utilization) and C(max_gpu_memory_utilization)
      (fractions 0-1), C(gain_gib) (what the largest safe share adds to vLLM's request over the running one, GiB,
      negative when lowered; null with nothing running), C(hysteresis_gib), C(line) (the same in words, also a line
      of RV(reasoning)).
  returned: success
  type: dict
  sample:
    case: kept
    gpu_memory_utilization: 0.73
    running_gpu_memory_utilization: 0.73
    max_gpu_memory_utilization: 0.74
    gain_gib: 1.22
    hysteresis_gib: 4.0
    line: "share kept: the running engine (vllm-replica.service) runs with 0.73, safe (...)"
problems:
  description:
    - What makes the plan unusable, one entry per problem - C(host), C(what) and C(fix) (in this module's option
      names). Today - a device total (O(device_total_gib)) more than 5% above the host's C(MemTotal). Empty when
      none; the figures are returned either way.
  returned: success
  type: list
  elements: dict
  sample:
    - host: spark-a
      what: "device total 121.70 GiB (device_total_gib) is 5.2 times host spark-a's MemTotal 23.54 GiB (...)"
      fix: "set device_total_gib to what CUDA reports on this host (...), or leave it out to plan on MemTotal (...)"
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
  description:
    - C(MemTotal) minus RV(granted_gib) and O(cuda_context_gib) on the deciding host, in GiB - what is left for
      everything else.
  returned: success
  type: float
  sample: 28.34
kv_cache_gib:
  description:
    - RV(granted_gib) minus weights, peak activation, CUDA graphs and non-torch memory on the deciding host - the
      KV cache vLLM will get, in GiB.
  returned: success
  type: float
  sample: 14.86
drop_caches_needed:
  description:
    - True when, on any host, C(MemFree) is below RV(start_need_gib) but C(MemAvailable) is enough - the start
      check drops the page cache first (C(sync; echo 3 > /proc/sys/vm/drop_caches)).
  returned: success
  type: bool
  sample: false
fits_now:
  description:
    - True when, on every host, a start on the memory as it is now leaves at least RV(floor_gib) of C(MemAvailable)
      once the engine holds its share and what it takes outside it (C(MemAvailable) plus what the running engines
      give back, less RV(start_need_gib)) - the start check would let it start.
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
    - "start check: MemAvailable >= 95.66 (share + outside it, rounded up) + 2.00 floor = 97.66 GiB; the host as declared has 100.00 GiB available"
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
      description: C(MemTotal) minus RV(hosts[].granted_gib) and O(cuda_context_gib), in GiB.
      type: float
      sample: 28.34
    spare_gib:
      description: RV(hosts[].left_gib) minus OS reserve, workloads and floor, in GiB (at least the headroom).
      type: float
      sample: 2.34
    start_need_gib:
      description: What the start check compares with C(MemAvailable) on this host, in GiB (see RV(start_need_gib)).
      type: float
      sample: 95.66
    floor_gib:
      description: The start check's floor, in GiB.
      type: float
      sample: 2.0
    cuda_context_gib:
      description: What vLLM holds outside its share (CUDA context, its processes), in GiB.
      type: float
      sample: 5.6
    cuda_graph_gib:
      description: CUDA graph memory inside the share, in GiB.
      type: float
      sample: 1.7
    non_torch_gib:
      description: Non-torch memory (NCCL buffers) inside the share, in GiB.
      type: float
      sample: 0.5
    weights_gib:
      description: Weights, in GiB.
      type: float
      sample: 71.0
    activation_gib:
      description: Peak activation inside the share, in GiB.
      type: float
      sample: 2.0
    min_kv_gib:
      description: The minimum KV cache asked for, in GiB.
      type: float
      sample: 8.0
    kv_cache_gib:
      description: Granted minus weights, peak activation, CUDA graphs and non-torch memory, in GiB.
      type: float
      sample: 14.86
    fits_now:
      description: A start on the memory as it is now keeps RV(hosts[].floor_gib) once the engine has its memory.
      type: bool
      sample: true
    max_gpu_memory_utilization_declared:
      description: The largest share (0-1) this host allows as declared.
      type: float
      sample: 0.74
    max_gpu_memory_utilization_now:
      description: The largest share (0-1) this host allows as it is now; null without C(MemAvailable).
      type: float
      sample: 0.82
    limited_by:
      description: V(declared) or V(now), whichever decided RV(hosts[].max_gpu_memory_utilization).
      type: str
      sample: declared
    engines_held_gib:
      description: What the engines running on this host now hold, in GiB.
      type: float
      sample: 95.66
    engines:
      description:
        - Each running engine read - C(unit), C(gpu_memory_utilization) (from its command line, null without the
          flag), C(measured_gib) (its cgroup, null when not measurable), C(held_gib) and C(held_basis).
      type: list
      elements: dict
      sample:
        - {unit: vllm-replica.service, gpu_memory_utilization: 0.74, measured_gib: null, held_gib: 95.66,
           held_basis: its --gpu-memory-utilization 0.74 + cuda_context_gib}
    available_after_start_gib:
      description: C(MemAvailable) after a start at the host's share, in GiB; null without C(MemAvailable).
      type: float
      sample: 12.87
    reference_gpu_memory_utilization:
      description: The share compared with (0-1), or null.
      type: float
      sample: 0.74
    difference:
      description: What keeps this host below its reference share, in one line; empty when nothing does.
      type: str
      sample: ""
    drop_caches_needed:
      description: C(MemFree) is below RV(hosts[].start_need_gib) and C(MemAvailable) is not.
      type: bool
      sample: false
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_log import compare, parse_engine_log
from ansible_collections.factory_floor.llm.plugins.module_utils._host.memory import (
    MemoryPlanError,
    to_gib,
    unit_memory,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import (
    plan_hosts,
    running_share,
    running_share_of,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_report import reasoning_lines, summary
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import UnitStateError, show_properties

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
                   "activation_gib", "cuda_graph_gib", "non_torch_gib", "cuda_context_gib", "floor_gib",
                   "min_kv_gib")


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
        try:
            return show_properties(unit, (name,), module.run_command, systemctl).get(name, "")
        except UnitStateError:
            return None

    return show_property


def measure_with(module):
    """A ``measure(unit)`` callable reading the unit's cgroup, or None when disabled."""
    if not module.params["measure_workloads"]:
        return None
    show_property = systemctl_show(module)

    def measure(unit):
        return unit_memory(unit, show_property, read_text, CGROUP_ROOT)

    return measure


def read_engines(module, units):
    """The engines running on this host now: each one's ``--gpu-memory-utilization`` and measured memory.

    A unit with no main process (inactive, or systemd cannot be asked) is not running and
    holds nothing. Its command line is its main process's (``/proc/PID/cmdline``; for a
    container, the ``docker run ... serve ...`` client's, which carries vLLM's flags).
    """
    show_property = systemctl_show(module)
    engines = []
    for unit in units:
        try:
            pid = int((show_property(unit, "MainPID") or "0").strip() or 0)
        except ValueError:
            pid = 0
        if pid <= 0:
            continue
        try:
            words = read_text("/proc/%d/cmdline" % pid).split("\0")
        except OSError:
            continue   # it ended since systemctl answered
        measured = unit_memory(unit, show_property, read_text, CGROUP_ROOT)
        engines.append({"unit": unit, "gpu_memory_utilization": running_share(words),
                        "measured_bytes": None if measured is None else measured["used"]})
    return engines


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
            cuda_graph_gib=dict(type="float", default=1.7),
            non_torch_gib=dict(type="float", default=0.5),
            cuda_context_gib=dict(type="float", default=5.6),
            floor_gib=dict(type="float", default=2.0),
            min_kv_gib=dict(type="float"),
            gpu_memory_utilization=dict(type="float"),
            reference_gpu_memory_utilization=dict(type="float"),
            engine_units=dict(type="list", elements="str", default=[]),
            engines_held_gib=dict(type="float"),
            engine_log=dict(type="str"),
            running_unit=dict(type="str"),
            running_gpu_memory_utilization=dict(type="float"),
            hysteresis_gib=dict(type="float", default=0.0),
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
                    cuda_graph_gib=dict(type="float"),
                    non_torch_gib=dict(type="float"),
                    cuda_context_gib=dict(type="float"),
                    floor_gib=dict(type="float"),
                    min_kv_gib=dict(type="float"),
                    engines_held_gib=dict(type="float"),
                    reference_gpu_memory_utilization=dict(type="float"),
                ),
            ),
        ),
        mutually_exclusive=[("hosts", "host"), ("hosts", "meminfo"), ("hosts", "workloads"),
                            ("hosts", "engine_units"), ("hosts", "engines_held_gib"), ("hosts", "running_unit"),
                            ("running_unit", "running_gpu_memory_utilization")],
        supports_check_mode=True,
    )
    params = module.params
    running = params["running_gpu_memory_utilization"]

    if params["hosts"]:
        entries = []
        for entry in params["hosts"]:
            kwargs = {"name": entry["name"], "meminfo": entry["meminfo"],
                      "workloads": entry["workloads"] or []}
            for key in _HOST_DEFAULTED:
                kwargs[key] = entry[key] if entry[key] is not None else params[key]
            kwargs["engines_held_gib"] = entry["engines_held_gib"]
            kwargs["reference_gpu_memory_utilization"] = (entry["reference_gpu_memory_utilization"]
                                                          if entry["reference_gpu_memory_utilization"] is not None
                                                          else params["reference_gpu_memory_utilization"])
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
        kwargs["reference_gpu_memory_utilization"] = params["reference_gpu_memory_utilization"]
        kwargs["engines_held_gib"] = params["engines_held_gib"]
        if params["engines_held_gib"] is None:
            units = list(params["engine_units"])
            if params["running_unit"] and params["running_unit"] not in units:
                units.append(params["running_unit"])
            kwargs["engines"] = read_engines(module, units)
            if params["running_unit"]:
                running = running_share_of(kwargs["engines"], params["running_unit"])
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
        result = plan_hosts(entries, measure=measure, gpu_memory_utilization=params["gpu_memory_utilization"],
                            running_gpu_memory_utilization=running, hysteresis_gib=params["hysteresis_gib"],
                            running_unit=params["running_unit"])
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
        # Without a pin, the largest over the hosts; the decision below says what the engines get.
        reasoning.append("split: gpu_memory_utilization = min over hosts = %.2f, decided by %s"
                         % (result["gpu_memory_utilization"] if result["decision"] is None
                            else result["max_gpu_memory_utilization"], result["decided_by"]))
    decision = result["decision"]
    if decision is not None:
        reasoning.append(decision["line"])
        decision = {
            "case": decision["case"],
            "gpu_memory_utilization": decision["hundredths"] / 100.0,
            "running_gpu_memory_utilization": (None if decision["running_hundredths"] is None
                                               else decision["running_hundredths"] / 100.0),
            "max_gpu_memory_utilization": decision["largest_hundredths"] / 100.0,
            "gain_gib": None if decision["gain_bytes"] is None else to_gib(decision["gain_bytes"]),
            "hysteresis_gib": to_gib(decision["hysteresis_bytes"]),
            "line": decision["line"],
        }
    difference = "; ".join(plan["difference"] for plan in plans if plan["difference"])
    if difference:
        reasoning.append(difference)
    for warning in warnings:
        module.warn(warning)

    decider_summary = summary(decider)
    measured = None
    declared_vs_measured = []
    if params["engine_log"] is not None:
        parsed = parse_engine_log(params["engine_log"])
        measured = dict(parsed["figures"], lines=parsed["lines"])
        declared = dict((key, decider_summary[key]) for key in
                        ("weights_gib", "activation_gib", "cuda_graph_gib", "non_torch_gib", "kv_cache_gib"))
        declared_vs_measured = compare(declared, parsed["figures"])
        for row in declared_vs_measured:
            if row["measured_gib"] is not None:
                reasoning.append("measured at the last start: %s declared %s GiB, vLLM %s %s GiB (%+.2f)"
                                 % (row["name"], row["declared_gib"], row["measured_as"], row["measured_gib"],
                                    row["difference_gib"]))
    module.exit_json(
        changed=False,
        start_need_gib=decider_summary["start_need_gib"],
        floor_gib=decider_summary["floor_gib"],
        max_gpu_memory_utilization=result["max_gpu_memory_utilization"],
        max_gpu_memory_utilization_declared=decider_summary["max_gpu_memory_utilization_declared"],
        max_gpu_memory_utilization_now=decider_summary["max_gpu_memory_utilization_now"],
        limited_by=decider_summary["limited_by"],
        available_after_start_gib=decider_summary["available_after_start_gib"],
        engines_held_gib=decider_summary["engines_held_gib"],
        difference=difference,
        measured=measured,
        declared_vs_measured=declared_vs_measured,
        gpu_memory_utilization=result["gpu_memory_utilization"],
        decision=decision,
        problems=result["problems"],
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
