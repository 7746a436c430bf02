# -*- coding: utf-8 -*-
"""Issue 36's budgets for the house (tests/budgets.py measures them): the ones met hold, the others may not grow."""

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location("budgets", os.path.join(HERE, "..", "budgets.py"))
budgets = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(budgets)

# Not met yet: what they measured when this test was written; lower them as logic moves, never raise them.
CEILING = {
    # 4,151 + 298: the group move's own steps (issue 37: roles/group_move, 261 lines; the per-host view in
    # topology_switch's switch_plan.yml, 13; model_check per model directory, 1) - its other steps reuse the switch's.
    "role task lines": 4449,
}
MEASURED = budgets.measure()


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_a_budget_holds_or_does_not_grow(name):
    value, budget = MEASURED[name]
    assert value <= CEILING.get(name, budget), "%s: %d, over %d (python tests/budgets.py -v lists them)" % (
        name, value, CEILING.get(name, budget))


def test_the_multi_line_rule_counts_what_it_says():
    assert budgets.multi_line_logic([os.path.join(HERE, "fixtures", "budgets", "logic.yml")]) == [
        (os.path.join("tests", "unit", "fixtures", "budgets", "logic.yml"), 4)]
