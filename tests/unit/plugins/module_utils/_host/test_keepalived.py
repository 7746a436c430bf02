# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The floating address's preflight decision (``_keepalived.check``), every refusal and
what it names; reading ``ip -j addr show`` and the notify script's state; the holder."""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import keepalived as ka

# `ip -j addr show` on a lab-like host holding the floating address (iproute2 6.1, Debian 12).
IP_ADDR_HOLDER = json.dumps([
    {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "addr_info": [
        {"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host", "label": "lo"},
        {"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host"}]},
    {"ifindex": 2, "link_index": 22, "ifname": "eth0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
     "addr_info": [
         {"family": "inet", "local": "10.89.9.11", "prefixlen": 24, "broadcast": "10.89.9.255", "scope": "global",
          "label": "eth0"},
         {"family": "inet", "local": "10.89.9.100", "prefixlen": 24, "scope": "global", "secondary": True,
          "label": "eth0"},
         {"family": "inet6", "local": "fe80::c0:68ff:fe99:d962", "prefixlen": 64, "scope": "link"}]},
    {"ifindex": 3, "ifname": "enp1s0f0np0", "flags": ["BROADCAST"], "addr_info": []},
])


def test_parse_ip_addr():
    out = ka.parse_ip_addr(IP_ADDR_HOLDER)
    assert out == {
        "lo": [{"address": "127.0.0.1", "prefixlen": 8, "secondary": False}],
        "eth0": [{"address": "10.89.9.11", "prefixlen": 24, "secondary": False},
                 {"address": "10.89.9.100", "prefixlen": 24, "secondary": True}],
        "enp1s0f0np0": [],
    }


@pytest.mark.parametrize("value, expected", [
    ("10.89.7.100/24", ("10.89.7.100", 24)),
    ("10.89.7.100", ("10.89.7.100", 32)),
    (" 192.0.2.10/32 ", ("192.0.2.10", 32)),
])
def test_parse_address(value, expected):
    ip, prefix = ka.parse_address(value)
    assert (str(ip), prefix) == expected


@pytest.mark.parametrize("value, reason", [
    ("", "empty"),
    ("spark-vip", "not an IPv4 address"),
    ("10.89.7.300/24", "not an IPv4 address"),
    ("fd00::10/64", "IPv6"),
    ("10.89.7.100/33", "prefix /33"),
    ("10.89.7.100/x", "prefix /x"),
])
def test_parse_address_refuses(value, reason):
    with pytest.raises(ValueError, match=reason):
        ka.parse_address(value)


def test_host_status_of_the_holder():
    status = ka.host_status(ka.parse_ip_addr(IP_ADDR_HOLDER), "eth0", "10.89.9.100/24", "active",
                            ka.parse_state('{"type": "INSTANCE", "instance": "factory_floor", "state": "MASTER", '
                                           '"priority": 249, "since": 1796162744.1}'))
    assert status["holds_address"] is True
    assert status["interface_exists"] is True
    assert status["interfaces"] == ["enp1s0f0np0", "eth0", "lo"]
    assert status["vrrp_state"] == "MASTER"
    assert status["vrrp_state_current"] is True
    assert status["priority"] == 249
    assert status["since"] == 1796162744.1


def test_host_status_without_keepalived_or_interface():
    status = ka.host_status(ka.parse_ip_addr(IP_ADDR_HOLDER), "eth9", "10.89.9.100/24", "inactive",
                            ka.parse_state('{"state": "MASTER"}'))
    assert status["interface_exists"] is False
    assert status["holds_address"] is False
    assert status["vrrp_state"] == "MASTER"
    assert status["vrrp_state_current"] is False  # written before keepalived stopped
    assert ka.host_status({}, "eth0")["holds_address"] is None


def test_host_status_without_an_interface_looks_on_every_one():
    # status.yml reads the proxy hosts without facts, where keepalived_interface's default comes from.
    interfaces = ka.parse_ip_addr(IP_ADDR_HOLDER)
    holder = ka.host_status(interfaces, "", "10.89.9.100/24", "active")
    assert holder["holds_address"] is True and holder["interface"] == "eth0"
    other = ka.host_status(interfaces, "", "10.89.9.101/24", "active")
    assert other["holds_address"] is False and other["interface"] == ""


