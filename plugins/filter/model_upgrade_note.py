# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_upgrade_note
short_description: What the model upgrade notes for its report when a replica's upgrade, rollback or restore fails
version_added: 0.1.0
description:
  - For the C(factory_floor.llm.model_upgrade) role, the C(maintenance_window_note) of one event, read by the switch
    report (the C(factory_floor.llm.switch_report) module's C(hosts)).
  - V(failed) - the upgrade failed - C(failed), the gate's verdict (C(gate)), when (C(events.failed), epoch seconds, the
    controller's clock) and the reason (the gate's message when it rejected the candidate, else the failed task's, cut
    to 900 characters, after the host's name).
  - V(rollback_failed) - the rollback could not start - C(restore_failed) and the reason, after the one noted so far.
  - V(restore) - C(events.restored) (O(restored)'s C(at)) when the old build served again, else C(restore_failed) and
    why it could not be put back, after the reason noted so far (or the host's name).
options:
  _input:
    description: Which event - V(failed), V(rollback_failed) or V(restore).
    type: str
    required: true
    choices: [failed, rollback_failed, restore]
  host:
    description: The replica (C(inventory_hostname)).
    type: str
    required: true
  failed:
    description: V(failed), V(rollback_failed) - the failed task's result (C(ansible_failed_result)); its C(msg) is the reason.
    type: dict
    default: {}
  gate:
    description: V(failed) - the gate's verdict so far (C(tool_gate_result)), empty when the gate did not run.
    type: dict
    default: {}
  noted:
    description: V(rollback_failed), V(restore) - what the host noted so far (C(maintenance_window_host)).
    type: dict
    default: {}
  restored:
    description: V(restore) - the restore's outcome (C(model_upgrade_restore_result) - C(ok), C(at), C(msg)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Note the failure
  ansible.builtin.include_role:
    name: factory_floor.llm.maintenance_window
    tasks_from: note
  vars:
    maintenance_window_note: "{{ 'failed' | factory_floor.llm.model_upgrade_note(inventory_hostname, ansible_failed_result) }}"
"""

RETURN = r"""
_value:
  description: The note, a dict for C(maintenance_window_note).
  type: dict
"""

import time

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu


def model_upgrade_note(event, host, failed=None, gate=None, noted=None, restored=None):
    """Filter entry point."""
    if event == "failed":
        return mu.failed_note(str(host), failed, gate, round(time.time(), 3))
    if event == "rollback_failed":
        return mu.rollback_failed_note(str(host), failed, noted)
    if event == "restore":
        return mu.restore_note(str(host), restored or {}, noted)
    raise AnsibleFilterError("model_upgrade_note takes failed, rollback_failed or restore, got %r" % (event,))


class FilterModule:
    """The model upgrade's notes of a failure."""

    def filters(self):
        return {"model_upgrade_note": model_upgrade_note}
