# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: noted_by_hosts
short_description: What each host noted under a name, for the hosts that noted something
version_added: 0.1.0
description:
  - Takes hosts and returns, per host whose variable C(name) is set and not empty, its value - for example the hosts
    whose topology record could not be written, with the error each one noted.
  - Used by the C(factory_floor.llm.topology_switch) role (C(vllm_switch_site.write_errors)).
options:
  _input:
    description: The hosts (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
  name:
    description: The variable the hosts noted it under.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The hosts that could not write their record
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | factory_floor.llm.noted_by_hosts(hostvars, 'record_error') }}"
  # {spark-b: "read-only file system"}
"""

RETURN = r"""
_value:
  description: Host name to its value, in the hosts' order; empty when none noted anything.
  type: dict
"""

from ansible.errors import AnsibleFilterError


def noted_by_hosts(hosts, hostvars, name):
    """Filter entry point."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("noted_by_hosts expects the hosts (a list), got %r" % (hosts,))
    found = {}
    for host in hosts:
        value = hostvars[host][name] if name in hostvars[host] else ""
        if value:
            found[host] = value
    return found


class FilterModule:
    """What the hosts noted."""

    def filters(self):
        return {"noted_by_hosts": noted_by_hosts}
