# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``--limit`` against what each playbook needs from the hosts it leaves out (issue 33, item 8).

One row per playbook and limit. The inventories are the lab's (spark-a, spark-b, a
gateway running the proxy) and the example's (spark-1, spark-2, each an engine and a
proxy, sharing a floating address).
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._limit import (
    PLAYBOOKS,
    LimitError,
    check_limit,
    format_errors,
    gather_errors,
    keepalived_runs,
    known_addresses,
    limit_patterns,
)

LAB = {"engines": ["spark-a", "spark-b"], "proxies": ["gateway"], "inventory": ["spark-a", "spark-b", "gateway"]}
EXAMPLE = {"engines": ["spark-1", "spark-2"], "proxies": ["spark-1", "spark-2"], "keepalived": True,
           "inventory": ["spark-1", "spark-2"]}
ALL_LAB = ["spark-a", "spark-b", "gateway"]


def run(playbook, hosts, site=None, limit=None, **kwargs):
    site = dict(LAB if site is None else site)
    site.update(kwargs)
    return check_limit(playbook, hosts, limit=",".join(hosts) if limit is None else limit, **site)


# (playbook, hosts the limit lets in, keyword arguments, the checks refused, the hosts to gather)
ROWS = [
    # deploy.yml --limit spark-a: the firewall needs the gateway's address - read it, do not refuse.
    pytest.param("deploy", ["spark-a"], {}, [], ["gateway"], id="deploy-one-engine-gathers-the-proxy-address"),
    pytest.param("deploy", ["spark-a"], {"addresses": ["gateway"]}, [], [], id="deploy-one-engine-address-known"),
    pytest.param("deploy", ["spark-a"], {"firewall": False}, [], [], id="deploy-one-engine-no-firewall"),
    pytest.param("deploy", ["spark-a", "gateway"], {"addresses": ["spark-a", "gateway"]}, [], [],
                 id="deploy-engine-and-proxy"),
    pytest.param("deploy", ["gateway"], {}, [], [], id="deploy-proxy-only-needs-no-addresses"),
    pytest.param("deploy", ALL_LAB, {"addresses": ALL_LAB}, [], [], id="deploy-no-limit"),
    # Before the run's own facts are gathered: the hosts of the run get theirs from their play.
    pytest.param("deploy", ALL_LAB, {"limit": ""}, [], [], id="deploy-no-limit-before-facts"),
    pytest.param("deploy", ALL_LAB, {"limit": "", "gathered": True, "addresses": ["spark-a", "spark-b"]},
                 ["proxy_address"], [], id="deploy-no-limit-proxy-without-facts"),
    pytest.param("deploy", ["spark-a"], {"topology": "split"}, ["split_pair"], ["gateway"], id="deploy-split-one-rank"),
    pytest.param("deploy", ["spark-b", "gateway"], {"topology": "split", "addresses": ALL_LAB}, ["split_pair"], [],
                 id="deploy-split-rank1-and-proxy"),
    pytest.param("deploy", ["spark-a", "spark-b"], {"topology": "split"}, [], ["gateway"], id="deploy-split-pair"),
    pytest.param("deploy", ["spark-1"], {"site": EXAMPLE, "addresses": ["spark-1"]}, ["proxy_peers"], ["spark-2"],
                 id="deploy-example-one-of-two-proxies"),
    pytest.param("deploy", ["spark-1", "spark-2"], {"site": EXAMPLE, "addresses": ["spark-1", "spark-2"]}, [], [],
                 id="deploy-example-both"),
    pytest.param("deploy", ["spark-1"], {"site": dict(EXAMPLE, keepalived=False), "addresses": ["spark-1"]}, [],
                 ["spark-2"], id="deploy-example-no-keepalived"),
    # The switches and the status view act on every engine and proxy host.
    pytest.param("switch", ["spark-a"], {}, ["whole_site"], [], id="switch-one-engine"),
    pytest.param("switch", ["spark-a", "spark-b"], {}, ["whole_site"], [], id="switch-engines-without-proxy"),
    pytest.param("switch", ALL_LAB, {}, [], [], id="switch-whole-site"),
    pytest.param("move_groups", ["spark-b", "gateway"], {}, ["whole_site"], [], id="move-groups-one-engine"),
    pytest.param("move_groups", ALL_LAB, {"limit": ""}, [], [], id="move-groups-no-limit"),
    pytest.param("switch_model", ["spark-b", "gateway"], {}, ["whole_site"], [], id="switch-model-one-replica"),
    pytest.param("switch_model", ALL_LAB, {"limit": ""}, [], [], id="switch-model-no-limit"),
    pytest.param("status", ["spark-a"], {}, ["whole_site", "controller"], [], id="status-one-engine"),
    pytest.param("status", ALL_LAB, {}, ["controller"], [], id="status-all-hosts-without-localhost"),
    pytest.param("status", ALL_LAB, {"limit": "all:localhost"}, [], [], id="status-all-and-localhost"),
    pytest.param("status", ALL_LAB, {"limit": ""}, [], [], id="status-no-limit"),
    # The peers report classes connections by the proxies' addresses.
    pytest.param("peers", ["spark-a"], {}, [], ["gateway"], id="peers-one-engine-gathers"),
    pytest.param("peers", ["spark-a"], {"firewall": False}, [], ["gateway"], id="peers-without-firewall-still-gathers"),
    pytest.param("peers", ["gateway"], {}, [], [], id="peers-no-engine"),
    # One-host playbooks: the host they run on must be in the run.
    pytest.param("metrics", ["spark-a"], {"reader": "gateway"}, ["reader"], [], id="metrics-reader-left-out"),
    pytest.param("metrics", ["gateway"], {"reader": "gateway"}, [], [], id="metrics-reader-in"),
    pytest.param("metrics", ["spark-a"], {"reader": "localhost"}, [], [], id="metrics-from-the-controller"),
    pytest.param("prometheus_config", ["spark-b"], {"reader": "gateway"}, ["reader"], [], id="prometheus-config-left-out"),
    pytest.param("chat", ["spark-a"], {"reader": "gateway"}, ["reader"], [], id="chat-left-out"),
    pytest.param("tune", ["spark-b"], {"reader": "spark-a"}, ["reader"], [], id="tune-host-left-out"),
    pytest.param("tune", ["spark-a"], {"reader": "spark-a"}, [], [], id="tune-host-in"),
    # Each host alone.
    pytest.param("memory_guard", ["spark-a"], {}, [], [], id="memory-guard-one-host"),
    pytest.param("tool_gate_spread", ["spark-b"], {}, [], [], id="tool-gate-spread-one-host"),
]


