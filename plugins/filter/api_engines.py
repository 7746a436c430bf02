# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: api_engines
short_description: The engine hosts that serve the API in a topology
version_added: 0.1.0
description:
  - Takes the engine hosts (C(groups[site_engine_group])) and a topology's C(api) (C(_vllm_topologies[topology].api))
    and returns every engine host when it is C(all), else the split's head only - the first engine host's
    C(vllm_split_head), else the first engine host.
  - Used by the C(factory_floor.llm.site_deploy) role (the deploy waits for these in the proxies' rotation).
options:
  _input:
    description: The engine hosts' names.
    type: list
    elements: str
    required: true
  api:
    description: The topology's C(api) - C(all) for the replicas, anything else for the split (C(head)).
    type: str
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The engines the proxies must route to
  ansible.builtin.debug:
    msg: "{{ groups['gb10'] | factory_floor.llm.api_engines(_vllm_topologies[topology].api, hostvars) }}"
  # replicas -> [spark-a, spark-b]; split -> [spark-a]
"""

RETURN = r"""
_value:
  description: The host names.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def api_engines(engines, api, hostvars):
    """Filter entry point."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError("api_engines expects the engine hosts (a list), got %r" % (engines,))
    if api == "all":
        return engines
    first = hostvars[engines[0]]
    return [first["vllm_split_head"] if "vllm_split_head" in first else engines[0]]


class FilterModule:
    """The engines that serve the API."""

    def filters(self):
        return {"api_engines": api_engines}
