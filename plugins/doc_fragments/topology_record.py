# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The options of reading an engine host's topology record: topology_record's, which deploy_topology_check
    runs on the host (one text for both, so they cannot drift)."""

    DOCUMENTATION = r"""
options:
  path:
    description:
      - The record on this host. Default, the C(factory_floor.llm.vllm) role's C(_vllm_topology_record_file) as the
        task sees it (the action plugin reads it), else this path.
    type: path
    default: /var/lib/factory-floor/topology.json
  topology:
    description:
      - The topology this run brings the hosts to (C(deploy.yml) - the inventory's C(topology)), or the one that
        serves after a switch. Default, the variable C(topology) as the task sees it (the action plugin reads it); the
        module fails without one.
    type: str
    choices: [replicas, split]
  inventory_topology:
    description:
      - The inventory's C(topology), for RV(inventory). Default, O(topology).
    type: str
  inventory_sources:
    description:
      - The run's inventory sources (the magic variable C(ansible_inventory_sources)), controller paths, to name the
        inventory file to change (C(group_vars/all.yml) inside a source directory, or next to a source file) and the
        switch command. Only used in messages; nothing is read there. Default, C(ansible_inventory_sources) (the action
        plugin reads it), else none.
    type: list
    elements: str
    default: []
  playbook_dir:
    description:
      - The directory of the playbook that runs (the magic variable C(playbook_dir)), a controller path, to name the
        playbooks in messages the way the operator runs them - C(factory_floor.llm.deploy) from an installed collection
        (and when empty), C(playbooks/deploy.yml) from a checkout (the P(factory_floor.llm.playbook_name#filter)
        filter's rule). Nothing is read there. Default, the magic variable C(playbook_dir) (the action plugin reads it),
        else empty.
    type: str
    default: ""
  units:
    description:
      - The engine units of the topologies C(replicas) and C(split), in that order (the C(site) role's
        C(_site_engine_units)). When given, C(systemctl is-active) is asked about them and RV(runs) says which runs.
    type: list
    elements: str
    default: []
  model:
    description:
      - The model directory this run deploys for O(topology) (C(vllm_model), or C(vllm_split_model) for the split),
        compared with the record's C(model) (RV(model_state)). Empty, no comparison.
    type: str
    default: ""
"""
