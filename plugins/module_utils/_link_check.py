# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The direct link between the split's two hosts, judged before anything stops.

Pure logic behind ``factory_floor.llm.link_check`` (one host's side: its interface,
its address, a ping of the peer at the link's MTU with don't-fragment, the route to
the peer, the rendezvous ports, its RDMA devices and NCCL library),
``factory_floor.llm.link_collective`` (one rank of a timed all-reduce) and the
``factory_floor.llm.link_report`` filter, which puts both hosts' observations together
on the controller: every problem names the host, what is wrong and the fix.

The checks follow what DGX Spark users run before a two-node start (NVIDIA's
dgx-spark-playbooks "Connect two Sparks", eugr's spark-vllm-docker ``setup-cluster.sh
--doctor``): the interface up with carrier, the address on it, the same MTU on both
ends, pings of ``MTU - 28`` bytes with fragmentation forbidden in both directions.
Standard library only; the ICMP echo itself is here too (a raw socket, so the hosts
need no ``ping`` binary and the don't-fragment bit is certain).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import re
import socket
import stat
import struct
import subprocess
import time

#: IPv4 header (20) + ICMP header (8): a ping payload of MTU - 28 fills one packet of MTU bytes.
IPV4_OVERHEAD = 28
#: IPv6 header (40) + ICMPv6 header (8).
IPV6_OVERHEAD = 48

# linux/in.h and linux/in6.h: path-MTU discovery "do": set DF, never fragment locally.
IP_MTU_DISCOVER = 10
IP_PMTUDISC_DO = 2
IPV6_MTU_DISCOVER = 23
IPV6_PMTUDISC_DO = 2
SO_BINDTODEVICE = 25

# NCCL's own log lines (NCCL_DEBUG=INFO; init.cc, net.cc, transport/net_ib.cc):
#   NCCL version 2.28.9+cuda13.0
#   NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.1<0>
#   NET/Socket : Using [0]enp1s0f1np1:10.0.0.1<0>
#   Using network IB        (or IBext_v8, Socket)
#   Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0   (or NET/IBext_v10/1, NET/Socket/0)
#   NET/IB : No device found.
_NCCL_VERSION = re.compile(r"NCCL version ([0-9][0-9.]*[^\s]*)")
_NCCL_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_NCCL_VIA = re.compile(r"\bvia NET/([A-Za-z]+)")
_NCCL_IB_USING = re.compile(r"NET/IB : Using (.*?)(?:;|$)")
_NCCL_IB_DEVICE = re.compile(r"\[\d+\]([A-Za-z0-9_.-]+):\d+/(RoCE|IB)")
_NCCL_SOCKET_USING = re.compile(r"NET/Socket : Using (.*)$")
_NCCL_NO_IB = re.compile(r"NET/IB : No device found")
_NCCL_WARN = re.compile(r"NCCL WARN (.*)$")


class LinkCheckError(ValueError):
    """An argument that cannot describe a link."""


# ----------------------------------------------------------------- interfaces


def parse_ip_addr(text):
    """Interfaces from ``ip -j addr show``: ``{name: {...}}``.

    Each: ``name``, ``admin_up`` (flag UP: ``ip link set up``), ``carrier`` (flag
    LOWER_UP: a cable and a peer port that is up), ``operstate`` (the kernel's
    ``UP``/``DOWN``/``UNKNOWN``...), ``mtu`` (bytes) and ``addresses``
    (``address/prefix`` strings, IPv4 and IPv6, link-local IPv6 left out).
    """
    try:
        data = json.loads(text or "[]")
    except ValueError as exc:
        raise LinkCheckError("ip -j addr printed something else than JSON: %s" % exc) from None
    links = {}
    for entry in data if isinstance(data, list) else []:
        if not isinstance(entry, dict) or not entry.get("ifname"):
            continue
        flags = [str(flag) for flag in entry.get("flags") or []]
        addresses = []
        for info in entry.get("addr_info") or []:
            local = info.get("local")
            if not local or info.get("scope") == "link":
                continue
            addresses.append("%s/%s" % (local, info.get("prefixlen", 32 if info.get("family") == "inet" else 128)))
        links[entry["ifname"]] = {
            "name": entry["ifname"],
            "admin_up": "UP" in flags,
            "carrier": "LOWER_UP" in flags,
            "operstate": str(entry.get("operstate") or ""),
            "mtu": int(entry.get("mtu") or 0),
            "addresses": addresses,
        }
    return links


def bare(address):
    """``10.0.0.1/24`` -> ``10.0.0.1``; ``fe80::1%eth0`` -> ``fe80::1``."""
    return str(address or "").split("/", 1)[0].split("%", 1)[0].strip("[]")


def holder_of(links, address):
    """The interface that holds ``address`` (IPv4 or IPv6), or None."""
    try:
        wanted = ipaddress.ip_address(bare(address))
    except ValueError:
        return None
    for name in sorted(links):
        for held in links[name]["addresses"]:
            try:
                if ipaddress.ip_address(bare(held)) == wanted:
                    return name
            except ValueError:
                continue
    return None


def parse_route_get(text):
    """``ip -j route get ADDRESS`` -> the outgoing interface and source address (``{dev, prefsrc}``)."""
    try:
        data = json.loads(text or "[]")
    except ValueError:
        return {"dev": "", "prefsrc": ""}
    first = data[0] if isinstance(data, list) and data else {}
    return {"dev": str(first.get("dev") or ""), "prefsrc": str(first.get("prefsrc") or "")}


def payload_for(mtu, address):
    """ICMP payload bytes that make one packet of exactly ``mtu`` bytes to ``address``."""
    overhead = IPV6_OVERHEAD if ":" in bare(address) else IPV4_OVERHEAD
    return max(0, int(mtu) - overhead)


# ------------------------------------------------------------------------ ping


def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(identifier, sequence, payload, ipv6=False):
    """One ICMP (or ICMPv6) echo request; ICMPv6's checksum is the kernel's."""
    kind = 128 if ipv6 else 8
    header = struct.pack("!BBHHH", kind, 0, 0, identifier & 0xFFFF, sequence & 0xFFFF)
    if ipv6:
        return header + payload
    checksum = _checksum(header + payload)
    return struct.pack("!BBHHH", kind, 0, checksum, identifier & 0xFFFF, sequence & 0xFFFF) + payload


def is_echo_reply(packet, identifier, sequence, ipv6=False):
    """Whether ``packet`` (an IPv4 datagram with its header, or a bare ICMPv6 message) answers our request."""
    if not ipv6:
        if len(packet) < 20:
            return False
        packet = packet[(packet[0] & 0x0F) * 4:]
    if len(packet) < 8:
        return False
    kind, _code, _checksum_, ident, seq = struct.unpack("!BBHHH", packet[:8])
    return kind == (129 if ipv6 else 0) and ident == identifier & 0xFFFF and seq == sequence & 0xFFFF


def icmp_echo(address, payload_bytes, count=3, timeout=1.0, interface="", make_socket=socket.socket,
              clock=time.monotonic):
    """Ping ``address`` ``count`` times with ``payload_bytes`` of payload, don't-fragment, out of ``interface``.

    A raw ICMP socket (root): ``IP_MTU_DISCOVER = IP_PMTUDISC_DO`` sets the DF bit and
    makes the kernel refuse, rather than fragment, a packet larger than the way out
    (``EMSGSIZE``, reported as ``local_mtu``); ``SO_BINDTODEVICE`` sends it out of
    ``interface`` whatever the routing table says. Returns ``sent``, ``received``,
    ``rtt_ms`` (the best round trip, or None) and ``error`` ("" when the socket worked:
    ``local_mtu``, ``unreachable``, or the OS error's text).
    """
    ipv6 = ":" in bare(address)
    family = socket.AF_INET6 if ipv6 else socket.AF_INET
    proto = socket.IPPROTO_ICMPV6 if ipv6 else socket.IPPROTO_ICMP
    result = {"sent": 0, "received": 0, "rtt_ms": None, "error": "", "payload": int(payload_bytes)}
    try:
        sock = make_socket(family, socket.SOCK_RAW, proto)
    except OSError as exc:
        result["error"] = "no raw ICMP socket (%s): the check needs root" % exc.strerror
        return result
    identifier = os.getpid() & 0xFFFF
    payload = bytes((i % 251 for i in range(int(payload_bytes))))
    try:
        if ipv6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO)
        else:
            sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        if interface:
            sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, interface.encode() + b"\0")
        sock.settimeout(timeout)
        best = None
        for sequence in range(1, int(count) + 1):
            started = clock()
            try:
                sock.sendto(echo_request(identifier, sequence, payload, ipv6), (bare(address), 0))
            except OSError as exc:
                # EMSGSIZE: larger than the MTU of the way out; ENETUNREACH/EHOSTUNREACH: no route.
                result["error"] = ("local_mtu" if exc.errno == errno.EMSGSIZE else
                                   "unreachable" if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)
                                   else (exc.strerror or str(exc)))
                break
            result["sent"] += 1
            deadline = started + timeout
            while True:
                left = deadline - clock()
                if left <= 0:
                    break
                sock.settimeout(left)
                try:
                    packet, _peer = sock.recvfrom(65535)
                except socket.timeout:
                    break
                except OSError as exc:
                    result["error"] = exc.strerror or str(exc)
                    break
                if is_echo_reply(packet, identifier, sequence, ipv6):
                    rtt = (clock() - started) * 1000.0
                    best = rtt if best is None else min(best, rtt)
                    result["received"] += 1
                    break
        result["rtt_ms"] = round(best, 3) if best is not None else None
    finally:
        sock.close()
    return result


