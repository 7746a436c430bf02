# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which topology the metrics views read, and where that came from (site_view's observe entry point)."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _serving_engines as se

ON = "active"
OFF = "inactive"


@pytest.mark.parametrize("units, override, inventory, chosen", [
    ({"a": [ON, OFF]}, None, "split", ("replicas", se.FROM_UNITS)),
    ({"a": [OFF, ON], "b": [OFF, ON]}, None, "replicas", ("split", se.FROM_UNITS)),
    # A switch that failed half-way: the split's head serves.
    ({"a": [ON, OFF], "b": [OFF, ON]}, None, "replicas", ("split", se.FROM_UNITS)),
    ({"a": [OFF, OFF]}, None, "split", ("split", se.FROM_INVENTORY)),
    ({}, None, None, ("replicas", se.FROM_INVENTORY)),
    ({"a": [ON, OFF]}, "split", "replicas", ("split", se.FROM_OVERRIDE)),
    ({"a": [ON, OFF]}, "", "split", ("replicas", se.FROM_UNITS)),
])
def test_the_topology_and_its_source(units, override, inventory, chosen):
    assert se.topology(units, override, inventory) == chosen


@pytest.mark.parametrize("override, inventory", [("both", "replicas"), (None, "groups")])
def test_a_topology_that_is_neither_is_refused(override, inventory):
    with pytest.raises(ValueError) as refused:
        se.topology({}, override, inventory)
    assert str(refused.value) == ("metrics_topology (or the inventory's topology) must be replicas or split, not '%s'."
                                  % (override or inventory))


def test_the_view_says_what_was_read_then_the_table():
    metrics = {"topology": "replicas", "total": {"engines_counted": 1}, "table": ["engine  tokens/s", "spark-a  12.5"],
               "engines": [{"name": "spark-a", "reachable": True, "restarted": True},
                           {"name": "spark-b", "reachable": False, "restarted": False},
                           {"name": "spark-c", "reachable": False}]}
    assert se.view(metrics, se.FROM_UNITS) == [
        "topology: replicas (from the engine units active now); 1 of 3 engine(s) read, not readable: spark-b, spark-c, "
        "restarted between reads: spark-a", "engine  tokens/s", "spark-a  12.5"]
    assert se.view({"topology": "split", "total": {"engines_counted": 1}, "engines": [{"name": "a", "reachable": True}],
                    "table": []}, se.FROM_OVERRIDE) == ["topology: split (from metrics_topology); 1 of 1 engine(s) read"]


def test_the_targets_are_each_engines_name_and_url():
    assert se.targets([{"name": "a", "address": "10.0.0.1", "port": 8000, "url": "http://10.0.0.1:8000"}]) == [
        {"name": "a", "url": "http://10.0.0.1:8000"}]
