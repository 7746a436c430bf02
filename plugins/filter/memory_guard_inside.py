# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: memory_guard_inside
short_description: The memory guard's workloads that run inside its slice
version_added: 0.1.0
description:
  - Takes C(memory_guard_workloads) and returns those inside C(memory_guard_slice), which count in its total - every
    workload with a (non-empty) C(unit), then those whose C(slice) is named C(<memory_guard_slice stem>-*.slice)
    (systemd places slices by name - C(a-b-c.slice) lives in C(a-b.slice)).
  - Used by the C(factory_floor.llm.memory_guard) role.
options:
  _input:
    description: The workloads (C(memory_guard_workloads)).
    type: list
    elements: dict
    required: true
  memory_guard_slice:
    description: The slice's unit name (C(memory_guard_slice)), for example C(factory-floor.slice).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The workloads inside the guard's slice
  ansible.builtin.debug:
    msg: "{{ memory_guard_workloads | factory_floor.llm.memory_guard_inside(memory_guard_slice) }}"
  # [{unit: vllm.service}, {slice: factory-floor-tools.slice}, {slice: other.slice}] with factory-floor.slice
  # -> [{unit: vllm.service}, {slice: factory-floor-tools.slice}]
"""

RETURN = r"""
_value:
  description: The workloads inside the slice, units first, each as given.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._memory_guard_vars import inside


def memory_guard_inside(workloads, memory_guard_slice):
    """Filter entry point."""
    if not isinstance(workloads, (list, tuple)) or not all(isinstance(w, dict) for w in workloads):
        raise AnsibleFilterError("memory_guard_inside expects memory_guard_workloads (a list of dicts), got %r" % (workloads,))
    return inside(list(workloads), memory_guard_slice)


class FilterModule:
    """The memory guard's workloads inside its slice."""

    def filters(self):
        return {"memory_guard_inside": memory_guard_inside}
