#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: keepalived_check
short_description: Refuse floating-address settings that cannot work, before anything changes; plan the VRRP peers
version_added: 0.1.0
description:
  - "The preflight decision of the C(factory_floor.llm.keepalived) role, made once for the whole group of proxy hosts
    on the controller (C(delegate_to: localhost), C(run_once)) from what each host was seen to have
    (M(factory_floor.llm.keepalived_info) - interfaces and addresses; M(factory_floor.llm.vrrp_info) - the VRRP routers
    heard on the interface) and each host's settings."
  - "Refused, each naming the host and the variable: two or more hosts and no C(keepalived_virtual_ipaddress);
    an address that is not IPv4 with a prefix of 0-32; an address outside a host's subnet on C(keepalived_interface)
    (or a prefix wider than that subnet); a host without that interface, or without an IPv4 address on it;
    the address equal to a host's own (a proxy host's address on the interface, or an address in O(reserved));
    C(keepalived_virtual_router_id) already advertised by a router that is not one of these hosts, or the address
    advertised by one under another id; hosts that disagree on the address, the router id,
    C(keepalived_advert_int), C(keepalived_auth_pass) (O(auth_pass); which hosts differ is said, never what they hold),
    C(keepalived_nopreempt), C(keepalived_preempt_delay), C(keepalived_track_engines) or
    C(keepalived_engines_script_weight); hosts whose interfaces put the address in different subnets; priorities that
    differ while preemption is on (the higher one would take the address back whenever it is eligible again); a router
    id outside 1-255, a priority outside 1-254, an interval outside 1-255 s, a preempt delay outside 0-1000 s, a weight
    outside 1-253 or one that takes a priority below 1; an C(keepalived_auth_pass) longer than 8 characters or with
    characters keepalived's parser reads as syntax; a C(keepalived_unicast_src_ip) that is not the host's own address on
    the interface; a C(keepalived_unicast_peer) list that names the host's own address, or leaves out another host of
    the group (that host would not hear this one and would hold the address too)."
  - With no problem, returns each host's C(unicast_src_ip) (its own address on the interface in the address's
    subnet, unless set) and C(unicast_peer) (every other host's C(unicast_src_ip), unless set), one VRRP router over
    any number of proxy hosts, two or more.
  - With fewer than two hosts there is no floating address and nothing is checked.
  - The module only reads its arguments; it never connects to a host.
  - "Its action plugin reads the group's input from C(hostvars) on the controller when the task leaves it out:
    O(hosts) and O(auth_pass) from what each of the play's hosts in O(group) noted (O(settings_fact),
    O(auth_pass_fact)), O(reserved) from every inventory host's facts."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  hosts:
    description:
      - Per proxy host (inventory name), its settings and what was seen on it. Left out, read with O(settings_fact).
      - "Settings (the role's variables without C(keepalived_)): C(virtual_ipaddress) (str, C(A.B.C.D/prefix)),
        C(interface) (str), C(virtual_router_id) (int), C(priority) (int), C(advert_int) (int, seconds),
        C(unicast_src_ip) (str, empty = derived), C(unicast_peer) (list of str, empty = derived), C(nopreempt) (bool),
        C(preempt_delay) (int, seconds), C(track_engines) (bool), C(engines_weight) (int) - the last four optional, each
        checked when every host gives it - and, without O(auth_pass), C(auth_pass_length) (int, characters of
        C(keepalived_auth_pass)) and C(auth_pass_syntax) (bool, whether it has whitespace or a character keepalived's
        parser reads as a comment, quote or block). Never the secret itself."
      - "Seen: C(observed), the result of M(factory_floor.llm.keepalived_info) on that host (C(interface_exists),
        C(interfaces), C(addresses), C(service_state)); C(routers), the RV(factory_floor.llm.vrrp_info#module:routers)
        heard there (omit, or null, when nobody listened)."
    type: dict
  auth_pass:
    description:
      - Each proxy host's C(keepalived_auth_pass), by inventory name (empty string, none). The hosts must agree; each is
        checked for what keepalived can use. C(no_log) - never returned, never in a message, not even its length.
    type: dict
  reserved:
    description:
      - Addresses the floating address must not equal, by inventory host - the other hosts' own (their facts'
        C(default_ipv4)).
      - Left out, the module's action plugin reads every inventory host's C(default_ipv4.address) from its facts in
        C(hostvars).
    type: dict
    default: {}
  settings_fact:
    description:
      - Without O(hosts), the name of the fact each proxy host noted its settings and what was seen on it as (one
        value of O(hosts)). The module's action plugin reads it, on the controller, for each of the play's hosts
        (C(ansible_play_hosts)) in O(group).
    type: str
  auth_pass_fact:
    description:
      - Without O(hosts) and O(auth_pass), the name of the fact each proxy host noted its C(keepalived_auth_pass) as,
        read like O(settings_fact) and passed on as O(auth_pass) (C(no_log)).
    type: str
  group:
    description: The inventory group of the proxy hosts, for the messages.
    type: str
    default: proxy
