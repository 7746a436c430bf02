# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: memory_guard_engine_log_command
short_description: The shell command that prints vLLM's own memory figures from the engine's last start
version_added: 0.1.0
description:
  - Takes the engine units (C(memory_guard_engine_units)) and returns a shell command that picks the one started last
    (systemd's C(ExecMainStartTimestampMonotonic), with an C(InvocationID)) and prints the lines of that start's
    journal that C(factory_floor.llm.gpu_memory_utilization) reads (model loading, KV cache, CUDA graph, free memory).
  - It prints nothing when no unit has started; it never fails for lack of such lines.
  - Used by the C(factory_floor.llm.memory_guard) role.
options:
  _input:
    description: The engine units' names; each is shell-quoted.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Read the engines' last start-up figures
  ansible.builtin.shell:
    cmd: "{{ ['vllm.service', 'vllm-split.service'] | factory_floor.llm.memory_guard_engine_log_command }}"
  changed_when: false
"""

RETURN = r"""
_value:
  description: The command, for C(ansible.builtin.shell).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._memory_guard_vars import engine_log_command


def memory_guard_engine_log_command(units):
    """Filter entry point."""
    if not isinstance(units, (list, tuple)):
        raise AnsibleFilterError("memory_guard_engine_log_command expects the engine units (a list), got %r" % (units,))
    return engine_log_command(units)


class FilterModule:
    """The engines' last start-up lines."""

    def filters(self):
        return {"memory_guard_engine_log_command": memory_guard_engine_log_command}