@pytest.mark.parametrize("text", ["", "not json", "[1]", '{"state": "ELSE"}'])
def test_unreadable_or_unknown_state(text):
    assert ka.host_status({}, "eth0", state=ka.parse_state(text))["vrrp_state"] == ""


@pytest.mark.parametrize("secret, problem", [
    ("", ""),
    ("s3cr3tXY", ""),
    ("longerthan8", "11 characters"),
    ("a b", "whitespace"),
    ("ab#c", "comment"),
    ('ab"c', "quote"),
    ("ab{", "block"),
])
def test_auth_pass(secret, problem):
    facts = ka.auth_pass_facts(secret)
    assert facts["auth_pass_length"] == len(secret)
    said = ka.auth_pass_problem(facts["auth_pass_length"], facts["auth_pass_syntax"])
    assert (problem in said) if problem else said == ""
    assert secret not in said or not secret


# ------------------------------------------------------------------ the check

def host(address, vip="10.89.7.100/24", interface="eth0", priority=250, extra=(), service="inactive", configured=(),
         **settings):
    """One proxy host's settings and what was seen on it."""
    addresses = [{"address": address, "prefixlen": 24, "secondary": False}] + list(extra)
    entry = {
        "virtual_ipaddress": vip, "interface": interface, "virtual_router_id": 51, "priority": priority,
        "advert_int": 1, "unicast_src_ip": "", "unicast_peer": [], "auth_pass_length": 8, "auth_pass_syntax": False,
        "observed": {"interface_exists": True, "interfaces": ["eth0", "lo"], "addresses": addresses,
                     "service_state": service, "configured_addresses": list(configured)},
        "routers": [],
    }
    entry.update(settings)
    return entry


def pair(**changes):
    """spark-a and spark-b on 10.89.7.0/24; ``changes`` maps a host to settings to change."""
    hosts = {"spark-a": host("10.89.7.10"), "spark-b": host("10.89.7.11", priority=249)}
    for name, values in changes.items():
        hosts[name.replace("_", "-")].update(values)
    return hosts


def checks(result):
    return [error["check"] for error in result["errors"]]


def test_a_good_pair_plans_the_peers():
    result = ka.check(pair())
    assert result["errors"] == []
    assert result["virtual_ipaddress"] == "10.89.7.100/24"
    assert result["virtual_router_id"] == 51
    assert result["hosts"] == {"spark-a": {"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11"]},
                               "spark-b": {"unicast_src_ip": "10.89.7.11", "unicast_peer": ["10.89.7.10"]}}


def trio(**changes):
    """Three proxy hosts on 10.89.7.0/24 (spark-a .10, spark-b .11, spark-c .12)."""
    hosts = dict(pair(), **{"spark-c": host("10.89.7.12")})
    hosts["spark-b"]["priority"] = 250
    for name, values in changes.items():
        hosts[name.replace("_", "-")].update(values)
    return hosts


def test_three_proxy_hosts_each_advertise_to_the_other_two():
    result = ka.check(trio())
    assert result["errors"] == []
    assert result["hosts"] == {
        "spark-a": {"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11", "10.89.7.12"]},
        "spark-b": {"unicast_src_ip": "10.89.7.11", "unicast_peer": ["10.89.7.10", "10.89.7.12"]},
        "spark-c": {"unicast_src_ip": "10.89.7.12", "unicast_peer": ["10.89.7.10", "10.89.7.11"]}}


def test_a_peer_list_naming_every_other_host_is_kept():
    result = ka.check(trio(spark_a={"unicast_peer": ["10.89.7.12", "10.89.7.11"]}))
    assert result["errors"] == []
    assert result["hosts"]["spark-a"]["unicast_peer"] == ["10.89.7.12", "10.89.7.11"]


@pytest.mark.parametrize("peers, check, named, words", [
    (["10.89.7.11"], "peer_missing", ["spark-a", "spark-c"],
     "keepalived_unicast_peer on spark-a (10.89.7.11) leaves out spark-c (10.89.7.12) of group 'proxy': spark-c "
     "would not hear spark-a's advertisements and would take the floating address as well (two holders). List "
     "every other proxy host (10.89.7.11, 10.89.7.12), or leave keepalived_unicast_peer empty for exactly that."),
    (["10.89.7.10", "10.89.7.11", "10.89.7.12"], "peer_self", ["spark-a"],
     "keepalived_unicast_peer on spark-a names its own address 10.89.7.10: a host does not advertise to itself. "
     "List the other proxy hosts' addresses only (10.89.7.11, 10.89.7.12)"),
])
def test_a_peer_list_that_misses_a_host_or_names_itself_is_refused(peers, check, named, words):
    result = ka.check(trio(spark_a={"unicast_peer": peers}))
    assert checks(result) == [check]
    assert result["errors"][0]["hosts"] == named
    assert result["errors"][0]["variables"] == ["keepalived_unicast_peer"]
    assert words in result["errors"][0]["message"]
    assert result["hosts"] == {}