"""

EXAMPLES = r"""
- name: Refuse a floating address that cannot work, naming the variable
  factory_floor.llm.keepalived_check:
    hosts:
      spark-1:
        virtual_ipaddress: 192.0.2.10/24
        interface: enP7s7
        virtual_router_id: 51
        priority: 250
        advert_int: 1
        nopreempt: false
        preempt_delay: 5
        track_engines: true
        engines_weight: 50
        observed: "{{ hostvars['spark-1'].__keepalived_observed }}"
        routers: "{{ hostvars['spark-1'].__keepalived_heard.routers }}"
      spark-2:
        virtual_ipaddress: 192.0.2.10/24
        interface: enP7s7
        virtual_router_id: 51
        priority: 250
        advert_int: 1
        nopreempt: false
        preempt_delay: 5
        track_engines: true
        engines_weight: 50
        observed: "{{ hostvars['spark-2'].__keepalived_observed }}"
        routers: "{{ hostvars['spark-2'].__keepalived_heard.routers }}"
    auth_pass:
      spark-1: "{{ hostvars['spark-1'].__keepalived_auth_pass }}"
      spark-2: "{{ hostvars['spark-2'].__keepalived_auth_pass }}"
  delegate_to: localhost
  run_once: true
  register: __keepalived_plan
"""

RETURN = r"""
changed:
  description: Always false; the module only reads its arguments.
  returned: always
  type: bool
  sample: false
errors:
  description: Every problem found; empty when the settings can work. On failure C(msg) holds the same messages, numbered.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - Which check failed - V(settings_differ), V(auth_differs), V(no_address), V(address_value), V(vrid_value),
          V(advert_int_value), V(preempt_delay_value), V(engines_weight_value), V(priority_value), V(priority_differs),
          V(weight_too_large), V(auth_pass_value), V(no_interface), V(missing_interface), V(no_ipv4), V(outside_subnet),
          V(prefix_wider), V(subnet_differs), V(src_not_own), V(own_address), V(vrid_in_use), V(address_in_use),
          V(peer_value), V(peer_self), V(peer_missing).
      type: str
      sample: outside_subnet
    hosts:
      description: Inventory hosts involved.
      type: list
      elements: str
      sample: [spark-1]
    variables:
      description: The role variables to change.
      type: list
      elements: str
      sample: [keepalived_virtual_ipaddress, keepalived_interface]
    message:
      description: What is wrong and what to change.
      type: str
      sample: >-
        10.99.0.100 (keepalived_virtual_ipaddress) is outside spark-a's subnet on eth0 (10.89.7.10/24): nobody on that
        LAN would send it a packet, and clients would find no proxy behind it. Choose a free address in 10.89.7.0/24.
hosts:
  description: Per host, the VRRP peers to configure; empty when there are errors or fewer than two hosts.
  returned: always
  type: dict
  sample: {spark-1: {unicast_src_ip: 192.0.2.11, unicast_peer: [192.0.2.12]}, spark-2: {unicast_src_ip: 192.0.2.12, unicast_peer: [192.0.2.11]}}
virtual_ipaddress:
  description: The floating address with its prefix (C(/32) added when none was given); empty when there are errors.
  returned: always
  type: str
  sample: 192.0.2.10/24
virtual_router_id:
  description: The virtual router id; null when there are errors.
  returned: always
  type: int
  sample: 51
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._host.keepalived import (
    check,
    format_errors,
)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            # Filled by the action plugin from settings_fact (and auth_pass from auth_pass_fact) when left out.
            hosts=dict(type="dict"),
            auth_pass=dict(type="dict", no_log=True),
            reserved=dict(type="dict", default={}),
            group=dict(type="str", default="proxy"),
            # Read by the action plugin (plugins/action/keepalived_check.py), which passes hosts and auth_pass.
            settings_fact=dict(type="str"),
            auth_pass_fact=dict(type="str", no_log=False),  # a variable's name, not the secret
        ),
        supports_check_mode=True,
    )
    params = module.params
    hosts = params["hosts"]
    if hosts is None:  # only without the action plugin, which fills it
        module.fail_json(msg="hosts is required: each proxy host's settings and what was seen on it")
    bad = sorted(name for name, value in hosts.items() if not isinstance(value, dict))
    if bad:
        module.fail_json(msg="hosts must map each proxy host to a dict of its settings; not a dict for: %s"
                         % ", ".join(bad))
    secrets = params["auth_pass"]
    if secrets is not None:
        missing = sorted(set(hosts) - set(secrets))
        odd = sorted(name for name, value in secrets.items() if value is not None and not isinstance(value, str))
        if missing or odd:
            module.fail_json(msg="auth_pass must map every proxy host to its keepalived_auth_pass (a string); %s"
                             % ("missing for: %s" % ", ".join(missing) if missing else "not a string for: %s" % ", ".join(odd)))
    result = check(hosts, reserved=params["reserved"], group=params["group"], auth_pass=secrets)
    if result["errors"]:
        module.fail_json(msg=format_errors(result["errors"]), changed=False, **result)
    module.exit_json(changed=False, **result)


def main():
    run_module()


if __name__ == "__main__":
    main()
