#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: keepalived_info
short_description: What one proxy host has of the floating address - holds it or not, keepalived's VRRP state
version_added: 0.1.0
description:
  - Reads, on one host, the IPv4 addresses of every interface (C(ip -j addr show)), whether O(virtual_ipaddress) is
    on O(interface) (this host holds the floating address), keepalived's systemd state (C(ActiveState)) and the
    VRRP state keepalived's notify script last wrote to O(state_file) (V(MASTER), V(BACKUP), V(FAULT), V(STOP)).
  - Run it on every proxy host and the one with RV(holds_address) is where clients' requests to the floating
    address land. The C(factory_floor.llm.keepalived) role's C(status) entry point does that and names the holder;
    its preflight feeds the interfaces and addresses to M(factory_floor.llm.keepalived_check).
  - Changes nothing.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  interface:
    description:
      - The interface the floating address lives on (the role's C(keepalived_interface)).
      - Empty - the address is looked for on every interface, and RV(interface) names the one that has it (empty when
        none does). For a reader without the host's facts, from which the role's default interface comes.
    type: str
    default: ""
  virtual_ipaddress:
    description: The floating address, C(A.B.C.D) or C(A.B.C.D/prefix) (the role's C(keepalived_virtual_ipaddress)). Empty, RV(holds_address) is null.
    type: str
    default: ""
  settings_of:
    description:
      - An inventory host whose interface and floating address to use instead, for a read delegated to each proxy host
        in turn. The module's action plugin reads them from C(hostvars) on the controller - what the
        C(factory_floor.llm.keepalived) role's preflight noted on that host this run, else that host's inventory
        C(keepalived_interface) and C(keepalived_virtual_ipaddress), else O(interface) and O(virtual_ipaddress).
    type: str
  state_file:
    description: The JSON file keepalived's notify script writes on every VRRP state change (the C(keepalived) role installs it).
    type: path
    default: /run/factory-floor/keepalived.json
  service:
    description: keepalived's systemd unit.
    type: str
    default: keepalived.service
  config:
    description: keepalived's configuration, read for the addresses it holds when it is master (RV(configured_addresses)).
    type: path
    default: /etc/keepalived/keepalived.conf
"""

EXAMPLES = r"""
- name: Ask each proxy host whether it holds the floating address
  factory_floor.llm.keepalived_info:
    interface: eth0
    virtual_ipaddress: 10.89.7.100/24
  delegate_to: "{{ item }}"
  loop: "{{ groups['proxy'] }}"
  register: __vip

- name: Name the holder
  ansible.builtin.debug:
    msg: "{{ __vip.results | selectattr('holds_address') | map(attribute='item') | list }}"
"""

RETURN = r"""
changed:
  description: Always false.
  returned: always
  type: bool
  sample: false
interface:
  description: O(interface) as given; without it, the interface that has O(virtual_ipaddress) (empty when none does).
  returned: always
  type: str
  sample: eth0
interface_exists:
  description: Whether the host has O(interface).
  returned: always
  type: bool
  sample: true
interfaces:
  description: Every interface of the host.
  returned: always
  type: list
  elements: str
  sample: [eth0, lo]
addresses:
  description: The IPv4 addresses on O(interface), in the kernel's order (the primary of a subnet first).
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: The address.
      type: str
      sample: 10.89.7.10
    prefixlen:
      description: Its prefix length (bits).
      type: int
      sample: 24
    secondary:
      description: Whether the kernel flags it secondary (another address of the same subnet came first).
      type: bool
      sample: false
all_addresses:
  description: The IPv4 addresses of every interface, by interface name (same entries as RV(addresses)).
  returned: always
  type: dict
  sample: {lo: [{address: 127.0.0.1, prefixlen: 8, secondary: false}], eth0: [{address: 10.89.7.10, prefixlen: 24, secondary: false}]}
holds_address:
  description: Whether O(virtual_ipaddress) is on O(interface) now; null without O(virtual_ipaddress).
  returned: always
  type: bool
  sample: true
service_state:
  description: systemd's C(ActiveState) of O(service) (V(active), V(inactive), V(failed), ...), empty when systemd could not say.
  returned: always
  type: str
  sample: active
vrrp_state:
  description: >-
    The VRRP state keepalived last reported through its notify script (V(MASTER), V(BACKUP), V(FAULT), V(STOP));
    empty when none was written since boot.
  returned: always
  type: str
  sample: MASTER
vrrp_state_current:
  description: Whether RV(vrrp_state) is current - keepalived is active. A state written before keepalived stopped or was killed is not.
  returned: always
  type: bool
  sample: true
since:
  description: UNIX time (seconds) keepalived entered RV(vrrp_state).
  returned: always
  type: float
  sample: 1767225600.5
priority:
  description: This host's VRRP priority as keepalived reported it with the state.
  returned: always
  type: int
  sample: 250
configured_addresses:
  description:
    - The addresses in the C(virtual_ipaddress) blocks of O(config) (without prefix), empty when there is none or it
      cannot be read. While keepalived runs these are its own on this host, not the host's (the preflight needs to
      tell them apart when the floating address changes).
  returned: always
  type: list
  elements: str
  sample: [10.89.7.100]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._host.keepalived import (
    configured_addresses,
    host_status,
    parse_ip_addr,
    parse_state,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import UnitStateError, show_properties


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type="str", default=""),
            virtual_ipaddress=dict(type="str", default=""),
            # Read by the action plugin (plugins/action/keepalived_info.py), which passes interface and the address.
            settings_of=dict(type="str"),
            state_file=dict(type="path", default="/run/factory-floor/keepalived.json"),
            service=dict(type="str", default="keepalived.service"),
            config=dict(type="path", default="/etc/keepalived/keepalived.conf"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    ip = module.get_bin_path("ip", required=True)
    rc, out, err = module.run_command([ip, "-j", "addr", "show"])
    if rc != 0:
        module.fail_json(msg="ip -j addr show failed (rc %s): %s" % (rc, err.strip()))
    try:
        interfaces = parse_ip_addr(out)
    except ValueError as exc:
        module.fail_json(msg="Could not read ip -j addr show: %s" % exc)

    service_state = ""
    systemctl = module.get_bin_path("systemctl")
    if systemctl:
        try:
            service_state = show_properties(params["service"], ("ActiveState",), module.run_command,
                                            systemctl).get("ActiveState", "")
        except UnitStateError:
            pass

    try:
        with open(params["state_file"], encoding="utf-8") as handle:
            state = parse_state(handle.read())
    except OSError:
        state = {}

    try:
        with open(params["config"], encoding="utf-8") as handle:
            configured = configured_addresses(handle.read())
    except OSError:
        configured = []

    status = host_status(interfaces, params["interface"], params["virtual_ipaddress"], service_state, state, configured)
    module.exit_json(changed=False, all_addresses=interfaces, **status)


def main():
    run_module()


if __name__ == "__main__":
    main()