# ----------------------------------------------------------------------- ports


_SS_USER = re.compile(r'\("([^"]*)",pid=(\d+)')


def parse_ss_listeners(text):
    """``ss -Hltnp`` lines -> ``[{"address", "port", "process", "pid"}]`` (one per listening socket)."""
    found = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        local = fields[3]
        host, _sep, port = local.rpartition(":")
        users = _SS_USER.findall(line)
        process, pid = (users[0][0], int(users[0][1])) if users else ("", 0)
        try:
            found.append({"address": host.strip("[]"), "port": int(port), "process": process, "pid": pid})
        except ValueError:
            continue
    return found


# ------------------------------------------------------------------------ RDMA


def rdma_devices(devices, links):
    """The RDMA devices and whether their Ethernet port is up, as ``ibdev2netdev`` shows them.

    ``devices``: ``{ibdev: [netdev, ...]}`` (``/sys/class/infiniband/<dev>/device/net/``).
    Returns ``[{name, netdevs, up}]`` sorted by name; ``up`` when one of its net devices
    has carrier (ibdev2netdev's "(Up)").
    """
    out = []
    for name in sorted(devices):
        netdevs = sorted(devices[name] or [])
        up = any(links.get(dev, {}).get("carrier") and links.get(dev, {}).get("admin_up") for dev in netdevs)
        out.append({"name": name, "netdevs": netdevs, "up": bool(up)})
    return out


