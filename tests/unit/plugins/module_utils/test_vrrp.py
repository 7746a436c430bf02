# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""VRRP advertisements as a raw socket hands them over: ``_vrrp.parse_packet`` and
``routers``. The version 2 packet below was captured from Debian's keepalived 2.2.7
in a container (unicast, simple authentication with a test password)."""

from __future__ import annotations

import struct

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vrrp as vrrp

# keepalived 2.2.7 as captured on a raw socket: vrid 51, priority 249, 10.89.9.11 -> 10.89.9.10
# (unicast_peer), one address 10.89.9.100, auth_type PASS with the test password "s3cr3tXY".
KEEPALIVED_V2 = bytes.fromhex("45c0002800380000ff7093a70a59090b0a59090a2133f90101016e990a5909647333637233745859")


def test_keepalived_advert_parses():
    advert = vrrp.parse_packet(KEEPALIVED_V2, received=12.5)
    assert advert == {
        "version": 2, "type": 1, "virtual_router_id": 51, "priority": 249, "addresses": ["10.89.9.100"],
        "advert_int": 1.0, "auth_type": "simple", "checksum_ok": True, "source": "10.89.9.11",
        "destination": "10.89.9.10", "ttl": 255, "received": 12.5}


def test_the_password_is_not_returned():
    assert "s3cr3tXY" not in repr(vrrp.parse_packet(KEEPALIVED_V2))


def test_build_advert_matches_keepalived():
    built = vrrp.build_advert(51, 249, ["10.89.9.100"], "10.89.9.11", "10.89.9.10", auth_type=1)
    # Same header and VRRP fields; keepalived sends its password where build_advert puts zeros, and
    # its own IP id.
    assert vrrp.parse_packet(built) == vrrp.parse_packet(KEEPALIVED_V2)


def test_v3_advert_with_centiseconds_and_pseudo_header_checksum():
    packet = vrrp.build_advert(7, 100, ["192.0.2.10", "192.0.2.11"], "192.0.2.2", version=3, advert_int=0.5)
    advert = vrrp.parse_packet(packet)
    assert advert["version"] == 3
    assert advert["virtual_router_id"] == 7
    assert advert["addresses"] == ["192.0.2.10", "192.0.2.11"]
    assert advert["advert_int"] == 0.5
    assert advert["auth_type"] is None
    assert advert["checksum_ok"] is True
    assert advert["destination"] == vrrp.MULTICAST_GROUP


def test_v3_checksum_unchecked_without_addresses():
    packet = vrrp.build_advert(7, 100, ["192.0.2.10"], "192.0.2.2", version=3)
    header, payload = vrrp.parse_ipv4(packet)
    assert vrrp.parse_vrrp(payload)["checksum_ok"] is None
    assert vrrp.parse_vrrp(payload, header["source"], header["destination"])["checksum_ok"] is True


def test_corrupted_checksum_is_reported_not_raised():
    packet = bytearray(KEEPALIVED_V2)
    packet[22] ^= 0x01  # the priority byte
    advert = vrrp.parse_packet(bytes(packet))
    assert advert["priority"] == 248
    assert advert["checksum_ok"] is False


@pytest.mark.parametrize("packet, reason", [
    (b"\x45" + b"\0" * 10, "shorter than an IPv4 header"),
    (b"\x65" + b"\0" * 39, "IP version 6"),
    (b"\x41" + b"\0" * 39, "header length 4"),
    (KEEPALIVED_V2[:9] + b"\x06" + KEEPALIVED_V2[10:], "protocol 6, not VRRP"),
    (KEEPALIVED_V2[:20] + b"\x21\x33", "shorter than a VRRP header"),
    (KEEPALIVED_V2[:20] + b"\x11" + KEEPALIVED_V2[21:], "VRRP version 1"),
    (KEEPALIVED_V2[:23] + b"\x09" + KEEPALIVED_V2[24:], "cannot hold 9 addresses"),
])
def test_not_a_vrrp_advert(packet, reason):
    with pytest.raises(vrrp.ParseError, match=reason):
        vrrp.parse_packet(packet)


def test_ip_total_length_bounds_the_payload():
    """Trailing bytes after the IP packet (padding) are not read as VRRP."""
    advert = vrrp.parse_packet(KEEPALIVED_V2 + b"\0" * 12)
    assert advert["checksum_ok"] is True


def test_routers_one_entry_per_id_and_source_sorted():
    adverts = [vrrp.parse_packet(p) for p in (
        vrrp.build_advert(51, 250, ["10.0.0.100"], "10.0.0.10", "10.0.0.11"),
        vrrp.build_advert(51, 249, ["10.0.0.100"], "10.0.0.11", "10.0.0.10"),
        vrrp.build_advert(51, 0, ["10.0.0.100"], "10.0.0.10", "10.0.0.11"),
        vrrp.build_advert(7, 100, ["10.0.0.200"], "10.0.0.9"),
    )]
    adverts.append(dict(adverts[-1], type=2))  # not an advertisement: left out
    out = vrrp.routers(adverts)
    assert [(r["virtual_router_id"], r["source"], r["count"], r["priority"]) for r in out] == [
        (7, "10.0.0.9", 1, 100), (51, "10.0.0.10", 2, 0), (51, "10.0.0.11", 1, 249)]
    assert out[0]["destination"] == "224.0.0.18"
    assert all(r["checksum_ok"] for r in out)


def test_routers_sorts_sources_numerically():
    adverts = [vrrp.parse_packet(vrrp.build_advert(1, 100, ["10.0.0.1"], src)) for src in ("10.0.0.10", "10.0.0.9")]
    assert [r["source"] for r in vrrp.routers(adverts)] == ["10.0.0.9", "10.0.0.10"]


def test_checksum_of_rfc1071_example():
    # RFC 1071's example words sum to 0xddf2; the checksum is its complement.
    assert vrrp.checksum(bytes.fromhex("0001f203f4f5f6f7")) == (~0xddf2) & 0xFFFF


def test_ip_mreqn_layout():
    packed = vrrp.ip_mreqn("224.0.0.18", 3)
    assert packed[:4] == bytes([224, 0, 0, 18])
    assert packed[4:8] == b"\0\0\0\0"
    assert struct.unpack("@i", packed[8:])[0] == 3
