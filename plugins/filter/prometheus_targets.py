# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: prometheus_targets
short_description: An engine host's Prometheus file_sd targets for the topology recorded
version_added: 0.1.0
description:
  - The host's API engine as one file_sd target group (labels C(host) and C(topology)) when it serves one in the
    topology recorded - every replica; in the split only the head (rank 0) - else none.
options:
  _input:
    description:
      - C(topology) (the topology recorded, C(replicas), C(split) or C("")), C(host) (C(inventory_hostname)), C(head)
        (the split's head), C(address) (what Prometheus scrapes, C(vllm_prometheus_address)) and C(port) (C(vllm_port)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The file_sd content
  ansible.builtin.debug:
    msg: "{{ {'topology': 'replicas', 'host': 'spark-a', 'head': 'spark-a', 'address': '10.0.0.1', 'port': 8000}
             | factory_floor.llm.prometheus_targets | to_nice_json }}"
"""

RETURN = r"""
_value:
  description: The file_sd target groups (none or one).
  type: list
  elements: dict
  sample: [{targets: ["10.0.0.1:8000"], labels: {host: spark-a, topology: replicas}}]
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_settings import (
    prometheus_targets as _prometheus_targets,
)


_KEYS = ("topology", "host", "head", "address", "port")


def prometheus_targets(engine):
    """Filter entry point."""
    if not isinstance(engine, Mapping) or any(key not in engine for key in _KEYS):
        raise AnsibleFilterError("prometheus_targets expects a dict with the keys %s" % ", ".join(_KEYS))
    return _prometheus_targets(*(engine[key] for key in _KEYS))


class FilterModule:
    """An engine host's Prometheus targets."""

    def filters(self):
        return {"prometheus_targets": prometheus_targets}