def device_nodes(paths, listdir=os.listdir, is_char_device=None):
    """The character devices ``paths`` name, for ``--device=``: a device itself, or those directly in a directory.

    ``/dev/infiniband`` holds ``by-ibdev/`` and ``by-path/`` (trees of symlinks) next to
    its nodes, and ``docker run --device=/dev/infiniband`` then fails as a whole with "not
    a device node" (sparkrun's rdma-test enumerates the nodes for that reason); so the
    nodes are listed one by one, sorted.
    """
    def _is_char(path):
        try:
            return stat.S_ISCHR(os.stat(path).st_mode)
        except OSError:
            return False

    is_char = is_char_device or _is_char
    nodes = []
    for path in paths or []:
        if is_char(path):
            nodes.append(path)
            continue
        try:
            names = sorted(listdir(path))
        except OSError:
            continue
        nodes += [os.path.join(path, name) for name in names if is_char(os.path.join(path, name))]
    return nodes


def port_key(netdev):
    """A netdev's name without its PCI domain: a DGX Spark port's two twins share it
    (``enp1s0f1np1`` and ``enP2p1s0f1np1`` -> ``enp1s0f1np1``)."""
    return re.sub(r"^enP[0-9]+p", "enp", str(netdev or ""))


def choose_hca(devices, configured, interface=""):
    """``(hca, source)``: the devices NCCL_IB_HCA names.

    The inventory's list when set; otherwise the RDMA devices whose port is up and that
    belong to the link interface's port (on a DGX Spark the cabled QSFP port shows as two
    "twins", one per PCIe x4 link - ``rocep1s0f1`` on ``enp1s0f1np1`` and ``roceP2p1s0f1`` on
    ``enP2p1s0f1np1`` - and NCCL reaches the port's full 200 Gb/s only over both, as eugr's
    spark-vllm-docker ``autodiscover.sh`` sets them). With the other port up too (a second
    cable), its devices are not the link's. When none of the up devices is the interface's
    (another naming), every device whose port is up.
    """
    if configured:
        return [str(name) for name in configured], "vllm_split_nccl_ib_hca"
    up = [device for device in devices if device["up"]]
    if interface:
        key = port_key(interface)
        own = [device["name"] for device in up if any(port_key(netdev) == key for netdev in device.get("netdevs") or [])]
        if own:
            return own, "discovered (the RDMA devices of %s's port, up)" % interface
    return [device["name"] for device in up], "discovered (RDMA devices whose port is up)"


