# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""running_topology: which topology the engine hosts run now, from their engine units' states."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _running_topology as rt

ON = "active"
OFF = "inactive"


@pytest.mark.parametrize("units, runs", [
    ({"a": [ON, OFF], "b": [ON, OFF]}, "replicas"),
    ({"a": [OFF, ON], "b": [OFF, ON]}, "split"),
    # One replica down still runs replicas; a unit on its way up runs.
    ({"a": [ON, OFF], "b": [OFF, OFF]}, "replicas"),
    ({"a": ["activating", OFF], "b": ["failed", OFF]}, "replicas"),
    ({"a": [OFF, OFF], "b": [OFF, "failed"]}, rt.NONE),
    # Hosts on different topologies, or one host with both (Conflicts= failed).
    ({"a": [ON, OFF], "b": [OFF, ON]}, rt.BOTH),
    ({"a": [ON, ON]}, rt.BOTH),
    # A host not read does not count; none read is not known.
    ({"a": None, "b": [OFF, ON]}, "split"),
    ({"a": None, "b": []}, None),
    ({}, None),
    (None, None),
])
def test_running_topology(units, runs):
    assert rt.running_topology(units) == runs


def test_units_of_a_loops_registered_reads():
    results = [{"item": "a", "stdout_lines": [ON, OFF]}, {"item": "b", "skipped": True},
               {"item": "c", "unreachable": True, "msg": "no route"}, "junk"]
    assert rt.units_of(results) == {"a": [ON, OFF]}
    assert rt.units_of(None) == {}
