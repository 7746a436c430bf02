# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engines' firewall (roles/vllm/templates/firewall.nft.j2) rendered as the role renders it.

The API port admits the proxy; the split's rendezvous (--master-port), the watchdogs' /state
and the ports the ranks open for each other (the kernel's ephemeral range, on the link address)
admit only the other engine host of the split's group, by its link address. The rules are
checked with nft itself (``nft -c`` in a network namespace of its own) where it can run.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from ansible.errors import AnsibleUndefinedVariable

from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import render


def facts(address, interface="eth0"):
    return {interface: {"ipv4": {"address": address}}, "default_ipv4": {"address": address, "interface": interface}}


def inventory(host="spark-a", peer_vars=None, engines=("spark-a", "spark-b"), **extra):
    """The lab: spark-a and spark-b (the split's group gb10, link eth0) and the proxy on the gateway."""
    hostvars = {"spark-a": {"ansible_facts": facts("10.89.7.10")}, "spark-b": {"ansible_facts": facts("10.89.7.11")},
                "gateway": {"ansible_facts": facts("10.89.7.20")}}
    if peer_vars is not None:
        hostvars["spark-b"] = peer_vars
    values = {"inventory_hostname": host, "groups": {"gb10": list(engines), "proxy": ["gateway"]},
              "hostvars": hostvars, "ansible_facts": hostvars[host]["ansible_facts"], "vllm_link_interface": "eth0"}
    values.update(extra)
    return values


def rules(text):
    """The rule lines of the input chain and the sets' elements, whitespace folded."""
    return [re.sub(r"\s+", " ", line.strip()) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_split_ports_admit_only_the_other_engine_host():
    text = render("vllm", "firewall.nft.j2", **inventory())
    lines = rules(text)
    assert "elements = { 10.89.7.11 }" in lines                       # split_peers_v4: spark-b, by its link address
    assert "tcp dport { 29500, 8091 } iif \"lo\" accept" in lines
    assert "tcp dport { 29500, 8091 } ip saddr @split_peers_v4 accept" in lines
    assert ('tcp dport { 29500, 8091 } counter reject with tcp reset comment '
            '"split rendezvous and watchdog state: the other engine host only"') in lines
    # The ranks' own ports on this host's link address: only a connection's first packet is refused.
    assert "ip daddr 10.89.7.10 tcp dport 32768-60999 ip saddr @split_peers_v4 accept" in lines
    assert ('ip daddr 10.89.7.10 tcp dport 32768-60999 tcp flags & (syn | ack) == syn counter reject with tcp reset '
            'comment "split ranks: the other engine host only"') in lines
    # Order: each accept before its reject; the API's rules as before.
    index = {line: n for n, line in enumerate(lines)}
    assert index["tcp dport { 29500, 8091 } ip saddr @split_peers_v4 accept"] < min(
        n for line, n in index.items() if line.startswith("tcp dport { 29500, 8091 } counter reject"))
    assert "tcp dport 8000 ip saddr @api_clients_v4 accept" in lines
    assert "elements = { 10.89.7.20 }" in lines


def test_the_link_address_of_the_inventory_wins():
    """GB10: the ranks talk over ConnectX (10.10.10.x), the proxy over the LAN."""
    peer = {"vllm_link_address": "10.10.10.2", "ansible_facts": facts("192.0.2.12")}
    text = render("vllm", "firewall.nft.j2", **inventory(peer_vars=peer, vllm_link_address="10.10.10.1"))
    lines = rules(text)
    assert "elements = { 10.10.10.2 }" in lines
    assert "ip daddr 10.10.10.1 tcp dport 32768-60999 ip saddr @split_peers_v4 accept" in lines


def test_the_ports_as_the_site_sets_them():
    ports = {"site_split_master_port": 29600, "site_watchdog_status_port": 9091, "vllm_firewall_rank_ports": "40000-50000"}
    text = render("vllm", "firewall.nft.j2", **inventory(**ports))
    lines = rules(text)
    assert "tcp dport { 29600, 9091 } ip saddr @split_peers_v4 accept" in lines
    assert "ip daddr 10.89.7.10 tcp dport 40000-50000 ip saddr @split_peers_v4 accept" in lines


def test_a_peer_whose_address_is_unknown_fails_naming_it():
    """deploy.yml --limit spark-a without spark-b's facts: refusing beats shutting rank 1 out."""
    with pytest.raises(AnsibleUndefinedVariable) as error:
        render("vllm", "firewall.nft.j2", **inventory(peer_vars={}))
    assert "the address of spark-b is not known in this run" in str(error.value)
    assert "vllm_link_address" in str(error.value)


def test_a_single_engine_host_opens_nothing_of_the_split():
    text = render("vllm", "firewall.nft.j2", **inventory(engines=("spark-a",)))
    lines = rules(text)
    assert not any("split_peers_v4" in line for line in lines)
    assert "tcp dport { 29500, 8091 } iif \"lo\" accept" in lines
    assert not any("32768-60999" in line for line in lines)   # not a rank: its ephemeral ports are not the split's


def test_a_site_without_a_direct_link_leaves_the_ephemeral_ports_alone():
    """Replicas only, no vllm_link_interface: no split can run, so the LAN address's other ports stay as they are."""
    lines = rules(render("vllm", "firewall.nft.j2", **inventory(vllm_link_interface="")))
    assert not any("32768-60999" in line for line in lines)
    assert "tcp dport { 29500, 8091 } ip saddr @split_peers_v4 accept" in lines


def nft_check(text, tmp_path):
    if shutil.which("nft") is None or shutil.which("unshare") is None:
        pytest.skip("nft or unshare not found")
    path = tmp_path / "firewall.nft"
    path.write_text(text + "\n")
    # A network namespace of its own: nft -c loads nothing anywhere, there even less.
    done = subprocess.run(["unshare", "-rn", "nft", "-c", "-f", str(path)], capture_output=True, text=True,
                          timeout=30, check=False)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        pytest.skip("no network namespace here: %s" % done.stderr.strip())
    return done


@pytest.mark.parametrize("engines", [("spark-a", "spark-b"), ("spark-a",)])
def test_nft_accepts_the_rules(tmp_path, engines):
    done = nft_check(render("vllm", "firewall.nft.j2", **inventory(engines=engines)), tmp_path)
    assert done.returncode == 0, done.stderr