# ------------------------------------------------------------------------ NCCL


def parse_ldconfig(text, machine=""):
    """The path of ``libnccl.so.2`` in ``ldconfig -p`` output, for this host's architecture (or "")."""
    wanted = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(machine, "")
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("libnccl.so.2 "):
            continue
        if wanted and wanted not in line:
            continue
        _name, _sep, path = line.partition("=>")
        if path.strip():
            return path.strip()
    return ""


def nccl_transport(lines):
    """What NCCL's own log says it chose, from ``NCCL_DEBUG=INFO`` lines.

    ``transport``: ``rdma`` (NET/IB, IBext: RoCE or InfiniBand verbs), ``socket``
    (NET/Socket: TCP), or ``unknown`` (no such line: NCCL_DEBUG off, or no NCCL at all,
    as in vLLM's CPU build). Also ``network`` (NCCL's name), ``devices`` (the RDMA
    devices it opened), ``version``, ``warnings`` (its WARN lines) and ``evidence`` (the
    lines that decided, at most five).
    """
    result = {"transport": "unknown", "network": "", "devices": [], "version": "", "warnings": [], "evidence": [],
              "no_rdma_device": False}
    vias = []
    for raw in lines or []:
        line = str(raw).rstrip()
        match = _NCCL_VERSION.search(line)
        if match and not result["version"]:
            result["version"] = match.group(1)
        match = _NCCL_NETWORK.search(line)
        if match:
            result["network"] = match.group(1)
            result["evidence"].append(line)
        match = _NCCL_VIA.search(line)
        if match:
            vias.append(match.group(1))
            if len(result["evidence"]) < 5:
                result["evidence"].append(line)
        match = _NCCL_IB_USING.search(line)
        if match:
            for device, _kind in _NCCL_IB_DEVICE.findall(match.group(1)):
                if device not in result["devices"]:
                    result["devices"].append(device)
        if _NCCL_NO_IB.search(line):
            result["no_rdma_device"] = True
        match = _NCCL_WARN.search(line)
        if match and len(result["warnings"]) < 10:
            result["warnings"].append(match.group(1).strip())
    names = [result["network"]] if result["network"] else []
    names += vias
    if any(name.upper().startswith("IB") for name in names):
        result["transport"] = "rdma"
    elif any(name.lower().startswith("socket") for name in names):
        result["transport"] = "socket"
    result["evidence"] = result["evidence"][:5]
    return result


# ---------------------------------------------------------------- one host


def _problem(host, what, fix):
    return {"host": host, "what": what, "fix": fix}


