# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_link_check.py: one row per refusal of the split's direct link."""

from __future__ import annotations

import errno
import json
import socket
import struct

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc

# What `ip -j addr show` printed on a DGX Spark-like host (trimmed to the fields read).
IP_ADDR = json.dumps([
    {"ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536, "operstate": "UNKNOWN",
     "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host"}]},
    {"ifname": "enP7s7", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 1500, "operstate": "UP",
     "addr_info": [{"family": "inet", "local": "192.0.2.11", "prefixlen": 24, "scope": "global"},
                   {"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}]},
    {"ifname": "enp1s0f1np1", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 9000, "operstate": "UP",
     "addr_info": [{"family": "inet", "local": "10.10.10.1", "prefixlen": 24, "scope": "global"}]},
    {"ifname": "enP2p1s0f1np1", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 9000, "operstate": "UP",
     "addr_info": []},
    {"ifname": "enp1s0f0np0", "flags": ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "mtu": 1500, "operstate": "DOWN",
     "addr_info": []},
])


def test_parse_ip_addr_reads_state_mtu_and_addresses():
    links = lc.parse_ip_addr(IP_ADDR)
    assert links["enp1s0f1np1"] == {"name": "enp1s0f1np1", "admin_up": True, "carrier": True, "operstate": "UP",
                                    "mtu": 9000, "addresses": ["10.10.10.1/24"]}
    # Link-local IPv6 is left out; an up port without a cable has no LOWER_UP.
    assert links["enP7s7"]["addresses"] == ["192.0.2.11/24"]
    assert links["enp1s0f0np0"]["admin_up"] and not links["enp1s0f0np0"]["carrier"]
    assert lc.holder_of(links, "10.10.10.1/24") == "enp1s0f1np1"
    assert lc.holder_of(links, "10.10.10.9") is None
    with pytest.raises(lc.LinkCheckError):
        lc.parse_ip_addr("not json")


def test_route_get_and_payload():
    assert lc.parse_route_get('[{"dst":"10.10.10.2","dev":"enp1s0f1np1","prefsrc":"10.10.10.1"}]') == {
        "dev": "enp1s0f1np1", "prefsrc": "10.10.10.1"}
    assert lc.parse_route_get("garbage") == {"dev": "", "prefsrc": ""}
    # One packet of exactly the MTU: ping -M do -s 8972 for 9000 (IPv4), 8952 for IPv6.
    assert lc.payload_for(9000, "10.10.10.2") == 8972
    assert lc.payload_for(9000, "fd00::2") == 8952


def test_echo_request_checksum_and_reply_matching():
    request = lc.echo_request(0x1234, 7, b"abcd")
    # A valid ICMP checksum sums to 0xffff over the whole message.
    words = struct.unpack("!%dH" % (len(request) // 2), request)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert total == 0xFFFF
    reply = struct.pack("!BBHHH", 0, 0, 0, 0x1234, 7) + b"abcd"
    ip_header = bytes([0x45]) + bytes(19)
    assert lc.is_echo_reply(ip_header + reply, 0x1234, 7)
    assert not lc.is_echo_reply(ip_header + reply, 0x1234, 8)           # another sequence
    assert not lc.is_echo_reply(ip_header + request, 0x1234, 7)          # our own request, looped back
    assert lc.is_echo_reply(struct.pack("!BBHHH", 129, 0, 0, 0x1234, 7), 0x1234, 7, ipv6=True)


class _FakeSocket:
    """A raw socket: sendto may fail with an errno; recvfrom answers from ``replies`` or times out."""

    def __init__(self, send_errno=None, replies=None):
        self.send_errno = send_errno
        self.replies = list(replies or [])
        self.options = []
        self.sent = []

    def setsockopt(self, level, name, value):
        self.options.append((level, name, value))

    def settimeout(self, value):
        pass

    def sendto(self, data, address):
        if self.send_errno:
            raise OSError(self.send_errno, "fake")
        self.sent.append(data)

    def recvfrom(self, size):
        if not self.replies:
            raise socket.timeout()
        return self.replies.pop(0)(self.sent[-1]), ("10.10.10.2", 0)

    def close(self):
        pass


def _echo(request):
    """The peer's answer to ``request`` (with an IPv4 header)."""
    _kind, _code, _sum, ident, seq = struct.unpack("!BBHHH", request[:8])
    return bytes([0x45]) + bytes(19) + struct.pack("!BBHHH", 0, 0, 0, ident, seq) + request[8:]


def test_icmp_echo_sets_dont_fragment_binds_the_interface_and_counts_replies():
    fake = _FakeSocket(replies=[_echo, _echo, _echo])
    result = lc.icmp_echo("10.10.10.2", 8972, count=3, interface="enp1s0f1np1", make_socket=lambda *a: fake)
    assert (result["sent"], result["received"], result["error"]) == (3, 3, "")
    assert (socket.IPPROTO_IP, lc.IP_MTU_DISCOVER, lc.IP_PMTUDISC_DO) in fake.options
    assert (socket.SOL_SOCKET, lc.SO_BINDTODEVICE, b"enp1s0f1np1\0") in fake.options
    assert len(fake.sent[0]) == 8 + 8972


def test_icmp_echo_without_reply_and_with_a_packet_too_large_to_leave():
    silent = lc.icmp_echo("10.10.10.2", 8972, count=2, timeout=0.01, make_socket=lambda *a: _FakeSocket())
    assert (silent["sent"], silent["received"], silent["rtt_ms"]) == (2, 0, None)
    too_big = lc.icmp_echo("10.10.10.2", 8972, make_socket=lambda *a: _FakeSocket(send_errno=errno.EMSGSIZE))
    assert too_big["error"] == "local_mtu" and too_big["sent"] == 0
    no_route = lc.icmp_echo("10.10.10.2", 100, make_socket=lambda *a: _FakeSocket(send_errno=errno.ENETUNREACH))
    assert no_route["error"] == "unreachable"


def test_ss_listeners():
    text = ('LISTEN 0 128 10.10.10.1:29500 0.0.0.0:* users:(("python3",pid=4242,fd=12))\n'
            'LISTEN 0 4096 [::]:29501 [::]:* users:(("nc",pid=7,fd=3))\n')
    assert lc.parse_ss_listeners(text) == [
        {"address": "10.10.10.1", "port": 29500, "process": "python3", "pid": 4242},
        {"address": "::", "port": 29501, "process": "nc", "pid": 7}]


def test_rdma_discovery_takes_every_device_whose_port_is_up():
    links = lc.parse_ip_addr(IP_ADDR)
    devices = lc.rdma_devices({"rocep1s0f0": ["enp1s0f0np0"], "rocep1s0f1": ["enp1s0f1np1"],
                               "roceP2p1s0f1": ["enP2p1s0f1np1"], "roceP2p1s0f0": ["enP2p1s0f0np0"]}, links)
    assert [(d["name"], d["up"]) for d in devices] == [
        ("roceP2p1s0f0", False), ("roceP2p1s0f1", True), ("rocep1s0f0", False), ("rocep1s0f1", True)]
    # Both twins of the cabled port, as eugr's autodiscover.sh sets NCCL_IB_HCA.
    assert lc.choose_hca(devices, []) == (["roceP2p1s0f1", "rocep1s0f1"], "discovered (RDMA devices whose port is up)")
    assert lc.choose_hca(devices, ["rocep1s0f1"]) == (["rocep1s0f1"], "vllm_split_nccl_ib_hca")
    assert lc.choose_hca(devices, [], "enp1s0f1np1") == (
        ["roceP2p1s0f1", "rocep1s0f1"], "discovered (the RDMA devices of enp1s0f1np1's port, up)")


def test_with_both_ports_up_only_the_link_ports_twins_are_named():
    # A second cable in the other QSFP port: its twins are up too, but they are not the
    # split's link; NCCL_IB_HCA names the twins of vllm_link_interface's port only.
    devices = [{"name": "roceP2p1s0f0", "netdevs": ["enP2p1s0f0np0"], "up": True},
               {"name": "roceP2p1s0f1", "netdevs": ["enP2p1s0f1np1"], "up": True},
               {"name": "rocep1s0f0", "netdevs": ["enp1s0f0np0"], "up": True},
               {"name": "rocep1s0f1", "netdevs": ["enp1s0f1np1"], "up": True}]
    assert lc.choose_hca(devices, [], "enp1s0f1np1")[0] == ["roceP2p1s0f1", "rocep1s0f1"]
    assert lc.choose_hca(devices, [], "enP2p1s0f0np0")[0] == ["roceP2p1s0f0", "rocep1s0f0"]
    # A link interface none of them belongs to (another naming): every device that is up.
    assert lc.choose_hca(devices, [], "eth1") == (
        ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"], "discovered (RDMA devices whose port is up)")


def test_rdma_device_nodes_are_listed_one_by_one():
    # /dev/infiniband: the nodes, and by-ibdev/ and by-path/ (symlink trees) that docker refuses as --device.
    tree = {"/dev/infiniband": ["by-ibdev", "by-path", "rdma_cm", "uverbs1", "uverbs0"]}
    chars = {"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/kfd"}

    def listdir(path):
        if path not in tree:
            raise FileNotFoundError(path)
        return tree[path]

    nodes = lc.device_nodes(["/dev/infiniband", "/dev/kfd", "/dev/absent"], listdir=listdir,
                            is_char_device=lambda path: path in chars)
    assert nodes == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1", "/dev/kfd"]


def test_ldconfig_finds_this_architectures_libnccl():
    text = ("\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"
            "\tlibnccl.so.2 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libnccl.so.2\n")
    assert lc.parse_ldconfig(text, "aarch64") == "/usr/lib/aarch64-linux-gnu/libnccl.so.2"
    assert lc.parse_ldconfig(text, "x86_64") == "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
    assert lc.parse_ldconfig("\tlibc.so.6 (libc6) => /lib/libc.so.6", "aarch64") == ""


# NCCL's own lines, as NCCL_DEBUG=INFO prints them (NVIDIA/nccl-tests#185, a DGX Spark pair's vLLM log).
IB_LINES = [
    "spark-1:2981:3113 [0] NCCL INFO Bootstrap : Using enp1s0f1np1:10.10.10.1<0>",
    "NCCL version 2.28.9+cuda13.0",
    "spark-1:2981:3111 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.10.10.1<0>",
    "spark-1:2981:3111 [0] NCCL INFO Using network IB",
    "spark-1:2981:3113 [0] NCCL INFO Channel 09/0 : 1[0] -> 0[0] [send] via NET/IBext_v10/1",
]
SOCKET_LINES = [
    "spark-1:2981:3111 [0] NCCL INFO NET/IB : No device found.",
    "spark-1:2981:3111 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:10.10.10.1<0>",
    "spark-1:2981:3111 [0] NCCL INFO Using network Socket",
    "spark-1:2981:3113 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
]


def test_nccl_transport_reads_what_nccl_chose():
    rdma = lc.nccl_transport(IB_LINES)
    assert (rdma["transport"], rdma["network"], rdma["devices"], rdma["version"]) == (
        "rdma", "IB", ["rocep1s0f1", "roceP2p1s0f1"], "2.28.9+cuda13.0")
    sockets = lc.nccl_transport(SOCKET_LINES)
    assert (sockets["transport"], sockets["no_rdma_device"]) == ("socket", True)
    # vLLM's CPU build: gloo only, no NCCL line at all.
    assert lc.nccl_transport(["INFO 12-06 [cpu_worker.py] using gloo"])["transport"] == "unknown"


# ----------------------------------------------------------------- the refusals

def _observed(**changes):
    """One host's link_check result on a good link; ``changes`` break it."""
    observed = {
        "interface": {"name": "eth1", "exists": True, "admin_up": True, "carrier": True, "operstate": "UP", "mtu": 9000,
                      "addresses": ["10.89.8.10/24"]},
        "interfaces": ["eth0", "eth1", "lo"], "address": "10.89.8.10", "peer_address": "10.89.8.11",
        "address_holder": "eth1", "route": {"dev": "eth1", "prefsrc": "10.89.8.10"},
        "peer": {"address": "10.89.8.11", "payload": 8972, "sent": 3, "received": 3, "rtt_ms": 0.1, "error": ""},
        "ports": [{"port": 29500, "free": True, "ours": False, "holders": [], "purpose": "the split's rendezvous",
                   "variable": "vllm_split_master_port"}],
        "rdma": {"mode": "auto", "devices": [], "hca": [], "hca_source": "discovered", "device_paths": ["/dev/infiniband"],
                 "device_nodes": []},
        "nccl_library": {"requested": "auto", "path": "", "source": "none"},
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(observed.get(key), dict):
            observed[key] = dict(observed[key], **value)
        else:
            observed[key] = value
    return observed


def _expect(**changes):
    expect = {"interface": "eth1", "address": "10.89.8.10", "peer_host": "spark-b", "peer_address": "10.89.8.11",
              "mtu": None, "rdma": "auto", "runtime": "container"}
    expect.update(changes)
    return expect


def test_a_good_link_has_no_problem():
    assert lc.host_problems("spark-a", _observed(), _expect()) == []


@pytest.mark.parametrize("observed, expect, what, fix", [
    pytest.param(_observed(interface={"exists": False}), _expect(), "the link interface eth1 does not exist",
                 "set vllm_link_interface in host_vars/spark-a.yml", id="interface missing"),
    pytest.param(_observed(interface={"admin_up": False, "carrier": False, "operstate": "DOWN"}), _expect(),
                 "eth1 is down (administratively)", "ip link set eth1 up", id="interface down"),
    pytest.param(_observed(interface={"carrier": False, "operstate": "DOWN"}), _expect(),
                 "eth1 has no carrier", "check the cable and which port it is in", id="no carrier"),
    pytest.param(_observed(address_holder="eth0"), _expect(),
                 "vllm_link_address 10.89.8.10 is on eth0, not on the link interface eth1",
                 "or set vllm_link_interface: eth0", id="address on the wrong interface"),
    pytest.param(_observed(address_holder=""), _expect(), "vllm_link_address 10.89.8.10 is on no interface",
                 "configure 10.89.8.10 on eth1", id="address on no interface"),
    pytest.param(_observed(), _expect(address=""), "vllm_link_address is empty", "set vllm_link_address",
                 id="no address"),
    pytest.param(_observed(route={"dev": "eth0"}), _expect(), "leaves by eth0, not by the link interface eth1",
                 "one subnet of their own", id="traffic to the peer over the LAN"),
    pytest.param(_observed(peer={"received": 0}), _expect(),
                 "spark-b's link address 10.89.8.11 does not answer over eth1: 0 of 3 pings of 9000 bytes",
                 "ping -M do -s 8972 -I eth1 10.89.8.11", id="peer unreachable"),
    pytest.param(_observed(peer={"sent": 0, "received": 0, "error": "local_mtu"}), _expect(),
                 "a 9000-byte packet to spark-b (10.89.8.11) cannot leave eth1", "same MTU", id="packet too large to leave"),
    pytest.param(_observed(interface={"mtu": 1500}), _expect(mtu=9000), "the MTU of eth1 is 1500, not vllm_link_mtu 9000",
                 "set MTU 9000 on eth1", id="MTU not the expected one"),
    pytest.param(_observed(ports=[{"port": 29500, "free": False, "ours": False,
                                   "holders": [{"process": "nc", "pid": 77}], "purpose": "the split's rendezvous",
                                   "variable": "vllm_split_master_port"}]), _expect(),
                 "port 29500 is taken by nc (pid 77)", "set vllm_split_master_port to a free port", id="rendezvous port taken"),
    pytest.param(_observed(rdma={"devices": [{"name": "rocep1s0f1", "netdevs": ["enp1s0f1np1"], "up": True}],
                                 "hca": ["mlx5_0"]}), _expect(),
                 "vllm_split_nccl_ib_hca names mlx5_0, which this host does not have (its RDMA devices: rocep1s0f1)",
                 "list this host's devices", id="an RDMA device the host lacks"),
    pytest.param(_observed(rdma={"mode": "required"}), _expect(rdma="required"),
                 "vllm_split_rdma is required, but no RDMA device has its port up", "vllm_split_rdma: auto",
                 id="RDMA required, none up"),
    pytest.param(_observed(rdma={"mode": "required", "hca": ["rocep1s0f1"],
                                 "devices": [{"name": "rocep1s0f1", "netdevs": ["enp1s0f1np1"], "up": True}]}),
                 _expect(rdma="required"), "/dev/infiniband holds no device node", "ib_uverbs",
                 id="RDMA required, no device files"),
    pytest.param(_observed(nccl_library={"requested": "/opt/nccl/libnccl.so.2", "path": ""}), _expect(),
                 "vllm_split_nccl_library /opt/nccl/libnccl.so.2 does not exist", "ldconfig -p", id="NCCL library missing"),
])
def test_each_refusal_names_the_host_what_and_the_fix(observed, expect, what, fix):
    problems = lc.host_problems("spark-a", observed, expect)
    assert problems, "expected a refusal"
    assert any(p["host"] == "spark-a" and what in p["what"] and fix in p["fix"] for p in problems), problems


def test_the_port_held_by_the_running_split_itself_is_fine():
    held = _observed(ports=[{"port": 29500, "free": False, "ours": True, "holders": [{"process": "docker", "pid": 1}]}])
    assert lc.host_problems("spark-a", held, _expect()) == []


def _pair(b_changes, a_changes=None):
    results = {"spark-a": _observed(**(a_changes or {})), "spark-b": _observed(**b_changes)}
    results["spark-b"].update(address="10.89.8.11", peer_address="10.89.8.10", address_holder="eth1")
    return results


def test_different_mtus_at_the_two_ends_are_one_problem_naming_both():
    report = lc.assess(_pair({"interface": dict(_observed()["interface"], mtu=1500)}))
    mtu = [p for p in report["problems"] if "different MTUs" in p["what"]]
    assert mtu and mtu[0]["host"] == "spark-a and spark-b"
    assert "spark-a eth1 9000, spark-b eth1 1500" in mtu[0]["what"] and "mtu: 9000" in mtu[0]["fix"]
    assert not report["ok"]


def test_one_address_on_both_hosts():
    results = _pair({})
    results["spark-b"]["address"] = "10.89.8.10"
    report = lc.assess(results)
    assert any(p["what"] == "both have vllm_link_address 10.89.8.10" for p in report["problems"])


def test_assess_a_good_pair_and_the_message():
    report = lc.assess(_pair({}))
    assert report["ok"] and report["problems"] == []
    assert report["summary"][0].startswith("spark-a: eth1 up, MTU 9000, 10.89.8.10; peer 10.89.8.11 3/3 at 9000 bytes DF")
    text = lc.message([{"host": "spark-b", "what": "eth1 is down", "fix": "ip link set eth1 up"}], "Refused.")
    assert text == "Refused.\n- spark-b: eth1 is down. Fix: ip link set eth1 up."


def _group(count, changes=None):
    """Each rank of a group of ``count`` on a good link: rank 0 (spark-a, 10.89.8.10) pings rank 1, every other rank
    pings the head (the vllm_split role's _vllm_split_peer)."""
    names = ["spark-a", "spark-b", "spark-c", "spark-d"][:count]
    results = {}
    for number, host in enumerate(names):
        address = "10.89.8.%d" % (10 + number)
        peer = "10.89.8.11" if number == 0 else "10.89.8.10"
        results[host] = _observed(**dict({"address": address, "peer_address": peer, "address_holder": "eth1",
                                          "peer": {"address": peer}}, **(changes or {}).get(host, {})))
    return results


@pytest.mark.parametrize("count", [3, 4])
def test_a_good_link_of_three_or_four_ranks(count):
    report = lc.assess(_group(count))
    assert report["ok"] and report["problems"] == [], report["problems"]
    assert [line.split(";")[1] for line in report["summary"]] == \
        [" peer 10.89.8.11 3/3 at 9000 bytes DF (0.10 ms)"] + [" peer 10.89.8.10 3/3 at 9000 bytes DF (0.10 ms)"] * (count - 1)


def test_in_a_group_each_rank_names_the_host_it_pinged():
    expect = lc.expectations(_group(4))
    assert {host: e["peer_host"] for host, e in expect.items()} == {
        "spark-a": "spark-b", "spark-b": "spark-a", "spark-c": "spark-a", "spark-d": "spark-a"}
    report = lc.assess(_group(3, {"spark-c": {"peer": {"received": 0}}}))
    assert [(p["host"], p["what"][:60]) for p in report["problems"]] == [
        ("spark-c", "spark-a's link address 10.89.8.10 does not answer over eth1:")]


def test_in_a_group_different_mtus_and_a_shared_address_name_every_host():
    report = lc.assess(_group(3, {"spark-c": {"interface": dict(_observed()["interface"], mtu=1500)}}))
    (mtu,) = [p for p in report["problems"] if "different MTUs" in p["what"]]
    assert mtu["host"] == "spark-a and spark-b and spark-c"
    assert mtu["what"].startswith("the 3 hosts' ends of the link have different MTUs: spark-a eth1 9000")
    assert "set the same MTU on all" in mtu["fix"]
    results = _group(3, {"spark-b": {"address": "10.89.8.10"}, "spark-c": {"address": "10.89.8.10"}})
    assert any(p["what"] == "all have vllm_link_address 10.89.8.10" and p["host"] == "spark-a and spark-b and spark-c"
               for p in lc.assess(results)["problems"])


# --------------------------------------------------------- the collective

GOOD = {"ok": True, "backend": "gloo", "rank": 0, "size_mib": 64, "iterations": 20, "seconds_per_iteration": 0.05,
        "busbw_gb_s": 1.34, "transport": {"transport": "unknown"}}


@pytest.mark.parametrize("result, expect, what, fix", [
    pytest.param({"ok": False, "error": "RuntimeError: Timed out after 180 seconds waiting for clients"}, {},
                 "the all-reduce over the link failed: RuntimeError: Timed out", "both ranks must run at once",
                 id="rendezvous not reached"),
    pytest.param({"ok": False, "error": "exec /usr/bin/python3: exec format error"}, {}, "exec format error",
                 "built for this host's architecture", id="image of another architecture"),
    pytest.param({"ok": False, "error": "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp, unhandled system error"}, {},
                 "NCCL error", "CUDA major version", id="NCCL failed"),
    pytest.param({"ok": False, "error": "Unable to find image 'x:1' locally"}, {}, "Unable to find image",
                 "load the vLLM image on this host first", id="image missing"),
    pytest.param(dict(GOOD, backend="nccl", transport={"transport": "socket", "warnings": []}), {"rdma": "required"},
                 "NCCL chose sockets (TCP over eth1), not RDMA, although vllm_split_rdma is required",
                 "vllm_split_nccl_ib_hca", id="sockets while RDMA is required"),
    pytest.param(GOOD, {"min_busbw_gb_s": 10}, "reached 1.34 GB/s bus bandwidth, below vllm_split_link_min_bandwidth 10.00",
                 "ethtool eth1", id="too slow"),
])
def test_each_collective_refusal(result, expect, what, fix):
    settings = {"rdma": "auto", "interface": "eth1", "head": "spark-a", "master": "10.89.8.10:29501", "min_busbw_gb_s": 0}
    settings.update(expect)
    problems = lc.collective_problems({"spark-b": result}, settings)
    assert any(p["host"] == "spark-b" and what in p["what"] and fix in p["fix"] for p in problems), problems


def test_a_collective_of_four_ranks():
    names = ["spark-a", "spark-b", "spark-c", "spark-d"]
    ranks = {host: dict(GOOD, rank=rank, world_size=4) for rank, host in enumerate(names)}
    assert lc.collective_problems(ranks, {"rdma": "auto"}) == []
    ranks["spark-d"] = {"ok": False, "error": "RuntimeError: Timed out after 180 seconds waiting for clients"}
    expect = {"rdma": "auto", "master": "10.89.8.10:29501", "head": "spark-a", "interface": "eth1"}
    (problem,) = lc.collective_problems(ranks, expect)
    assert problem["host"] == "spark-d" and problem["fix"].startswith("all 4 ranks must run at once")
    assert "reach 10.89.8.10:29501: check the firewall on spark-a" in problem["fix"]


def test_a_good_collective_and_its_summary():
    assert lc.collective_problems({"spark-a": GOOD, "spark-b": dict(GOOD, rank=1)}, {"rdma": "auto"}) == []
    assert lc.collective_summary(GOOD) == ("64 MiB all-reduce x 20: 50.000 ms each, 1.34 GB/s bus bandwidth (10.7 Gbit/s), "
                                           "gloo over TCP")
    nccl = dict(GOOD, backend="nccl", transport={"transport": "rdma", "version": "2.28.9", "devices": ["rocep1s0f1"]})
    assert lc.collective_summary(nccl).endswith("NCCL 2.28.9 over RDMA (rocep1s0f1)")


@pytest.mark.parametrize("transport, mode, level", [
    (lc.nccl_transport(IB_LINES), "required", "ok"),
    (lc.nccl_transport(SOCKET_LINES), "auto", "warn"),
    (lc.nccl_transport(SOCKET_LINES), "required", "refuse"),
    (lc.nccl_transport(SOCKET_LINES), "disabled", "ok"),
    (lc.nccl_transport([]), "required", "refuse"),
    (lc.nccl_transport([]), "auto", "info"),
    (dict(lc.nccl_transport([]), active=False), "required", "info"),   # the split does not run: nothing to read
])
def test_the_engine_transport_after_a_start(transport, mode, level):
    assert lc.engine_transport_verdict(transport, mode)[0] == level


def test_the_rank_runs_in_the_image_as_the_split_does():
    argv = lc.collective_argv("container", "/tmp/x/collective_probe.py", 1, "10.10.10.1", 29501, "nccl", 64, 20, 180,
                              engine="/usr/bin/docker", image="vllm-gb10:0.32.0",
                              run_args=["--gpus=all", "--ipc=host", "--device=/dev/infiniband"],
                              env={"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"})
    assert argv[:7] == ["/usr/bin/docker", "run", "--rm", "--name", "factory-floor-link-check", "--network=host",
                        "--pull=never"]
    assert "--device=/dev/infiniband" in argv and "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1" in argv
    assert argv[argv.index("--entrypoint") + 1:argv.index("--entrypoint") + 4] == [
        "python3", "vllm-gb10:0.32.0", "/factory-floor-link/collective_probe.py"]
    assert argv[-16:-14] == ["--rank", "1"]
    venv = lc.collective_argv("venv", "/tmp/x/p.py", 0, "10.10.10.1", 29501, "gloo", 64, 20, 180, venv="/opt/vllm")
    assert venv[:2] == ["/opt/vllm/bin/python", "/tmp/x/p.py"]


def test_probe_output_and_its_nccl_lines():
    result, transport = lc.parse_probe_output("noise\nFACTORY_FLOOR_COLLECTIVE=" + json.dumps(GOOD) + "\n",
                                              "\n".join(IB_LINES))
    assert result == GOOD and transport["transport"] == "rdma"
    assert lc.parse_probe_output("nothing", "")[0] is None
