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
  - With O(units), it also asks systemd which engine unit runs (C(systemctl is-active)); the host is then on the
    topology whose unit runs, whatever the record says, and only on the record's when none runs. A host with no record
    that runs the other topology's engine is refused like one whose record names it; one with no record that runs
    nothing (a first deploy) agrees with any topology.
  - With O(model), it compares the model directory the record names (C(switch-model.yml) writes the one it put there)
    with the one this run deploys (RV(model_state), RV(model_message)). After C(switch-model.yml), a routine
    C(deploy.yml) with the inventory's old C(vllm_model) would put the old model back with no tool-calling gate. The
    message names the inventory line to change, C(switch-model.yml) and C(deploy.yml)'s override,
    C(vllm_deploy_model_change).
  - With O(hosts), it reads no file and compares what every engine host said (this module's results there) and
    names each disagreement - a record that names another topology than the host runs, hosts whose records or units
    differ, a host that could not be read (RV(site), RV(message)); RV(inventory) then says what the inventory must
    say for what the hosts run. Run it once, on the controller.
  - RV(inventory) says what the inventory must say for C(deploy.yml) to agree with O(topology); the switches
    print its C(advice) last.
  - The module only reads.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.topology_record
options:
  hosts:
    description:
      - Per engine host (inventory name, in inventory order), this module's result there (read with O(units)), or
        null/a failed or unreachable result for a host that could not be read. When given, no file is read and the hosts
        are compared (RV(site)).
    type: dict
  engine_hosts:
    description:
      - The engine hosts (inventory names, in inventory order), with O(registered) - the module's action plugin reads,
        on the controller, the result each one registered under O(registered) (in C(hostvars); none, an empty result)
        and passes them as O(hosts).
      - Default, the engine group as the task sees it (C(groups[site_engine_group]), C(gb10) when
        C(site_engine_group) is not defined).
    type: list
    elements: str
  registered:
    description:
      - Instead of O(hosts), the name each engine host (O(engine_hosts)) registered this module's result under.
    type: str
"""

EXAMPLES = r"""
- name: Read the topology this host records (the inventory's topology, its sources and playbook_dir read by the action)
  factory_floor.llm.topology_record:
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

- name: Read the record, what runs, and compare the model (deploy.yml's preflight, on each engine host)
  factory_floor.llm.topology_record:
    topology: "{{ topology }}"
    units: [vllm-replica.service, vllm-split.service]
    model: "{{ vllm_model }}"
    inventory_sources: "{{ ansible_inventory_sources }}"
  register: record

- name: Name every disagreement between the engine hosts (each one's result registered as record, read on the controller)
  factory_floor.llm.topology_record:
    registered: record
  delegate_to: localhost
  run_once: true
  register: site
"""

RETURN = r"""
state:
  description:
    - The host compared with O(topology) - V(absent) (no file, and no engine unit runs or O(units) was not given),
      V(agrees), V(differs) or V(invalid) (a file whose topology cannot be read, and no engine unit runs). What the host
      is on is the topology whose engine unit runs (RV(runs)), else the one its record names.
    - With O(hosts), V(agrees) or V(disagrees) (RV(site)).
  returned: always
  type: str
  sample: differs
record_state:
  description:
    - The record alone compared with O(topology) (RV(state) without what runs); what decides whether the record is
      written again.
  returned: when O(hosts) is not given
  type: str
  sample: agrees
runs:
  description:
    - What the host runs by C(systemctl is-active) of O(units) - V(replicas), V(split), V(none), V(both), or empty when
      O(units) was not given or systemd could not be asked.
  returned: when O(hosts) is not given
  type: str
  sample: replicas
model_state:
  description:
    - The record's C(model) compared with O(model) - V(agrees), V(differs), or V(absent) (nothing to compare - no model
      recorded, a record of the other topology, or no O(model)).
  returned: when O(hosts) is not given
  type: str
  sample: differs
model_message:
  description: With RV(model_state) V(differs), why C(deploy.yml) stops and the ways on; empty otherwise.
  returned: when O(hosts) is not given
  type: str
  sample: >-
    This host's engine was brought to /models/New-Build (switch-model.yml put it there (run 20261129T110000Z-3f9a1c) by
    ops@controller on 2026-11-29 11:00:00 UTC (2.0 h ago); /var/lib/factory-floor/topology.json), not /models/Old-Build. ...
site:
  description:
    - With O(hosts), every host's record next to what it runs - C(hosts) (per host C(read), C(recorded), C(runs),
      C(model)), C(running) (the one topology the hosts run, V(none), V(mixed), or V(unknown) when no host's units were
      read), C(recorded) (the one topology the records name, V(mixed), or null), C(agrees) and C(disagreements) (one
      sentence each).
  returned: with O(hosts)
  type: dict
  sample:
    running: replicas
    recorded: mixed
    agrees: false
    disagreements: ["spark-a records split but runs replicas", "the hosts' records differ: spark-a split, spark-b replicas"]
recorded:
  description: The topology the record names; empty when there is no record or it cannot be read.
  returned: always
  type: str
  sample: split
record:
  description: The record's fields as read from O(path), or null when there is no file.
  returned: always (null with O(hosts))
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
    model:
      description: The model directory the host's engine was brought to serve; null in records written before models were.
      type: str
      sample: /models/Qwen3-Next-80B-A3B-Instruct-NVFP4
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
    - With O(hosts), every disagreement in one sentence; empty when the hosts agree.
  returned: always
  type: str
  sample: >-
    This host is on split, not replicas: switched to split by ops@controller with switch-to-split.yml (run
    20261129T110000Z-3f9a1c) on 2026-11-29 11:00:00 UTC (2.0 h ago) (/var/lib/factory-floor/topology.json). ...
inventory:
  description:
    - What the inventory must say for C(deploy.yml) to agree with hosts that are on O(topology); with O(hosts), with what
      the hosts run (C(topology) and C(line) empty when they do not run one topology).
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


def _runs(module, units):
    """What ``systemctl is-active`` says runs of ``units`` ("" when not asked or systemd cannot be asked)."""
    if not units:
        return ""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return ""
    # is-active exits non-zero when a unit is inactive: the states are what counts.
    _rc, out, _err = module.run_command([systemctl, "is-active", "--"] + list(units))
    states = out.split()
    return (tr.runs(states) or "") if len(states) == len(units) else ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default=tr.PATH),
            # The action plugin reads topology, path, inventory_sources and playbook_dir the task leaves out.
            topology=dict(type="str", choices=list(tr.TOPOLOGIES)),
            inventory_topology=dict(type="str"),
            inventory_sources=dict(type="list", elements="str", default=[]),
            playbook_dir=dict(type="str", default=""),
            units=dict(type="list", elements="str", default=[]),
            model=dict(type="str", default=""),
            hosts=dict(type="dict"),
            # Read by the action plugin (plugins/action/topology_record.py), which passes hosts instead.
            engine_hosts=dict(type="list", elements="str"),
            registered=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not params["topology"]:
        module.fail_json(msg="topology_record needs a topology (replicas or split): set the inventory's topology, or "
                             "the task's topology")
    topology, sources, playbook_dir = params["topology"], params["inventory_sources"], params["playbook_dir"]
    inventory_topology = params["inventory_topology"] if params["inventory_topology"] is not None else topology
    if params["hosts"] is not None:
        site = tr.compare(list(params["hosts"]), params["hosts"])
        module.exit_json(changed=False, state=tr.AGREES if site["agrees"] else "disagrees", recorded=site["recorded"] or "",
                         record=None, site=site, message=tr.disagreement(site),
                         inventory=tr.site_advice(site, inventory_topology, sources, playbook_dir))
    record = tr.read(params["path"])
    running = _runs(module, params["units"])
    now = time.time()
    module.exit_json(
        changed=False,
        state=tr.state_of(record, topology, running or None),
        record_state=tr.state_of(record, topology),
        recorded=record["topology"] if record and record.get("topology") else "",
        runs=running,
        record=record,
        message=tr.refusal(record, topology, sources, now, running or None, playbook_dir),
        model_state=tr.model_state(record, topology, params["model"]),
        model_message=tr.model_refusal(record, topology, params["model"], sources, now, playbook_dir),
        inventory=tr.inventory_advice(topology, inventory_topology, sources, playbook_dir),
    )


if __name__ == "__main__":
    main()
