# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: link_interface_address
short_description: This host's address on the direct link, from its facts
version_added: 0.1.0
description:
  - The IPv4 address of the link interface when it is set and the facts hold that interface (fails when it has no IPv4
    address); else the host's default IPv4 address; else C("") (facts not gathered).
  - The C(vllm) role's default of C(vllm_link_address).
options:
  _input:
    description: The host's facts (C(ansible_facts)).
    type: dict
    required: true
  interface:
    description: The link interface (C(vllm_link_interface)), or C("").
    type: str
    required: true
"""

EXAMPLES = r"""
- name: This host's link address
  ansible.builtin.debug:
    msg: "{{ ansible_facts | factory_floor.llm.link_interface_address(vllm_link_interface) }}"
"""

RETURN = r"""
_value:
  description: The address, or C("").
  type: str
  sample: 10.10.0.1
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_settings import (
    EngineSettingsError,
    link_interface_address as _link_interface_address,
)


def link_interface_address(facts, interface):
    """Filter entry point."""
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("link_interface_address expects a host's facts (a dict), got %s" % type(facts).__name__)
    try:
        return _link_interface_address(facts, interface)
    except EngineSettingsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """A host's link address from its facts."""

    def filters(self):
        return {"link_interface_address": link_interface_address}
