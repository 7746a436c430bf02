# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: split_link_ports
short_description: The TCP ports the split's link check wants free on the head
version_added: 0.1.0
description:
  - On the head (rank 0), the split's rendezvous port (C(--master-port), held by the split itself while it runs) and
    the link check's all-reduce port, each with the variable that sets it and what it is for; none on another rank.
options:
  _input:
    description: C(vllm_split_master_port).
    type: raw
    required: true
  collective_port:
    description: C(vllm_split_link_collective_port).
    type: raw
    required: true
  is_head:
    description: Whether this host is the head.
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: The ports to find free
  ansible.builtin.debug:
    msg: "{{ vllm_split_master_port | factory_floor.llm.split_link_ports(vllm_split_link_collective_port, true) }}"
"""

RETURN = r"""
_value:
  description: C(port) (int), C(variable) and C(purpose) of each port; empty off the head.
  type: list
  elements: dict
  sample: [{port: 29501, variable: vllm_split_master_port, purpose: "the split's rendezvous (--master-port) on the head"}]
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._split_settings import link_ports


def split_link_ports(master_port, collective_port, is_head):
    """Filter entry point."""
    return link_ports(master_port, collective_port, is_head)


class FilterModule:
    """The split's ports to check."""

    def filters(self):
        return {"split_link_ports": split_link_ports}