def test_a_pair_whose_peer_is_its_own_address_is_refused_on_both_counts():
    result = ka.check(pair(spark_b={"unicast_peer": ["10.89.7.11"]}))
    assert checks(result) == ["peer_self", "peer_missing"]


def test_one_host_is_not_checked():
    assert ka.check({"spark-a": host("10.89.7.10", vip="")}) == {
        "errors": [], "hosts": {}, "virtual_ipaddress": "", "virtual_router_id": None}


def test_a_bare_address_is_slash_32():
    result = ka.check(pair(spark_a={"virtual_ipaddress": "10.89.7.100"}, spark_b={"virtual_ipaddress": "10.89.7.100"}))
    assert result["virtual_ipaddress"] == "10.89.7.100/32"


def test_rerun_while_a_host_holds_the_address():
    """The holder has the address on its interface; keepalived runs, so it is not the host's own."""
    held = {"address": "10.89.7.100", "prefixlen": 24, "secondary": True}
    hosts = pair()
    hosts["spark-a"] = host("10.89.7.10", extra=[held], service="active", configured=["10.89.7.100"])
    hosts["spark-b"]["observed"]["service_state"] = "active"
    # What each host heard: the other one's unicast advertisements (ours, so no conflict).
    hosts["spark-b"]["routers"] = [{"virtual_router_id": 51, "source": "10.89.7.10", "priority": 250,
                                    "addresses": ["10.89.7.100"]}]
    result = ka.check(hosts)
    assert result["errors"] == []
    assert result["hosts"]["spark-a"]["unicast_src_ip"] == "10.89.7.10"


def test_no_address_with_two_hosts():
    result = ka.check(pair(spark_a={"virtual_ipaddress": ""}, spark_b={"virtual_ipaddress": ""}))
    assert checks(result) == ["no_address"]
    error = result["errors"][0]
    assert error["variables"] == ["keepalived_virtual_ipaddress"]
    assert error["hosts"] == ["spark-a", "spark-b"]
    assert "Group 'proxy' has 2 hosts (spark-a, spark-b) but no floating address" in error["message"]
    assert result["hosts"] == {}


def test_address_outside_the_subnet():
    result = ka.check(pair(spark_a={"virtual_ipaddress": "10.99.0.100/24"}, spark_b={"virtual_ipaddress": "10.99.0.100/24"}))
    assert checks(result) == ["outside_subnet", "outside_subnet"]
    message = result["errors"][0]["message"]
    assert "10.99.0.100 (keepalived_virtual_ipaddress) is outside spark-a's subnet on eth0 (10.89.7.10/24)" in message
    assert "Choose a free address in 10.89.7.0/24" in message
    assert result["errors"][0]["variables"] == ["keepalived_virtual_ipaddress", "keepalived_interface"]


def test_address_outside_one_hosts_subnet_names_that_host():
    hosts = pair()
    hosts["spark-b"]["observed"]["addresses"] = [{"address": "192.0.2.11", "prefixlen": 24, "secondary": False}]
    result = ka.check(hosts)
    assert checks(result) == ["outside_subnet"]
    assert result["errors"][0]["hosts"] == ["spark-b"]


def test_prefix_wider_than_the_subnet():
    result = ka.check(pair(spark_a={"virtual_ipaddress": "10.89.7.100/16"}, spark_b={"virtual_ipaddress": "10.89.7.100/16"}))
    assert checks(result) == ["prefix_wider", "prefix_wider"]
    assert "Give the subnet's prefix (/24) or /32" in result["errors"][0]["message"]


def test_missing_interface_names_what_the_host_has():
    hosts = pair(spark_b={"interface": "eth9"})
    hosts["spark-b"]["observed"].update(interface_exists=False, addresses=[])
    result = ka.check(hosts)
    assert checks(result) == ["missing_interface"]
    error = result["errors"][0]
    assert error["hosts"] == ["spark-b"] and error["variables"] == ["keepalived_interface"]
    assert "spark-b has no interface eth9 (keepalived_interface); it has: eth0, lo" in error["message"]


