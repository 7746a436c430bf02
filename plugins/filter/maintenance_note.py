# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: maintenance_note
short_description: What a host noted during a switch or an upgrade, with one more note and the times of its events
version_added: 0.1.0
description:
  - Takes what this host noted so far (the fact C(maintenance_window_host)) and returns it with O(note) merged in
    (recursively, as C(combine(recursive=true))) and each name of O(events) noted at O(at) - epoch seconds, by
    default the controller's clock now (every event of a switch's timeline is on the controller's clock).
  - The procedures (the C(factory_floor.llm.topology_switch) and C(factory_floor.llm.model_upgrade) roles) set the
    fact with it; M(factory_floor.llm.switch_plan) and M(factory_floor.llm.switch_report) read it from each host.
options:
  _input:
    description: What this host noted so far (C(maintenance_window_host | default({}))).
    type: dict
    required: true
  note:
    description:
      - What to add - C(health), C(gate), C(reason), C(failed), C(upgraded), C(restore_failed), C(rollback_failed),
        C(events) (seconds by name); see the switch_report module's C(hosts) option.
    type: dict
    default: {}
  events:
    description: Names of the events to note at O(at) (C(drained), C(old_stopped), C(serving), C(gate_done), ...).
    type: list
    elements: str
    default: []
  at:
    description: When the O(events) happened, epoch seconds (unit seconds); default, now on the controller.
    type: float
"""

EXAMPLES = r"""
- name: Note when the model went away
  ansible.builtin.set_fact:
    maintenance_window_host: "{{ maintenance_window_host | default({}) | factory_floor.llm.maintenance_note(events=['drained']) }}"
"""

RETURN = r"""
_value:
  description: What the host noted, with the note added; event times are epoch seconds (float).
  type: dict
  sample: {events: {drained: 1764417600.5, old_stopped: 1764417631.2}, failed: false}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import noted


def maintenance_note(host, note=None, events=None, at=None):
    """Filter entry point."""
    if not isinstance(host, Mapping) or not isinstance(note or {}, Mapping):
        raise AnsibleFilterError("maintenance_note expects what the host noted and the note as dicts, got %s and %s"
                                 % (type(host).__name__, type(note).__name__))
    return noted(host, note, events or (), at)


class FilterModule:
    """What a host noted during a switch or an upgrade."""

    def filters(self):
        return {"maintenance_note": maintenance_note}
