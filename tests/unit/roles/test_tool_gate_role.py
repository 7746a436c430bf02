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

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_call as tc

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


def test_lab_selection_names_existing_cases_one_per_category():
    suite = tc.merge_suites([_load(ROLE, "files", "suites", "default.yml")])
    for pattern in LAB["tool_gate_cases"]:
        assert len(tc.select_cases(suite, [pattern])) == 1, pattern
    selected = tc.select_cases(suite, LAB["tool_gate_cases"])
    assert sorted(case["category"] for case in selected) == sorted({case["category"] for case in suite["cases"]})


def test_lab_selection_is_bounded():
    # Two requests per case (non-streamed and streamed); about 3-6 s each on the
    # lab's CPU SmolLM2: keep the gate near a minute and well inside its time bound.
    requests = 2 * len(LAB["tool_gate_cases"])
    assert requests * 6 <= 120
    assert 0 < LAB["tool_gate_run_timeout"] <= 300
