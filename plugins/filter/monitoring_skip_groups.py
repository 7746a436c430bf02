# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_skip_groups
short_description: The alert rule groups of daemons the inventory says the site does not run
version_added: 0.1.0
description:
  - Takes the engine hosts' variables and returns the rule groups to leave out - C(factory-floor-memory-guard-watch)
    unless an engine host runs the memory guard's watch (C(memory_guard_enabled) and C(memory_guard_watch), true when
    unset, and a C(memory_guard_workloads) entry with a C(unit) or a C(slice)), and C(factory-floor-floating-address)
    unless two or more proxy hosts share the floating address.
  - The default of C(monitoring_skip_groups) in the C(factory_floor.llm.monitoring) role.
options:
  _input:
    description: The engine hosts' variables (C(groups[site_engine_group] | map('extract', hostvars))).
    type: list
    elements: dict
    required: true
  proxies:
    description: The proxy hosts (C(groups[site_proxy_group])).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The rule groups this site leaves out
  ansible.builtin.debug:
    msg: "{{ groups['gb10'] | map('extract', hostvars) | factory_floor.llm.monitoring_skip_groups(groups['proxy']) }}"
  # one proxy host, no workload with a unit -> [factory-floor-memory-guard-watch, factory-floor-floating-address]
"""

RETURN = r"""
_value:
  description: The rule group names, the watch's first.
  type: list
  elements: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._monitoring_inputs import memory_guard_watched, skip_groups


def monitoring_skip_groups(engines, proxies):
    """Filter entry point."""
    engines = list(engines)
    if not all(isinstance(engine, Mapping) for engine in engines):
        raise AnsibleFilterError("monitoring_skip_groups expects the engine hosts' variables (dicts), got %r" % (engines,))
    return skip_groups(memory_guard_watched(engines), list(proxies))


class FilterModule:
    """The rule groups a site leaves out."""

    def filters(self):
        return {"monitoring_skip_groups": monitoring_skip_groups}
