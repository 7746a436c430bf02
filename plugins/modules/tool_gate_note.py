#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tool_gate_note
short_description: The tool-calling gate's verdict and notes, from the tool_gate role's variables
version_added: 0.1.0
description:
  - "On the controller, for the C(factory_floor.llm.tool_gate) role: reads the role's variables as the task sees them
    (its defaults, the run registered as C(__tool_gate_run), the stored score C(__tool_gate_found), C(tool_gate_build))
    and returns what the role notes as a fact (RV(value)) and says (RV(message)). The role sets the fact with
    C(set_fact)."
  - "O(note=verdict): C(tool_gate_result) - the candidate's score against C(tool_gate_min_score) and the incumbent's
    stored score minus C(tool_gate_tolerance) (points, 0-100), where its record goes (C(_tool_gate_record_file), or a
    file of its own under C(_tool_gate_failed_dir) when it failed) and the sentence an operator reads."
  - "O(note=not_gated): C(tool_gate_result) of a candidate whose C(tool_gate_topology) is not in
    C(tool_gate_topologies) (passed, not tested). O(note=measured): the incumbent's score just measured, or in check
    mode the chat completions a run would send. O(note=incumbent): C(tool_gate_incumbent). O(note=not_measured): why
    an incumbent without a stored score is not measured. O(note=spread): C(tool_gate_spread) and the pass marks that
    leave one case of margin below every score seen."
  - It never connects to the host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  note:
    description: What to note.
    type: str
    required: true
    choices: [not_gated, not_measured, measured, incumbent, verdict, spread]
notes:
  - Its action plugin does the work; this file holds its documentation.
"""

EXAMPLES = r"""
- name: Compare with the pass marks
  factory_floor.llm.tool_gate_note:
    note: verdict
  register: __tool_gate_verdict

- name: Note the verdict
  ansible.builtin.set_fact:
    tool_gate_result: "{{ __tool_gate_verdict.value }}"
"""

RETURN = r"""
changed:
  description: Always false.
  returned: always
  type: bool
  sample: false
value:
  description:
    - The fact's value - C(tool_gate_result) (verdict, not_gated), C(__tool_gate_found) (measured),
      C(tool_gate_incumbent) (incumbent), C(tool_gate_spread) (spread); null for not_measured.
  returned: always
  type: raw
  sample: {gated: false, passed: true, topology: split, message: "Tool-calling gate off for split on spark-a (tool_gate_topologies: replicas): not tested."}
message:
  description: What the role prints; empty for measured and incumbent.
  returned: always
  type: str
  sample: "Tool-calling gate off for split on spark-a (tool_gate_topologies: replicas): not tested."
"""
