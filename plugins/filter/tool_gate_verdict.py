# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tool_gate_verdict
short_description: Whether a candidate build passes the tool-calling gate, and the message that says why
version_added: 0.1.0
description:
  - Runs on the controller, for the C(tool_gate) role (the fact C(tool_gate_result) it sets after a candidate's run).
  - A candidate fails when its score is below C(min_score); when its score is 0 or less while C(min_score) is 0 or less
    (no case passed never passes); or when an incumbent score is known (C(incumbent_build_id) set and its record in
    C(found)) and the score is below it minus C(tolerance). Scores are percent of the suite's cases (0-100);
    C(min_score) and C(tolerance) are points.
  - The incumbent may be the candidate's own build (a topology switch); the message then calls it C(this build) and names
    the cases whose verdict changed since that build's stored run.
  - A run that passed is kept in C(record_file); a run that failed under C(failed_dir), in a file named like
    C(record_file) with the run's UTC time added, so it never replaces the last passing score.
  - A C(min_score) or C(tolerance) that is not a number is an error naming the variable.
options:
  _input:
    description:
      - C(run) (dict, the result of M(factory_floor.llm.tool_call_test) - C(score), C(passed_count), C(total),
        C(failed_cases), C(failed_count), C(by_category), C(suite_digest), C(repeat), C(run_scores), C(flipped_cases)),
        C(found) (dict or null, the stored record of C(incumbent_build_id) - C(score), C(failed_cases)),
        C(host) (str, the inventory name), C(url) (str, where the candidate was tested), C(build_id) (str, sha256),
        C(model_path) (str), C(topology) (str, C(tool_gate_topology)), C(min_score) (float, points),
        C(tolerance) (float, points), C(incumbent_build_id) (str, empty for none), C(record_file) (str, the build's
        score file on the controller), C(failed_dir) (str, the directory of failed runs), C(id_chars) (int, characters
        of a build id shown; default 16), C(now) (float, epoch seconds of the run; default now).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Compare with the pass marks
  ansible.builtin.set_fact:
    tool_gate_result: "{{ __tool_gate_inputs | factory_floor.llm.tool_gate_verdict }}"
  vars:
    __tool_gate_inputs:
      run: "{{ __tool_gate_run }}"
      found: "{{ __tool_gate_found | default(none) }}"
      host: "{{ inventory_hostname }}"
      url: "{{ tool_gate_url }}"
      build_id: "{{ tool_gate_build.id }}"
      model_path: "{{ tool_gate_model_path }}"
      topology: "{{ tool_gate_topology }}"
      min_score: "{{ tool_gate_min_score }}"
      tolerance: "{{ tool_gate_tolerance }}"
      incumbent_build_id: "{{ tool_gate_incumbent_build_id }}"
      record_file: "{{ _tool_gate_record_file }}"
      failed_dir: "{{ _tool_gate_failed_dir }}"
"""

RETURN = r"""
_value:
  description:
    - C(gated) (true), C(topology), C(passed) (bool), C(score), C(passed_count), C(total), C(failed_cases) (ids),
      C(by_category), C(build_id), C(model_path), C(suite_digest), C(record_file) (where the run is to be stored),
      C(min_score) (float), C(tolerance) (float), C(incumbent_build_id), C(incumbent_score) (null when none was compared),
      C(run_scores), C(flipped_cases), C(flipped_since_stored) (case ids whose verdict changed since this build's stored
      run), C(message) (the verdict in words, for people).
  type: dict
"""

import datetime
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_verdict as tv

_REQUIRED = ("run", "host", "url", "build_id", "model_path", "topology", "min_score", "tolerance", "incumbent_build_id",
             "record_file", "failed_dir")
_KEYS = _REQUIRED + ("found", "id_chars", "now")


def tool_gate_verdict(options):
    """Filter entry point."""
    if not isinstance(options, Mapping):
        raise AnsibleFilterError("tool_gate_verdict expects a dict of options, got %s" % type(options).__name__)
    unknown = sorted(set(options) - set(_KEYS))
    missing = [key for key in _REQUIRED if key not in options]
    if unknown or missing:
        raise AnsibleFilterError("tool_gate_verdict: %s (known: %s)" % (
            "; ".join(filter(None, ["unknown options " + ", ".join(unknown) if unknown else "",
                                    "missing " + ", ".join(missing) if missing else ""])), ", ".join(_KEYS)))
    given = {key: options[key] for key in _REQUIRED}
    when = options.get("now")
    given["now"] = (datetime.datetime.now(datetime.timezone.utc) if when is None
                    else datetime.datetime.fromtimestamp(float(when), datetime.timezone.utc))
    given["found"] = options.get("found")
    given["id_chars"] = int(options.get("id_chars") or tv.ID_CHARS)
    try:
        return tv.verdict(**given)
    except ValueError as error:
        raise AnsibleFilterError("tool_gate_verdict: %s" % error) from None


class FilterModule:
    """The tool-calling gate's verdict."""

    def filters(self):
        return {"tool_gate_verdict": tool_gate_verdict}
