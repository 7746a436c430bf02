# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.link_check run for real on both ends of a link, judged by the link_report filter.

Two network namespaces of this test's own joined by a veth pair (MTU 9000, 10.250.<n>.1/.2)
stand for two GB10 hosts and their ConnectX link. The module runs as a process inside each
namespace (as Ansible runs it on a host), with a real raw-socket ping; then the link is
broken the four ways the lab scenario breaks it - MTU mismatch, interface down, address on
the wrong interface, peer unreachable (an nftables drop) - and each refusal must name the
host and the fix. Needs root and ``ip netns``; the namespaces are removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.filter.link_report import link_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULE = os.path.join(ROOT, "plugins", "modules", "link_check.py")
TAG = "%d" % (os.getpid() % 100000)
NS = {"spark-a": "ffl-%s-a" % TAG, "spark-b": "ffl-%s-b" % TAG}
IFACE = {"spark-a": "fa%s" % TAG, "spark-b": "fb%s" % TAG}
SUBNET = "10.250.%d" % (os.getpid() % 200 + 20)
ADDRESS = {"spark-a": SUBNET + ".1", "spark-b": SUBNET + ".2"}


def _can_run():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        return False
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _can_run(), reason="needs root, ip netns and nft")


def _ip(*args, host=None):
    argv = ["ip"] + (["-n", NS[host]] if host else []) + list(args)
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(scope="module")
def link():
    for ns in NS.values():
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        _ip("link", "add", IFACE["spark-a"], "type", "veth", "peer", "name", IFACE["spark-b"])
        for host in NS:
            _ip("link", "set", IFACE[host], "netns", NS[host])
            _ip("addr", "add", ADDRESS[host] + "/24", "dev", IFACE[host], host=host)
            _ip("link", "set", IFACE[host], "mtu", "9000", "up", host=host)
            _ip("link", "set", "lo", "up", host=host)
        # Another interface on spark-b (a veth pair of its own: the dummy driver may not be loaded).
        _ip("link", "add", "dum0", "type", "veth", "peer", "name", "dum1", host="spark-b")
        _ip("link", "set", "dum0", "up", host="spark-b")
        _ip("link", "set", "dum1", "up", host="spark-b")
        yield
    finally:
        for ns in NS.values():
            subprocess.run(["ip", "netns", "del", ns], check=False)


def _run(host, **extra):
    """The module's JSON output, run as a process in ``host``'s namespace."""
    peer = "spark-b" if host == "spark-a" else "spark-a"
    args = {"interface": IFACE[host], "address": ADDRESS[host], "peer_address": ADDRESS[peer], "ping_timeout": 0.3,
            "ports": [{"port": 29500, "purpose": "the split's rendezvous", "variable": "vllm_split_master_port"}]}
    args.update(extra)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [os.environ.get("ANSIBLE_COLLECTIONS_PATH", ""), os.path.join(ROOT, "build", "collections")])))
    done = subprocess.run(["ip", "netns", "exec", NS[host], sys.executable, MODULE],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), capture_output=True, text=True, env=env,
                          check=False, timeout=60)
    return json.loads(done.stdout)


def _report(**extra):
    return link_report({host: _run(host, **extra.get(host, {})) for host in NS}, mtu=extra.get("mtu"))


def _has(report, host, what, fix):
    return any(host in p["host"] and what in p["what"] and fix in p["fix"] for p in report["problems"])


def test_a_good_link(link):
    report = _report()
    assert report["ok"], report["message"]
    assert report["summary"][0].startswith("spark-a: %s up, MTU 9000, %s; peer %s 3/3 at 9000 bytes DF"
                                           % (IFACE["spark-a"], ADDRESS["spark-a"], ADDRESS["spark-b"]))


def test_mtu_mismatch(link):
    _ip("link", "set", IFACE["spark-b"], "mtu", "1500", host="spark-b")
    try:
        report = _report()
    finally:
        _ip("link", "set", IFACE["spark-b"], "mtu", "9000", host="spark-b")
    assert _has(report, "spark-a and spark-b", "different MTUs: spark-a %s 9000, spark-b %s 1500"
                % (IFACE["spark-a"], IFACE["spark-b"]), "mtu: 9000")
    # 9000-byte packets with don't-fragment do not get through to the 1500 end; 1500-byte ones do.
    assert _has(report, "spark-a", "does not answer over %s: 0 of 3 pings of 9000 bytes" % IFACE["spark-a"], "ping -M do")
    assert not _has(report, "spark-b", "does not answer", "")
    assert _has(_report(mtu=9000), "spark-a", "", "") is False  # restored: a good link again


def test_interface_down(link):
    _ip("link", "set", IFACE["spark-b"], "down", host="spark-b")
    try:
        report = _report()
    finally:
        _ip("link", "set", IFACE["spark-b"], "up", host="spark-b")
    assert _has(report, "spark-b", "%s is down (administratively)" % IFACE["spark-b"], "ip link set %s up" % IFACE["spark-b"])
    assert _has(report, "spark-a", "%s has no carrier" % IFACE["spark-a"], "check the cable")