def host_problems(host, observed, expect):
    """Problems on one host, each ``{host, what, fix}``.

    ``observed``: ``link_check``'s result on that host (``interface``, ``address_holder``,
    ``route``, ``peer``, ``ports``, ``rdma``, ``nccl_library``). ``expect``: ``interface``,
    ``address``, ``peer_host``, ``peer_address``, ``mtu`` (or None), ``rdma``
    (``auto``/``required``/``disabled``), ``runtime`` (``container``/``venv``).
    """
    problems = []
    name = expect["interface"]
    address = bare(expect.get("address"))
    iface = observed.get("interface") or {}
    peer_host = expect.get("peer_host") or "the other host"
    if not iface.get("exists"):
        problems.append(_problem(
            host, "the link interface %s does not exist (its interfaces: %s)" % (name, ", ".join(observed.get("interfaces") or []) or "none"),
            "set vllm_link_interface in host_vars/%s.yml to the interface of the direct link (ibdev2netdev shows the "
            "ConnectX port that is Up)" % host))
        return problems
    if not iface.get("admin_up"):
        problems.append(_problem(
            host, "the link interface %s is down (administratively)" % name,
            "bring it up (ip link set %s up) and keep it up in the host's network configuration (netplan)" % name))
    elif not iface.get("carrier"):
        problems.append(_problem(
            host, "the link interface %s has no carrier (operstate %s): no cable, the cable in the other port, or %s's "
            "port down" % (name, iface.get("operstate") or "?", peer_host),
            "check the cable and which port it is in (ibdev2netdev on both hosts), or set vllm_link_interface to the "
            "port that is Up"))
    holder = observed.get("address_holder") or ""
    if not address:
        problems.append(_problem(host, "vllm_link_address is empty",
                                 "set vllm_link_address in host_vars/%s.yml to this host's address on %s" % (host, name)))
    elif holder != name:
        own = ", ".join(bare(a) for a in iface.get("addresses") or []) or "none"
        if holder:
            problems.append(_problem(
                host, "vllm_link_address %s is on %s, not on the link interface %s (which has: %s)" % (address, holder, name, own),
                "move %s to %s in the host's network configuration, or set vllm_link_interface: %s if %s is the link"
                % (address, name, holder, holder)))
        else:
            problems.append(_problem(
                host, "vllm_link_address %s is on no interface of this host (%s has: %s)" % (address, name, own),
                "configure %s on %s (netplan), or set vllm_link_address to %s's address" % (address, name, name)))
    if expect.get("mtu") and iface.get("mtu") and int(iface["mtu"]) != int(expect["mtu"]):
        problems.append(_problem(
            host, "the MTU of %s is %s, not vllm_link_mtu %s" % (name, iface["mtu"], expect["mtu"]),
            "set MTU %s on %s on both hosts (netplan: mtu: %s), or change vllm_link_mtu" % (expect["mtu"], name, expect["mtu"])))
    route = observed.get("route") or {}
    peer = observed.get("peer") or {}
    peer_address = bare(expect.get("peer_address"))
    if peer_address and route.get("dev") and route["dev"] != name:
        problems.append(_problem(
            host, "traffic to %s's link address %s leaves by %s, not by the link interface %s: the split's ranks would "
            "talk over %s" % (peer_host, peer_address, route["dev"], name, route["dev"]),
            "give %s and %s's address one subnet of their own on the link (a /24 or /30 no other interface has)"
            % (name, peer_host)))
    if peer_address and peer:
        mtu = iface.get("mtu") or "?"
        if peer.get("error") == "local_mtu":
            problems.append(_problem(
                host, "a %s-byte packet to %s (%s) cannot leave %s with don't-fragment set: the way out has a smaller MTU"
                % (mtu, peer_host, peer_address, name),
                "set the same MTU on %s on both hosts" % name))
        elif peer.get("received", 0) == 0:
            why = (" (%s)" % peer["error"]) if peer.get("error") else ""
            problems.append(_problem(
                host, "%s's link address %s does not answer over %s: 0 of %s pings of %s bytes with don't-fragment got a "
                "reply%s" % (peer_host, peer_address, name, peer.get("sent", 0), mtu, why),
                "check %s's own problems in this list; otherwise the cable, a firewall dropping ICMP on the link, or an MTU "
                "one end does not carry (ping -M do -s %s -I %s %s)"
                % (peer_host, payload_for(mtu if mtu != "?" else 1500, peer_address), name, peer_address)))
    for port in observed.get("ports") or []:
        if port.get("free") or port.get("ours"):
            continue
        holders = ", ".join("%s (pid %s)" % (h.get("process") or "?", h.get("pid") or "?") for h in port.get("holders") or [])
        problems.append(_problem(
            host, "port %s is taken by %s: %s" % (port["port"], holders or "another program", port.get("purpose") or "the split needs it"),
            "stop that program, or set %s to a free port" % (port.get("variable") or "vllm_split_master_port")))
    rdma = observed.get("rdma") or {}
    mode = expect.get("rdma") or "auto"
    if mode != "disabled":
        known = [d["name"] for d in rdma.get("devices") or []]
        missing = [d for d in rdma.get("hca") or [] if d not in known]
        if missing:
            problems.append(_problem(
                host, "vllm_split_nccl_ib_hca names %s, which this host does not have (its RDMA devices: %s)"
                % (", ".join(missing), ", ".join(known) or "none"),
                "list this host's devices in vllm_split_nccl_ib_hca (ibdev2netdev), or leave it empty to use every device "
                "whose port is up"))
        if mode == "required" and not rdma.get("hca"):
            problems.append(_problem(
                host, "vllm_split_rdma is required, but no RDMA device has its port up (RDMA devices: %s)"
                % (", ".join("%s (%s)" % (d["name"], "up" if d["up"] else "down") for d in rdma.get("devices") or []) or "none"),
                "cable the ConnectX port and bring it up, install the RDMA stack (rdma-core; /sys/class/infiniband), or set "
                "vllm_split_rdma: auto to let NCCL use sockets"))
        if mode == "required" and expect.get("runtime") == "container" and rdma.get("hca") and not rdma.get("device_nodes"):
            problems.append(_problem(
                host, "vllm_split_rdma is required, but %s holds no device node, so the container could not open the RDMA devices"
                % ", ".join(rdma.get("device_paths") or ["/dev/infiniband"]),
                "load the RDMA modules (ib_uverbs) or set vllm_split_rdma_devices to where this host has them"))
    library = observed.get("nccl_library") or {}
    if library.get("requested") not in (None, "", "auto") and not library.get("path"):
        problems.append(_problem(
            host, "vllm_split_nccl_library %s does not exist" % library["requested"],
            "point vllm_split_nccl_library at this host's libnccl.so.2 (ldconfig -p | grep nccl), or set it to auto or \"\""))
    return problems