def test_no_interface_set_and_no_default_route():
    result = ka.check(pair(spark_a={"interface": ""}))
    assert checks(result) == ["no_interface"]


def test_interface_without_ipv4():
    hosts = pair()
    hosts["spark-a"]["observed"]["addresses"] = []
    assert checks(ka.check(hosts)) == ["no_ipv4"]


def test_address_equal_to_a_proxy_hosts_own():
    result = ka.check(pair(spark_a={"virtual_ipaddress": "10.89.7.11/24"}, spark_b={"virtual_ipaddress": "10.89.7.11/24"}))
    assert checks(result) == ["own_address"]
    error = result["errors"][0]
    assert error["hosts"] == ["spark-b"]
    assert "10.89.7.11 (keepalived_virtual_ipaddress) is spark-b's own address" in error["message"]


def test_address_equal_to_another_hosts_own_from_facts():
    result = ka.check(pair(), reserved={"gateway": ["10.89.7.100"], "spark-a": ["10.89.7.10"]})
    assert checks(result) == ["own_address"]
    assert result["errors"][0]["hosts"] == ["gateway"]


def test_a_new_address_while_the_holder_holds_the_old_one():
    """The address changes: the holder's old floating address is keepalived's, not the host's subnet
    or own address; the new one is checked as any other."""
    held = {"address": "10.89.7.100", "prefixlen": 24, "secondary": True}
    hosts = pair(spark_a={"virtual_ipaddress": "10.89.7.101/24"}, spark_b={"virtual_ipaddress": "10.89.7.101/24"})
    hosts["spark-a"]["observed"].update(addresses=hosts["spark-a"]["observed"]["addresses"] + [held],
                                        service_state="active", configured_addresses=["10.89.7.100"])
    result = ka.check(hosts)
    assert result["errors"] == []
    outside = ka.check(pair(spark_a={"virtual_ipaddress": "10.99.0.100/24", "observed": hosts["spark-a"]["observed"]},
                            spark_b={"virtual_ipaddress": "10.99.0.100/24"}))
    assert "(10.89.7.10/24)" in outside["errors"][0]["message"]
    assert "Choose a free address in 10.89.7.0/24 (" in outside["errors"][0]["message"]


def test_configured_addresses():
    text = """
global_defs {
    router_id spark-a   # a comment { with braces }
}
vrrp_instance factory_floor {
    virtual_ipaddress {
        10.89.7.100/24 dev eth0
        10.89.7.101 dev eth0 label eth0:1
    }
    ! virtual_ipaddress { 10.0.0.1 }
    track_script {
        proxy_healthz
    }
}
vrrp_instance other { virtual_ipaddress { 192.0.2.5/32 } }
"""
    assert ka.configured_addresses(text) == ["10.89.7.100", "10.89.7.101", "192.0.2.5"]
    assert ka.configured_addresses("") == []


def test_address_on_a_host_without_keepalived_is_its_own():
    """The address is on spark-a's interface but keepalived does not run there: someone else put it there."""
    hosts = pair()
    hosts["spark-a"] = host("10.89.7.10", extra=[{"address": "10.89.7.100", "prefixlen": 24, "secondary": True}])
    assert checks(ka.check(hosts)) == ["own_address"]


def test_router_id_in_use_by_another_router():
    hosts = pair()
    hosts["spark-a"]["routers"] = [
        {"virtual_router_id": 51, "source": "10.89.7.20", "priority": 100, "addresses": ["10.89.7.101"]},
        {"virtual_router_id": 7, "source": "10.89.7.21", "priority": 100, "addresses": ["10.89.7.102"]},
    ]
    result = ka.check(hosts)
    assert checks(result) == ["vrid_in_use"]
    error = result["errors"][0]
    assert error["variables"] == ["keepalived_virtual_router_id"]
    assert error["hosts"] == ["spark-a"]
    assert "Virtual router id 51 (keepalived_virtual_router_id) is already used on the network" in error["message"]
    assert "10.89.7.20 advertises it (priority 100, for 10.89.7.101), heard on spark-a" in error["message"]
    assert "heard here: 7, 51; free, for example: 1, 2, 3, 4, 5" in error["message"]


