# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.vrrp_info with a fake raw socket (no packet leaves the test)."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vrrp as vrrp
from ansible_collections.factory_floor.llm.plugins.modules import vrrp_info

PACKETS = [
    vrrp.build_advert(51, 250, ["10.89.7.100"], "10.89.7.10", "10.89.7.11", auth_type=1),
    b"\x45\x00garbage",
    vrrp.build_advert(52, 100, ["10.89.7.101"], "10.89.7.20"),
    vrrp.build_advert(51, 250, ["10.89.7.100"], "10.89.7.10", "10.89.7.11", auth_type=1),
]


class FakeSocket:
    """Hands out PACKETS, then times out; records what was set on it."""

    made = []

    def __init__(self, family, kind, proto):
        self.args = (family, kind, proto)
        self.options = []
        self.packets = list(PACKETS)
        self.closed = False
        FakeSocket.made.append(self)

    def setsockopt(self, level, name, value):
        self.options.append((level, name, value))

    def settimeout(self, value):
        pass

    def recv(self, size):
        if not self.packets:
            raise socket.timeout()
        return self.packets.pop(0)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_socket(monkeypatch):
    FakeSocket.made = []
    monkeypatch.setattr(vrrp_info.socket, "socket", FakeSocket)
    monkeypatch.setattr(vrrp_info.socket, "if_nametoindex", lambda name: 2)
    monkeypatch.setattr(vrrp_info, "list_interfaces", lambda: ["eth0", "lo"])
    return FakeSocket


def test_listens_and_names_the_routers(fake_socket, run_module):
    code, result = run_module(vrrp_info, {"interface": "eth0", "seconds": 0.3, "_ansible_check_mode": True})
    assert code == 0, result
    assert result["changed"] is False and result["interface_exists"] is True
    assert len(result["adverts"]) == 3 and result["ignored"] == 1
    assert [(r["virtual_router_id"], r["source"], r["count"]) for r in result["routers"]] == [
        (51, "10.89.7.10", 2), (52, "10.89.7.20", 1)]
    made = fake_socket.made[0]
    assert made.args == (socket.AF_INET, socket.SOCK_RAW, 112)
    assert (socket.SOL_SOCKET, vrrp_info.SO_BINDTODEVICE, b"eth0") in made.options
    assert (socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, vrrp.ip_mreqn("224.0.0.18", 2)) in made.options
    assert made.closed


@pytest.mark.parametrize("args", [{"interface": "eth9"}, {"interface": "eth0", "seconds": 0}])
def test_nothing_to_listen_to(fake_socket, run_module, args):
    code, result = run_module(vrrp_info, args)
    assert code == 0, result
    assert result["adverts"] == [] and result["routers"] == []
    assert result["interface_exists"] is (args["interface"] == "eth0")
    assert fake_socket.made == []


def test_without_root(monkeypatch, run_module):
    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(vrrp_info.socket, "socket", refuse)
    monkeypatch.setattr(vrrp_info, "list_interfaces", lambda: ["eth0"])
    code, result = run_module(vrrp_info, {"interface": "eth0", "seconds": 1})
    assert code == 1
    assert result["msg"].startswith("Listening for VRRP on eth0 needs root (a raw socket, CAP_NET_RAW)")


def test_seconds_bounded(fake_socket, run_module):
    code, result = run_module(vrrp_info, {"interface": "eth0", "seconds": 600})
    assert code == 1
    assert result["msg"] == "seconds is 600.0: listen 0-60 seconds"


def test_the_listening_time_is_measured_on_the_monotonic_clock(fake_socket):
    """The wall clock steps back an hour at every reading (NTP, an operator): the listen still ends
    after its 0.3 s of monotonic time, and each advertisement is stamped with the wall clock."""
    mono, wall = [100.0], [1_796_000_000.0]

    def monotonic():
        mono[0] += 0.05
        return mono[0]

    def stepping_wall():
        wall[0] -= 3600.0
        return wall[0]

    adverts, ignored = vrrp_info.listen("eth0", 0.3, clock=monotonic, wall=stepping_wall)
    assert len(adverts) == 3 and ignored == 1
    assert mono[0] - 100.0 <= 0.3 + 0.1
    assert all(a["received"] in {1_796_000_000.0 - 3600.0 * n for n in range(1, 5)} for a in adverts)