def test_address_on_the_wrong_interface(link):
    _ip("addr", "del", ADDRESS["spark-b"] + "/24", "dev", IFACE["spark-b"], host="spark-b")
    _ip("addr", "add", ADDRESS["spark-b"] + "/24", "dev", "dum0", host="spark-b")
    try:
        report = _report()
    finally:
        _ip("addr", "del", ADDRESS["spark-b"] + "/24", "dev", "dum0", host="spark-b")
        _ip("addr", "add", ADDRESS["spark-b"] + "/24", "dev", IFACE["spark-b"], host="spark-b")
    assert _has(report, "spark-b", "vllm_link_address %s is on dum0, not on the link interface %s"
                % (ADDRESS["spark-b"], IFACE["spark-b"]), "set vllm_link_interface: dum0")
    assert _has(report, "spark-b", "leaves by dum0", "one subnet of their own")


def test_peer_unreachable(link):
    script = ("table inet ffl_break {\n chain input {\n  type filter hook input priority -50; policy accept;\n"
              '  iifname "%s" ip protocol icmp drop\n }\n}\n' % IFACE["spark-b"])
    subprocess.run(["ip", "netns", "exec", NS["spark-b"], "nft", "-f", "-"], input=script, text=True, check=True)
    try:
        report = _report()
    finally:
        subprocess.run(["ip", "netns", "exec", NS["spark-b"], "nft", "delete", "table", "inet", "ffl_break"], check=True)
    assert _has(report, "spark-a", "spark-b's link address %s does not answer" % ADDRESS["spark-b"], "firewall dropping ICMP")
    assert _has(report, "spark-b", "spark-a's link address %s does not answer" % ADDRESS["spark-a"], "")


def test_rendezvous_port_taken(link):
    holder = subprocess.Popen(["ip", "netns", "exec", NS["spark-a"], sys.executable, "-c",
                               "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', 29500)); s.listen(); time.sleep(30)"])
    try:
        for _attempt in range(50):
            ss = subprocess.run(["ip", "netns", "exec", NS["spark-a"], "ss", "-Hltn", "sport = :29500"],
                                capture_output=True, text=True, check=False)
            if ss.stdout.strip():
                break
            subprocess.run(["sleep", "0.1"], check=False)
        report = _report()
    finally:
        holder.kill()
        holder.wait()
    assert _has(report, "spark-a", "port 29500 is taken by python", "set vllm_split_master_port to a free port")


# ------------------------------------------------ the all-reduce over the same link

TORCH_PYTHON = os.environ.get("FF_TORCH_PYTHON", "")


def _collective(host, **extra):
    """factory_floor.llm.link_collective as a process in ``host``'s namespace (venv runtime: FF_TORCH_PYTHON's)."""
    venv = os.path.dirname(os.path.dirname(TORCH_PYTHON))
    args = {"runtime": "venv", "venv": venv, "rank": 0 if host == "spark-a" else 1, "master_addr": ADDRESS["spark-a"],
            "master_port": 29501, "backend": "gloo", "size_mib": 8, "iterations": 5, "timeout": 30,
            "env": {"GLOO_SOCKET_IFNAME": IFACE[host]}}
    args.update(extra)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [os.environ.get("ANSIBLE_COLLECTIONS_PATH", ""), os.path.join(ROOT, "build", "collections")])))
    return subprocess.Popen(["ip", "netns", "exec", NS[host], sys.executable,
                             os.path.join(ROOT, "plugins", "modules", "link_collective.py")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env), json.dumps(
        {"ANSIBLE_MODULE_ARGS": args})


def _both(extra_b=None):
    runs = {}
    for host in NS:
        process, args = _collective(host, **(extra_b or {} if host == "spark-b" else {}))
        process.stdin.write(args)
        process.stdin.close()
        runs[host] = process
    return {host: json.loads(process.stdout.read()) for host, process in runs.items()}


@pytest.mark.skipif(not os.path.exists(TORCH_PYTHON), reason="FF_TORCH_PYTHON names no Python with torch")
def test_gloo_all_reduce_over_the_link(link):
    results = _both()
    report = link_report(results, kind="collective", interface=IFACE["spark-a"], head="spark-a",
                         master=ADDRESS["spark-a"] + ":29501")
    assert report["ok"], report["message"]
    for host, result in results.items():
        assert result["ok"] and result["backend"] == "gloo" and result["busbw_gb_s"] > 0, (host, result)
    assert report["summary"][0].startswith("spark-a (rank 0): 8 MiB all-reduce x 5: ")
    assert report["summary"][0].endswith("gloo over TCP")


@pytest.mark.skipif(not os.path.exists(TORCH_PYTHON), reason="FF_TORCH_PYTHON names no Python with torch")
def test_a_rank_that_cannot_reach_the_rendezvous_is_named(link):
    process, args = _collective("spark-b", master_port=29599, timeout=5)
    process.stdin.write(args)
    process.stdin.close()
    result = json.loads(process.stdout.read())
    assert not result["ok"]
    report = link_report({"spark-b": result}, kind="collective", interface=IFACE["spark-b"], head="spark-a",
                         master=ADDRESS["spark-a"] + ":29599")
    assert _has(report, "spark-b", "the all-reduce over the link failed", "both ranks must run at once"), report
