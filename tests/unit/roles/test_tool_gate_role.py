# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool_gate role's settings that live in YAML, checked without Ansible.

- The role's argument_specs name exactly the variables of its defaults, with the
  same default values, for every entry point.
- The lab inventory's case selection names cases that exist (a pattern matching
  nothing would silently shrink the suite the lab's min score is measured with) and
  covers every category of the shipped suite; the lab gates replicas only.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_suite as suites

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "tool_gate")


def _load(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


DEFAULTS = _load(ROLE, "defaults", "main.yml")
SPECS = _load(ROLE, "meta", "argument_specs.yml")["argument_specs"]
LAB = _load(ROOT, "inventory", "lab", "group_vars", "gb10.yml")


@pytest.mark.parametrize("entry_point", sorted(SPECS))
def test_argument_specs_name_the_defaults(entry_point):
    options = SPECS[entry_point]["options"]
    assert set(options) == set(DEFAULTS)
    for name, spec in options.items():
        if "default" in spec:
            assert spec["default"] == DEFAULTS[name], name


def test_entry_points_have_task_files():
    for entry_point in SPECS:
        assert os.path.exists(os.path.join(ROLE, "tasks", entry_point + ".yml")), entry_point


def test_topologies_default_gates_both():
    assert DEFAULTS["tool_gate_topologies"] == ["replicas", "split"]
    assert DEFAULTS["tool_gate_topology"] == ""
    assert set(SPECS["main"]["options"]["tool_gate_topologies"]["choices"]) == {"replicas", "split"}


def test_lab_gates_replicas_only():
    # The lab's split serves a stand-in (vllm_split_model), which scores about 0.
    assert LAB["vllm_split_model"] != LAB["vllm_model"]
    assert LAB["tool_gate_topologies"] == ["replicas"]


def test_lab_runs_the_whole_suite_one_case_at_a_time():
    # A 7-case selection made one case 14 points; a verdict must not depend on the batch.
    assert "tool_gate_cases" not in LAB and "tool_gate_categories" not in LAB
    assert LAB.get("tool_gate_concurrency", DEFAULTS["tool_gate_concurrency"]) == 1


def test_lab_pass_marks_separate_the_measured_scores_with_margin():
    # Measured in the lab (inventory/lab comment): SmolLM2 38.9 in every run, the tiny random model 0.0.
    suite = suites.merge_suites([_load(ROLE, "files", "suites", "default.yml")])
    one_case = 100.0 / len(suite["cases"])
    smollm2, bad_build = 38.9, 0.0
    assert smollm2 - LAB["tool_gate_min_score"] >= 2 * one_case
    assert LAB["tool_gate_min_score"] - bad_build >= 2 * one_case
    assert LAB["tool_gate_tolerance"] >= one_case


def test_lab_gate_is_bounded():
    # The slowest measured run is the upgrade scenario's bad build, 529 s (every case to the token cap); the bound
    # leaves 2x that, and stays under half an hour so a hung gate does not hold the lab.
    assert 2 * 529 <= LAB["tool_gate_run_timeout"] <= 1800
