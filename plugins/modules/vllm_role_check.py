#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_role_check
short_description: Refuse a split layout, watchdog settings or firewall clients the engine roles cannot run with
version_added: 0.1.0
description:
  - "The refusals of the engine service roles' own preflights, before anything changes. Each names the host and the
    variable and says what to change; the task fails with one message per problem (numbered when there are several).
    The module reads the variables the check needs itself, as the task sees them (inventory, the roles' defaults, an
    include's C(vars)), on the controller; only V(split) reads the host (the model's C(config.json), O(model_config))."
  - "O(check=split) (the C(factory_floor.llm.vllm_split) role's C(preflight), each engine host), each a refusal of its
    own: fewer than two machines in C(vllm_split_group) (C(_vllm_split_hosts)); this host not one of them (one rank per
    host); C(vllm_split_head) not among them; C(vllm_split_tensor_parallel_size) x C(vllm_split_pipeline_parallel_size)
    other than the number of machines; an empty C(vllm_link_interface) or C(vllm_link_address) on this rank; no known
    address of the head on the link (C(_vllm_split_head_address), vLLM's C(--master-addr)); and a
    C(vllm_split_tensor_parallel_size) the heads of C(vllm_split_model) cannot be split over (C(num_attention_heads)
    and C(num_key_value_heads) of its C(config.json), or of its C(text_config); O(model_config)) - vLLM would refuse to
    start; the message names the sizes that work and the tensor x pipeline shapes that fill the group."
  - "O(check=watchdog) (the C(factory_floor.llm.vllm_watchdog) role's preflight): C(vllm_watchdog_topology) other than
    C(replicas)/C(split), an empty C(vllm_served_model_name), C(vllm_watchdog_interval) not above 0 s,
    C(vllm_watchdog_stall_window) below the interval, C(vllm_watchdog_probe_timeout), C(_startup_grace),
    C(_dead_confirm), C(_restart_window), C(_backoff_max), C(_request_timeout), C(_lock_stale_after) not above 0 s,
    C(_down_confirm) or C(_backoff) below 0 s, C(_max_restarts) below 1; with the split, fewer than two machines in
    C(vllm_watchdog_split_group) or this host or C(vllm_watchdog_split_head) not among them, no C(vllm_link_address),
    C(vllm_watchdog_status_port) outside 1-65535, C(vllm_watchdog_pair_ack_timeout) or C(vllm_watchdog_pair_skew) not
    above 0 s."
  - "O(check=watchdog_topology) (its C(disable) entry point): C(vllm_watchdog_topology) other than C(replicas)/C(split)."
  - "O(check=firewall) (the C(factory_floor.llm.vllm) role's C(firewall)): a C(vllm_allowed_clients) entry that is not
    an IPv4 address or CIDR and holds no C(:) (IPv6) - nftables matches addresses, not names."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description:
      - Which refusals to check (see the description). The variables each reads, as the task sees them -
      - "V(split): C(inventory_hostname), C(vllm_split_group), C(_vllm_split_hosts) (the role's list of the group's
        machines), C(vllm_split_head), C(vllm_split_tensor_parallel_size), C(vllm_split_pipeline_parallel_size),
        C(vllm_link_interface), C(vllm_link_address), C(vllm_split_model), C(_vllm_split_head_address) (the role's
        head address on the link; not checked where undefined)."
      - "V(watchdog): C(inventory_hostname), C(vllm_watchdog_topology), C(vllm_served_model_name), the
        C(vllm_watchdog_*) durations (seconds) and C(vllm_watchdog_max_restarts); with the split
        C(vllm_watchdog_split_group), C(_vllm_watchdog_split_hosts), C(vllm_watchdog_split_head), C(vllm_link_address),
        C(vllm_watchdog_status_port), C(vllm_watchdog_pair_ack_timeout), C(vllm_watchdog_pair_skew)."
      - "V(watchdog_topology): C(vllm_watchdog_topology). V(firewall): C(vllm_allowed_clients)."
    type: str
    required: true
    choices: [split, watchdog, watchdog_topology, firewall]
  model_config:
    description:
      - V(split) - the M(ansible.builtin.slurp) result of the model's C(config.json). Not checked when it has no
        C(content) (not read) or names no attention heads.
      - Left out, the module reads C(vllm_split_model)/config.json on the host itself (M(ansible.builtin.slurp), in
        check mode too; nothing to read when C(vllm_split_model) is not a path, a read that fails is not checked).
    type: dict
notes:
  - An undefined variable the check reads fails the task, naming it - except the watchdog's split settings and
    C(vllm_split_model), read only where they matter.
seealso:
  - module: factory_floor.llm.vllm_check
"""

EXAMPLES = r"""
- name: Refuse a split layout, or a tensor-parallel size the model's heads cannot be divided by
  factory_floor.llm.vllm_role_check:
    check: split

- name: Refuse watchdog settings it cannot run with
  factory_floor.llm.vllm_role_check:
    check: watchdog
"""

RETURN = r"""
changed:
  description: Always false; the check only reads.
  returned: always
  type: bool
  sample: false
errors:
  description:
    - Every refusal, in the order checked; empty when there is none. On failure C(msg) holds the same messages (numbered
      when there are several).
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - Which refusal - V(split_layout), V(split_heads) (check V(split)); V(watchdog_settings), V(watchdog_split)
          (V(watchdog)); V(watchdog_topology); V(allowed_clients) (V(firewall)).
      type: str
      sample: split_heads
    hosts:
      description: Inventory hosts involved.
      type: list
      elements: str
      sample: [spark-1]
    variables:
      description: Variables to change.
      type: list
      elements: str
      sample: [vllm_split_tensor_parallel_size]
    message:
      description: What is refused, why, and what to change.
      type: str
      sample: >-
        /models/q has 14 attention heads, which vllm_split_tensor_parallel_size=4 cannot divide: vLLM would refuse to
        start. Use a tensor-parallel size that divides 14, or split by layers (vllm_split_pipeline_parallel_size) instead.
"""
