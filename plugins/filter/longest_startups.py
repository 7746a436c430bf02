# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: longest_startups
short_description: The longest start-up measured per engine kind over the engine hosts' start-up files
version_added: 0.1.0
description:
  - Takes the C(slurp) results of the engine hosts' start-up files (JSON, seconds by name - C(replicas), C(split),
    C(replicas_gate), C(split_gate)) and returns, per name, the longest over the hosts, in seconds. A result without
    content (no file yet, not read) adds nothing.
  - Used by the C(open) entry point of the C(factory_floor.llm.maintenance_window) role.
options:
  _input:
    description: The C(slurp) results, one per engine host.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Note the start-ups measured before
  ansible.builtin.set_fact:
    startup: >-
      {{ groups['gb10'] | map('extract', hostvars) | map(attribute='startup_file', default={})
         | factory_floor.llm.longest_startups }}
"""

RETURN = r"""
_value:
  description: Seconds (float) by name; empty when no host has measured one.
  type: dict
  sample: {replicas: 48.5, split: 131.0}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import longest_startups as _longest


def longest_startups(files):
    """Filter entry point."""
    if not isinstance(files, (list, tuple)):
        raise AnsibleFilterError("longest_startups expects slurp results (a list), got %s" % type(files).__name__)
    return _longest(files)


class FilterModule:
    """Start-ups measured on the engine hosts."""

    def filters(self):
        return {"longest_startups": longest_startups}