def pair_problems(observed_by_host, expect_by_host):
    """Problems between the ends (two, or every rank of a larger group): different MTUs, one address on two."""
    problems = []
    hosts = sorted(observed_by_host)
    pair = len(hosts) <= 2
    mtus = {}
    for host in hosts:
        iface = observed_by_host[host].get("interface") or {}
        if iface.get("exists") and iface.get("mtu"):
            mtus[host] = (expect_by_host[host]["interface"], int(iface["mtu"]))
    if len(set(mtu for _name, mtu in mtus.values())) > 1:
        problems.append(_problem(
            " and ".join(hosts), "the %s of the link have different MTUs: %s" % (
                "two ends" if pair else "%d hosts' ends" % len(hosts), ", ".join(
                    "%s %s %s" % (host, name, mtu) for host, (name, mtu) in sorted(mtus.items()))),
            "set the same MTU on %s (netplan: mtu: 9000 on the link interface of each host); NCCL and Gloo size their "
            "packets for their own end, and the larger ones are dropped at the other" % ("both" if pair else "all")))
    addresses = {}
    for host in hosts:
        addresses.setdefault(bare(expect_by_host[host].get("address")), []).append(host)
    for address, owners in sorted(addresses.items()):
        if address and len(owners) > 1:
            problems.append(_problem(
                " and ".join(owners), "%s have vllm_link_address %s" % ("both" if len(owners) == 2 else "all", address),
                "give each host its own address on the link in its host_vars"))
    return problems


def expectations(results_by_host, mtu=None, runtime="container"):
    """Per host, what its ``link_check`` was asked and who its peer is: the other host of two; in a larger group the
    host whose link address it pinged (each rank pings the head, the head rank 1)."""
    hosts = sorted(results_by_host)
    by_address = {bare((results_by_host[host] or {}).get("address")): host for host in hosts
                  if bare((results_by_host[host] or {}).get("address"))}
    expect = {}
    for host in hosts:
        result = results_by_host[host] or {}
        others = [other for other in hosts if other != host]
        pinged = by_address.get(bare(result.get("peer_address")))
        expect[host] = {
            "interface": (result.get("interface") or {}).get("name", ""),
            "address": result.get("address", ""),
            "peer_address": result.get("peer_address", ""),
            "peer_host": others[0] if len(others) == 1 else pinged or ", ".join(others) or "the other host",
            "mtu": int(mtu) if mtu else None,
            "rdma": (result.get("rdma") or {}).get("mode", "auto"),
            "runtime": runtime,
        }
    return expect


def assess(results_by_host, mtu=None, runtime="container"):
    """Every problem of the link, the pair's first, then each host's: ``{ok, problems, summary}``.

    ``results_by_host``: ``link_check``'s result on each of the split's hosts.
    """
    expect_by_host = expectations(results_by_host, mtu, runtime)
    observed_by_host = results_by_host
    problems = pair_problems(observed_by_host, expect_by_host)
    for host in sorted(observed_by_host):
        problems += host_problems(host, observed_by_host[host], expect_by_host[host])
    summary = []
    for host in sorted(observed_by_host):
        observed = observed_by_host[host]
        iface = observed.get("interface") or {}
        peer = observed.get("peer") or {}
        rdma = observed.get("rdma") or {}
        library = observed.get("nccl_library") or {}
        summary.append("%s: %s %s, MTU %s, %s; peer %s %s/%s at %s bytes DF%s; NCCL_IB_HCA %s; NCCL library %s" % (
            host, expect_by_host[host]["interface"],
            "up" if iface.get("admin_up") and iface.get("carrier") else "NOT UP", iface.get("mtu", "?"),
            bare(expect_by_host[host].get("address")) or "no address",
            bare(expect_by_host[host].get("peer_address")) or "-", peer.get("received", 0), peer.get("sent", 0),
            iface.get("mtu", "?"), (" (%.2f ms)" % peer["rtt_ms"]) if peer.get("rtt_ms") is not None else "",
            ",".join(rdma.get("hca") or []) or "none (sockets)",
            library.get("path") or "the image's own"))
    return {"ok": not problems, "problems": problems, "summary": summary}


