#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: limit_check
short_description: Refuse a --limit that leaves out what a playbook needs, or name the hosts to read first
version_added: 0.1.0
description:
  - "C(ansible-playbook --limit) narrows every play to the hosts it names; the plays then know nothing of the others
    but their inventory variables - no facts. This module says, for one of the collection's playbooks (O(playbook)),
    what the run lacks from hosts outside the limit, before anything changes: a limit that cannot work is refused,
    naming the C(--limit) to use; addresses it needs are returned in RV(gather) for the run to read first
    (C(ansible.builtin.setup) delegated to those hosts, network facts only)."
  - "V(deploy): the proxy hosts' addresses, which the engines' firewall admits (gathered); the split's other rank when
    O(topology) is V(split) (the pair restarts together with one share, and rank 1 needs rank 0's link address:
    refused); every proxy host when they share a floating address (O(keepalived): each one's VRRP peers are planned
    from the proxy hosts in the run: refused)."
  - "V(switch), V(switch_model), V(status): every engine and proxy host (refused); V(status) also the play on
    localhost, which a C(--limit) must name."
  - "V(peers): the proxy hosts' addresses, by which connections are classed (gathered)."
  - "V(metrics), V(prometheus_config), V(chat), V(tune): the one host they run on (O(reader)); refused when the limit
    leaves it out, since the run would do nothing and exit 0. V(memory_guard), V(tool_gate_spread): nothing."
  - The C(limit) entry point of the C(factory_floor.llm.vllm) role runs it on the controller in a playbook's first
    play; deploy.yml and the switch run it in their layout play.
  - The module only reads its arguments; it never connects to a host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  playbook:
    description:
      - The playbook being run.
      - Left out, the action plugin reads C(site_limit_playbook) (the C(site) role's C(limit) entry point); the module
        fails without one.
    type: str
    choices: [deploy, switch, move_groups, switch_model, status, peers, metrics, prometheus_config, chat, tune, memory_guard,
              tool_gate_spread]
  hosts:
    description:
      - The hosts the run includes, C(ansible_play_hosts_all) of a play over C(all) (or the engine and proxy
        groups) - the inventory hosts C(--limit) lets in.
      - Left out, the action plugin reads C(ansible_play_hosts_all); the module fails without them.
    type: list
    elements: str
  limit:
    description:
      - The C(--limit) text (C(ansible_limit)), for messages; empty without one.
      - Left out, the action plugin reads C(ansible_limit).
    type: str
    default: ""
  engines:
    description:
      - The engine group's hosts (C(groups[site_engine_group])), in inventory order.
      - Left out, the action plugin reads the hosts of the group O(engine_group) names.
    type: list
    elements: str
    default: []
  proxies:
    description:
      - The proxy group's hosts (C(groups[site_proxy_group])), in inventory order.
      - Left out, the action plugin reads the hosts of the group O(proxy_group) names.
    type: list
    elements: str
    default: []
  split_hosts:
    description:
      - The split's hosts (C(groups[vllm_split_group])); default O(engines).
      - Left out, the action plugin reads the hosts of the group C(vllm_split_group) names, else O(engine_group)'s.
    type: list
    elements: str
  inventory:
    description:
      - Every inventory host (C(groups['all'])). An O(reader) outside it (the controller) is not checked.
      - Left out, the action plugin reads C(groups['all']).
    type: list
    elements: str
  topology:
    description:
      - The inventory's topology, V(replicas) or V(split).
      - Left out, the action plugin reads C(topology), else V(replicas).
    type: str
    default: replicas
  firewall:
    description:
      - The engines' firewall is managed (C(vllm_firewall)), so it needs the proxy hosts' addresses.
      - Left out, the action plugin reads C(vllm_firewall) where it is defined (a first play has not loaded the vllm
        role's settings; its default is this one).
    type: bool
    default: true
  keepalived:
    description:
      - The proxy hosts share a floating address (C(keepalived_enabled), two or more proxy hosts).
      - Left out, the module's action plugin reads it on the controller - two or more O(proxies) and the first one's
        C(keepalived_enabled) (default true) from C(hostvars).
    type: bool
    default: false
  reader:
    description:
      - The host a one-host playbook runs on (C(metrics_from), C(tune_host), the first proxy host).
      - Left out, the action plugin reads C(site_limit_reader) (undefined or empty, none).
    type: str
  addresses:
    description:
      - Hosts whose default IPv4 address is known now (their facts have C(default_ipv4.address)).
      - Left out, the module's action plugin reads them on the controller - the hosts of O(inventory) (default every
        inventory host) whose facts in C(hostvars) hold one.
    type: list
    elements: str
    default: []
  gathered:
    description:
      - The hosts of an earlier RV(gather) were asked for their network facts. A host that still has no address is
        then refused (its firewall or report would be wrong), instead of returned in RV(gather) again.
      - Left out, the action plugin reads the C(site) role's C(_site_limit_gathered) (from C(site_limit_gathered) and
        C(site_limit_gather)).
    type: bool
    default: false
  gather_errors:
    description:
      - Why a host of RV(gather) could not be read, by host (the C(setup) result's message), for the refusal.
      - Left out, the module's action plugin reads it with O(gather_register).
    type: dict
    default: {}
  gather_register:
    description:
      - The name the earlier RV(gather)'s delegated C(setup) loop was registered under. The module's action plugin reads
        that result of every inventory host from C(hostvars) (the loop runs from one host of a play, maybe an earlier
        play's) and fills O(gather_errors) with its unreachable or failed items' messages, 300 characters at most.
    type: str
  engine_group:
    description:
      - The engine group's name, for messages.
      - Left out, the action plugin reads C(site_engine_group).
    type: str
    default: gb10
  proxy_group:
    description:
      - The proxy group's name, for messages.
      - Left out, the action plugin reads C(site_proxy_group).
    type: str
    default: proxy
  playbook_dir:
    description:
      - The directory of the playbook being run (the magic variable C(playbook_dir)), to name it in messages the way the
        operator runs it - C(factory_floor.llm.deploy) from an installed collection (and when empty),
        C(playbooks/deploy.yml) from a checkout (the P(factory_floor.llm.playbook_name#filter) filter's rule).
      - Left out, the action plugin reads the magic variable C(playbook_dir).
    type: str
    default: ""
notes:
  - "A C(--limit) is read as the hosts it lets in (O(hosts)), so every pattern form works (C(spark-a:proxy),
    C(@retry_file), C(~regex)); only the check that V(status) names localhost reads the text of O(limit)."
seealso:
  - module: factory_floor.llm.layout_check
"""

EXAMPLES = r"""
# What the vllm role's "limit" entry point does, in a playbook's first play (hosts: all).
- name: Refuse a --limit that leaves out what deploy.yml needs
  factory_floor.llm.limit_check:
    playbook: deploy
    hosts: "{{ ansible_play_hosts_all }}"
    limit: "{{ ansible_limit | default('') }}"
    engines: "{{ groups['gb10'] }}"
    proxies: "{{ groups['proxy'] }}"
    topology: "{{ topology }}"
    addresses: "{{ groups['all'] | map('extract', hostvars) | selectattr('ansible_facts.default_ipv4.address', 'defined')
                   | map(attribute='inventory_hostname') | list }}"
  delegate_to: localhost
  run_once: true
  become: false
  register: __limit

- name: Read the proxy hosts' addresses the run lacks (network facts, read-only)
  ansible.builtin.setup:
    gather_subset: [network]
  delegate_to: "{{ item }}"
  delegate_facts: true
  loop: "{{ __limit.gather }}"
  run_once: true
"""

RETURN = r"""
changed:
  description: Always false; the module only reads its arguments.
  returned: always
  type: bool
  sample: false
errors:
  description:
    - Every reason the limited run cannot work; empty when it can. On failure C(msg) holds the same messages, numbered.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - V(whole_site) (a switch, an upgrade or the status view of some hosts), V(controller) (status without the
          localhost play), V(reader) (the one host a playbook runs on is left out), V(split_pair), V(proxy_peers),
          V(proxy_address) (an address still unknown after O(gathered)).
      type: str
      sample: split_pair
    message:
      description: What the run lacks, why it matters, and the C(--limit) to use; no secret appears in it.
      type: str
      sample: >-
        deploy.yml with --limit spark-a: the split deploys as a pair ... but spark-b is left out. Use --limit
        spark-a,spark-b, or no --limit. Nothing has changed.
    hosts:
      description: The hosts left out (or unreadable) that the run needs.
      type: list
      elements: str
      sample: [spark-b]
    limit:
      description: A C(--limit) value that works, or empty when the advice is to run without one.
      type: str
      sample: spark-a,spark-b
gather:
  description:
    - Hosts whose network facts the run must read before anything changes (the proxy hosts' addresses for the
      engines' firewall or the peers report). Empty with O(gathered).
  returned: always
  type: list
  elements: str
  sample: [gateway]
outside:
  description: Engine and proxy hosts the limit leaves out, in inventory order.
  returned: always
  type: list
  elements: str
  sample: [gateway, spark-b]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._limit import (
    PLAYBOOKS,
    check_limit,
    format_errors,
)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            # The action plugin reads the options the task leaves out (site_limit_playbook, ansible_play_hosts_all, ...).
            playbook=dict(type="str", choices=sorted(PLAYBOOKS)),
            hosts=dict(type="list", elements="str"),
            limit=dict(type="str", default=""),
            engines=dict(type="list", elements="str", default=[]),
            proxies=dict(type="list", elements="str", default=[]),
            split_hosts=dict(type="list", elements="str"),
            inventory=dict(type="list", elements="str"),
            topology=dict(type="str", default="replicas"),
            firewall=dict(type="bool", default=True),
            keepalived=dict(type="bool", default=False),
            reader=dict(type="str"),
            addresses=dict(type="list", elements="str", default=[]),
            gathered=dict(type="bool", default=False),
            gather_errors=dict(type="dict", default={}),
            # Read by the action plugin (plugins/action/limit_check.py), which fills gather_errors with it.
            gather_register=dict(type="str"),
            engine_group=dict(type="str", default="gb10"),
            proxy_group=dict(type="str", default="proxy"),
            playbook_dir=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name, variable in (("playbook", "site_limit_playbook"), ("hosts", "ansible_play_hosts_all")):
        if params[name] is None:
            module.fail_json(msg="limit_check needs %s: include the site role's limit entry point with %s set, or pass "
                                 "%s" % (name, variable, name), changed=False)
    result = check_limit(
        params["playbook"], params["hosts"], params["engines"], params["proxies"],
        split_hosts=params["split_hosts"], topology=params["topology"], firewall=params["firewall"],
        keepalived=params["keepalived"], reader=params["reader"] or None, inventory=params["inventory"],
        limit=params["limit"] or "", addresses=params["addresses"], gathered=params["gathered"],
        gather_errors=dict((str(k), str(v)) for k, v in (params["gather_errors"] or {}).items()),
        engine_group=params["engine_group"], proxy_group=params["proxy_group"], playbook_dir=params["playbook_dir"])
    if result["errors"]:
        module.fail_json(msg=format_errors(result["errors"]), changed=False, **result)
    module.exit_json(changed=False, **result)


def main():
    run_module()


if __name__ == "__main__":
    main()
