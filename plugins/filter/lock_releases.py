# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: lock_releases
short_description: Which hosts gave back this run's maintenance lock and which keep it, from a delegated loop's results
version_added: 0.1.0
description:
  - Takes the C(results) of a loop of M(factory_floor.llm.maintenance_lock) with C(state=absent) delegated to each
    host and returns per host C(released), C(path) (that host's lock file - the C(maintenance_window_lock_path) it
    noted, else O(default_path)) and C(error) (why not - unreachable, or the module's message), added to O(previous).
  - Used by the C(unlock) entry point of the C(factory_floor.llm.maintenance_window) role (the fact
    C(maintenance_window_unlocked)).
options:
  _input:
    description: The loop's C(results).
    type: list
    elements: dict
    required: true
  hostvars:
    description: Ansible's C(hostvars), for each host's own lock file.
    type: dict
    required: true
  default_path:
    description: The lock file of a host that noted none (C(maintenance_window_lock_file)).
    type: path
    required: true
  previous:
    description: What an earlier release noted (C(maintenance_window_unlocked)); the loop's hosts replace theirs.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Note which locks were released and which stay
  ansible.builtin.set_fact:
    unlocked: "{{ released.results | factory_floor.llm.lock_releases(hostvars, '/run/factory-floor-maintenance') }}"
"""

RETURN = r"""
_value:
  description: Per host, C(released) (bool), C(path) (its lock file) and C(error) (empty when released).
  type: dict
  sample: {spark-b: {released: false, path: /run/factory-floor-maintenance, error: "host unreachable: timed out"}}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import unlocked


def lock_releases(results, hostvars, default_path, previous=None):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("lock_releases expects a loop's results (a list), got %s" % type(results).__name__)
    return unlocked(results, hostvars, default_path, previous)


class FilterModule:
    """Where this run's maintenance lock was given back."""

    def filters(self):
        return {"lock_releases": lock_releases}
