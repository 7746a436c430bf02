# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._peers import classify, own_address, parse_ss, report

# What `ss -Htn state established` printed on a lab replica (iproute2 6.1), plus
# an IPv6 and an IPv4-mapped line, and a connection on another port.
SS = """\
0      0          10.89.0.3:8000      10.89.0.4:40112
0      0          10.89.0.3:8000      10.89.0.4:40114
0      0          127.0.0.1:8000      127.0.0.1:51000
0      0          10.89.0.3:8000      10.89.0.3:52000
0      0          10.89.0.3:22        10.89.0.9:60000
0      0   [::ffff:10.89.0.3]:8000   [::ffff:10.89.0.7]:33000
0      0              [::1]:8000              [::1]:34000
"""


def test_parse_keeps_the_port_and_maps_ipv4_in_ipv6():
    connections = parse_ss(SS, 8000)
    assert [c["peer"] for c in connections] == [
        "10.89.0.4", "10.89.0.4", "127.0.0.1", "10.89.0.3", "10.89.0.7", "::1"]


def test_parse_with_state_column():
    assert parse_ss("ESTAB 0 0 10.0.0.1:8000 10.0.0.2:5000\n", 8000)[0]["peer"] == "10.0.0.2"


def test_classify_proxy_loopback_and_bypass():
    rows = classify(parse_ss(SS, 8000), ["10.89.0.4"])
    by = {r["address"]: r for r in rows}
    assert by["10.89.0.4"] == {"address": "10.89.0.4", "class": "allowed", "connections": 2}
    assert by["127.0.0.1"]["class"] == "loopback"
    assert by["::1"]["class"] == "loopback"
    # The host's own LAN address is not loopback: a local client that skips the proxy.
    assert by["10.89.0.3"]["class"] == "other"
    assert by["10.89.0.7"]["class"] == "other"
    assert [r["class"] for r in rows][:2] == ["other", "other"]


def test_classify_cidr():
    rows = classify(parse_ss(SS, 8000), ["10.89.0.0/24"])
    assert {r["class"] for r in rows} == {"allowed", "loopback"}


def test_classify_rejects_a_name():
    with pytest.raises(ValueError, match="gateway"):
        classify([], ["gateway"])


def test_nothing_connected():
    assert classify(parse_ss("", 8000), []) == []


@pytest.mark.parametrize("url, own", [
    ("http://127.0.0.1:8000", ["127.0.0.1"]),
    ("http://10.0.0.11:8000", ["10.0.0.11"]),
    ("http://[fd00::11]:8000", ["fd00::11"]),
    ("http://spark-a.lab:8000", []),
    ("", []),
    (None, []),
])
def test_the_engines_own_address_is_allowed_when_it_is_one(url, own):
    assert own_address(url) == own


def test_the_report_line():
    peers = [{"address": "10.9.9.9", "class": "other", "connections": 1},
             {"address": "127.0.0.1", "class": "loopback", "connections": 2}]
    assert report(peers, ["10.9.9.9"]) == ("['10.9.9.9 other 1', '127.0.0.1 loopback 2']; BYPASSING THE PROXY: "
                                           "10.9.9.9")
    assert report([], []) == "no connections"
