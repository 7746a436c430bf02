# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: link_address
short_description: A host's address on the split's direct link
version_added: 0.1.0
description:
  - Returns the host's C(vllm_link_address) when its variables set one (not empty); else the IPv4 address of its link
    interface (its own C(vllm_link_interface), else the one given) from its gathered facts; else C("").
  - C("") too for an empty host name or a host that is not in the inventory (a replicas-only site stopping a split it
    once ran; the split's preflight refuses empty link settings before a start).
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  host:
    description: The host whose address is wanted (for example C(vllm_split_head)).
    type: str
    required: true
  interface:
    description: The link interface to use when the host's variables name none (this host's C(vllm_link_interface)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The head's address on the link
  ansible.builtin.debug:
    msg: "{{ hostvars | factory_floor.llm.link_address(vllm_split_head, vllm_link_interface) }}"
"""

RETURN = r"""
_value:
  description: The address (as the inventory or the facts hold it, without a prefix length from the facts), or C("").
  type: str
  sample: 10.10.0.1
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._split_settings import link_address as _link_address


def link_address(hostvars, host, interface):
    """Filter entry point."""
    if not hasattr(hostvars, "__getitem__") or not hasattr(hostvars, "__contains__"):
        raise AnsibleFilterError("link_address expects hostvars, got %s" % type(hostvars).__name__)
    return _link_address(hostvars, host, interface)


class FilterModule:
    """A host's address on the direct link."""

    def filters(self):
        return {"link_address": link_address}
