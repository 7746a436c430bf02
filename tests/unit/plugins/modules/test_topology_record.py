# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.topology_record`` on record files in a tmp dir."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.modules import topology_record as module

INVENTORY = ["/srv/ff/inventory/site"]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "topology.json"


def write(path, topology, playbook="switch-to-%s.yml"):
    path.write_text(json.dumps({"topology": topology, "since": 1795950000.0, "by": "ops@ctl",
                                "playbook": playbook % topology if "%s" in playbook else playbook,
                                "run": "20261129T110000Z-3f9a1c", "note": ""}))


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("recorded, topology, state", [
    (None, "replicas", "absent"),
    ("replicas", "replicas", "agrees"),
    ("split", "replicas", "differs"),
    ("replicas", "split", "differs"),
])
def test_reads_and_compares_and_changes_nothing(run_module, path, check_mode, recorded, topology, state):
    if recorded:
        write(path, recorded)
    before = path.read_text() if recorded else None
    code, result = run_module(module, {"path": str(path), "topology": topology, "inventory_sources": INVENTORY,
                                       "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False and result["state"] == state
    assert result["recorded"] == (recorded or "")
    assert (result["record"] is None) == (recorded is None)
    assert bool(result["message"]) == (state == "differs")
    assert (path.read_text() if recorded else None) == before
    assert path.exists() == bool(recorded)


def test_the_refusal_names_what_to_do(run_module, path):
    write(path, "replicas")
    code, result = run_module(module, {"path": str(path), "topology": "split", "inventory_sources": INVENTORY})
    assert code == 0
    assert result["message"].startswith("This host is on replicas, not split: switched to replicas by ops@ctl with "
                                        "switch-to-replicas.yml (run 20261129T110000Z-3f9a1c) on 2026-11-29 11:00:00 UTC")
    for words in ("`topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml",
                  "ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-split.yml",
                  "-e vllm_deploy_topology_change=true"):
        assert words in result["message"]


def test_an_unreadable_record_is_invalid(run_module, path):
    path.write_text("{")
    code, result = run_module(module, {"path": str(path), "topology": "split"})
    assert code == 0
    assert result["state"] == "invalid" and result["recorded"] == ""
    assert result["record"]["error"].startswith("not JSON")
    assert result["message"].startswith("%s does not say which topology" % path)


@pytest.mark.parametrize("inventory_topology, agrees", [(None, True), ("split", False), ("replicas", True)])
def test_inventory_advice_defaults_to_the_topology(run_module, path, inventory_topology, agrees):
    args = {"path": str(path), "topology": "replicas", "inventory_sources": INVENTORY}
    if inventory_topology is not None:
        args["inventory_topology"] = inventory_topology
    code, result = run_module(module, args)
    assert code == 0
    assert result["inventory"]["agrees"] is agrees
    assert result["inventory"]["line"] == "topology: replicas"
    assert result["inventory"]["file"] == "/srv/ff/inventory/site/group_vars/all.yml"


def test_an_unknown_topology_is_refused_by_the_argument_spec(run_module, path):
    code, result = run_module(module, {"path": str(path), "topology": "both"})
    assert code == 1 and "topology" in result["msg"]


def test_documentation_is_yaml_and_matches_the_argument_spec():
    doc = yaml.safe_load(module.DOCUMENTATION)
    assert set(doc["options"]) == {"path", "topology", "inventory_sources", "inventory_topology"}
    assert doc["options"]["path"]["default"] == module.tr.PATH
    returned = yaml.safe_load(module.RETURN)
    assert set(returned) == {"state", "recorded", "record", "message", "inventory"}
    yaml.safe_load(module.EXAMPLES)
