#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: topology_record
short_description: Read which topology an engine host was last brought to, and compare it with a run's
version_added: 0.1.0
description:
  - Reads the host's topology record, one JSON object that C(deploy.yml) writes when it brings the hosts to a
    topology and a topology switch writes when it completes (the C(topology_record) entry point of the
    C(factory_floor.llm.vllm) role writes it), and compares it with O(topology).
  - C(deploy.yml) runs it in its preflight and refuses with RV(message) when the record names the other topology;
    after a switch, a routine C(deploy.yml) with the inventory's old C(topology) would stop the topology that serves
    with no drain, no tool-calling gate and no maintenance lock. The message names both topologies, who switched,
    when and with which playbook and run, the switch playbook to run instead, the inventory line to change, and
    C(deploy.yml)'s override, C(vllm_deploy_topology_change).
  - A host with no record (a first deploy, or hosts set up before records were written) agrees with any topology.
  - RV(inventory) says what the inventory must say for C(deploy.yml) to agree with O(topology); the switches
    print its C(advice) last.
  - The module only reads.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  path:
    description:
      - The record on this host (the C(factory_floor.llm.vllm) role's C(_vllm_topology_record_file)).
    type: path
    default: /var/lib/factory-floor/topology.json
  topology:
    description:
      - The topology this run brings the hosts to (C(deploy.yml) - the inventory's C(topology)), or the one that
        serves after a switch.
    type: str
    choices: [replicas, split]
    required: true
  inventory_topology:
    description:
      - The inventory's C(topology), for RV(inventory). Default, O(topology).
    type: str
  inventory_sources:
    description:
      - The run's inventory sources (the magic variable C(ansible_inventory_sources)), controller paths, to name the
        inventory file to change (C(group_vars/all.yml) inside a source directory, or next to a source file) and the
        switch command. Only used in messages; nothing is read there.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the topology this host records
  factory_floor.llm.topology_record:
    topology: "{{ topology }}"
    inventory_sources: "{{ ansible_inventory_sources }}"
  register: record

- name: Refuse, before anything changes, to undo a switch
  ansible.builtin.fail:
    msg: "{{ record.message }}"
  when: record.state in ['differs', 'invalid']

- name: After a switch to replicas, say what the inventory must say
  factory_floor.llm.topology_record:
    topology: replicas
    inventory_topology: "{{ topology }}"
    inventory_sources: "{{ ansible_inventory_sources }}"
  register: record

- name: Print it
  ansible.builtin.debug:
    msg: "{{ record.inventory.advice }}"
"""

RETURN = r"""
state:
  description:
    - The record compared with O(topology) - V(absent) (no file), V(agrees) (it names O(topology)), V(differs) (it names
      the other topology) or V(invalid) (a file whose topology cannot be read).
  returned: always
  type: str
  sample: differs
recorded:
  description: The topology the record names; empty when there is no record or it cannot be read.
  returned: always
  type: str
  sample: split
record:
  description: The record's fields as read from O(path), or null when there is no file.
  returned: always
  type: dict
  contains:
    topology:
      description: V(replicas) or V(split); null when unreadable (see C(error)).
      type: str
      sample: split
    since:
      description: When the playbook brought the host to it, epoch seconds (the controller's clock).
      type: float
      sample: 1795950000.0
    by:
      description: Who ran that playbook (user@controller).
      type: str
      sample: ops@controller
    playbook:
      description: The playbook's file name (C(deploy.yml), C(switch-to-split.yml), ...).
      type: str
      sample: switch-to-split.yml
    run:
      description: That run's id.
      type: str
      sample: 20261129T110000Z-3f9a1c
    note:
      description: Anything else for people (a rolled-back switch says so).
      type: str
      sample: ""
    error:
      description: Why the topology cannot be read (not JSON, an unknown topology, unreadable); null otherwise.
      type: str
      sample: null
    path:
      description: The file, O(path).
      type: str
      sample: /var/lib/factory-floor/topology.json
    mtime:
      description: When the file was last written, epoch seconds (this host's clock).
      type: float
      sample: 1795950012.4
message:
  description:
    - With RV(state) V(differs) or V(invalid), why C(deploy.yml) stops before anything changes and the ways on; empty
      otherwise.
  returned: always
  type: str
  sample: >-
    This host is on split, not replicas: switched to split by ops@controller with switch-to-split.yml (run
    20261129T110000Z-3f9a1c) on 2026-11-29 11:00:00 UTC (2.0 h ago) (/var/lib/factory-floor/topology.json). ...
inventory:
  description: What the inventory must say for C(deploy.yml) to agree with hosts that are on O(topology).
  returned: always
  type: dict
  contains:
    topology:
      description: O(topology).
      type: str
      sample: replicas
    inventory_topology:
      description: O(inventory_topology).
      type: str
      sample: split
    agrees:
      description: Whether they are the same.
      type: bool
      sample: false
    file:
      description: The inventory file that sets C(topology), from O(inventory_sources) (C(group_vars/all.yml)).
      type: str
      sample: /srv/factory-floor/inventory/site/group_vars/all.yml
    line:
      description: The inventory line deploy.yml agrees with.
      type: str
      sample: "topology: replicas"
    advice:
      description: One sentence for people, the last line of a switch's output.
      type: str
      sample: >-
        inventory: change the line `topology: split` to `topology: replicas` in
        /srv/factory-floor/inventory/site/group_vars/all.yml, so that deploy.yml agrees with the hosts (until then it
        refuses and names this switch).
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=tr.PATH),
            topology=dict(type="str", choices=list(tr.TOPOLOGIES), required=True),
            inventory_topology=dict(type="str"),
            inventory_sources=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    topology, sources = params["topology"], params["inventory_sources"]
    inventory_topology = params["inventory_topology"] if params["inventory_topology"] is not None else topology
    record = tr.read(params["path"])
    state = tr.state_of(record, topology)
    module.exit_json(
        changed=False,
        state=state,
        recorded=record["topology"] if record and record.get("topology") else "",
        record=record,
        message=tr.refusal(record, topology, sources, time.time()),
        inventory=tr.inventory_advice(topology, inventory_topology, sources),
    )


if __name__ == "__main__":
    main()
