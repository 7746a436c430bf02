# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""VRRP advertisements as they arrive on a raw socket: parse and summarize.

A raw IPv4 socket for IP protocol 112 (VRRP) hands over whole IPv4 packets, the
header included. ``parse_packet`` reads the IPv4 header and the VRRP message in it,
version 2 (RFC 3768: auth type, advertisement interval in seconds) or version 3
(RFC 5798: maximum advertisement interval in centiseconds, no authentication), and
checks both checksums (v3's covers an IPv4 pseudo-header). ``routers`` folds the
adverts seen into one entry per (virtual router id, source): who uses which id on
the network, at which priority, for which addresses.

Pure: bytes in, dicts out; the socket work is in the vrrp_info module. Stdlib only.
"""

from __future__ import annotations

import socket
import struct

PROTO_VRRP = 112
# The group VRRP advertises to when it is not told unicast peers (RFC 3768, 5798).
MULTICAST_GROUP = "224.0.0.18"
TYPE_ADVERTISEMENT = 1
AUTH_TYPES = {0: "none", 1: "simple", 2: "ah"}


class ParseError(ValueError):
    """The bytes are not an IPv4 packet carrying a VRRP advertisement."""


def checksum(data):
    """The Internet checksum (RFC 1071) of ``data``: 0 when ``data`` includes a correct one."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def parse_ipv4(packet):
    """Return (header dict, payload) of an IPv4 packet: source, destination, ttl, protocol."""
    if len(packet) < 20:
        raise ParseError("%d bytes: shorter than an IPv4 header" % len(packet))
    version, ihl = packet[0] >> 4, (packet[0] & 0x0F) * 4
    if version != 4:
        raise ParseError("IP version %d, not 4" % version)
    if ihl < 20 or len(packet) < ihl:
        raise ParseError("IPv4 header length %d in a %d-byte packet" % (ihl, len(packet)))
    total_length = struct.unpack("!H", packet[2:4])[0]
    end = total_length if ihl <= total_length <= len(packet) else len(packet)
    header = {
        "source": socket.inet_ntoa(packet[12:16]),
        "destination": socket.inet_ntoa(packet[16:20]),
        "ttl": packet[8],
        "protocol": packet[9],
    }
    return header, packet[ihl:end]


def parse_vrrp(message, source=None, destination=None):
    """Parse a VRRP message (the IPv4 payload). ``source``/``destination`` (dotted
    quads) are needed to check a version 3 checksum; without them it is not checked.

    Returns a dict: version, type, virtual_router_id, priority, addresses (list of
    dotted quads), advert_int (seconds, a float for v3), auth_type (v2: none, simple,
    ah; v3: None), checksum_ok (bool, or None when it could not be checked).
    """
    if len(message) < 8:
        raise ParseError("%d bytes: shorter than a VRRP header" % len(message))
    version, kind = message[0] >> 4, message[0] & 0x0F
    if version not in (2, 3):
        raise ParseError("VRRP version %d, not 2 or 3" % version)
    vrid, priority, count = message[1], message[2], message[3]
    if len(message) < 8 + 4 * count:
        raise ParseError("VRRP message of %d bytes cannot hold %d addresses" % (len(message), count))
    addresses = [socket.inet_ntoa(message[8 + 4 * i:12 + 4 * i]) for i in range(count)]
    if version == 2:
        auth_type = AUTH_TYPES.get(message[4], "unknown (%d)" % message[4])
        advert_int = float(message[5])
        # The checksum covers the VRRP message: header, addresses and the 8 bytes of authentication data.
        covered = message[:8 + 4 * count + 8] if len(message) >= 8 + 4 * count + 8 else message
        checksum_ok = checksum(covered) == 0
    else:
        auth_type = None
        advert_int = (struct.unpack("!H", message[4:6])[0] & 0x0FFF) / 100.0
        covered = message[:8 + 4 * count]
        if source and destination:
            pseudo = (socket.inet_aton(source) + socket.inet_aton(destination)
                      + struct.pack("!BBH", 0, PROTO_VRRP, len(covered)))
            checksum_ok = checksum(pseudo + covered) == 0
        else:
            checksum_ok = None
    return {
        "version": version,
        "type": kind,
        "virtual_router_id": vrid,
        "priority": priority,
        "addresses": addresses,
        "advert_int": advert_int,
        "auth_type": auth_type,
        "checksum_ok": checksum_ok,
    }


def parse_packet(packet, received=None):
    """Parse one packet from a raw VRRP socket into an advert dict (see parse_vrrp), plus
    source, destination, ttl and ``received`` (the caller's timestamp)."""
    header, payload = parse_ipv4(packet)
    if header["protocol"] != PROTO_VRRP:
        raise ParseError("IP protocol %d, not VRRP (%d)" % (header["protocol"], PROTO_VRRP))
    advert = parse_vrrp(payload, header["source"], header["destination"])
    advert.update(source=header["source"], destination=header["destination"], ttl=header["ttl"], received=received)
    return advert


def routers(adverts):
    """One entry per (virtual_router_id, source), sorted: who advertises which id.

    Each entry: virtual_router_id, source, version, priority (the last seen),
    addresses (the last seen), advert_int, auth_type, destination (multicast group or
    a unicast peer), count (adverts seen), checksum_ok (every one correct).
    Advertisements that are not of type 1 are left out.
    """
    seen = {}
    for advert in adverts:
        if advert.get("type") != TYPE_ADVERTISEMENT:
            continue
        key = (advert["virtual_router_id"], advert["source"])
        entry = seen.setdefault(key, {"virtual_router_id": key[0], "source": key[1], "count": 0, "checksum_ok": True})
        entry["count"] += 1
        entry["checksum_ok"] = entry["checksum_ok"] and advert.get("checksum_ok") is not False
        for field in ("version", "priority", "addresses", "advert_int", "auth_type", "destination"):
            entry[field] = advert.get(field)
    return [seen[key] for key in sorted(seen, key=lambda k: (k[0], socket.inet_aton(k[1])))]


def ip_mreqn(group, ifindex):
    """``struct ip_mreqn`` for IP_ADD_MEMBERSHIP: join ``group`` on the interface ``ifindex``."""
    return socket.inet_aton(group) + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex)


def build_advert(vrid, priority, addresses, source, destination=MULTICAST_GROUP, advert_int=1, version=2,
                 auth_type=0, ttl=255):
    """An IPv4 packet carrying a VRRP advertisement, checksums filled in (for tests)."""
    count = len(addresses)
    packed = b"".join(socket.inet_aton(a) for a in addresses)
    if version == 2:
        body = struct.pack("!BBBBBBH", 0x21, vrid, priority, count, auth_type, int(advert_int), 0) + packed + b"\0" * 8
        body = body[:6] + struct.pack("!H", checksum(body)) + body[8:]
    else:
        body = struct.pack("!BBBBHH", 0x31, vrid, priority, count, int(round(advert_int * 100)) & 0x0FFF, 0) + packed
        pseudo = socket.inet_aton(source) + socket.inet_aton(destination) + struct.pack("!BBH", 0, PROTO_VRRP, len(body))
        body = body[:6] + struct.pack("!H", checksum(pseudo + body)) + body[8:]
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0xC0, 20 + len(body), 0, 0, ttl, PROTO_VRRP, 0,
                         socket.inet_aton(source), socket.inet_aton(destination))
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + body