@pytest.mark.parametrize("playbook, hosts, kwargs, refused, gather", ROWS)
def test_each_playbook_and_limit(playbook, hosts, kwargs, refused, gather):
    result = run(playbook, hosts, **kwargs)
    assert [e["check"] for e in result["errors"]] == refused
    assert result["gather"] == gather


def test_every_playbook_has_a_row():
    assert {row.values[0] for row in ROWS} == set(PLAYBOOKS)


def test_the_proxy_address_is_refused_when_it_cannot_be_read():
    """deploy.yml --limit spark-a with the gateway down: the firewall would shut it out, so nothing changes."""
    result = run("deploy", ["spark-a"], gathered=True,
                 gather_errors={"gateway": "Failed to connect to the host via ssh: Connection refused"})
    assert result["gather"] == []
    [error] = result["errors"]
    assert error["check"] == "proxy_address" and error["hosts"] == ["gateway"]
    assert error["message"] == (
        "factory_floor.llm.deploy with --limit spark-a: the engines' firewall admits the proxy hosts by address (their default IPv4 "
        "address, from their facts) and a firewall written without one shuts that proxy out of spark-a; the address "
        "of gateway could not be read (gateway: Failed to connect to the host via ssh: Connection refused). Nothing "
        "has changed. Bring gateway back, or, if it is gone, take it out of group proxy.")
    # Read, it passes.
    assert run("deploy", ["spark-a"], gathered=True, addresses=["spark-a", "gateway"])["errors"] == []


@pytest.mark.parametrize("playbook, hosts, kwargs, expected", [
    ("deploy", ["spark-a"], {"topology": "split", "limit": "spark-a"},
     "factory_floor.llm.deploy with --limit spark-a: the split deploys as a pair - both ranks restart together with one "
     "gpu_memory_utilization (the tighter host's) and rank 1 is given rank 0's address on the link - but spark-b is "
     "left out. Use --limit spark-a,spark-b, or no --limit. Nothing has changed."),
    ("deploy", ["spark-a", "spark-b"], {"topology": "split", "limit": "spark-a,spark-b", "addresses": ["gateway"],
                                        "engines": ["spark-a", "spark-b", "spark-c"],
                                        "inventory": ["spark-a", "spark-b", "spark-c", "gateway"]},
     "factory_floor.llm.deploy with --limit spark-a,spark-b: the split deploys as one group - its 3 ranks restart "
     "together with one gpu_memory_utilization (the tightest host's) and every other rank is given rank 0's address on "
     "the link - but spark-c is left out. Use --limit spark-a,spark-b,spark-c, or no --limit. Nothing has changed."),
    ("deploy", ["spark-1"], {"site": EXAMPLE, "limit": "spark-1", "addresses": ["spark-1", "spark-2"]},
     "factory_floor.llm.deploy with --limit spark-1: the proxy hosts share a floating address, and each one's "
     "keepalived is written with the others as its VRRP peers, planned from the proxy hosts in the run; spark-2 is left "
     "out, so spark-1 would be written without spark-2 as a peer and both could hold the address. Use --limit "
     "spark-1,spark-2, or no --limit (factory_floor.llm.deploy restarts changed replicas one at a time by itself, while "
     "another serves). Nothing has changed."),
    # Run from a checkout (issue 35): the playbooks by their files.
    ("switch", ["spark-a"], {"limit": "spark-a", "playbook_dir": "/srv/factory-floor/playbooks"},
     "playbooks/switch-to-replicas.yml / playbooks/switch-to-split.yml with --limit spark-a: a switch stops, starts, locks and records "
     "every engine host at once, puts them in the rotation of every proxy host, and runs its probe client and report "
     "on the first proxy host; a switch of some hosts would leave the others on the other topology, but spark-b, "
     "gateway are left out. Run it without --limit (or --limit 'gb10:proxy'). Nothing has changed."),
    ("metrics", ["spark-a"], {"reader": "gateway", "limit": "spark-a"},
     "factory_floor.llm.metrics with --limit spark-a: it runs on gateway (metrics_from, default the first proxy host), "
     "which the limit leaves out: it would do nothing and exit 0. Use --limit gateway, -e metrics_from=<a host in "
     "the limit>, or no --limit."),
])
def test_the_message_names_the_limit_to_use(playbook, hosts, kwargs, expected):
    result = run(playbook, hosts, **kwargs)
    assert format_errors(result["errors"]) == expected


