#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: layout_check
short_description: Refuse an inventory layout that cannot work, before anything changes
version_added: 0.1.0
description:
  - "Checks the layout an inventory describes - which hosts run the engines, the proxy and the split, on which
    machines and ports - and fails with one message per problem, each naming the host or the variable and what
    to change. Run it first in C(deploy.yml) and the switch playbooks, on the controller
    (C(delegate_to: localhost), C(run_once)); the C(layout) entry point of the C(factory_floor.llm.vllm) role does
    that and builds the arguments from the inventory."
  - "Refused: O(topology) other than V(replicas)/V(split); a host listed in both topologies - this collection
    has no per-topology groups (the variable C(topology) names the site's topology), so that is a host whose
    C(topology) differs from the other hosts', or, in an inventory that lists hosts under groups named
    C(replicas) and C(split) (neither of them the engine, proxy or split group), a host in both; an empty engine
    group while the proxy group has hosts (a proxy with no replicas), or no proxy host; two engines on one machine
    with the same C(vllm_port); two engines the proxy would reach at the same
    C(nginx_proxy_backend_address:vllm_port); the proxy's port equal to C(vllm_port) on a machine that runs both;
    a loopback C(nginx_proxy_backend_address) or C(vllm_listen_host) while a proxy runs on another machine."
  - "For V(split) (one group of every engine host, two or more) also: fewer than two machines;
    C(vllm_split_group) not holding the same hosts as the engine group; two ranks on one machine;
    C(vllm_split_head) outside the group; ranks that disagree on the parallel sizes or the head;
    C(vllm_split_tensor_parallel_size) x C(vllm_split_pipeline_parallel_size) not equal to the number of hosts (one
    rank per host); a tensor-parallel size the declared heads cannot be split over
    (C(site_engine_groups_num_attention_heads), C(site_engine_groups_num_key_value_heads), when set)."
  - "For a declared C(site_engine_groups) (the site's engine groups, a list of lists of engine host names) also: a host
    outside O(engine_group), in no group or in two; a group size vLLM's tensor parallelism cannot split the model's
    heads over (C(site_engine_groups_num_attention_heads), C(site_engine_groups_num_key_value_heads), when set); two
    hosts of one group on one machine; engine hosts that disagree on it; and, outside a group move (O(move)), any
    grouping other than O(topology)'s own - every engine host its own group for V(replicas), every engine host in
    one group with C(vllm_split_head) first for V(split); several groups or groups of mixed sizes run only with
    C(move-groups.yml) - each saying what to set instead."
  - "Also refused, each naming the variable and the hosts, never a value: a variable the roles declare C(type: list)
    or C(type: dict) set to something else (O(value_types); Ansible's own check turns a string into a list or a dict
    for the check only, and the role then takes it character by character); an API key that is not a bearer token
    (O(api_keys)); engine hosts that disagree on C(vllm_served_model_name) or C(vllm_api_key)."
  - "With O(inventory_variables), also every inventory variable set for a host of O(groups) (host_vars, group_vars,
    extra vars) whose name has one of the collection's prefixes (each role's name - C(vllm_), C(nginx_proxy_),
    C(keepalived_), C(memory_guard_), C(tool_gate_), C(maintenance_window_), C(site_) - and the first word of the
    options no role's name prefixes, such as C(switch_), C(metrics_), C(tune_), C(status_), C(ff_); not
    C(prometheus_), prometheus.prometheus's): a name no role's C(meta/argument_specs.yml) declares is refused with the
    closest declared name (a typo: no role reads it, so it would change nothing); a value is refused, in one line
    saying what it must be, when it is not of its option's type (a whole number for C(int), a number for C(float),
    true or false for C(bool), a list, a mapping, text), not one of its C(choices), or outside the range its
    description documents (a fraction 0-1 for C(vllm_gpu_memory_utilization), 1-65535 for a TCP port, ...).
    A scalar value is quoted in the message unless its option is C(no_log); a list or a mapping never is."
  - A machine is identified by where Ansible connects to it - C(ansible_host) (default, the inventory name) and
    C(ansible_port) when set to other than ssh's 22. C(ansible_connection=local), and loopback addresses without
    C(ansible_port), are the controller itself.
  - The module only reads its arguments; it never connects to a host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  topology:
    description:
      - The topology about to be deployed or switched to - V(replicas) (one full copy per machine behind the
        proxy) or V(split) (one model over two machines). Any other value is reported as an error.
    type: str
    required: true
  groups:
    description:
      - Inventory groups by name, each a list of inventory host names (the C(groups) magic variable, or the part
        of it naming O(engine_group), O(proxy_group) and O(split_group), and the groups C(replicas) and C(split)
        when the inventory has them). A group missing here is reported as not in the inventory.
      - "Left out, the module's action plugin reads the layout from the inventory on the controller (C(groups) and
        C(hostvars) as the task sees them): these groups, and for each of their hosts O(hostvars) and O(api_keys),
        which it fills itself (what the given ones say is then not read). The result then also holds
        RV(prometheus_hosts), and once the layout passed the task fails naming the names there the inventory does not
        list (topology_record publishes scrape targets on them by delegation, after the engines changed)."
    type: dict
  hostvars:
    description:
      - Per inventory host, the inventory variables the check reads, as set for that host; leave unset ones out
        and the roles' defaults apply (C(vllm_port) 8000, C(vllm_listen_host) 0.0.0.0, C(site_proxy_port) 8080,
        C(vllm_split_tensor_parallel_size) 2, C(vllm_split_pipeline_parallel_size) 1, C(vllm_split_head) the
        first host of the split's group).
      - "Variables read: C(topology), C(ansible_host), C(ansible_port), C(ansible_connection), C(vllm_port),
        C(vllm_listen_host), C(site_proxy_port), C(nginx_proxy_backend_address),
        C(vllm_split_head), C(vllm_split_tensor_parallel_size), C(vllm_split_pipeline_parallel_size),
        C(vllm_served_model_name) (the engine hosts must agree on it), C(site_engine_groups),
        C(site_engine_groups_num_attention_heads), C(site_engine_groups_num_key_value_heads) (the engine hosts must agree
        on each). Ports are TCP port numbers; parallel sizes are counts of ranks; heads are counts of heads."
    type: dict
    default: {}
  value_types:
    description:
      - Per inventory host, the type of each variable of O(expected_types) that is set for it, as Jinja's
        C(type_debug) names it (V(str), V(list), V(dict), V(NoneType), V(int), ...). Types only, no value, are passed.
    type: dict
    default: {}
  expected_types:
    description:
      - "The variables the roles declare C(type: list) or C(type: dict) in their C(meta/argument_specs.yml), each with
        V(list) or V(dict). A variable of O(value_types) whose type differs is reported (check V(value_type))."
    type: dict
    default: {}
  inventory_variables:
    description:
      - Also check every inventory variable of the hosts of O(groups) that has one of the collection's prefixes -
        its name, its type, its choices and its documented range - against every role's C(meta/argument_specs.yml)
        (read on the controller from the collection's C(roles/)). Done by the module's action plugin on the
        controller, from C(hostvars); the values never become module arguments, so no verbosity shows them.
      - Names of another collection's variables that share a prefix are accepted when listed in the inventory
        variable C(vllm_layout_foreign_variables) of a host.
      - Supersedes O(value_types) and O(expected_types), which remain for a what-if without an inventory.
    type: bool
    default: false
  api_keys:
    description:
      - Per inventory host, the API key variables set for it (C(vllm_api_key), C(tool_gate_api_key),
        C(nginx_proxy_api_key), C(metrics_api_key)). Each must be a bearer token (RFC 6750 b64token - letters, digits,
        C(-._~+/), then C(=) only at its end); the engine hosts' C(vllm_api_key) must be the same. Never shown in a
        message or a result (C(no_log)).
    type: dict
    default: {}
  engine_group:
    description:
      - Group of the machines that run vLLM (the playbooks' C(gb10); the proxy's C(site_engine_group)).
    type: str
    default: gb10
  proxy_group:
    description:
      - Group of the hosts that run the proxy (the playbooks' C(proxy); C(site_proxy_group)).
    type: str
    default: proxy
  split_group:
    description:
      - Group of the two machines the split runs on (C(vllm_split_group)). Only read for V(split).
    type: str
    default: gb10
  move:
    description:
      - The run is a group move (C(move-groups.yml)), which runs any grouping of the engine hosts the model's heads
        allow - a declared C(site_engine_groups) of several groups, or of mixed sizes, is then not refused
        (V(engine_groups_unsupported), V(engine_groups_topology) are the two-topology playbooks' refusals).
    type: bool
    default: false
  move_to:
    description:
      - With O(move), the move's target grouping (the playbook's C(move_to)), a list of groups, each a list of inventory
        names; checked as a declared C(site_engine_groups) is (V(move_to)). Empty, not checked.
    type: list
    elements: list
    default: []
notes:
  - Checks that need the hosts themselves (the model directory exists, a port is free, the tool-call parser is
    known) stay in the roles' preflight tasks, which also run before anything changes.
seealso:
  - module: factory_floor.llm.kv_cache_plan
"""

EXAMPLES = r"""
# What the vllm role's "layout" entry point does (include it first in a preflight play): the groups, the hosts'
# variables and their API keys read from the inventory by the action plugin.
- name: Check the layout before anything changes
  factory_floor.llm.layout_check:
    topology: "{{ topology }}"
    engine_group: gb10
    proxy_group: proxy
    # and every vllm_*, nginx_proxy_*, switch_*, ... variable of those hosts: name, type, choices, range
    inventory_variables: true
  delegate_to: localhost
  run_once: true
  become: false

- name: A what-if - would spark-2 on the same box as spark-1 work?
  factory_floor.llm.layout_check:
    topology: replicas
    groups: {gb10: [spark-1, spark-2], proxy: [spark-1]}
    hostvars:
      spark-1: {ansible_host: 192.0.2.11}
      spark-2: {ansible_host: 192.0.2.11, vllm_port: 8001}
  delegate_to: localhost
  register: __layout
"""

RETURN = r"""
changed:
  description: Always false; the module only reads its arguments.
  returned: always
  type: bool
  sample: false
errors:
  description:
    - Every problem found, in the order checked; empty when the layout can work. On failure C(msg) holds the
      same messages, numbered.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - Which check failed - V(topology), V(topology_differs), V(topology_groups), V(no_engines), V(no_proxy),
          V(port_value), V(port_shared), V(upstream_shared), V(proxy_port_shared), V(loopback_backend),
          V(loopback_listen), V(split_group), V(split_hosts), V(split_settings_differ), V(split_head), V(split_parallel),
          V(split_machines), V(engine_groups) (C(site_engine_groups) names a host outside the engine group, leaves one
          out or lists it twice, has a group size the heads cannot be split over or a group with two hosts on one
          machine), V(engine_groups_differ), V(engine_groups_unsupported) (outside a group move, a grouping the
          two-topology playbooks do not run),
          V(engine_groups_topology) (the grouping of the other topology), V(move_to) (with O(move), a target grouping
          with a host outside the engine group, left out or twice, or a group size the heads cannot be split over),
          V(engine_groups_head) (the split's group not
          led by C(vllm_split_head)), V(value_type), V(api_key), V(served_model_name_differs), V(api_key_differs),
          V(variable_name) (with O(inventory_variables), a name no role declares), V(variable_renamed) (with
          O(inventory_variables), a name the collection gave up for one shared name, such as C(vllm_engine_group) for
          C(site_engine_group), or one that moved with its procedure to another role, such as C(vllm_replica_drain_timeout)
          for C(rolling_restart_drain_timeout)).
      type: str
      sample: split_hosts
    hosts:
      description: Inventory hosts involved.
      type: list
      elements: str
      sample: [spark-1]
    variables:
      description: Inventory variables to change.
      type: list
      elements: str
      sample: [topology, vllm_split_group]
    message:
      description: What is wrong and what to change.
      type: str
      sample: >-
        topology 'split' runs one model over two or more machines, one rank each, but group 'gb10' has 1: spark-1.
        To fix, add the second machine to gb10, or keep topology 'replicas' (one full copy per machine).
layout:
  description: The layout as the module understood it.
  returned: always
  type: dict
  contains:
    topology:
      description: O(topology) as given.
      type: str
      sample: replicas
    engines:
      description: Hosts of O(engine_group).
      type: list
      elements: str
      sample: [spark-1]
    proxies:
      description: Hosts of O(proxy_group).
      type: list
      elements: str
      sample: [spark-1]
    serving:
      description: Engines that serve the API and are the proxy's upstream - every replica, or the split's head.
      type: list
      elements: str
      sample: [spark-1]
    split:
      description: The split's head and parallel sizes (ranks); null for V(replicas).
      type: dict
      sample: {head: spark-1, tensor_parallel_size: 2, pipeline_parallel_size: 1}
    machines:
      description: Inventory hosts by the machine they are (how Ansible reaches it).
      type: dict
      sample: {"ansible_host 192.0.2.11": [spark-1]}
    upstream:
      description: The C(address:port) the proxy reaches each serving engine at.
      type: list
      elements: str
      sample: ["127.0.0.1:8000"]
prometheus_hosts:
  description:
    - Where the engines publish their scrape targets (C(vllm_prometheus_hosts), read from the inventory) - the engine
      hosts that set it, and the names it lists that the inventory does not (refused - the task fails naming them).
  returned: when O(groups) is left out (read from the inventory) and the layout passes
  type: dict
  contains:
    setters:
      description: Hosts of O(engine_group) that set C(vllm_prometheus_hosts).
      type: list
      elements: str
      sample: [spark-1]
    unlisted:
      description: Names in their C(vllm_prometheus_hosts) that are not inventory hosts.
      type: list
      elements: str
      sample: [prometheus-1]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._inventory_values import (
    check_agreement,
    check_api_keys,
    check_types,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._layout import (
    ENGINE_GROUP,
    PROXY_GROUP,
    SPLIT_GROUP,
    check_layout,
    format_errors,
)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="str", required=True),
            # Filled by the action plugin from the inventory when the task leaves it out.
            groups=dict(type="dict"),
            hostvars=dict(type="dict", default={}),
            engine_group=dict(type="str", default=ENGINE_GROUP),
            proxy_group=dict(type="str", default=PROXY_GROUP),
            split_group=dict(type="str", default=SPLIT_GROUP),
            value_types=dict(type="dict", default={}),
            expected_types=dict(type="dict", default={}),
            api_keys=dict(type="dict", default={}, no_log=True),
            # Read by the action plugin (plugins/action/layout_check.py), which does that check on the controller.
            inventory_variables=dict(type="bool", default=False),
            move=dict(type="bool", default=False),
            move_to=dict(type="list", elements="list", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    hostvars = params["hostvars"] or {}
    bad = sorted(host for host, values in hostvars.items() if values is not None and not isinstance(values, dict))
    if bad:
        module.fail_json(msg="hostvars must map each host to a dict of its inventory variables; not a dict for: %s"
                         % ", ".join(bad))
    groups = params["groups"]
    if groups is None:  # only without the action plugin, which always fills it
        module.fail_json(msg="groups is required: the inventory groups the check reads")
    bad = sorted(name for name, members in groups.items() if members is not None and not isinstance(members, list))
    if bad:
        module.fail_json(msg="groups must map each group to a list of host names; not a list for: %s" % ", ".join(bad))

    for name in ("value_types", "api_keys"):
        bad = sorted(host for host, values in params[name].items() if values is not None and not isinstance(values, dict))
        if bad:
            module.fail_json(msg="%s must map each host to a dict of variables; not a dict for: %s" % (name, ", ".join(bad)))

    result = check_layout(params["topology"], groups, hostvars, engine_group=params["engine_group"],
                          proxy_group=params["proxy_group"], split_group=params["split_group"],
                          move=params["move"], move_to=params["move_to"])
    # The values the roles could not take as they are (types, keys, engines that must agree).
    result["errors"] += (check_types(params["expected_types"], params["value_types"])
                         + check_api_keys(params["api_keys"])
                         + check_agreement(result["layout"]["engines"], hostvars, params["api_keys"],
                                           params["engine_group"]))
    if result["errors"]:
        module.fail_json(msg=format_errors(result["errors"]), changed=False, **result)
    module.exit_json(changed=False, **result)


def main():
    run_module()


if __name__ == "__main__":
    main()