def message(problems, title):
    """One failure message: ``title``, then one line per problem with its fix."""
    lines = [title]
    for problem in problems:
        lines.append("- %s: %s. Fix: %s." % (problem["host"], problem["what"], problem["fix"]))
    return "\n".join(lines)


# ------------------------------------------------------------- the collective


def collective_summary(result):
    """One line for one rank's all-reduce (``link_collective``'s result)."""
    if not result.get("ok"):
        return "failed: %s" % (result.get("error") or "no result")
    transport = result.get("transport") or {}
    how = result.get("backend", "?")
    if result.get("backend") == "nccl":
        over = {"rdma": "RDMA (%s)" % ",".join(transport.get("devices") or []) or "RDMA",
                "socket": "sockets (TCP)"}.get(transport.get("transport"), "an unknown transport")
        how = "NCCL %s over %s" % (transport.get("version") or "", over)
    else:
        how = "gloo over TCP"
    return "%g MiB all-reduce x %s: %.3f ms each, %.2f GB/s bus bandwidth (%.1f Gbit/s), %s" % (
        float(result.get("size_mib") or 0), result.get("iterations"), result.get("seconds_per_iteration", 0) * 1000.0,
        result.get("busbw_gb_s", 0.0), result.get("busbw_gb_s", 0.0) * 8, how)


def collective_problems(results_by_host, expect):
    """Problems of the all-reduce between the ranks, each naming the host and the fix.

    ``expect``: ``rdma`` (mode), ``interface``, ``head``, ``master`` (address:port),
    ``min_busbw_gb_s`` (0: report only), ``backend``.
    """
    problems = []
    for host in sorted(results_by_host):
        result = results_by_host[host] or {}
        if result.get("skipped"):
            continue
        if not result.get("ok"):
            error = result.get("error") or "no result"
            fix = "read the rank's log above; the link checks passed, so look at the image and its libraries"
            lowered = error.lower()
            if "exec format error" in lowered:
                fix = "use an image built for this host's architecture"
            elif any(word in lowered for word in ("timed out", "timeout", "connection refused", "connection reset",
                                                  "no route")):
                fix = ("%s must run at once (forks >= 2; async) and reach %s: check the firewall on %s and that "
                       "%s carries TCP between the link addresses"
                       % ("both ranks" if len(results_by_host) <= 2 else "all %d ranks" % len(results_by_host),
                          expect.get("master"), expect.get("head"), expect.get("interface")))
            elif "nccl" in lowered or "libnccl" in lowered:
                fix = ("NCCL failed in the image: see its WARN lines; with vllm_split_nccl_library set to the host's "
                       "library, check it matches the image's CUDA major version, or set vllm_split_nccl_library: \"\"")
            elif "no such image" in lowered or "unable to find image" in lowered or "image not known" in lowered:
                fix = "load the vLLM image on this host first (the image check says which)"
            problems.append(_problem(host, "the all-reduce over the link failed: %s" % error, fix))
            continue
        transport = result.get("transport") or {}
        if result.get("backend") == "nccl" and expect.get("rdma") == "required" and transport.get("transport") != "rdma":
            problems.append(_problem(
                host, "NCCL chose %s, not RDMA, although vllm_split_rdma is required%s" % (
                    {"socket": "sockets (TCP over %s)" % expect.get("interface")}.get(
                        transport.get("transport"), "no transport it logged"),
                    (": " + "; ".join(transport.get("warnings")[:2])) if transport.get("warnings") else ""),
                "pass the RDMA devices to the container (vllm_split_rdma_devices, /dev/infiniband), name them in "
                "vllm_split_nccl_ib_hca, and check ibv_devinfo shows the ports ACTIVE"))
        floor = float(expect.get("min_busbw_gb_s") or 0)
        if floor and float(result.get("busbw_gb_s") or 0) < floor:
            problems.append(_problem(
                host, "the all-reduce reached %.2f GB/s bus bandwidth, below vllm_split_link_min_bandwidth %.2f GB/s"
                % (float(result.get("busbw_gb_s") or 0), floor),
                "check that NCCL runs over RDMA on both RoCE devices of the port (NCCL_IB_HCA), the link speed "
                "(ethtool %s) and the MTU" % expect.get("interface")))
    return problems