def test_a_group_pattern_limit_is_read_as_the_hosts_it_lets_in():
    # --limit 'spark-a:proxy' lets in spark-a and the gateway: the firewall has its address.
    result = run("deploy", ["spark-a", "gateway"], limit="spark-a:proxy", addresses=["spark-a", "gateway"])
    assert result == {"errors": [], "gather": [], "outside": ["spark-b"]}


@pytest.mark.parametrize("limit, patterns", [
    ("spark-a", ["spark-a"]),
    ("spark-a:proxy", ["spark-a", "proxy"]),
    ("gb10:&proxy:!spark-b,localhost", ["gb10", "proxy", "localhost"]),
    ("", []),
])
def test_limit_patterns(limit, patterns):
    assert limit_patterns(limit) == patterns


def test_status_suggests_a_limit_with_the_controller():
    [error, _controller] = run("status", ["spark-a"], limit="spark-a")["errors"]
    assert "Run it without --limit (or --limit 'gb10:proxy:localhost')." in error["message"]
    assert run("status", ALL_LAB, limit="gb10:proxy:localhost")["errors"] == []


def test_several_errors_are_numbered():
    result = run("status", ["spark-a"], limit="spark-a")
    text = format_errors(result["errors"])
    assert text.startswith("(1) factory_floor.llm.status with --limit spark-a: the view is of the whole site")
    assert "(2) factory_floor.llm.status with --limit spark-a: the view is put together in a play on localhost" in text


def test_unknown_playbook():
    with pytest.raises(LimitError, match="playbook must be one of"):
        check_limit("deploy-everything", [], [], [])


# ------------------------------------------------------------------ what the check reads from the other hosts

def test_keepalived_runs_with_two_proxies_unless_the_first_says_no():
    assert keepalived_runs(["gw-1", "gw-2"], True) is True
    assert keepalived_runs(["gw-1", "gw-2"], False) is False
    assert keepalived_runs(["gw-1"], True) is False
    assert keepalived_runs(None, True) is False


def test_known_addresses_are_the_hosts_whose_facts_hold_one():
    hostvars = {"a": {"ansible_facts": {"default_ipv4": {"address": "192.0.2.1"}}},
                "b": {"ansible_facts": {"default_ipv4": {}}}, "c": {"ansible_facts": {}}, "d": {}}
    assert known_addresses(["a", "b", "c", "d", "e"], hostvars) == ["a"]


def test_gather_errors_name_each_host_the_gather_could_not_read():
    long = "word " * 80
    hostvars = {
        # The gather ran from spark-a (a play's first host); the other hosts' results are skipped ones.
        "spark-a": {"__gathered": {"results": [
            {"item": "gw-1", "unreachable": True, "msg": "Failed to connect to the host via ssh"},
            {"item": "gw-2", "failed": True, "msg": long},
            {"item": "gw-3", "ansible_facts": {}},
            {"skipped": True}]}},
        "spark-b": {"__gathered": {"skipped": True}},
        "gw-1": {}}
    errors = gather_errors(["spark-a", "spark-b", "gw-1"], hostvars, "__gathered")
    assert errors["gw-1"] == "Failed to connect to the host via ssh"
    assert len(errors["gw-2"]) <= 300 and errors["gw-2"].endswith("word...")  # as Jinja's truncate(300)
    assert sorted(errors) == ["gw-1", "gw-2"]
