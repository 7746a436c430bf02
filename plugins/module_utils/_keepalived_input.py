# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the keepalived role's group decision (factory_floor.llm.keepalived_check) reads from the hosts, on the
controller. Pure logic, standard library only; the decision itself is ``_host/keepalived.py``'s ``check``."""

from __future__ import annotations

from collections.abc import Mapping


def _host(hostvars, host):
    return hostvars[host] if host in hostvars else {}


def group_hosts(play_hosts, members):
    """The hosts of the play that are in the group (``members``), in the play's order, each once."""
    found = []
    for host in play_hosts or []:
        if host in (members or []) and host not in found:
            found.append(host)
    return found


def noted(hosts, hostvars, fact):
    """Per host of ``hosts``, what it noted as ``fact`` (its settings, its secret; None where it noted nothing)."""
    return {host: _host(hostvars, host).get(fact) for host in hosts}


def reserved_addresses(inventory, hostvars):
    """Per host of ``inventory`` whose facts hold a default IPv4 address, that address (as a list of words): the
    hosts' own addresses, which the floating address must not be."""
    found = {}
    for host in inventory or []:
        facts = _host(hostvars, host).get("ansible_facts")
        ipv4 = facts.get("default_ipv4") if isinstance(facts, Mapping) else None
        if isinstance(ipv4, Mapping) and "address" in ipv4:
            found[host] = str(ipv4["address"]).split(" ")
    return found


# What the keepalived role's preflight notes on each proxy host (roles/keepalived/tasks/preflight.yml).
SETTINGS_FACT = "__keepalived_settings"
ADDRESS_FACT = "__keepalived_address"


def host_settings(host_vars, interface="", virtual_ipaddress=""):
    """A proxy host's interface and floating address as the keepalived role has them: what its preflight noted this
    run (``SETTINGS_FACT``'s ``interface``, ``ADDRESS_FACT``), else its inventory's ``keepalived_interface`` /
    ``keepalived_virtual_ipaddress``, else ``interface`` / ``virtual_ipaddress`` (the reader's own defaults).
    ``host_vars``: that host's variables (Ansible's ``hostvars[host]``, or any mapping)."""
    settings = host_vars.get(SETTINGS_FACT)
    if isinstance(settings, Mapping) and "interface" in settings:
        interface = settings["interface"]
    elif "keepalived_interface" in host_vars:
        interface = host_vars["keepalived_interface"]
    if ADDRESS_FACT in host_vars:
        virtual_ipaddress = host_vars[ADDRESS_FACT]
    elif "keepalived_virtual_ipaddress" in host_vars:
        virtual_ipaddress = host_vars["keepalived_virtual_ipaddress"]
    return interface, virtual_ipaddress