def engine_transport_verdict(transport, rdma_mode, runtime_has_nccl=True):
    """After a start: ``(level, text)`` from the engine's own NCCL lines.

    ``level``: ``ok``, ``warn`` (sockets with RDMA asked for by ``auto`` and devices
    found), ``refuse`` (sockets, or nothing, while ``vllm_split_rdma`` is ``required``),
    ``info`` (no NCCL line: the CPU build, or NCCL_DEBUG off).
    """
    kind = transport.get("transport")
    evidence = "; ".join(transport.get("evidence") or [])[:400]
    if transport.get("active") is False:
        return "info", "the split does not run here: no engine log to read"
    if kind == "rdma":
        return "ok", "NCCL %s runs over RDMA (%s): %s" % (transport.get("version") or "", ", ".join(transport.get("devices") or []) or "IB", evidence)
    if kind == "socket":
        text = ("NCCL %s fell back to sockets (TCP) for the split: %s. Per message that is 10-20x slower than RDMA; check "
                "the RDMA devices reach the container and NCCL_IB_HCA names them" % (transport.get("version") or "", evidence))
        return ("refuse" if rdma_mode == "required" else "warn" if rdma_mode == "auto" else "ok"), text
    if rdma_mode == "required" and runtime_has_nccl:
        return "refuse", ("the engine's log has no NCCL transport line, so RDMA cannot be confirmed although "
                          "vllm_split_rdma is required: keep vllm_split_nccl_debug at INFO")
    return "info", "no NCCL transport line in the engine's log (vLLM's CPU build uses gloo; or NCCL_DEBUG is off)"


# ------------------------------------------------------- running one rank


# The options of the modules that run a program in the image that will serve (container runtime) or
# in its virtualenv (venv runtime): link_collective and vllm_cli_check.
RUNNER_SPEC = dict(
    runtime=dict(type="str", choices=["container", "venv"], required=True),
    engine=dict(type="str", default="/usr/bin/docker"),
    image=dict(type="str", default=""),
    python=dict(type="str", default="python3"),
    venv=dict(type="str", default="/opt/vllm"),
)


def run_with_timeout(argv, timeout, env=None):
    """``(rc, stdout, stderr, timed_out)`` of ``argv``, killed after ``timeout`` seconds."""
    try:
        # A timeout that kills the rank (run_command has none).
        # pylint: disable-next=ansible-bad-function
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        return 124, (exc.stdout or b"").decode("utf-8", "replace"), (exc.stderr or b"").decode("utf-8", "replace"), True
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc), False
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"), False


def collective_argv(runtime, probe_path, rank, master_addr, master_port, backend, size_mib, iterations, timeout,
                    world_size=2, engine="", image="", run_args=(), env=None, name="factory-floor-link-check",
                    python="python3", venv="", mount_dir="/factory-floor-link"):
    """The command that runs one rank of the probe: in a container of ``image`` (as the split's container is run:
    host network, ``run_args`` - GPU, IPC, RDMA devices, the host's NCCL - and ``env``), or with the virtualenv's Python."""
    probe_args = ["--rank", str(rank), "--world-size", str(world_size), "--master-addr", str(master_addr),
                  "--master-port", str(master_port), "--backend", backend, "--size-mib", str(size_mib),
                  "--iterations", str(iterations), "--timeout", str(timeout)]
    if runtime == "venv":
        return [os.path.join(venv, "bin", "python"), probe_path] + probe_args
    argv = [engine, "run", "--rm", "--name", name, "--network=host", "--pull=never"]
    argv += [str(arg) for arg in run_args or []]
    for key in sorted(env or {}):
        argv += ["--env", "%s=%s" % (key, (env or {})[key])]
    argv += ["--volume=%s:%s:ro" % (os.path.dirname(probe_path), mount_dir), "--entrypoint", python, image,
             "%s/%s" % (mount_dir, os.path.basename(probe_path))]
    return argv + probe_args


def parse_probe_output(stdout, stderr, marker="FACTORY_FLOOR_COLLECTIVE="):
    """The probe's result (its last marker line), and NCCL's transport from its log lines."""
    result = None
    for line in (stdout or "").splitlines():
        if line.startswith(marker):
            try:
                result = json.loads(line[len(marker):])
            except ValueError:
                result = None
    lines = (stdout or "").splitlines() + (stderr or "").splitlines()
    return result, nccl_transport(lines)
