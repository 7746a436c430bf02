#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: link_check
short_description: One host's side of the split's direct link - interface, address, MTU, a don't-fragment ping of the peer, ports, RDMA, NCCL
version_added: 0.1.0
description:
  - Reads, on the host it runs on, what the split's two ranks need of the direct link between the machines (ConnectX on
    a DGX Spark) and returns it; it judges nothing. The C(factory_floor.llm.link_report) filter puts both hosts'
    results together on the controller and names each problem with its host and fix; the C(vllm_split) role's
    C(preflight) does that before anything stops.
  - "The interface O(interface): whether it exists, is up (C(ip link set up)), has carrier (a cable and an up port at
    the other end), its MTU and addresses (C(ip -j addr show)); which interface holds O(address); which interface the
    kernel sends traffic to O(peer_address) out of (C(ip -j route get))."
  - A ping of O(peer_address) out of O(interface) (bound to it, whatever the routing table says) with packets of exactly
    the interface's MTU and the don't-fragment bit set (a raw ICMP socket with C(IP_PMTUDISC_DO), as C(ping -M do -s
    MTU-28 -I IFACE) does; no C(ping) binary needed). A peer whose end has a smaller MTU drops them.
  - O(ports) free, or held while one of O(port_owner_units) is active (the split itself, running).
  - The RDMA devices (C(/sys/class/infiniband/*/device/net/*), as C(ibdev2netdev) shows them) and which have their
    port up; the devices NCCL_IB_HCA will name (O(nccl_ib_hca), or the up devices of O(interface)'s port - its
    twins -, else every device whose port is up); whether O(rdma_devices) exist for the container.
  - The host's C(libnccl.so.2) (O(nccl_library) C(auto) finds it with C(ldconfig -p)).
  - With O(engine_unit), what NCCL chose in that unit's current run, from its own C(NCCL_DEBUG=INFO) lines in the
    journal (C(Using network IB), C(via NET/Socket/0)...).
  - Changes nothing. Needs root (the raw socket).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  interface:
    description: The link's network interface on this host (C(vllm_link_interface)), for example C(enp1s0f1np1).
    type: str
    required: true
  address:
    description: This host's address on the link (C(vllm_link_address)), with or without a C(/prefix).
    type: str
    default: ""
  peer_address:
    description: The address on the link of the rank this host pings (the head; the head pings rank 1); empty skips the ping and the route.
    type: str
    default: ""
  ping_count:
    description: Echo requests sent to O(peer_address).
    type: int
    default: 3
  ping_timeout:
    description: Seconds to wait for each reply.
    type: float
    default: 1.0
  ports:
    description:
      - TCP ports that must be free on this host, each C({port, purpose, variable}) - the port number, what needs it
        (for the message) and the inventory variable that moves it.
    type: list
    elements: dict
    default: []
  port_owner_units:
    description: Units that may hold O(ports) (the split's own, when it runs); a port held while one of them is active counts as theirs.
    type: list
    elements: str
    default: []
  rdma:
    description:
      - C(auto) reads the RDMA devices and chooses those whose port is up; C(required) the same (the report then refuses
        a host with none); C(disabled) skips RDMA.
    type: str
    choices: [auto, required, disabled]
    default: auto
  nccl_ib_hca:
    description:
      - The RDMA devices NCCL_IB_HCA names (C(vllm_split_nccl_ib_hca)).
      - Empty chooses the up devices of O(interface)'s port (a DGX Spark port's two twins), or every device whose port
        is up when none is O(interface)'s.
    type: list
    elements: str
    default: []
  rdma_devices:
    description: Device files, or directories of them, the split's container gets for RDMA (C(vllm_split_rdma_devices)); their character devices are returned.
    type: list
    elements: str
    default: [/dev/infiniband]
  nccl_library:
    description:
      - C(auto) finds this host's C(libnccl.so.2) with C(ldconfig -p) (none is fine); a path must exist; empty looks for none
        (the image's own NCCL).
    type: str
    default: auto
  engine_unit:
    description: A unit whose current run's journal is read for NCCL's transport lines; empty reads none.
    type: str
    default: ""
notes:
  - IPv4 and IPv6 peers. An IPv4 ping's packet is the MTU (payload MTU - 28); IPv6's MTU - 48.
seealso:
  - name: eugr/spark-vllm-docker, DGX Spark networking
    description: The checks two-Spark users run (MTU 9000, pings of MTU - 28 bytes without fragmentation on both rails, NCCL_IB_HCA on both RoCE twins).
    link: https://github.com/eugr/spark-vllm-docker/blob/main/docs/NETWORKING.md
"""

EXAMPLES = r"""
- name: Read this host's side of the link
  factory_floor.llm.link_check:
    interface: enp1s0f1np1
    address: 10.10.10.1
    peer_address: 10.10.10.2
    ports: [{port: 29500, purpose: the rendezvous (--master-port), variable: vllm_split_master_port}]
    port_owner_units: [vllm-split.service]
  register: link

- name: What NCCL chose in the running split
  factory_floor.llm.link_check:
    interface: enp1s0f1np1
    engine_unit: vllm-split.service
  register: link
"""

RETURN = r"""
interface:
  description: The link interface as C(ip -j addr) shows it.
  returned: always
  type: dict
  sample: {name: enp1s0f1np1, exists: true, admin_up: true, carrier: true, operstate: UP, mtu: 9000, addresses: [10.10.10.1/24]}
address:
  description: O(address), without a prefix.
  returned: always
  type: str
  sample: 10.10.10.1
peer_address:
  description: O(peer_address), without a prefix.
  returned: always
  type: str
  sample: 10.10.10.2
interfaces:
  description: Every interface name on the host.
  returned: always
  type: list
  elements: str
address_holder:
  description: The interface that holds O(address); empty when none does.
  returned: always
  type: str
  sample: enp1s0f1np1
route:
  description: How the kernel reaches O(peer_address) (C(dev), the interface; C(prefsrc), the source address); empty without a peer.
  returned: always
  type: dict
  sample: {dev: enp1s0f1np1, prefsrc: 10.10.10.1}
peer:
  description:
    - The don't-fragment ping of O(peer_address) out of O(interface) - C(address), C(payload) (bytes), C(sent), C(received),
      C(rtt_ms) (best round trip, milliseconds, or null) and C(error) (C(local_mtu) when the packet cannot leave at that
      size, C(unreachable), or the OS's text; empty when the socket worked).
  returned: always
  type: dict
  sample: {address: 10.10.10.2, payload: 8972, sent: 3, received: 3, rtt_ms: 0.21, error: ""}
ports:
  description: Per O(ports) item, C(port), C(free), C(ours) (held while an owner unit is active), C(holders) (C(process), C(pid)), C(purpose), C(variable).
  returned: always
  type: list
  elements: dict
rdma:
  description:
    - C(mode) (O(rdma)), C(devices) (C(name), C(netdevs), C(up)), C(hca) (what NCCL_IB_HCA names) and C(hca_source),
      C(device_paths) (O(rdma_devices)) and C(device_nodes) (the character devices they hold - a directory's are listed
      one by one, as C(docker run --device=/dev/infiniband) fails on its C(by-ibdev/) and C(by-path/) subdirectories).
  returned: always
  type: dict
  sample: {mode: auto, devices: [{name: rocep1s0f1, netdevs: [enp1s0f1np1], up: true}], hca: [rocep1s0f1, roceP2p1s0f1],
           hca_source: discovered, device_paths: [/dev/infiniband],
           device_nodes: [/dev/infiniband/rdma_cm, /dev/infiniband/uverbs0, /dev/infiniband/uverbs1]}
nccl_library:
  description: C(requested) (O(nccl_library)), C(path) (the library the split uses; empty for the image's own) and C(source).
  returned: always
  type: dict
  sample: {requested: auto, path: /usr/lib/aarch64-linux-gnu/libnccl.so.2, source: "ldconfig -p"}
engine_transport:
  description:
    - With O(engine_unit), what NCCL logged in that unit's current run - C(transport) (C(rdma), C(socket) or C(unknown)),
      C(network), C(devices), C(version), C(warnings), C(evidence) (the lines that decided) - and C(active) (the unit runs).
  returned: always
  type: dict
machine:
  description: This host's architecture (C(uname -m)).
  returned: always
  type: str
  sample: aarch64
"""

import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import invocation_journal, show_properties

SYSFS_INFINIBAND = "/sys/class/infiniband"


def read_rdma_devices(root=SYSFS_INFINIBAND):
    """``{ibdev: [netdev, ...]}`` from sysfs (what ``ibdev2netdev`` reads)."""
    devices = {}
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return devices
    for name in names:
        try:
            devices[name] = sorted(os.listdir(os.path.join(root, name, "device", "net")))
        except OSError:
            devices[name] = []
    return devices


def _run(module, argv):
    rc, out, err = module.run_command(argv)
    return rc, out or "", err or ""


def port_state(module, item, owners_active):
    port = int(item.get("port"))
    rc, out, _err = _run(module, ["ss", "-Hltnp", "sport = :%d" % port])
    holders = lc.parse_ss_listeners(out) if rc == 0 else []
    holders = [h for h in holders if h["port"] == port]
    return {"port": port, "free": not holders, "ours": bool(holders) and owners_active, "holders": holders,
            "purpose": str(item.get("purpose") or ""), "variable": str(item.get("variable") or "")}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type="str", required=True),
            address=dict(type="str", default=""),
            peer_address=dict(type="str", default=""),
            ping_count=dict(type="int", default=3),
            ping_timeout=dict(type="float", default=1.0),
            ports=dict(type="list", elements="dict", default=[]),
            port_owner_units=dict(type="list", elements="str", default=[]),
            rdma=dict(type="str", choices=["auto", "required", "disabled"], default="auto"),
            nccl_ib_hca=dict(type="list", elements="str", default=[]),
            rdma_devices=dict(type="list", elements="str", default=["/dev/infiniband"]),
            nccl_library=dict(type="str", default="auto"),
            engine_unit=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    rc, out, err = _run(module, ["ip", "-j", "addr", "show"])
    if rc != 0:
        module.fail_json(msg="ip -j addr show failed (rc %s): %s. The link check needs iproute2." % (rc, err.strip()[:300]))
    try:
        links = lc.parse_ip_addr(out)
    except lc.LinkCheckError as exc:
        module.fail_json(msg=str(exc))
    name = params["interface"]
    iface = dict(links.get(name) or {"name": name, "admin_up": False, "carrier": False, "operstate": "", "mtu": 0,
                                     "addresses": []})
    iface["exists"] = name in links
    result = dict(changed=False, interface=iface, interfaces=sorted(links), machine=platform.machine(),
                  address=lc.bare(params["address"]), peer_address=lc.bare(params["peer_address"]),
                  address_holder=lc.holder_of(links, params["address"]) or "" if params["address"] else "",
                  route={"dev": "", "prefsrc": ""}, peer={}, ports=[], engine_transport={})

    peer = lc.bare(params["peer_address"])
    if peer:
        rc, out, _err = _run(module, ["ip", "-j", "route", "get", peer])
        result["route"] = lc.parse_route_get(out) if rc == 0 else {"dev": "", "prefsrc": ""}
        if iface["exists"]:
            payload = lc.payload_for(iface["mtu"] or 1500, peer)
            echo = lc.icmp_echo(peer, payload, count=params["ping_count"], timeout=params["ping_timeout"], interface=name)
            echo["address"] = peer
            result["peer"] = echo

    owners_active = False
    if params["port_owner_units"]:
        rc, out, _err = _run(module, ["systemctl", "is-active"] + params["port_owner_units"])
        owners_active = "active" in out.split()
    result["ports"] = [port_state(module, item, owners_active) for item in params["ports"]]

    devices = lc.rdma_devices(read_rdma_devices(), links) if params["rdma"] != "disabled" else []
    hca, source = lc.choose_hca(devices, params["nccl_ib_hca"], name) if params["rdma"] != "disabled" else ([], "vllm_split_rdma: disabled")
    nodes = lc.device_nodes(params["rdma_devices"]) if params["rdma"] != "disabled" else []
    result["rdma"] = {"mode": params["rdma"], "devices": devices, "hca": hca, "hca_source": source,
                      "device_paths": params["rdma_devices"], "device_nodes": nodes}

    requested = params["nccl_library"]
    library = {"requested": requested, "path": "", "source": "the image's own (vllm_split_nccl_library is empty)"}
    if requested == "auto":
        rc, out, _err = _run(module, ["ldconfig", "-p"])
        path = lc.parse_ldconfig(out, platform.machine()) if rc == 0 else ""
        library.update(path=path, source="ldconfig -p" if path else "none on this host: the image's own")
    elif requested:
        library.update(path=requested if os.path.exists(requested) else "", source="vllm_split_nccl_library")
    result["nccl_library"] = library

    if params["engine_unit"]:
        try:
            props = show_properties(params["engine_unit"], ("ActiveState", "InvocationID"), module.run_command)
        except Exception:  # pylint: disable=broad-except
            props = {}
        lines = invocation_journal(props.get("InvocationID", ""), module.run_command, lines=50000)
        transport = lc.nccl_transport(lines)
        transport["active"] = props.get("ActiveState") == "active"
        result["engine_transport"] = transport
    module.exit_json(**result)


if __name__ == "__main__":
    main()
