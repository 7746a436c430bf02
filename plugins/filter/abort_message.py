# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: abort_message
short_description: What a switch, upgrade or deploy says when a step failed after it took the maintenance lock
version_added: 0.1.0
description:
  - Takes where this run gave its maintenance lock back (the fact C(maintenance_window_unlocked), per host
    C(released)) and returns the message the C(abort) entry point of the C(factory_floor.llm.maintenance_window)
    role fails with - what failed, O(note), the hosts whose lock was given back and those where it stays (not
    reachable); under C(--check), that no lock was taken and where a real run takes it.
options:
  _input:
    description: Per host C(released) (bool), as C(lock_releases) returns it.
    type: dict
    required: true
  failure:
    description: The failed task's result (C(ansible_failed_result)); its C(msg) comes first.
    type: dict
    default: {}
  note:
    description: What the run left as it was (C(maintenance_window_abort_note)).
    type: str
    default: ""
  check_mode:
    description: The run is a C(--check) run (C(ansible_check_mode)), which took no lock.
    type: bool
    default: false
  engine_hosts:
    description: The engine hosts a real run locks (C(groups[site_engine_group])).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Stop here, with what failed
  ansible.builtin.fail:
    msg: "{{ maintenance_window_unlocked | factory_floor.llm.abort_message(ansible_failed_result, 'Nothing was stopped.') }}"
"""

RETURN = r"""
_value:
  description: The message.
  type: str
  sample: "unit failed Nothing was stopped. This run's maintenance lock was given back on spark-a, spark-b."
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import abort_message as _message


def abort_message(unlocked_hosts, failure=None, note="", check_mode=False, engine_hosts=None):
    """Filter entry point."""
    if not isinstance(unlocked_hosts, Mapping):
        raise AnsibleFilterError("abort_message expects the released locks by host (a dict), got %s"
                                 % type(unlocked_hosts).__name__)
    return _message(unlocked_hosts, failure or {}, note, check_mode, list(engine_hosts or []))


class FilterModule:
    """The message of a run that stops after a failed step."""

    def filters(self):
        return {"abort_message": abort_message}
