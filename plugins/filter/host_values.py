# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: host_values
short_description: One variable of each of a list of hosts, by host
version_added: 0.1.0
description:
  - A dict of each host (in order) to its variable O(name) (C(hostvars[host][name])); a host without the variable
    gets O(default).
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The hosts.
    type: list
    elements: str
    required: true
  name:
    description: The variable.
    type: str
    required: true
  default:
    description: The value of a host without it.
    type: raw
    default: {}
"""

EXAMPLES = r"""
- name: Each engine host's manifest of its model
  ansible.builtin.debug:
    msg: "{{ hostvars | factory_floor.llm.host_values(['spark-a', 'spark-b'], '__vllm_model_manifest') }}"
"""

RETURN = r"""
_value:
  description: The values by host.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def host_values(hostvars, hosts, name, default=None):
    """Filter entry point."""
    if not hasattr(hostvars, "__getitem__"):
        raise AnsibleFilterError("host_values expects hostvars, got %s" % type(hostvars).__name__)
    fallback = {} if default is None else default
    found = {}
    for host in hosts:
        host_vars = hostvars[host]
        found[host] = host_vars[name] if name in host_vars else fallback
    return found


class FilterModule:
    """One variable of several hosts."""

    def filters(self):
        return {"host_values": host_values}