def test_our_own_adverts_are_no_conflict():
    hosts = pair()
    hosts["spark-a"]["routers"] = [{"virtual_router_id": 51, "source": "10.89.7.11", "priority": 249,
                                    "addresses": ["10.89.7.100"]}]
    assert ka.check(hosts)["errors"] == []


def test_address_advertised_by_another_router_under_another_id():
    hosts = pair()
    hosts["spark-b"]["routers"] = [{"virtual_router_id": 9, "source": "10.89.7.30", "priority": 100,
                                    "addresses": ["10.89.7.100"]}]
    result = ka.check(hosts)
    assert checks(result) == ["address_in_use"]
    assert "10.89.7.30, virtual router id 9, heard on spark-b" in result["errors"][0]["message"]


@pytest.mark.parametrize("key, value, check, variable", [
    ("virtual_ipaddress", "10.89.7.101/24", "settings_differ", "keepalived_virtual_ipaddress"),
    ("virtual_router_id", 52, "settings_differ", "keepalived_virtual_router_id"),
    ("advert_int", 2, "settings_differ", "keepalived_advert_int"),
])
def test_hosts_that_disagree(key, value, check, variable):
    result = ka.check(pair(spark_b={key: value}))
    assert checks(result) == [check]
    assert result["errors"][0]["variables"] == [variable]
    assert "The proxy hosts disagree on %s" % variable in result["errors"][0]["message"]


@pytest.mark.parametrize("settings, check, variable", [
    ({"virtual_ipaddress": "vip.example"}, "address_value", "keepalived_virtual_ipaddress"),
    ({"virtual_router_id": 0}, "vrid_value", "keepalived_virtual_router_id"),
    ({"virtual_router_id": 256}, "vrid_value", "keepalived_virtual_router_id"),
    ({"virtual_router_id": "x"}, "vrid_value", "keepalived_virtual_router_id"),
    ({"advert_int": 0}, "advert_int_value", "keepalived_advert_int"),
    ({"advert_int": 1.5}, "advert_int_value", "keepalived_advert_int"),
])
def test_values_out_of_range_on_every_host(settings, check, variable):
    result = ka.check(pair(spark_a=dict(settings), spark_b=dict(settings)))
    assert checks(result) == [check]
    assert result["errors"][0]["variables"] == [variable]


@pytest.mark.parametrize("priority", [0, 255, "high", None])
def test_priority_out_of_range(priority):
    result = ka.check(pair(spark_b={"priority": priority}))
    assert checks(result) == ["priority_value"]
    assert result["errors"][0]["hosts"] == ["spark-b"]
    assert result["errors"][0]["variables"] == ["keepalived_priority"]


def test_auth_pass_too_long_is_named_never_shown():
    result = ka.check(pair(spark_a={"auth_pass_length": 12}, spark_b={"auth_pass_length": 12}))
    assert checks(result) == ["auth_pass_value", "auth_pass_value"]
    assert "keepalived_auth_pass on spark-a cannot be used: it has 12 characters" in result["errors"][0]["message"]


# --- the proxies agree: authentication, what the address follows, one LAN ---------------------------------


SECRETS = {"spark-a": "Vr9-aaaa", "spark-b": "Vr9-bbbb"}


def test_different_auth_pass_is_refused_without_showing_it():
    """Two secrets: each keepalived drops the other's advertisements and both hold the address."""
    result = ka.check(pair(), auth_pass=SECRETS)
    assert checks(result) == ["auth_differs"]
    error = result["errors"][0]
    assert error["variables"] == ["keepalived_auth_pass"] and error["hosts"] == ["spark-a", "spark-b"]
    assert "(hosts that share one: spark-a / spark-b; the values are not shown)" in error["message"]
    text = json.dumps(result)
    assert not any(secret in text for secret in SECRETS.values())
    assert "8" not in error["message"]            # not even a length
    assert result["hosts"] == {}


@pytest.mark.parametrize("secrets", [{"spark-a": "", "spark-b": "Vr9-bbbb"}, {"spark-a": "Vr9-aaaa", "spark-b": None}])
def test_auth_on_one_host_only_is_refused(secrets):
    assert checks(ka.check(pair(), auth_pass=secrets)) == ["auth_differs"]


