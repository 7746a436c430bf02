# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: default_ipv4_addresses
short_description: The default IPv4 addresses of a list of hosts, from their gathered facts
version_added: 0.1.0
description:
  - For each host, in order, C(ansible_facts.default_ipv4.address); hosts without facts or without that address are
    left out.
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The hosts, for example the proxy group's.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The proxy hosts' addresses
  ansible.builtin.debug:
    msg: "{{ hostvars | factory_floor.llm.default_ipv4_addresses(groups['proxy'] | default([])) }}"
"""

RETURN = r"""
_value:
  description: The addresses.
  type: list
  elements: str
  sample: [10.0.0.10]
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_settings import (
    default_ipv4_addresses as _default_ipv4_addresses,
)


def default_ipv4_addresses(hostvars, hosts):
    """Filter entry point."""
    return _default_ipv4_addresses(hostvars, hosts)


class FilterModule:
    """Hosts' default IPv4 addresses."""

    def filters(self):
        return {"default_ipv4_addresses": default_ipv4_addresses}
