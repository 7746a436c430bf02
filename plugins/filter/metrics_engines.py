# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: metrics_engines
short_description: The engines that serve the model now, each on its own address
version_added: 0.1.0
description:
  - For the topology that runs, the engines whose C(/metrics) and API serve it - every engine host for C(replicas), the
    split's rank-0 head only for C(split) (the first engine host's C(vllm_split_head), else that host; the headless rank
    serves no C(/metrics), the head's covers the whole tensor-parallel group).
  - Each as C(name), C(address) (its C(metrics_address), else C(nginx_proxy_backend_address), else C(ansible_host),
    else its inventory name - never the proxy's), C(port) (the one its own host probes, as
    P(factory_floor.llm.vllm_probe_url#filter) gives it) and C(url) (C(http://address:port)).
  - Used by the C(factory_floor.llm.site_view) role's C(observe) entry point (C(metrics.yml), C(prometheus-config.yml)).
options:
  _input:
    description: The engine hosts, inventory names, in inventory order (C(groups[site_engine_group])).
    type: list
    elements: str
    required: true
  hostvars:
    description: Every host's variables (C(hostvars)).
    type: dict
    required: true
  topology:
    description: The topology that runs now.
    type: str
    choices: [replicas, split]
    required: true
"""

EXAMPLES = r"""
- name: List each engine on its own address
  ansible.builtin.set_fact:
    engines: "{{ groups['gb10'] | factory_floor.llm.metrics_engines(hostvars, 'replicas') }}"
  # [{"name": "spark-a", "address": "10.0.0.11", "port": 8000, "url": "http://10.0.0.11:8000"}, ...]
"""

RETURN = r"""
_value:
  description: One entry per engine that serves, in inventory order - C(name), C(address), C(port) (TCP port), C(url).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import metrics_engines as _engines
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError


def metrics_engines(engines, hostvars, topology):
    """Filter entry point."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError("metrics_engines expects host names (a list), got %s" % type(engines).__name__)
    try:
        return _engines(hostvars, engines, topology)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """Where each engine that serves is reached, from the controller."""

    def filters(self):
        return {"metrics_engines": metrics_engines}
