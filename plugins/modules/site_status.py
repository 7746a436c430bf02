#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: site_status
short_description: One view of a Factory Floor site from what each host says, as a table and as data
version_added: 0.1.0
description:
  - Puts together what C(playbooks/status.yml) read on each host with the roles' C(status) entry points, on the
    controller, once - the topology the hosts run (their active engine units and their topology record) against the
    inventory's; each engine's unit, whether it serves, whether each proxy has it in rotation, its model and build, and
    the last tool-calling gate score of that host; the watchdogs' last verdicts and the restarts left in their budget;
    each host's memory share (the engine's running C(--gpu-memory-utilization) and the largest safe one) and headroom
    (C(MemAvailable) above the memory guard's floor); a maintenance lock and its holder; the clients that reach an
    engine's API port without the proxy; the proxies' membership checkers.
  - A host that could not be read, or a read that failed, is shown as such (and listed under RV(attention)); the module
    fails only on arguments it cannot use.
  - Reads nothing on the hosts itself; on the controller it reads the tool gate's score files in O(gate_store_dir).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  inventory_topology:
    description: The inventory's C(topology), compared with what the hosts run and record.
    type: str
    choices: [replicas, split]
    required: true
  engines:
    description:
      - Per engine host (inventory name), what the C(factory_floor.llm.vllm) role's C(status) entry point read there
        (its fact C(vllm_status)), or null or empty when nothing was read. Keys read - C(reachable) (bool), C(error) (why not),
        C(units) (C(systemctl show -p Id,LoadState,ActiveState,SubState,Result,UnitFileState,NRestarts) of the engine
        units, as text), C(record) (C(factory_floor.llm.topology_record)'s result), C(health)
        (C(factory_floor.llm.vllm_health)'s), C(engine) (C(factory_floor.llm.vllm_engine_info)'s results, one per
        engine unit, each with C(item), the unit), C(containers) (C(factory_floor.llm.container_image_info)'s
        C(containers)), C(runtime), C(watchdog) (the C(factory_floor.llm.vllm_watchdog) role's C(status) - C(units),
        C(status) per unit), C(memory) (the C(factory_floor.llm.memory_guard) role's C(status) - C(enabled), C(share),
        C(watch)), C(lock) (C(factory_floor.llm.maintenance_lock) with C(state=query)) and C(peers)
        (C(factory_floor.llm.vllm_peers)'s result).
    type: dict
    required: true
  engine_hosts:
    description:
      - The engine hosts (inventory names), instead of O(engines) - the module's action plugin reads, on the controller,
        each one's C(vllm_status) fact from C(hostvars) and passes them as O(engines); and, unless the task gives them,
        O(inventory_topology) and O(split_head) as the first engine host's C(topology) and C(vllm_split_head) say
        (C(replicas) and that host when not set).
    type: list
    elements: str
  proxy_hosts:
    description:
      - With O(engine_hosts), the proxy hosts, instead of O(proxies) - the plugin reads each one's C(nginx_proxy_status)
        and, unless the task gives O(keepalived), the first C(keepalived_status) set among them.
    type: list
    elements: str
  proxies:
    description:
      - Per proxy host, what the C(factory_floor.llm.nginx_proxy) role's C(status) entry point read there (its fact
        C(nginx_proxy_status) - C(reachable), C(error), C(rotation), the membership checker's state file, and
        C(checker), its unit's C(systemctl show) text), or null.
    type: dict
    default: {}
  split_head:
    description: The split's rank-0 host, the one that serves the API (C(vllm_split_head)). Default, the first engine host.
    type: str
  gate_store_dir:
    description:
      - Where the C(factory_floor.llm.tool_gate) role keeps its scores on the controller (C(tool_gate_store_dir)). The
        newest score file of each engine host there (or under C(failed/)) is that host's last gate.
    type: path
  floating_addresses:
    description:
      - The proxy's floating addresses, each C(name), C(address), C(holder) (the host that holds it now) and C(state),
        for its row of the table; O(keepalived) adds the one the C(keepalived) role manages.
    type: list
    elements: dict
    default: []
  keepalived:
    description:
      - The C(keepalived) role's C(keepalived_status) fact (its C(status) entry point, run on the proxy hosts first) -
        C(address), C(holders) (inventory names), C(ok), C(hosts) (each host's VRRP state), C(message). Its address,
        holder and each proxy host's VRRP state get the table's floating address line; no holder or two holders
        need attention.
      - Omitted or null - no floating address (fewer than two proxy hosts), unless O(floating_addresses) names one.
    type: dict
"""

EXAMPLES = r"""
- name: Put the site's view together (playbooks/status.yml)
  factory_floor.llm.site_status:
    inventory_topology: "{{ topology }}"
    engines: "{{ dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars) | map(attribute='vllm_status', default={}))) }}"
    proxies: "{{ dict(groups['proxy'] | zip(groups['proxy'] | map('extract', hostvars) | map(attribute='nginx_proxy_status', default={}))) }}"
    gate_store_dir: "{{ tool_gate_scores_dir }}"
  delegate_to: localhost
  run_once: true
  register: status

- name: Print it
  ansible.builtin.debug:
    msg: "{{ status.table }}"
"""

RETURN = r"""
time:
  description: When the view was put together, epoch seconds (the controller's clock).
  returned: always
  type: float
  sample: 1795957165.2
topology:
  description:
    - C(running) (V(replicas), V(split), V(none), or both), C(recorded) (what the hosts' topology records name), C(inventory),
      C(agrees), C(by_host) (each host's record), C(last) (the latest record - C(topology), C(by), C(playbook), C(since)
      epoch seconds, C(run), C(note)), C(advice) (C(factory_floor.llm.topology_record)'s message when the inventory
      differs) and C(disagreements) (one sentence each - a host whose record is not what its units run, records that
      differ between hosts; each is also in RV(attention)).
  returned: always
  type: dict
  sample: {running: replicas, recorded: replicas, inventory: split, agrees: false}
engines:
  description:
    - One row per engine host that was read - C(host), C(unit), C(unit_state) (words), C(active), C(api) (it serves the
      API; the split's rank 1 does not), C(serving) (words) and C(status) (C(vllm_health)'s, probe C(models)),
      C(rotation) (per proxy V(in), V(drained), V(out (...)), V(not a member) or V(unknown (...))), C(served_model),
      C(model) (the directory vLLM runs), C(vllm_version), C(image_id) (the running container's image, null with the venv
      runtime), C(runtime), C(gpu_memory_utilization) (the running one, a fraction 0-1 as text), C(gate) (the last
      tool-calling gate here - C(score) percent 0-100, C(verdict), C(measured_at), C(model), C(build_id),
      C(running_build) whether that record is of the build that runs now, by model directory, tool-call parser and
      image ID; null when there is none).
  returned: always
  type: list
  elements: dict
watchdogs:
  description:
    - One row per watchdog unit installed on an engine host - C(host), C(unit), C(unit_state), C(verdict) and C(reason)
      (its last), C(updated) (epoch seconds), C(stale) (older than 300 s), C(restarts_left) (restarts its budget allows
      now, a count), C(max_restarts), C(restart_window) (seconds), C(gave_up) (why, or null).
  returned: always
  type: list
  elements: dict
memory:
  description:
    - One row per engine host - C(enabled) (the memory guard), C(share_running) (the engine's C(--gpu-memory-utilization)),
      C(share_largest_safe) (C(factory_floor.llm.gpu_memory_utilization)'s, a fraction 0-1), C(share_error),
      C(mem_available_gib) and C(floor_gib) (GiB, from the memory guard's watch when it runs, else C(/proc/meminfo) and
      the start floor), C(headroom_gib) (their difference, GiB), C(below_floor), C(source), C(workloads) (the watch's).
  returned: always
  type: list
  elements: dict
locks:
  description: One row per engine host - C(state) (V(free), V(held), V(expired), V(unknown)), C(holder) (in words), C(lock).
  returned: always
  type: list
  elements: dict
peers:
  description:
    - One row per engine host - C(bypassing) (addresses of clients that reach the API port without the proxy),
      C(counts) (connections by class V(loopback), V(allowed), V(other)), C(error).
  returned: always
  type: list
  elements: dict
proxies:
  description:
    - One row per proxy host - C(reachable), C(error), C(checker) (its unit's state), C(mode), C(in_rotation),
      C(drained), C(updated) (epoch seconds), C(stale) (older than 60 s).
  returned: always
  type: list
  elements: dict
floating_addresses:
  description: O(floating_addresses), then the one of O(keepalived) - C(name) (V(keepalived)), C(address), C(holder)
    (the holders, joined with C(and); null when none holds it), C(holders), C(state), C(ok) (exactly one holder),
    C(message).
  returned: always
  type: list
  elements: dict
not_read:
  description: The engine hosts that could not be read (unreachable, or no observation), each C(host) and C(error).
  returned: always
  type: list
  elements: dict
attention:
  description: What needs a person, one sentence each (empty when nothing does).
  returned: always
  type: list
  elements: str
  sample: ["spark-b: maintenance lock held by switch-to-replicas (run 20261201T210200Z-3f9a1c, by ops@ctl), since ..."]
table:
  description: The view as lines a person reads.
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _site_status as site


def main():
    module = AnsibleModule(
        argument_spec=dict(
            inventory_topology=dict(type="str", required=True, choices=["replicas", "split"]),
            engines=dict(type="dict", required=True),
            # Read by the action plugin (plugins/action/site_status.py), which passes engines and proxies instead.
            engine_hosts=dict(type="list", elements="str"),
            proxy_hosts=dict(type="list", elements="str"),
            proxies=dict(type="dict", default={}),
            split_head=dict(type="str"),
            gate_store_dir=dict(type="path"),
            floating_addresses=dict(type="list", elements="dict", default=[]),
            keepalived=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    now = time.time()
    gate = site.read_gate_records(params["gate_store_dir"], list(params["engines"]))
    view = site.build(params["engines"], params["proxies"], params["inventory_topology"], split_head=params["split_head"],
                      gate=gate, floating=params["floating_addresses"], now=now,
                      keepalived=params["keepalived"])
    module.exit_json(changed=False, table=site.table(view, now), **view)


if __name__ == "__main__":
    main()
