#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: maintenance_note
short_description: Note one step of a switch or an upgrade for its report, on the host it happened on
version_added: 0.1.0
description:
  - Adds one step's note to what this host noted during the run - the fact C(maintenance_window_host), which
    M(factory_floor.llm.switch_plan) and M(factory_floor.llm.switch_report) read from every engine host - and returns
    the whole as that fact (RV(ansible_facts.maintenance_window_host)). Reads that fact, C(inventory_hostname) and, in
    a rescue, the failed task's result (C(ansible_failed_result)) from the host's variables itself; runs nothing on
    the host (an action plugin, on the controller).
  - Every reader takes the notes from C(ansible_facts.maintenance_window_host) - a top-level variable of the name
    (C(set_fact), play or task C(vars)) would outrank a fact there, and ansible-core stops injecting facts as
    top-level variables in 2.24. A host's first note starts from a top-level C(maintenance_window_host) when there is
    one (an inventory variable), as the former C(maintenance_window_host | default({})) did.
  - The C(factory_floor.llm.topology_switch) and C(factory_floor.llm.model_upgrade) roles note each step with it.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: It only notes, on the controller; a dry run notes what it predicts, as a real one does.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Each run notes the events at the time it runs.
options:
  events:
    description:
      - Names of the events to note at O(at) (C(drained), C(old_stopped), C(serving), C(gate_done), C(in_rotation),
        C(rollback_started), C(rollback_serving), C(restored)) - the report's timeline.
    type: list
    elements: str
    default: []
  at:
    description: When the O(events) happened, epoch seconds (unit seconds); unset, the controller's clock now.
    type: float
  after:
    description:
      - When the O(events) happened, as a time this host noted before (C(event)) plus how long a step took on the host
        (C(delta), seconds, or a command's registered C(delta) such as C(0:00:17.712345)) - the step's own end on the
        controller's clock, free of the host's clock and of the other hosts' pace (a task ends on every host once the
        slowest is done). Unset, or C(event) not noted on this host, O(at) (or now).
      - For example the cut-over's C(old_stopped) after C(drained) by the C(systemctl enable --now) command's C(delta).
    type: dict
  note:
    description:
      - What else to note, merged in recursively - C(health), C(gate) (the C(tool_gate) role's C(tool_gate_result)),
        C(upgraded); see the switch_report module's C(hosts) option.
    type: dict
    default: {}
  failure:
    description:
      - In a rescue, the failed step, noted from C(ansible_failed_result) in the report's words.
      - >-
        V(step) - C(failed) and the reason C(<host>: <the task's message>) (at most about 600 characters; O(message)
        when the task has none).
      - V(switch_gate) - C(failed), the gate's verdict (O(note)'s C(gate)) and why the engine did not pass.
      - >-
        V(switch_rollback) - C(rollback_failed), the reason so far and C(; rollback failed on <host>: <message>).
      - V(upgrade) - C(failed) now (C(events.failed)), the gate's verdict (O(note)'s C(gate)) and the reason, the
        gate's message when it rejected the candidate.
      - V(upgrade_rollback) - C(restore_failed), the reason so far and why the rollback could not start.
    type: str
    choices: [step, switch_gate, switch_rollback, upgrade, upgrade_rollback]
  message:
    description: With O(failure=step), the reason when the failed task gave no message.
    type: str
    default: step failed
  restored:
    description:
      - A model upgrade's restore (the C(model_upgrade) role's C(model_upgrade_restore_result) - C(ok), C(at) epoch
        seconds, C(msg)) - C(events.restored) when it served again, else C(restore_failed) and why.
    type: dict
notes:
  - An unknown O(failure) fails with the choices to use.
seealso:
  - module: factory_floor.llm.switch_report
"""

EXAMPLES = r"""
- name: Note when the model went away
  factory_floor.llm.maintenance_note:
    events: [drained]

- name: Note the failure for the rollback
  factory_floor.llm.maintenance_note:
    failure: step
    message: stop/start failed
"""

RETURN = r"""
ansible_facts:
  description: What this host noted during the run.
  returned: always
  type: dict
  contains:
    maintenance_window_host:
      description: What this host noted, with this step added; event times are epoch seconds (unit seconds, float).
      returned: always
      type: dict
      sample: {events: {drained: 1764417600.5, old_stopped: 1764417631.2}, failed: true, reason: "spark-a: start failed"}
"""
