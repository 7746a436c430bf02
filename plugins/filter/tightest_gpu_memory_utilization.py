# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tightest_gpu_memory_utilization
short_description: The smallest vllm_gpu_memory_utilization among a group of hosts
version_added: 0.1.0
description:
  - Both ranks of the split hold half the model and half the KV cache, so the host with the least memory to give
    decides the fraction both use.
  - Returns the smallest C(vllm_gpu_memory_utilization) (a fraction 0-1, as a float) that the hosts' variables set
    (not null); the fallback when none sets one, or when that smallest is 0.
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The hosts of the group (for example the split group's).
    type: list
    elements: str
    required: true
  fallback:
    description: The value when no host sets one (this host's C(vllm_gpu_memory_utilization)).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: The fraction of GPU memory both ranks use
  ansible.builtin.debug:
    msg: "{{ hostvars | factory_floor.llm.tightest_gpu_memory_utilization(groups['gb10'], vllm_gpu_memory_utilization) }}"
"""

RETURN = r"""
_value:
  description: The fraction of GPU memory (0-1).
  type: raw
  sample: 0.8
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._split_settings import (
    tightest_gpu_memory_utilization as _tightest,
)


def tightest_gpu_memory_utilization(hostvars, hosts, fallback):
    """Filter entry point."""
    return _tightest(hostvars, hosts, fallback)


class FilterModule:
    """The split's GPU memory fraction."""

    def filters(self):
        return {"tightest_gpu_memory_utilization": tightest_gpu_memory_utilization}
