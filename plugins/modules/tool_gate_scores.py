#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tool_gate_scores
short_description: Look up or store the tool-calling gate's scores on the controller
version_added: 0.1.0
description:
  - "The scores of the C(factory_floor.llm.tool_gate) role, kept on the controller whichever host ran the test: one JSON
    file per build, suite digest and host (C(<build_id[:16]>.<suite_digest[:16]>.<host>.json) in O(store_dir)),
    holding that build's last run that counts there - an incumbent's measurement or a candidate that passed. A
    candidate that failed is stored in a file of its own under C(failed/), which a lookup never reads."
  - "O(state=lookup): the latest record (by C(measured_epoch)) of O(build_id) with O(suite_digest), any host's; a
    record marked C(passed: false) (written into a score file by an older version) is left out."
  - "O(state=store): writes the record of O(run) at O(path) (mode C(0644), its directory made when missing) - the
    build, the host, the role, the verdict, the time (C(measured_at) UTC, C(measured_epoch) seconds) and the run's
    C(url), C(model), C(score) (0-100), C(total), C(passed_count), C(by_category), C(failed_cases) (with the raw
    answers), C(latency_mean) (seconds), C(suite_name), C(suite_digest)."
  - "O(state=spread): writes every play host's C(tool_gate_spread) (the role's C(spread) entry point), read from
    C(hostvars), as one JSON object by inventory name at O(path) - the figures to choose C(tool_gate_min_score) and
    C(tool_gate_tolerance) from."
  - Runs on the controller (its action plugin); it never connects to the host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: A store says whether it would write and writes nothing; a lookup reads as outside check mode.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: A store records the time it ran.
options:
  state:
    description: V(lookup) reads a build's stored score, V(store) writes one, V(spread) writes the play's spreads.
    type: str
    required: true
    choices: [lookup, store, spread]
  store_dir:
    description: (lookup) The directory of the scores on the controller (C(tool_gate_store_dir)).
    type: path
  build_id:
    description: (lookup) The build whose score to read (C(tool_gate_build.id), or C(tool_gate_incumbent_build_id)).
    type: str
  suite_digest:
    description: (lookup) The digest of the suite the score must have been measured with (the run's C(suite_digest)).
    type: str
  id_chars:
    description: (lookup) Characters of the build id and the digest in a file name.
    type: int
    default: 16
  path:
    description: (store, spread) Where to write the record (the figures) on the controller.
    type: path
  build:
    description: (store) The build measured, M(factory_floor.llm.tool_gate_build)'s RV(factory_floor.llm.tool_gate_build#module:build).
    type: dict
  run:
    description: (store) The result of M(factory_floor.llm.tool_call_test) for that build.
    type: dict
  host:
    description: (store) The inventory name of the host the build was measured on.
    type: str
  role:
    description: (store) V(incumbent) (a measurement of the build serving now) or V(candidate).
    type: str
    choices: [incumbent, candidate]
  passed:
    description: (store) The candidate's verdict; an incumbent's record holds null.
    type: bool
"""

EXAMPLES = r"""
- name: Read the stored score of the incumbent's build
  factory_floor.llm.tool_gate_scores:
    state: lookup
    store_dir: "{{ tool_gate_store_dir }}"
    build_id: "{{ tool_gate_build.id }}"
    suite_digest: "{{ __tool_gate_run.suite_digest }}"
  register: __tool_gate_lookup
"""

RETURN = r"""
found:
  description: (lookup) The record that counts, as stored (see O(state=store)); null when there is none.
  returned: with state lookup
  type: dict
  sample: {build_id: 5f0c1d3c9a0b7e0f, host: spark-a, role: incumbent, passed: null, score: 38.9, total: 18,
           measured_epoch: 1796000000.5}
path:
  description: (store, spread) Where the record (the figures) was written.
  returned: with state store or spread
  type: str
  sample: /home/ops/.local/state/factory-floor/tool-gate/5f0c1d3c9a0b7e0f.0c1d3c9a0b7e0f5f.spark-a.json
record:
  description: (store, spread) What was written.
  returned: with state store or spread
  type: dict
"""
