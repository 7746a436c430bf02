#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deploy_topology_check
short_description: Refuse a deploy that would change an engine host's topology or model ungated, unless told to
version_added: 0.1.0
description:
  - C(deploy.yml)'s preflight, on each engine host. Reads the host's topology record and which engine unit runs, as
    M(factory_floor.llm.topology_record) reads them (its options are this module's; the module runs on the host), then
    refuses, before anything changes, when the host is on another topology than O(topology) - the one whose engine unit
    runs, else the one its record names - with M(factory_floor.llm.topology_record)'s RV(factory_floor.llm.topology_record#module:message);
    or when its record names another model than O(model), with its RV(factory_floor.llm.topology_record#module:model_message).
  - After a switch, a routine C(deploy.yml) with the inventory's old topology would stop the one that serves with no
    drain and no tool-calling gate; after C(switch-model.yml), one with the old C(vllm_model) would put the old model
    back ungated. A host with no record that runs nothing (a first deploy) passes.
  - C(vllm_deploy_topology_change) and C(vllm_deploy_model_change) (the task's variables, read by the action plugin on
    the controller) let the run go on; RV(notes) then says what it does with no drain or no gate. A note of a run that
    is refused all the same (the topology allowed, the model not) comes back as a warning.
  - The module only reads.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.topology_record
seealso:
  - module: factory_floor.llm.topology_record
"""

EXAMPLES = r"""
- name: Refuse to change the topology or the model the hosts record, unless told to
  factory_floor.llm.deploy_topology_check:
    topology: "{{ topology }}"
    units: [vllm-replica.service, vllm-split.service]
    model: "{{ vllm_model }}"
    inventory_sources: "{{ ansible_inventory_sources }}"
    playbook_dir: "{{ playbook_dir }}"
  register: checked

- name: Say what this run changes with no drain or no tool-calling gate
  ansible.builtin.debug:
    msg: "{{ checked.notes | join(' ') }}"
  when: checked.notes | length > 0
"""

RETURN = r"""
notes:
  description:
    - What the run does with no drain or no tool-calling gate because an override lets it go on (one sentence each,
      naming the host, what it is on and what it is brought to); empty when nothing is overridden.
  returned: success
  type: list
  elements: str
  sample: ["vllm_deploy_model_change=true: spark-a records /models/a; this run restarts it on /models/b with no tool-calling gate."]
state:
  description: M(factory_floor.llm.topology_record)'s - V(absent), V(agrees), V(differs) or V(invalid).
  returned: success
  type: str
  sample: agrees
runs:
  description: M(factory_floor.llm.topology_record)'s - what the host runs (V(replicas), V(split), V(none), V(both)).
  returned: success
  type: str
  sample: replicas
recorded:
  description: M(factory_floor.llm.topology_record)'s - the topology the record names, empty when none.
  returned: success
  type: str
  sample: replicas
record:
  description: M(factory_floor.llm.topology_record)'s - the record read, or null when there is none.
  returned: success
  type: dict
message:
  description: M(factory_floor.llm.topology_record)'s - the topology refusal (the task's C(msg) when it fails on it).
  returned: success
  type: str
  sample: ""
model_state:
  description: M(factory_floor.llm.topology_record)'s - V(differs) when the record names another model.
  returned: success
  type: str
  sample: agrees
model_message:
  description: M(factory_floor.llm.topology_record)'s - the model refusal.
  returned: success
  type: str
  sample: ""
inventory:
  description: M(factory_floor.llm.topology_record)'s - what the inventory must say for C(deploy.yml) to agree with O(topology).
  returned: success
  type: dict
"""
