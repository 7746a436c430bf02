#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: split_link
short_description: Read the split's direct link on each host and judge it on the controller, refusing what cannot carry the split
version_added: 0.1.0
description:
  - "The C(factory_floor.llm.vllm_split) role's link steps. The module reads the variables it needs itself, as the task
    sees them (inventory, the role's defaults and vars)."
  - "O(step=read) runs M(factory_floor.llm.link_check) on the host: O(kind=link) the link itself (C(vllm_link_interface),
    C(vllm_link_address), the address of the rank it pings (the head, or rank 1 from the head), the ports the split needs free on the head, C(vllm_split_rdma),
    C(vllm_split_nccl_ib_hca), C(vllm_split_rdma_devices), C(vllm_split_nccl_library)); O(kind=engine) only what NCCL
    logged in the running split unit's current run. Its result is M(factory_floor.llm.link_check)'s, with RV(link)."
  - "O(step=judge) (once, C(run_once)) reads from C(hostvars) the result each of the split's hosts (C(_vllm_split_hosts);
    O(kind=engine), those of this batch) registered - C(__vllm_split_link_seen) (V(link)), C(__vllm_split_collective)
    (V(collective), M(factory_floor.llm.link_collective)'s) or C(__vllm_split_transport) (V(engine)) - and judges them
    on the controller (the C(factory_floor.llm.link_report) filter's verdict). It fails with the refusal: a link that
    cannot carry the split, an all-reduce that failed, ran on sockets with RDMA required or was slower than
    C(vllm_split_link_min_bandwidth) (GB/s), an engine on sockets with C(vllm_split_rdma) C(required); each names the
    host and the fix."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  step:
    description: V(read) on each host, or V(judge) once over every host's reading.
    type: str
    required: true
    choices: [read, judge]
  kind:
    description:
      - What is read or judged - the link (V(link)), the all-reduce (V(collective), judged only) or the transport NCCL
        chose in the running engine (V(engine)).
      - "Variables read: V(read) V(link) - C(vllm_link_interface), C(vllm_link_address), C(_vllm_split_peer_address),
        C(_vllm_split_link_ports), C(_vllm_split_unit), C(vllm_split_rdma), C(vllm_split_nccl_ib_hca),
        C(vllm_split_rdma_devices), C(vllm_split_nccl_library); V(read) V(engine) - C(vllm_link_interface),
        C(_vllm_split_unit); V(judge) V(link) - C(_vllm_split_hosts), C(vllm_link_mtu) (bytes), C(vllm_runtime);
        V(judge) V(collective) - C(_vllm_split_hosts), C(vllm_split_rdma), C(vllm_link_interface), C(vllm_split_head),
        C(_vllm_split_head_address), C(vllm_split_link_collective_port), C(vllm_split_link_min_bandwidth) (GB/s);
        V(judge) V(engine) - C(_vllm_split_hosts), C(ansible_play_batch), C(vllm_split_rdma)."
    type: str
    default: link
    choices: [link, collective, engine]
notes:
  - An undefined variable the step reads fails the task, naming it.
seealso:
  - module: factory_floor.llm.link_check
  - module: factory_floor.llm.link_collective
"""

EXAMPLES = r"""
- name: Read this host's side of the direct link
  factory_floor.llm.split_link:
    step: read
  register: __vllm_split_link_seen

- name: Judge the direct link from both hosts' checks
  factory_floor.llm.split_link:
    step: judge
    kind: link
  register: __vllm_split_link_report
  run_once: true
"""

RETURN = r"""
link:
  description:
    - V(read) V(link) - what the split's unit renders from this host's check (the role's C(vllm_split_link)) -
      C(hca) (the RDMA devices NCCL_IB_HCA names), C(device_nodes), C(nccl_library) (the host's, or empty),
      C(interface) and C(peer) (the ping of the rank it pinged). The rest of a read's result is
      M(factory_floor.llm.link_check)'s.
  returned: step read, kind link
  type: dict
  sample: {hca: [rocep1s0f1], device_nodes: [/dev/infiniband/uverbs0], nccl_library: "", interface: {}, peer: {}}
report:
  description:
    - V(judge) - C(ok), C(problems) (each C(host), C(what), C(fix)), C(message), C(summary) (one line per host);
      V(collective) also C(busbw_gb_s) (GB/s, the lowest of the ranks) and C(transport); V(engine) C(level) (C(ok),
      C(warn), C(info)) and C(text).
  returned: step judge, when it does not refuse
  type: dict
say:
  description: V(judge) - what the role shows - the summary lines, or (V(engine)) the transport, prefixed C(WARNING:) for sockets.
  returned: step judge, when it does not refuse
  type: raw
  sample: ["spark-a: enp1s0f1np1 up, MTU 9000, 10.10.10.2 answers at 8972 bytes"]
"""
