#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: vllm_peers
short_description: List who holds connections to a vLLM API port, and flag anyone who bypasses the proxy
version_added: 0.1.0
description:
  - Reads the host's established TCP connections (C(ss -Htn state established), from iproute2) whose local port is
    O(port), and sorts each peer address into V(loopback) (the host itself), V(allowed) (listed in O(allowed), that is
    the proxy hosts, health-check and metrics hosts) or V(other).
  - The firewall the C(factory_floor.llm.vllm) role installs refuses new connections from anyone else; a V(other) peer
    is a client that got past it (a connection older than the rules, a rule set that was not loaded, a process on the
    host talking to its own network address). Clients that bypass the proxy break C(least_conn) and miss the
    proxy's draining during a switch.
  - Only reads. It never changes anything, so it always reports RV(ignore:changed=false) and runs in full in check mode.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - C(ss) from iproute2 on the host the module runs on.
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  port:
    description:
      - The vLLM API port on this host (vLLM's C(--port); the roles' C(vllm_port)).
    type: int
    required: true
  allowed:
    description:
      - Addresses or CIDRs (IPv4 or IPv6) that may hold connections to O(port) besides loopback, usually the proxy
        hosts' addresses plus C(vllm_allowed_clients) (what the firewall lets in).
      - A value that is not an address or CIDR fails the module, naming it.
    type: list
    elements: str
    default: []
  probe_url:
    description:
      - The URL this host's own checks reach vLLM at (the C(vllm) role's C(_vllm_probe_url)). When its host is an IPv4 or
        IPv6 address (vLLM listens on one address of its own, C(vllm_listen_host)), that address is allowed too, as
        loopback is - the watchdog and the health waits connect from there. A name, or unset, adds nothing.
    type: str
  fail_on_other:
    description:
      - Fail when any V(other) peer holds a connection, listing them.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Who talks to the replica's API port
  factory_floor.llm.vllm_peers:
    port: 8000
    allowed: ["10.0.0.10"]
  register: peers

- name: Fail a compliance run on any client that bypasses the proxy
  factory_floor.llm.vllm_peers:
    port: "{{ vllm_port }}"
    allowed: "{{ groups['proxy'] | map('extract', hostvars, ['ansible_facts', 'default_ipv4', 'address']) | list }}"
    fail_on_other: true
"""

RETURN = r"""
peers:
  description: One entry per peer address holding at least one established connection to O(port), V(other) first.
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: The peer's IP address (IPv4-mapped IPv6 addresses are shown as IPv4).
      type: str
      sample: 10.89.0.4
    class:
      description: V(loopback), V(allowed) or V(other).
      type: str
      sample: allowed
    connections:
      description: How many established connections this peer holds to O(port).
      type: int
      sample: 2
others:
  description: The addresses of class V(other), the clients that bypass the proxy.
  returned: always
  type: list
  elements: str
  sample: []
connections:
  description: Number of established connections to O(port), all classes together.
  returned: always
  type: int
  sample: 3
report:
  description:
    - One line - each peer's address, class and connections (or V(no connections)), then the clients that bypass the
      proxy after C(; BYPASSING THE PROXY:).
  returned: always
  type: str
  sample: "['10.89.0.4 allowed 2', '127.0.0.1 loopback 1']"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._peers import classify, own_address, parse_ss, report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", required=True),
            allowed=dict(type="list", elements="str", default=[]),
            probe_url=dict(type="str"),
            fail_on_other=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    port = module.params["port"]
    allowed = list(module.params["allowed"]) + own_address(module.params["probe_url"])
    if not 0 < port < 65536:
        module.fail_json(msg="port must be a TCP port (1-65535), got %d" % port)
    ss = module.get_bin_path("ss", required=True)
    rc, out, err = module.run_command([ss, "-Htn", "state", "established"])
    if rc != 0:
        module.fail_json(msg="ss failed (rc=%d): %s" % (rc, err.strip()))
    try:
        connections = parse_ss(out, port)
        peers = classify(connections, allowed)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    others = [p["address"] for p in peers if p["class"] == "other"]
    result = dict(changed=False, peers=peers, others=others, connections=len(connections), report=report(peers, others))
    if others and module.params["fail_on_other"]:
        module.fail_json(msg="clients bypass the proxy: %s hold connections to port %d directly; only loopback and %s may"
                         % (", ".join(others), port, ", ".join(allowed) or "nobody else"), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
