# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: switch_gate_failure
short_description: Why an engine did not pass a topology switch's tool-calling gate, in the words of the switch's report
version_added: 0.1.0
description:
  - Takes the failed task's result (C(ansible_failed_result) in a rescue) and returns the gate's own message when the
    gate ran and failed (O(gate) with C(passed) false), else C(the tool-calling test took longer than
    tool_gate_run_timeout) (the result has C(timedout)) or C(the tool-calling gate could not test it), then a colon and
    the task's message. At most 900 characters (whole words, C(...)).
  - Used by the C(switch_gate) entry point of the C(factory_floor.llm.topology_switch) role, for the rollback's reason.
options:
  _input:
    description: The failed task's result (C(ansible_failed_result)).
    type: dict
    required: true
  gate:
    description: The gate's verdict (the C(tool_gate) role's C(tool_gate_result)); empty when it did not get that far.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Note the failure for the rollback
  ansible.builtin.set_fact:
    reason: "{{ inventory_hostname }}: {{ ansible_failed_result | factory_floor.llm.switch_gate_failure(tool_gate_result | default({})) }}"
"""

RETURN = r"""
_value:
  description: Why the engine did not pass.
  type: str
  sample: "the tool-calling gate could not test it: Status code was -1 and not [200]: Request failed"
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure


def switch_gate_failure(failure, gate=None):
    """Filter entry point."""
    if not isinstance(failure, Mapping):
        raise AnsibleFilterError("switch_gate_failure expects the failed task's result (a dict), got %s"
                                 % type(failure).__name__)
    return gate_failure(failure, gate)


class FilterModule:
    """Why an engine did not pass the switch's gate."""

    def filters(self):
        return {"switch_gate_failure": switch_gate_failure}
