#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vrrp_info
short_description: Listen on an interface for VRRP advertisements and say which routers use which ids
version_added: 0.1.0
description:
  - Opens a raw IPv4 socket for IP protocol 112 (VRRP) bound to O(interface), joins VRRP's multicast group
    C(224.0.0.18) there, and records every advertisement that arrives within O(seconds) seconds (VRRP version 2 and
    3). Returns each advertisement and one entry per virtual router id and source.
  - What it hears is what reaches this host - multicast advertisements on the LAN, and unicast ones addressed to
    it. Routers that advertise unicast to other hosts (keepalived with C(unicast_peer)) cannot be heard.
  - The C(factory_floor.llm.keepalived) role's preflight runs it on every proxy host to refuse a
    C(keepalived_virtual_router_id) another router already uses.
  - Changes nothing on the host (joining the group lasts as long as the socket). Needs root (C(CAP_NET_RAW)).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  interface:
    description: The network interface to listen on, for example the LAN the proxies share (C(eth0), C(enP7s7)).
    type: str
    required: true
  seconds:
    description:
      - How long to listen, in seconds. VRRP routers advertise every C(advert_int) seconds (1 by default), so 3 s
        hears each one at least twice. V(0) only checks that the interface exists.
    type: float
    default: 3
notes:
  - The advertisement's authentication data (VRRPv2's simple password, sent in clear text) is never returned.
"""

EXAMPLES = r"""
- name: Which VRRP routers advertise on the LAN
  factory_floor.llm.vrrp_info:
    interface: eth0
    seconds: 3
  become: true
  register: __vrrp

- name: Say which virtual router ids are taken
  ansible.builtin.debug:
    msg: "{{ __vrrp.routers | map(attribute='virtual_router_id') | unique | list }}"
"""

RETURN = r"""
changed:
  description: Always false; the module only listens.
  returned: always
  type: bool
  sample: false
interface_exists:
  description: Whether O(interface) exists on the host. When false nothing was listened to.
  returned: always
  type: bool
  sample: true
interfaces:
  description: The host's network interfaces (names from C(/sys/class/net)).
  returned: always
  type: list
  elements: str
  sample: [eth0, lo]
seconds:
  description: How long the module listened, in seconds.
  returned: always
  type: float
  sample: 3.0
adverts:
  description: Every VRRP advertisement heard, in arrival order.
  returned: always
  type: list
  elements: dict
  contains:
    source:
      description: The sender's IPv4 address (the router's primary address, or keepalived's C(unicast_src_ip)).
      type: str
      sample: 10.89.7.10
    destination:
      description: C(224.0.0.18) (multicast) or this host's address (unicast).
      type: str
      sample: 224.0.0.18
    ttl:
      description: IP time to live; VRRP senders use 255.
      type: int
      sample: 255
    version:
      description: VRRP version, 2 or 3.
      type: int
      sample: 2
    type:
      description: VRRP packet type; 1 is an advertisement.
      type: int
      sample: 1
    virtual_router_id:
      description: The virtual router id (1-255).
      type: int
      sample: 51
    priority:
      description: The sender's priority (0 = it is giving the address up, 255 = it owns the address).
      type: int
      sample: 250
    addresses:
      description: The virtual (floating) addresses it advertises.
      type: list
      elements: str
      sample: [10.89.7.100]
    advert_int:
      description: Advertisement interval, seconds (v3's centiseconds converted).
      type: float
      sample: 1.0
    auth_type:
      description: VRRPv2 authentication type - C(none), C(simple) (a password in clear text) or C(ah); null for v3.
      type: str
      sample: simple
    checksum_ok:
      description: Whether the VRRP checksum is right (null when it could not be checked).
      type: bool
      sample: true
    received:
      description: UNIX time (seconds) the advertisement arrived.
      type: float
      sample: 1767225600.25
routers:
  description: One entry per virtual router id and source, sorted by id then source.
  returned: always
  type: list
  elements: dict
  contains:
    virtual_router_id:
      description: The virtual router id.
      type: int
      sample: 51
    source:
      description: The sender's address.
      type: str
      sample: 10.89.7.10
    count:
      description: Advertisements heard from it.
      type: int
      sample: 3
    priority:
      description: The last priority it advertised.
      type: int
      sample: 250
    addresses:
      description: The last addresses it advertised.
      type: list
      elements: str
      sample: [10.89.7.100]
    version:
      description: VRRP version.
      type: int
      sample: 2
    advert_int:
      description: Advertisement interval, seconds.
      type: float
      sample: 1.0
    auth_type:
      description: VRRPv2 authentication type.
      type: str
      sample: simple
    destination:
      description: Where it advertises to (the last advertisement's destination).
      type: str
      sample: 224.0.0.18
    checksum_ok:
      description: Whether every advertisement heard from it had a correct checksum.
      type: bool
      sample: true
ignored:
  description: Packets on the socket that were not VRRP advertisements this module could read (count).
  returned: always
  type: int
  sample: 0
"""

import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._vrrp import (
    MULTICAST_GROUP,
    PROTO_VRRP,
    ParseError,
    ip_mreqn,
    parse_packet,
    routers,
)

# linux/socket.h; not exported by Python's socket module on every version.
SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)


def list_interfaces(root="/sys/class/net"):
    try:
        return sorted(os.listdir(root))
    except OSError:
        return []


def listen(interface, seconds, clock=time.monotonic, wall=time.time):
    """Adverts heard on ``interface`` for ``seconds``, and the count of packets that were not readable ones.

    The listening time is measured on ``clock`` (monotonic: a step of the wall clock neither cuts it short
    nor stretches it); ``wall`` (UNIX time) stamps each advertisement's ``received``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, PROTO_VRRP)
    adverts, ignored = [], 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, interface.encode())
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                        ip_mreqn(MULTICAST_GROUP, socket.if_nametoindex(interface)))
        deadline = clock() + seconds
        while True:
            left = deadline - clock()
            if left <= 0:
                break
            sock.settimeout(min(left, 0.5))
            try:
                packet = sock.recv(65535)
            except socket.timeout:
                continue
            try:
                adverts.append(parse_packet(packet, received=wall()))
            except ParseError:
                ignored += 1
    finally:
        sock.close()
    return adverts, ignored


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type="str", required=True),
            seconds=dict(type="float", default=3.0),
        ),
        supports_check_mode=True,
    )
    interface = module.params["interface"]
    seconds = module.params["seconds"]
    if seconds < 0 or seconds > 60:
        module.fail_json(msg="seconds is %s: listen 0-60 seconds" % seconds)
    interfaces = list_interfaces()
    result = dict(changed=False, interface_exists=interface in interfaces, interfaces=interfaces, seconds=0.0,
                  adverts=[], routers=[], ignored=0)
    if not result["interface_exists"] or seconds == 0:
        module.exit_json(**result)
    started = time.monotonic()
    try:
        adverts, ignored = listen(interface, seconds)
    except PermissionError as exc:
        module.fail_json(msg="Listening for VRRP on %s needs root (a raw socket, CAP_NET_RAW): %s" % (interface, exc),
                         **result)
    except OSError as exc:
        module.fail_json(msg="Could not listen for VRRP advertisements on %s: %s" % (interface, exc), **result)
    result.update(seconds=round(time.monotonic() - started, 3), adverts=adverts, routers=routers(adverts), ignored=ignored)
    module.exit_json(**result)


def main():
    run_module()


if __name__ == "__main__":
    main()
