#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_engines
short_description: Which engines serve the model now, each on its own address (never the proxy's)
version_added: 0.1.0
description:
  - The topology is the one that runs now - every engine host's C(systemctl is-active) of the engine units
    (C(vllm-replica.service), C(vllm-split.service)), read as C(_running_topology.running_topology) reads them (a unit
    C(active), C(activating) or C(reloading) runs); hosts that run both give C(split). When no engine unit runs, the
    inventory's C(topology); O(topology) overrides both.
  - The engines are every engine host for C(replicas), the split's rank-0 head only for C(split) (the first engine
    host's C(vllm_split_head), else that host; the headless rank serves no C(/metrics), the head's covers the whole
    tensor-parallel group). Each one's address is its host variable C(metrics_address), else
    C(nginx_proxy_backend_address) (what the proxy uses), else C(ansible_host), else its inventory name; its port the
    one its own host probes (P(factory_floor.llm.vllm_probe_url#filter)).
  - Runs on the controller through its action plugin, which reads C(groups), C(site_engine_group), C(topology) and
    each engine host's variables from C(hostvars) itself; it connects to no host. Used by the
    C(factory_floor.llm.site_view) role's C(observe) entry point (C(metrics.yml), C(prometheus-config.yml)).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  units:
    description:
      - The registered results of C(systemctl is-active vllm-replica.service vllm-split.service) delegated to each
        engine host in a loop (each result's C(item) the host, its C(stdout_lines) the states in that order). A result
        without C(stdout_lines) (skipped, unreachable) counts as not read.
    type: list
    elements: raw
    default: []
  topology:
    description: C(replicas) or C(split), instead of what runs (C(metrics_topology)). Unset or empty - what runs.
    type: str
notes:
  - Fails, naming the value, when the topology chosen is neither C(replicas) nor C(split).
"""

EXAMPLES = r"""
- name: Read which engine units are active on each machine
  ansible.builtin.command:
    argv: [systemctl, is-active, vllm-replica.service, vllm-split.service]
  delegate_to: "{{ item }}"
  loop: "{{ groups['gb10'] }}"
  register: engine_units
  changed_when: false
  failed_when: false
  check_mode: false
  run_once: true

- name: Decide the topology and list each engine on its own address
  factory_floor.llm.serving_engines:
    units: "{{ engine_units.results }}"
  run_once: true
  register: serving
"""

RETURN = r"""
topology:
  description: The topology whose engines are listed.
  returned: success
  type: str
  sample: replicas
topology_source:
  description:
    - Where RV(topology) came from - V(metrics_topology) (O(topology)), V(the engine units active now), or
      V(the inventory (no engine unit is active)).
  returned: success
  type: str
  sample: the engine units active now
engines:
  description: One entry per engine that serves, in inventory order.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The engine host's inventory name.
      type: str
      sample: spark-a
    address:
      description: The address it is read at.
      type: str
      sample: 10.0.0.11
    port:
      description: Its API and C(/metrics) TCP port.
      type: int
      sample: 8000
    url:
      description: C(http://address:port).
      type: str
      sample: http://10.0.0.11:8000
targets:
  description: RV(engines) with C(name) and C(url) only, what M(factory_floor.llm.vllm_metrics) reads.
  returned: success
  type: list
  elements: dict
  sample: [{name: spark-a, url: "http://10.0.0.11:8000"}]
"""
