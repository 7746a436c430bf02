# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: first_engine_value
short_description: A variable of the first engine host, for the hosts that have none of their own
version_added: 0.1.0
description:
  - Takes the engine hosts (C(groups[site_engine_group])) and returns the named variable of the first one, as
    C(hostvars) gives it; an empty string when there is no engine host or it does not set the variable.
  - The engine hosts agree on such a variable (C(vllm_api_key), C(vllm_api_key_next); the layout check refuses engine
    hosts that disagree), so the first one's is the site's; a proxy host has none of its own.
  - Used by the C(factory_floor.llm.site) role's C(site_api_key) and C(site_api_key_next).
options:
  _input:
    description: The engine hosts' names.
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
  name:
    description: The variable's name.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The engines' API key
  ansible.builtin.set_fact:
    api_key: "{{ groups['gb10'] | default([]) | factory_floor.llm.first_engine_value(hostvars, 'vllm_api_key') }}"
  no_log: true
"""

RETURN = r"""
_value:
  description: The variable's value on the first engine host (as set, null included), else C('').
  type: raw
"""

from ansible.errors import AnsibleFilterError


def first_engine_value(engines, hostvars, name):
    """Filter entry point."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError("first_engine_value expects the engine hosts (a list), got %r" % (engines,))
    if not engines:
        return ""
    host = hostvars[engines[0]]
    return host[name] if name in host else ""


class FilterModule:
    """A variable of the first engine host."""

    def filters(self):
        return {"first_engine_value": first_engine_value}
