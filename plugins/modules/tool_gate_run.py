#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tool_gate_run
short_description: The tool_gate role's steps once the build is known - plan, score, judge and store
version_added: 0.1.0
description:
  - "For the C(factory_floor.llm.tool_gate) role, after it set C(tool_gate_build) and read the suite. Reads the
    role's variables as the task sees them (C(tool_gate_*), C(_tool_gate_endpoint), C(_tool_gate_topology_gated)),
    runs M(factory_floor.llm.tool_call_test) on the host through that module's own action (its progress lines are
    printed as it goes) and keeps the scores on the controller under C(tool_gate_store_dir), as
    M(factory_floor.llm.tool_gate_scores) does. The sentences and facts are M(factory_floor.llm.tool_gate_note)'s."
  - "O(step=plan): plans the incumbent's run (the suite's digest; no request is sent), looks up the stored score of
    C(tool_gate_build.id) with that digest, and decides whether to measure it: no score stored,
    C(tool_gate_measure_incumbent) true and C(tool_gate_topology) gated; otherwise RV(message) says why not."
  - "O(step=incumbent): with O(plan) from O(step=plan) - scores the incumbent when O(plan) says to measure (the role
    probes it first), stores the score as the build's score on this host, and returns C(tool_gate_incumbent) as
    RV(value). In check mode nothing is sent or stored; the score is noted as one it would measure. With
    C(tool_gate_candidate_model_path) set (a topology switch, the new topology's model directory), it also identifies
    that build on this host (as M(factory_floor.llm.tool_gate_build), with C(tool_gate_candidate_image) or the image
    the preflight checked) and returns as RV(known) whether it passed the gate on this site's engine hosts
    (C(groups[site_engine_group])): its last stored score with this suite, which must reach C(tool_gate_min_score) and
    be above 0. With C(tool_gate_admit_known_builds) false it looks nothing up and RV(known) says so."
  - "O(step=candidate): for a candidate whose topology is not gated (C(tool_gate_gated) false) returns the result of one
    not tested and runs nothing. Otherwise scores the candidate, looks up the stored score of
    C(tool_gate_incumbent_build_id) (of C(tool_gate_build.id) itself with C(tool_gate_compare_own_build)), judges the
    run against C(tool_gate_min_score) and that score minus C(tool_gate_tolerance) (points, 0-100), stores the run
    (as the build's score when it passed, in a file of its own under the failed runs when it did not), and returns
    C(tool_gate_result) as RV(value) and its sentence as RV(message), with C(started_at) (epoch seconds, the
    controller's clock, when the test began: the switch report's C(gate_started)). It does not fail on a failed verdict:
    the role enforces C(tool_gate_enforce)."
  - "O(step=candidate) with C(tool_gate_share_hosts) naming this host among two or more - a suite split over the new
    engines of one build: reads the whole selection (no request sent), runs only this host's share (the selected cases
    dealt round-robin over those hosts, one at a time as C(tool_gate_concurrency) says), judges and stores nothing, and
    returns the share as RV(value) (C(passed) null, C(share), C(run), C(selected), C(suite_digest) of the whole
    selection)."
  - "O(step=union): once every host of C(tool_gate_share_hosts) ran its share (each one's registered
    C(__tool_gate_verdict), read from C(hostvars)), the verdict over all the cases - scored with C(tool_call_test)'s
    formula, judged and stored as the candidate step judges and stores a whole run - as RV(value), with C(shares) (per
    host C(cases), C(of), C(started_at), C(done_at)); a share that did not run gives C(passed) false, naming the
    host. Without a share it returns the candidate step's C(value) as it is."
  - "O(step=spread): scores the build C(tool_gate_repeat) times and returns C(tool_gate_spread) and its sentence;
    stores nothing."
  - A test run that fails fails the task with that run's result (its C(msg)).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: The test sends no chat completion and nothing is stored; RV(changed) says whether a score would be.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Each run of a step other than plan sends the suite again and stores what it measured.
options:
  step:
    description: Which step to run.
    type: str
    required: true
    choices: [plan, incumbent, candidate, union, spread]
  suites:
    description:
      - The suites, as data read on the controller (the role reads C(tool_gate_suite) and C(tool_gate_suite_extra)).
    type: list
    elements: raw
    default: []
  plan:
    description: What O(step=plan) returned; read by O(step=incumbent) (its RV(found) and RV(measure)).
    type: dict
    default: {}
notes:
  - Its action plugin does the work; this file holds its documentation.
seealso:
  - module: factory_floor.llm.tool_call_test
  - module: factory_floor.llm.tool_gate_note
  - module: factory_floor.llm.tool_gate_scores
"""

EXAMPLES = r"""
- name: Score the candidate, compare with the pass marks and the incumbent build's stored score, store the score
  factory_floor.llm.tool_gate_run:
    step: candidate
    suites: "{{ __tool_gate_suites }}"
  register: __tool_gate_verdict
"""

RETURN = r"""
changed:
  description: Whether a score was stored (or, in check mode, would be).
  returned: always
  type: bool
  sample: true
suite_digest:
  description: The suite's digest, part of every stored score's key.
  returned: O(step=plan)
  type: str
  sample: 3f9a61c2d84e0b17
found:
  description: The incumbent build's stored score record, or null when none is stored.
  returned: O(step=plan)
  type: dict
  sample: {score: 100.0, build_id: 9c1e0f3a52b4d6e7, passed_count: 12, total: 12}
measure:
  description: Whether the incumbent is to be measured now (no stored score, measuring on, its topology gated).
  returned: O(step=plan)
  type: bool
  sample: false
value:
  description:
    - The fact the role sets - C(tool_gate_incumbent) (incumbent), C(tool_gate_result) (candidate),
      C(tool_gate_spread) (spread).
  returned: O(step=incumbent), O(step=candidate), O(step=union), O(step=spread)
  type: dict
  sample: {gated: false, passed: true, topology: split, message: "Tool-calling gate off for split on spark-a (tool_gate_topologies: replicas): not tested."}
known:
  description:
    - The fact C(tool_gate_known) - C(known) (bool), C(why) (in words), C(build_id), C(admit)
      (C(tool_gate_admit_known_builds)), and of the stored record C(score) (percent of the suite's cases, 0-100),
      C(measured_at) (UTC), C(host) and C(role) (C(candidate) or C(incumbent)); empty without
      C(tool_gate_candidate_model_path).
    - A failure to identify the candidate build fails the task, naming the model directory.
  returned: O(step=incumbent)
  type: dict
  sample: {known: true, build_id: 9c1e0f3a52b4d6e7, score: 94.4, measured_at: "2026-12-01T10:02:11Z", host: spark-a,
           role: candidate, admit: true, why: "the build 9c1e0f3a52b4d6e7 passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4"}
message:
  description: What the role prints - why the incumbent is not measured (plan), the verdict (candidate), the spread; empty otherwise.
  returned: always
  type: str
  sample: "Tool-calling gate on spark-a (http://10.0.0.11:8000): candidate build 9c1e0f3a52b4d6e7 (/models/chat) scored 100.0 (12/12 cases): passed."
"""
