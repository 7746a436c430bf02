# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: lock_refusals
short_description: Who refused the maintenance lock and why, one "host - why" each, from a delegated loop's results
version_added: 0.1.0
description:
  - "Takes the C(results) of a loop of M(factory_floor.llm.maintenance_lock) delegated to each host and returns
    C(<host>: <message>) for each host that refused, in loop order, each followed by a space - the start of the
    message the C(lock) entry point of the C(factory_floor.llm.maintenance_window) role fails with."
options:
  _input:
    description: The loop's C(results) (C(ansible_failed_result.results) in a rescue).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Stop here, naming who holds the lock
  ansible.builtin.fail:
    msg: "{{ ansible_failed_result.results | default([]) | factory_floor.llm.lock_refusals }}Nothing has changed."
"""

RETURN = r"""
_value:
  description: "The refusals, each C(<host>: <message>) and a space; empty when no host refused."
  type: str
  sample: "spark-b: the maintenance lock is held by switch-model since 2026-11-29 11:00 UTC "
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import lock_refusals as _refusals


def lock_refusals(results):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("lock_refusals expects a loop's results (a list), got %s" % type(results).__name__)
    return _refusals(results)


class FilterModule:
    """The maintenance lock's refusals."""

    def filters(self):
        return {"lock_refusals": lock_refusals}
