# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""deploy.yml's verdict on what an engine host is on, next to what the run deploys. Pure logic, no I/O.

``seen`` is the ``topology_record`` module's result on the host (its record read with the engine units). A host on
another topology than the run deploys (the one whose unit runs, else the one its record names), or whose record
names another model, is refused with the module's message - after a switch, a routine deploy.yml with the
inventory's old topology would stop the one that serves with no drain and no tool-calling gate; after
switch-model.yml, the old ``vllm_model`` would come back ungated - unless the run is told to
(``vllm_deploy_topology_change``, ``vllm_deploy_model_change``); then a note says what it does instead.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr


def verdict(seen, host, topology, model, topology_change=False, model_change=False):
    """``(refusal, notes)``: the message that stops the run on ``host`` ("" to go on) and what is said instead when
    an override lets it go on (in the order the checks are made: the topology, then the model)."""
    notes = []
    if seen.get("state") in (tr.DIFFERS, tr.INVALID):
        if not topology_change:
            return seen.get("message") or "", notes
        runs = seen.get("runs")
        on = runs if runs in tr.TOPOLOGIES else (seen.get("recorded") or "no readable topology")
        notes.append("%s=true: %s is on %s; this run brings it to %s with no drain and no tool-calling gate (an outage "
                     "of one start-up)." % (tr.OVERRIDE, host, on, topology))
    if seen.get("model_state") == tr.DIFFERS:
        if not model_change:
            return seen.get("model_message") or "", notes
        notes.append("%s=true: %s records %s; this run restarts it on %s with no tool-calling gate."
                     % (tr.MODEL_OVERRIDE, host, (seen.get("record") or {}).get("model"), model))
    return "", notes