def test_the_same_auth_pass_passes_and_is_checked_for_keepalived():
    assert ka.check(pair(), auth_pass={"spark-a": "Vr9-aaaa", "spark-b": "Vr9-aaaa"})["errors"] == []
    result = ka.check(pair(), auth_pass={"spark-a": "far-too-long", "spark-b": "far-too-long"})
    assert checks(result) == ["auth_pass_value", "auth_pass_value"]
    assert "far-too-long" not in json.dumps(result)


def follows(**settings):
    """The settings of what the address follows, as the role passes them."""
    values = {"nopreempt": False, "preempt_delay": 5, "track_engines": True, "engines_weight": 50, "priority": 250}
    values.update(settings)
    return values


def test_the_roles_defaults_pass():
    assert ka.check(pair(spark_a=follows(), spark_b=follows()))["errors"] == []


@pytest.mark.parametrize("key, value, variable", [
    ("nopreempt", True, "keepalived_nopreempt"),
    ("preempt_delay", 30, "keepalived_preempt_delay"),
    ("track_engines", False, "keepalived_track_engines"),
    ("engines_weight", 20, "keepalived_engines_script_weight"),
])
def test_proxies_that_follow_different_rules_are_refused(key, value, variable):
    result = ka.check(pair(spark_a=follows(), spark_b=follows(**{key: value})))
    assert "settings_differ" in checks(result)
    assert [e for e in result["errors"] if e["check"] == "settings_differ"][0]["variables"] == [variable]


def test_priorities_that_differ_while_preemption_is_on_are_refused():
    result = ka.check(pair(spark_a=follows(), spark_b=follows(priority=249)))
    assert checks(result) == ["priority_differs"]
    assert "would take the address back whenever it is eligible again" in result["errors"][0]["message"]
    # Without preemption the priorities only pick the first holder.
    assert ka.check(pair(spark_a=follows(nopreempt=True), spark_b=follows(nopreempt=True, priority=249)))["errors"] == []


@pytest.mark.parametrize("settings, check", [
    ({"engines_weight": 250}, "weight_too_large"),
    ({"engines_weight": 0}, "engines_weight_value"),
    ({"preempt_delay": 1001}, "preempt_delay_value"),
])
def test_follow_settings_out_of_range(settings, check):
    assert check in checks(ka.check(pair(spark_a=follows(**settings), spark_b=follows(**settings))))


def test_hosts_that_put_the_address_in_different_subnets_are_refused():
    """A /24 on one machine and a /16 on the other: a mistyped prefix, not one LAN."""
    hosts = pair()
    hosts["spark-b"]["observed"]["addresses"] = [{"address": "10.89.7.11", "prefixlen": 16, "secondary": False}]
    result = ka.check(hosts)
    assert checks(result) == ["subnet_differs"]
    assert "10.89.0.0/16 on spark-b; 10.89.7.0/24 on spark-a" in result["errors"][0]["message"]


# --- keepalived's engines check on a proxy host ------------------------------------------------------


def upstream_state(in_rotation, **extra):
    state = {"updated": 1_796_000_000.0, "mode": "live", "members": ["spark-a", "spark-b"], "in_rotation": in_rotation,
             "statuses": {}, "drained": []}
    state.update(extra)
    return json.dumps(state)


@pytest.mark.parametrize("text, age, ok, why", [
    (upstream_state(["spark-a"]), 1.0, True, "in rotation: spark-a"),
    (upstream_state([]), 1.0, False, "no engine in rotation"),
    # Every engine drained (a switch) or gone: none in rotation, on every proxy alike.
    (upstream_state([], mode="drained", drained=["spark-a", "spark-b"]), 1.0, False, "no engine in rotation"),
    (upstream_state(["spark-a"]), 45.0, False, "45s old (more than 30s)"),
    # Written "in the future" (this host's clock stepped back): not stale.
    (upstream_state(["spark-a"]), -600.0, True, "in rotation"),
    (None, None, False, "no state file"),
    ("{truncated", 1.0, False, "not JSON"),
    ("[]", 1.0, False, "no engine in rotation"),
])
def test_engines_verdict(text, age, ok, why):
    got_ok, got_why = ka.engines_verdict(text, age, 30)
    assert got_ok is ok and why in got_why


