# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's verdict on what an engine host is on: one row per refusal and per override's note."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._deploy_topology import verdict

AGREES = {"state": "agrees", "model_state": "agrees", "message": "", "model_message": ""}
OTHER = dict(AGREES, state="differs", runs="split", recorded="split", message="spark-a runs split: refused.")
INVALID = dict(AGREES, state="invalid", runs="none", recorded="", message="record unreadable: refused.")
MODEL = dict(AGREES, model_state="differs", record={"model": "/models/a"}, model_message="spark-a records /models/a.")


@pytest.mark.parametrize("seen, topology_change, model_change, expected", [
    (AGREES, False, False, ("", [])),
    ({"state": "absent", "model_state": "agrees"}, False, False, ("", [])),
    (OTHER, False, False, ("spark-a runs split: refused.", [])),
    (INVALID, False, True, ("record unreadable: refused.", [])),
    (MODEL, True, False, ("spark-a records /models/a.", [])),
    (OTHER, True, False, ("", [
        "vllm_deploy_topology_change=true: spark-a is on split; this run brings it to replicas with no drain and no "
        "tool-calling gate (an outage of one start-up)."])),
    # Nothing runs: the record says; an unreadable record says so.
    (dict(OTHER, runs="none"), True, False, ("", [
        "vllm_deploy_topology_change=true: spark-a is on split; this run brings it to replicas with no drain and no "
        "tool-calling gate (an outage of one start-up)."])),
    (INVALID, True, False, ("", [
        "vllm_deploy_topology_change=true: spark-a is on no readable topology; this run brings it to replicas with no "
        "drain and no tool-calling gate (an outage of one start-up)."])),
    (MODEL, False, True, ("", [
        "vllm_deploy_model_change=true: spark-a records /models/a; this run restarts it on /models/b with no "
        "tool-calling gate."])),
    # The topology let through, the model refused: the note comes with the refusal.
    (dict(MODEL, state="differs", runs="split"), True, False, ("spark-a records /models/a.", [
        "vllm_deploy_topology_change=true: spark-a is on split; this run brings it to replicas with no drain and no "
        "tool-calling gate (an outage of one start-up)."])),
])
def test_verdict(seen, topology_change, model_change, expected):
    assert verdict(seen, "spark-a", "replicas", "/models/b", topology_change, model_change) == expected
