# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Who holds connections to a vLLM API port, and may they?

Private to the collection; standard library only. Parses what ``ss -Htn state
established`` prints (columns Recv-Q, Send-Q, local address:port, peer
address:port) and sorts each peer of one local port into:

``loopback``  127.0.0.0/8 or ::1 (the host itself: health checks, the watchdog);
``allowed``   an address in the allowed list (the proxy hosts, health-check and
              metrics hosts: what the firewall lets in);
``other``     anyone else: a client that bypasses the proxy, which every client must go through.
"""

from __future__ import annotations

import ipaddress
import re

from urllib.parse import urlsplit


def _split_endpoint(text: str) -> tuple[str, int]:
    """``10.0.0.2:8000`` / ``[::1]:8000`` / ``[::ffff:10.0.0.2]:8000`` -> (address, port)."""
    address, port = text.rsplit(":", 1)
    address = address.strip("[]").split("%", 1)[0]
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port)


def parse_ss(text: str, port: int) -> list[dict]:
    """Established TCP connections whose local port is ``port``, one dict per connection."""
    connections = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        # With "state established" ss leaves out the State column; without it, it is first.
        if not fields[0].isdigit():
            fields = fields[1:]
        local_address, local_port = _split_endpoint(fields[2])
        if local_port != port:
            continue
        peer_address, peer_port = _split_endpoint(fields[3])
        connections.append({"local": local_address, "peer": peer_address, "peer_port": peer_port})
    return connections


def _networks(allowed: list[str]) -> list:
    networks = []
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError("allowed holds %r, which is not an IP address or CIDR" % entry) from exc
    return networks


def classify(connections: list[dict], allowed: list[str]) -> list[dict]:
    """One row per peer address: its class and how many connections it holds."""
    networks = _networks(allowed)
    rows: dict[str, dict] = {}
    for connection in connections:
        address = connection["peer"]
        row = rows.get(address)
        if row is None:
            ip = ipaddress.ip_address(address)
            if ip.is_loopback:
                kind = "loopback"
            elif any(ip.version == net.version and ip in net for net in networks):
                kind = "allowed"
            else:
                kind = "other"
            row = rows[address] = {"address": address, "class": kind, "connections": 0}
        row["connections"] += 1
    return sorted(rows.values(), key=lambda r: (r["class"] != "other", r["address"]))


def own_address(probe_url: str | None) -> list[str]:
    """``[address]`` when the engine's own host reaches it at an address (``vllm_probe_url``'s host is an IPv4 or IPv6
    address: vLLM listens on one address of its own, and the host's own checks - the watchdog, health waits - come from
    there, like loopback); ``[]`` for a name or nothing."""
    host = urlsplit(probe_url or "").hostname or ""
    return [host] if re.match(r"^[0-9.]+$", host) or ":" in host else []


def report(peers: list[dict], others: list[str]) -> str:
    """The peers line after ``host:port:`` - each peer's address, class and connections, or ``no connections``, then
    the clients that bypass the proxy."""
    line = str(["%s %s %s" % (p["address"], p["class"], p["connections"]) for p in peers]) if peers else "no connections"
    return line + ("; BYPASSING THE PROXY: " + ", ".join(others) if others else "")