def test_engines_check_main(tmp_path, capsys):
    state = tmp_path / "upstream.json"
    state.write_text(upstream_state(["spark-b"]))
    assert ka.main(["--state-file", str(state), "--stale-after", "30"]) == 0
    os.utime(state, (1_796_000_000.0, 1_796_000_000.0))
    assert ka.main(["--state-file", str(state), "--stale-after", "30"], clock=lambda: 1_796_000_100.0) == 1
    assert "100s old" in capsys.readouterr().err
    assert ka.main(["--state-file", str(tmp_path / "missing")]) == 1


def test_unicast_src_ip_set_and_not_own():
    result = ka.check(pair(spark_a={"unicast_src_ip": "10.89.7.55"}))
    assert checks(result) == ["src_not_own"]
    assert result["errors"][0]["variables"] == ["keepalived_unicast_src_ip"]


def test_unicast_settings_kept_when_set():
    hosts = pair(spark_a={"unicast_peer": ["10.89.7.11", "10.89.7.12"]})
    hosts["spark-a"]["observed"]["addresses"].append({"address": "10.89.7.50", "prefixlen": 24, "secondary": True})
    hosts["spark-a"]["unicast_src_ip"] = "10.89.7.50"
    result = ka.check(hosts)
    assert result["errors"] == []
    assert result["hosts"]["spark-a"] == {"unicast_src_ip": "10.89.7.50", "unicast_peer": ["10.89.7.11", "10.89.7.12"]}
    assert result["hosts"]["spark-b"] == {"unicast_src_ip": "10.89.7.11", "unicast_peer": ["10.89.7.50"]}


def test_unicast_peer_not_an_address():
    assert checks(ka.check(pair(spark_a={"unicast_peer": ["spark-b"]}))) == ["peer_value"]


def test_source_is_the_address_in_the_floating_subnet():
    """A host with two subnets on the interface advertises from the one the address is in."""
    hosts = pair()
    hosts["spark-a"]["observed"]["addresses"] = [
        {"address": "192.0.2.10", "prefixlen": 24, "secondary": False},
        {"address": "10.89.7.10", "prefixlen": 24, "secondary": False}]
    assert ka.check(hosts)["hosts"]["spark-a"]["unicast_src_ip"] == "10.89.7.10"


def test_every_problem_at_once_and_the_message():
    hosts = pair(spark_a={"virtual_ipaddress": "10.99.0.1/24"}, spark_b={"virtual_ipaddress": "10.99.0.1/24"})
    hosts["spark-b"]["observed"].update(interface_exists=False, addresses=[])
    result = ka.check(hosts)
    assert checks(result) == ["outside_subnet", "missing_interface"]
    message = ka.format_errors(result["errors"])
    assert message.startswith("The floating address (keepalived) cannot work with these settings; nothing was changed.")
    assert "\n1) 10.99.0.1" in message and "\n2) spark-b has no interface" in message


def test_check_does_not_change_its_input():
    hosts = pair()
    before = copy.deepcopy(hosts)
    ka.check(hosts)
    assert hosts == before


# ------------------------------------------------------------------ the holder

def test_summarize_one_holder():
    summary = ka.summarize({
        "spark-a": {"holds_address": True, "vrrp_state": "MASTER", "vrrp_state_current": True, "service_state": "active"},
        "spark-b": {"holds_address": False, "vrrp_state": "BACKUP", "vrrp_state_current": True, "service_state": "active"},
    }, "10.89.7.100/24")
    assert summary["ok"] is True
    assert summary["holders"] == ["spark-a"]
    assert summary["address"] == "10.89.7.100"
    assert summary["message"] == "The floating address 10.89.7.100 is on spark-a. spark-a MASTER; spark-b BACKUP."


def test_summarize_nobody_and_split_brain():
    nobody = ka.summarize({"spark-a": {"holds_address": False, "service_state": "inactive", "vrrp_state": "MASTER"},
                           "spark-b": {"holds_address": False, "vrrp_state": "FAULT", "vrrp_state_current": True,
                                       "service_state": "active"}}, "10.89.7.100")
    assert nobody["ok"] is False and nobody["holders"] == []
    assert nobody["message"].startswith("No proxy holds the floating address 10.89.7.100")
    assert "spark-a keepalived inactive; spark-b FAULT" in nobody["message"]
    both = ka.summarize({"spark-a": {"holds_address": True}, "spark-b": {"holds_address": True}}, "10.89.7.100")
    assert both["ok"] is False
    assert both["message"].startswith("spark-a and spark-b hold the floating address 10.89.7.100 at once (split brain")
