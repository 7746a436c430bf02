# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the keepalived role's group decision (factory_floor.llm.keepalived_check) reads from the hosts, on the
controller, and what each host notes for it (factory_floor.llm.keepalived_settings_info). Pure logic; the decision
itself is ``_host/keepalived.py``'s ``check``."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float


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


# What the keepalived role's preflight notes of a host for the group's decision (``SETTINGS_FACT``), as
# factory_floor.llm.keepalived_settings_info reads it: (key, variable) in the order the settings are noted.
SETTINGS_VARIABLES = (("virtual_ipaddress", "keepalived_virtual_ipaddress"), ("interface", "keepalived_interface"),
                      ("virtual_router_id", "keepalived_virtual_router_id"), ("priority", "keepalived_priority"),
                      ("advert_int", "keepalived_advert_int"), ("unicast_src_ip", "keepalived_unicast_src_ip"),
                      ("unicast_peer", "keepalived_unicast_peer"), ("nopreempt", "keepalived_nopreempt"),
                      ("preempt_delay", "keepalived_preempt_delay"), ("track_engines", "keepalived_track_engines"),
                      ("engines_weight", "keepalived_engines_script_weight"))
# Every variable keepalived_settings_info reads, as the task sees them (inventory, the role's defaults and vars).
OBSERVE_VARIABLES = (tuple(variable for _key, variable in SETTINGS_VARIABLES)
                     + ("keepalived_preflight_listen", "_keepalived_state_file"))


def info_args(v):
    """``factory_floor.llm.keepalived_info``'s arguments: this host's interface, floating address and state file."""
    return {"interface": v["keepalived_interface"], "virtual_ipaddress": v["keepalived_virtual_ipaddress"],
            "state_file": v["_keepalived_state_file"]}


def listen_args(v, observed):
    """``factory_floor.llm.vrrp_info``'s arguments - listen ``keepalived_preflight_listen`` seconds on the interface -
    or None: the interface does not exist (``observed``, keepalived_info's result, says), or the listen is 0 s."""
    if not (observed or {}).get("interface_exists") or jinja_float(v["keepalived_preflight_listen"]) <= 0:
        return None
    return {"interface": v["keepalived_interface"], "seconds": v["keepalived_preflight_listen"]}


def settings(v, observed, heard=None):
    """This host's settings for the group's decision, read as the preflight's Jinja read them before
    (``keepalived_priority | trim``, ``keepalived_nopreempt | bool``, ``keepalived_track_engines | bool``), with
    ``observed`` (keepalived_info's result) and ``routers`` (``heard``, vrrp_info's result; None: not listened)."""
    noted = {key: v[variable] for key, variable in SETTINGS_VARIABLES}
    noted.update(priority=str(noted["priority"]).strip(), nopreempt=boolean(noted["nopreempt"], strict=False),
                 track_engines=boolean(noted["track_engines"], strict=False), observed=observed,
                 routers=(heard or {}).get("routers"))
    return noted
