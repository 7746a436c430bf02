# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.site_status on observations shaped as the roles register them."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.modules import site_status
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_site_status import GATE, engine, proxy


@pytest.mark.parametrize("check_mode", [False, True])
def test_one_view_from_every_host_with_the_gate_scores_read_on_the_controller(run_module, tmp_path, check_mode):
    (tmp_path / ("b" * 16 + ".dddd.spark-a.json")).write_text(json.dumps(GATE["spark-a"]))
    code, result = run_module(site_status, {
        "inventory_topology": "replicas", "engines": {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")},
        "proxies": {"gateway": proxy()}, "gate_store_dir": str(tmp_path), "_ansible_check_mode": check_mode})
    assert code == 0, result
    # the observations' times are a fixed moment; only their age depends on the clock
    assert result["changed"] is False
    assert [a for a in result["attention"] if "verdict since" not in a and "state is from" not in a] == []
    assert [e["gate"]["score"] if e["gate"] else None for e in result["engines"]] == [38.9, None]
    assert result["table"][0].startswith("Factory Floor status, ")
    documented = set(yaml.safe_load(site_status.RETURN))
    assert set(result) - {"changed", "invocation"} == documented


def test_nothing_read_anywhere_is_a_view_too(run_module):
    code, result = run_module(site_status, {"inventory_topology": "split", "engines": {"spark-a": None}})
    assert code == 0 and result["not_read"] == [{"host": "spark-a", "error": "not read (no observation from this host)"}]
    assert result["topology"]["running"] == "none"


def test_the_topology_must_be_one_of_the_two(run_module):
    code, result = run_module(site_status, {"inventory_topology": "mesh", "engines": {}})
    assert code == 1 and "inventory_topology" in result["msg"]
