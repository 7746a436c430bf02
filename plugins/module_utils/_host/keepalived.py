# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proxies' floating address (VRRP, keepalived): what a host has, and whether the settings can work.

* ``parse_ip_addr``: the IPv4 addresses per interface from ``ip -j addr show``;
* ``host_status``: what one proxy host has of the floating address (holds it or not,
  keepalived's VRRP state as its notify script wrote it, the service's state);
* ``check``: the preflight decision for the whole group of proxy hosts, from what each
  host was seen to have (its interfaces and addresses, the VRRP routers heard on its
  network) and its settings. Every problem names the host(s) and the role variable
  to change; with none, it returns each host's ``unicast_src_ip`` and ``unicast_peer``;
* ``summarize``: which host holds the address, from every host's status;
* ``engines_verdict``: keepalived's engines check on a proxy host - whether the proxy has
  an engine in rotation, from its membership checker's state file. ``main`` runs it there
  (``python3 -m _host.keepalived --state-file FILE --stale-after SECONDS``; exit 0 yes, 1 no),
  installed by the ``keepalived`` role as keepalived's ``vrrp_script``.

Pure: data in, data out (``main`` reads one file). Stdlib only; no Ansible imports.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import sys
import time

# keepalived's VRRP states, as its notify script is called with them.
STATES = ("MASTER", "BACKUP", "FAULT", "STOP")
# VRRPv2's simple-text authentication carries 8 bytes; keepalived truncates a longer
# auth_pass with a warning, and `keepalived -t` then fails.
AUTH_PASS_MAX = 8
# Characters keepalived's configuration parser reads as comments, quotes or blocks.
_AUTH_PASS_FORBIDDEN = re.compile(r"""[\s#!"'{}\\]""")
PRIORITY_MIN, PRIORITY_MAX = 1, 254   # 255 is the address owner's, which a floating address has none of
VRID_MIN, VRID_MAX = 1, 255
ADVERT_INT_MIN, ADVERT_INT_MAX = 1, 255  # VRRPv2: whole seconds

# The role's variables each check names.
VAR_ADDRESS = "keepalived_virtual_ipaddress"
VAR_INTERFACE = "keepalived_interface"
VAR_VRID = "keepalived_virtual_router_id"
VAR_PRIORITY = "keepalived_priority"
VAR_ADVERT_INT = "keepalived_advert_int"
VAR_AUTH_PASS = "keepalived_auth_pass"
VAR_SRC = "keepalived_unicast_src_ip"
VAR_PEER = "keepalived_unicast_peer"
VAR_NOPREEMPT = "keepalived_nopreempt"
VAR_PREEMPT_DELAY = "keepalived_preempt_delay"
VAR_TRACK_ENGINES = "keepalived_track_engines"
VAR_ENGINES_WEIGHT = "keepalived_engines_script_weight"
PREEMPT_DELAY_MAX = 1000   # keepalived's own bound, seconds
WEIGHT_MAX = 253           # keepalived's vrrp_script weight: -253..253


def parse_ip_addr(text):
    """``{ifname: [{"address", "prefixlen", "secondary"}, ...]}`` from ``ip -j addr show``.

    Every interface is listed, with its IPv4 addresses in the kernel's order (the
    primary address of a subnet before its secondaries); an interface without IPv4
    has an empty list.
    """
    data = json.loads(text or "[]")
    out = {}
    for link in data if isinstance(data, list) else []:
        name = link.get("ifname")
        if not name:
            continue
        addresses = out.setdefault(name, [])
        for info in link.get("addr_info") or []:
            if info.get("family") != "inet" or not info.get("local"):
                continue
            addresses.append({"address": info["local"], "prefixlen": int(info.get("prefixlen", 32)),
                              "secondary": bool(info.get("secondary", False))})
    return out


def parse_address(value):
    """``(IPv4Address, prefixlen)`` of ``A.B.C.D`` (prefix 32, keepalived's default) or ``A.B.C.D/N``.

    Raises ValueError with a reason for anything else (IPv6 included: a floating IPv6
    address needs a VRRPv3 instance of its own).
    """
    text = str(value or "").strip()
    if not text:
        raise ValueError("empty")
    address, dummy, prefix = text.partition("/")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError("%r is not an IPv4 address" % address)
    if ip.version != 4:
        raise ValueError("%s is IPv6; the floating address here is IPv4 (VRRPv2)" % address)
    if prefix == "":
        return ip, 32
    if not prefix.isdigit() or not 0 <= int(prefix) <= 32:
        raise ValueError("prefix /%s is not 0-32" % prefix)
    return ip, int(prefix)


def configured_addresses(text):
    """The addresses in the ``virtual_ipaddress`` blocks of a keepalived.conf (without prefix):
    what a running keepalived holds when it is master. Comments (``#``, ``!``) are skipped."""
    out, depth, inside = [], 0, None
    for raw in (text or "").splitlines():
        line = re.split(r"[#!]", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        words = line.replace("{", " { ").replace("}", " } ").split()
        for index, word in enumerate(words):
            if word == "{":
                depth += 1
                if index > 0 and words[index - 1] in ("virtual_ipaddress", "virtual_ipaddress_excluded"):
                    inside = depth
            elif word == "}":
                if inside == depth:
                    inside = None
                depth -= 1
            elif inside == depth and (index == 0 or words[index - 1] == "{"):
                try:
                    out.append(str(parse_address(word)[0]))
                except ValueError:
                    pass
    return out


def parse_state(text):
    """The notify script's state file (one JSON object), or {} when there is none or it is unreadable."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def host_status(interfaces, interface, virtual_ipaddress=None, service_state="", state=None, configured=None):
    """What one proxy host has of the floating address.

    ``interfaces`` from parse_ip_addr, ``service_state`` systemd's ActiveState of
    keepalived.service, ``state`` the notify script's file (parse_state), ``configured``
    the addresses of keepalived's configuration (configured_addresses). Without an
    ``interface`` (a reader without the host's facts, where the role's default comes
    from), the address is looked for on every interface, and ``interface`` is the one
    that has it ("" when none does).
    """
    state = state or {}
    vip = None
    if virtual_ipaddress:
        try:
            vip = str(parse_address(virtual_ipaddress)[0])
        except ValueError:
            vip = None
    if not interface:
        interface = next((name for name in sorted(interfaces)
                          if vip and any(entry["address"] == vip for entry in interfaces[name])), "")
    addresses = interfaces.get(interface)
    holds = None
    if virtual_ipaddress:
        holds = bool(vip) and any(entry["address"] == vip for entry in addresses or [])
    vrrp_state = state.get("state") if state.get("state") in STATES else ""
    return {
        "interface": interface,
        "interface_exists": addresses is not None,
        "interfaces": sorted(interfaces),
        "addresses": addresses or [],
        "holds_address": holds,
        "service_state": service_state or "",
        "vrrp_state": vrrp_state,
        # A state the notify script wrote while keepalived ran is stale once it stopped.
        "vrrp_state_current": bool(vrrp_state) and service_state == "active",
        "since": state.get("since"),
        "priority": state.get("priority"),
        # What keepalived is configured to hold (while it runs, on its master).
        "configured_addresses": list(configured or []),
    }


def auth_pass_facts(secret):
    """What the preflight may know of an auth_pass: its length and whether it has characters
    keepalived's parser reads as syntax. The secret itself never leaves its host's variables."""
    secret = secret or ""
    return {"auth_pass_length": len(secret), "auth_pass_syntax": bool(_AUTH_PASS_FORBIDDEN.search(secret))}


def auth_pass_problem(length, syntax=False):
    """Why keepalived cannot use an auth_pass of ``length`` characters (``syntax``: with characters
    its parser reads as comment, quote or block), or ""."""
    length = _whole(length) or 0
    if length > AUTH_PASS_MAX:
        return ("it has %d characters; VRRPv2's simple authentication carries %d, keepalived truncates a longer one "
                "and its own check (keepalived -t) then fails" % (length, AUTH_PASS_MAX))
    if syntax in (True, "True", "true"):
        return ("it has whitespace or one of # ! \" ' { } \\, which keepalived's configuration parser reads as a "
                "comment, quote or block")
    return ""


def _whole(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _names(hosts):
    return ", ".join(hosts) if hosts else "none"


class _Report:
    def __init__(self):
        self.errors = []

    def add(self, check, message, hosts=(), variables=()):
        self.errors.append({"check": check, "hosts": sorted(set(hosts)), "variables": list(variables),
                            "message": message})


def _networks(addresses, exclude=None):
    """The IPv4 networks of ``addresses`` (entries of parse_ip_addr), leaving out ``exclude``."""
    out = []
    for entry in addresses:
        if entry["address"] == exclude:
            continue
        out.append(ipaddress.ip_interface("%s/%s" % (entry["address"], entry["prefixlen"])))
    return out


def _agree(report, hosts, key, variable, what):
    """All hosts must give ``key`` one value; returns that value (or None after reporting)."""
    by_value = {}
    for name in sorted(hosts):
        by_value.setdefault(json.dumps(hosts[name].get(key)), []).append(name)
    if len(by_value) > 1:
        said = "; ".join("%s on %s" % (value, _names(names)) for value, names in sorted(by_value.items()))
        report.add("settings_differ",
                   "The proxy hosts disagree on %s (%s): one VRRP router is one %s on every host, or each host "
                   "would hold an address of its own. Set %s once for the group (group_vars/proxy.yml) and remove "
                   "it from the host_vars that differ." % (variable, said, what, variable),
                   list(hosts), [variable])
        return None
    return hosts[sorted(hosts)[0]].get(key)


def _auth_agree(report, secrets):
    """Every host must have one ``auth_pass``: with two, each host drops the other's advertisements
    and both hold the address. Says which hosts differ, never what they hold (not even a length)."""
    groups = {}
    for name in sorted(secrets):
        groups.setdefault(secrets[name] or "", []).append(name)
    if len(groups) > 1:
        said = " / ".join(_names(names) for names in sorted(groups.values()))
        report.add("auth_differs",
                   "The proxy hosts do not have the same %s (hosts that share one: %s; the values are not shown). "
                   "keepalived drops an advertisement whose authentication differs, so each host would take the "
                   "address for itself: two holders. Set %s once for the group (group_vars/%s.yml, in Ansible Vault) "
                   "and remove it from the host_vars that differ." % (VAR_AUTH_PASS, said, VAR_AUTH_PASS, "proxy"),
                   list(secrets), [VAR_AUTH_PASS])


def _present(hosts, key):
    """Whether every host's settings name ``key`` (an older caller may leave a setting out)."""
    return all(key in settings for settings in hosts.values())


def _truthy(value):
    return value in (True, "True", "true", "yes", 1, "1")


def check(hosts, reserved=None, group="proxy", auth_pass=None):
    """Can the floating address work on these hosts? The preflight's decision.

    ``hosts``: per proxy host (inventory name), a dict with its settings -
    ``virtual_ipaddress``, ``interface``, ``virtual_router_id``, ``priority``,
    ``advert_int``, ``unicast_src_ip`` ("" = this host's own address on the interface),
    ``unicast_peer`` ([] = the other hosts' unicast_src_ip), ``auth_pass_length`` and
    ``auth_pass_syntax`` (auth_pass_facts, when ``auth_pass`` is not given), and, when
    given, ``nopreempt``, ``preempt_delay``, ``track_engines`` and ``engines_weight`` - and
    what was seen on it: ``observed`` (host_status: interface_exists, interfaces, addresses,
    service_state) and ``routers`` (the VRRP routers heard on the interface, _vrrp.routers;
    None when nobody listened).

    ``auth_pass``: ``{inventory name: secret}``, each host's ``keepalived_auth_pass``. The
    hosts must agree on it; it is checked for what keepalived can use, and never appears in
    what this returns (the module takes it as a ``no_log`` option).

    ``reserved``: ``{inventory name: [IPv4 addresses]}``, addresses of other hosts of the
    inventory (their facts' default_ipv4), which the floating address must not equal.

    Returns ``{"errors": [...], "hosts": {name: {"unicast_src_ip", "unicast_peer"}},
    "virtual_ipaddress": "A.B.C.D/N", "virtual_router_id": int}``; ``hosts`` is empty when
    there are errors. Each error: check, hosts, variables, message.
    """
    report = _Report()
    reserved = reserved or {}
    names = sorted(hosts)
    result = {"errors": report.errors, "hosts": {}, "virtual_ipaddress": "", "virtual_router_id": None}
    if len(names) < 2:
        return result
    if auth_pass is not None:
        hosts = {name: dict(hosts[name], **auth_pass_facts(auth_pass.get(name))) for name in names}
        _auth_agree(report, {name: auth_pass.get(name) or "" for name in names})

    # One address, one router id, one interval for the whole group.
    address_value = _agree(report, hosts, "virtual_ipaddress", VAR_ADDRESS, "address")
    vrid_value = _agree(report, hosts, "virtual_router_id", VAR_VRID, "virtual router id")
    advert_value = _agree(report, hosts, "advert_int", VAR_ADVERT_INT, "advertisement interval")
    # What the address follows, one rule for the group (roles/keepalived/README.md).
    nopreempt = None
    if _present(hosts, "nopreempt"):
        nopreempt = _agree(report, {n: {"v": _truthy(hosts[n]["nopreempt"])} for n in names}, "v", VAR_NOPREEMPT,
                           "preemption setting")
    if _present(hosts, "track_engines"):
        _agree(report, {n: {"v": _truthy(hosts[n]["track_engines"])} for n in names}, "v", VAR_TRACK_ENGINES,
               "rule for what the address follows")
    for key, variable, top in (("preempt_delay", VAR_PREEMPT_DELAY, PREEMPT_DELAY_MAX),
                               ("engines_weight", VAR_ENGINES_WEIGHT, WEIGHT_MAX)):
        if not _present(hosts, key):
            continue
        value = _agree(report, hosts, key, variable, key.replace("_", " "))
        number = _whole(value) if value is not None else None
        if value is not None and (number is None or not (0 if key == "preempt_delay" else 1) <= number <= top):
            report.add("%s_value" % key, "%s is %r: a whole number %d-%d." % (
                variable, value, 0 if key == "preempt_delay" else 1, top), names, [variable])

    vip = prefix = None
    if address_value is not None:
        if not str(address_value).strip():
            report.add(
                "no_address",
                "Group '%s' has %d hosts (%s) but no floating address (%s is empty). Clients need one address that "
                "follows whichever proxy is up; with a machine's own, they lose the model when that machine "
                "restarts although the other one serves. Set %s to a free IPv4 address with its prefix in the LAN "
                "the proxies share, for example 192.0.2.10/24, in group_vars/%s.yml."
                % (group, len(names), _names(names), VAR_ADDRESS, VAR_ADDRESS, group),
                names, [VAR_ADDRESS])
        else:
            try:
                vip, prefix = parse_address(address_value)
            except ValueError as exc:
                report.add("address_value",
                           "%s is %r: %s. Give an IPv4 address with its prefix, for example 192.0.2.10/24."
                           % (VAR_ADDRESS, address_value, exc), names, [VAR_ADDRESS])

    vrid = _whole(vrid_value) if vrid_value is not None else None
    if vrid_value is not None and (vrid is None or not VRID_MIN <= vrid <= VRID_MAX):
        report.add("vrid_value", "%s is %r: VRRP's virtual router id is a whole number %d-%d."
                   % (VAR_VRID, vrid_value, VRID_MIN, VRID_MAX), names, [VAR_VRID])
        vrid = None
    advert = _whole(advert_value) if advert_value is not None else None
    if advert_value is not None and (advert is None or not ADVERT_INT_MIN <= advert <= ADVERT_INT_MAX):
        report.add("advert_int_value",
                   "%s is %r: VRRPv2 advertises every whole number of seconds, %d-%d (the other proxy takes the "
                   "address after three missed advertisements when a host dies)."
                   % (VAR_ADVERT_INT, advert_value, ADVERT_INT_MIN, ADVERT_INT_MAX), names, [VAR_ADVERT_INT])

    for name in names:
        priority = _whole(hosts[name].get("priority"))
        if priority is None or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            report.add("priority_value",
                       "%s on %s is %r: a whole number %d-%d (255 belongs to an address's owner, which a floating "
                       "address has none of)." % (VAR_PRIORITY, name, hosts[name].get("priority"), PRIORITY_MIN,
                                                  PRIORITY_MAX), [name], [VAR_PRIORITY])
        problem = auth_pass_problem(hosts[name].get("auth_pass_length"), hosts[name].get("auth_pass_syntax"))
        if problem:
            report.add("auth_pass_value", "%s on %s cannot be used: %s. Choose 1-%d letters, digits or punctuation."
                       % (VAR_AUTH_PASS, name, problem, AUTH_PASS_MAX), [name], [VAR_AUTH_PASS])

    priorities = {name: _whole(hosts[name].get("priority")) for name in names}
    if nopreempt is False and None not in priorities.values() and len(set(priorities.values())) > 1:
        report.add("priority_differs",
                   "%s differs between the proxy hosts (%s) while preemption is on (%s: false): the host with the "
                   "higher priority would take the address back whenever it is eligible again, breaking every "
                   "client's connection a second time for nothing. Give every proxy host the same %s (the default), "
                   "or set %s: true (then the address follows nginx's /healthz only, not the engines)."
                   % (VAR_PRIORITY, "; ".join("%s %s" % (n, priorities[n]) for n in names), VAR_NOPREEMPT,
                      VAR_PRIORITY, VAR_NOPREEMPT), names, [VAR_PRIORITY, VAR_NOPREEMPT])
    weight = _whole(hosts[names[0]].get("engines_weight")) if _present(hosts, "engines_weight") else None
    if (weight is not None and _truthy(hosts[names[0]].get("track_engines", True))
            and None not in priorities.values() and min(priorities.values()) - weight < PRIORITY_MIN):
        report.add("weight_too_large",
                   "%s (%d) would take %s (lowest %d) below %d, keepalived's least: choose a weight below %d."
                   % (VAR_ENGINES_WEIGHT, weight, VAR_PRIORITY, min(priorities.values()), PRIORITY_MIN,
                      min(priorities.values())), names, [VAR_ENGINES_WEIGHT, VAR_PRIORITY])

    # Per host: the interface, its subnet, its own addresses.
    own = {}       # name -> that host's own IPv4 addresses on the interface (not the floating one)
    subnets = {}   # name -> the subnet(s) of its interface the floating address is in
    sources = {}   # name -> unicast_src_ip
    for name in names:
        settings = hosts[name]
        observed = settings.get("observed") or {}
        interface = str(settings.get("interface") or "")
        if not interface:
            report.add("no_interface",
                       "%s on %s is empty and the host has no default route to take it from: name the interface "
                       "of the LAN the clients reach the proxies on (its interfaces: %s), not the ConnectX link."
                       % (VAR_INTERFACE, name, _names(observed.get("interfaces") or [])), [name], [VAR_INTERFACE])
            continue
        if not observed.get("interface_exists"):
            report.add("missing_interface",
                       "%s has no interface %s (%s); it has: %s. Name the interface of the LAN the clients reach "
                       "the proxies on (host_vars/%s.yml when the machines differ), not the ConnectX link."
                       % (name, interface, VAR_INTERFACE, _names(observed.get("interfaces") or []), name),
                       [name], [VAR_INTERFACE])
            continue
        addresses = observed.get("addresses") or []
        # An address keepalived's configuration names is keepalived's while keepalived runs (it holds
        # it as master); any other address on the interface is the host's own.
        held = set(observed.get("configured_addresses") or []) if observed.get("service_state") == "active" else set()
        mine = [entry for entry in addresses if entry["address"] not in held]
        own[name] = [entry["address"] for entry in mine]
        if not mine:
            report.add("no_ipv4",
                       "%s has no IPv4 address on %s (%s): VRRP's unicast source and the floating address's "
                       "subnet come from it." % (name, interface, VAR_INTERFACE), [name], [VAR_INTERFACE])
            continue
        if vip is not None:
            networks = _networks(mine)
            inside = [net for net in networks if vip in net.network]
            subnets[name] = sorted(set(str(net.network) for net in inside))
            if not inside:
                report.add("outside_subnet",
                           "%s (%s) is outside %s's subnet on %s (%s): nobody on that LAN would send it a packet, "
                           "and clients would find no proxy behind it. Choose a free address in %s (and set %s to "
                           "the interface the clients reach the proxies on, if %s is not it)."
                           % (vip, VAR_ADDRESS, name, interface, ", ".join(str(net) for net in networks),
                              " or ".join(sorted(set(str(net.network) for net in networks))), VAR_INTERFACE, interface),
                           [name], [VAR_ADDRESS, VAR_INTERFACE])
            elif prefix is not None and prefix < min(net.network.prefixlen for net in inside):
                report.add("prefix_wider",
                           "%s/%d (%s) is wider than %s's subnet on %s (%s): keepalived would add a route for the "
                           "whole /%d there. Give the subnet's prefix (/%d) or /32."
                           % (vip, prefix, VAR_ADDRESS, name, interface, ", ".join(str(net) for net in inside),
                              prefix, min(net.network.prefixlen for net in inside)), [name], [VAR_ADDRESS])
        wanted = str(settings.get("unicast_src_ip") or "")
        if wanted:
            if wanted not in own[name]:
                report.add("src_not_own",
                           "%s on %s is %s, which is not an address of its interface %s (%s): keepalived would go "
                           "to FAULT (\"src address not configured\")."
                           % (VAR_SRC, name, wanted, interface, _names(own[name])), [name], [VAR_SRC])
            sources[name] = wanted
        else:
            in_subnet = [a for a in mine if vip is not None and vip in ipaddress.ip_interface(
                "%s/%s" % (a["address"], a["prefixlen"])).network]
            sources[name] = (in_subnet or mine)[0]["address"]

    # One LAN: the subnet the address is in is the same on every host (a /24 here and a /16 there
    # means a mistyped prefix on one machine; advertisements and ARP would not reach every host).
    if vip is not None and len(subnets) == len(names) and all(subnets.values()):
        by_subnet = {}
        for name in names:
            by_subnet.setdefault(", ".join(subnets[name]), []).append(name)
        if len(by_subnet) > 1:
            report.add("subnet_differs",
                       "The proxy hosts' interfaces put %s (%s) in different subnets: %s. The hosts that share a "
                       "floating address share one LAN: fix the address or prefix on the host that differs, or set "
                       "%s to the interface of the LAN they share." % (
                           vip, VAR_ADDRESS, "; ".join("%s on %s" % (subnet, _names(hosts_))
                                                       for subnet, hosts_ in sorted(by_subnet.items())), VAR_INTERFACE),
                       names, [VAR_INTERFACE, VAR_ADDRESS])

    # The address must not be any host's own.
    if vip is not None:
        owners = sorted(name for name, addresses in own.items() if str(vip) in addresses)
        owners += sorted(name for name, addresses in reserved.items()
                         if name not in hosts and str(vip) in [str(a) for a in addresses or []])
        if owners:
            report.add("own_address",
                       "%s (%s) is %s's own address: it would move away from that machine with the proxy, and "
                       "both machines would answer for it. Choose a free address in the subnet, used by no host."
                       % (vip, VAR_ADDRESS, _names(owners)), owners, [VAR_ADDRESS])

    # Other VRRP routers heard on the network: the same router id, or the same address.
    ours = set(a for addresses in own.values() for a in addresses) | set(sources.values())
    foreign = {}
    for name in names:
        for router in hosts[name].get("routers") or []:
            if router.get("source") in ours:
                continue
            foreign[(router.get("virtual_router_id"), router.get("source"))] = (router, name)
    if vrid is not None:
        clash = [(router, seen_on) for (rid, _src), (router, seen_on) in sorted(foreign.items()) if rid == vrid]
        if clash:
            used = sorted(set(rid for rid, _src in foreign))
            free = [n for n in range(VRID_MIN, VRID_MAX + 1) if n not in used][:5]
            report.add("vrid_in_use",
                       "Virtual router id %d (%s) is already used on the network: %s. Two VRRP routers with one id "
                       "on one LAN fight over who is master and drop each other's advertisements. Choose an id no "
                       "router uses (heard here: %s; free, for example: %s)."
                       % (vrid, VAR_VRID, "; ".join(
                           "%s advertises it (priority %s, for %s), heard on %s" % (
                               router.get("source"), router.get("priority"),
                               _names(router.get("addresses") or []), seen_on) for router, seen_on in clash),
                          _names([str(r) for r in used]), ", ".join(str(n) for n in free)),
                       sorted(set(seen_on for _router, seen_on in clash)), [VAR_VRID])
    if vip is not None:
        taken = [(router, seen_on) for (rid, _src), (router, seen_on) in sorted(foreign.items())
                 if str(vip) in (router.get("addresses") or []) and rid != vrid]
        if taken:
            report.add("address_in_use",
                       "%s (%s) is already a floating address of another VRRP router: %s. Choose another address."
                       % (vip, VAR_ADDRESS, "; ".join("%s, virtual router id %s, heard on %s" % (
                           router.get("source"), router.get("virtual_router_id"), seen_on) for router, seen_on in taken)),
                       sorted(set(seen_on for _router, seen_on in taken)), [VAR_ADDRESS])

    for name in names:
        peers = hosts[name].get("unicast_peer") or []
        for peer in peers:
            try:
                ipaddress.IPv4Address(str(peer))
            except ValueError:
                report.add("peer_value", "%s on %s holds %r, not an IPv4 address." % (VAR_PEER, name, peer),
                           [name], [VAR_PEER])

    # A peer list given by hand (keepalived_unicast_peer) must name every other proxy host and not this one: a host
    # left out never hears this one's advertisements and takes the address too (two holders); a host's own
    # address among its peers is an advertisement to itself. Any number of proxy hosts: one VRRP router over all.
    if len(sources) == len(names):
        for name in names:
            peers = [str(p) for p in hosts[name].get("unicast_peer") or []]
            if not peers or any(error["check"] == "peer_value" and name in error["hosts"] for error in report.errors):
                continue
            mine = sorted(set(own.get(name, [])) | {sources[name]})
            itself = [p for p in peers if p in mine]
            if itself:
                report.add("peer_self",
                           "%s on %s names its own address %s: a host does not advertise to itself. List the other "
                           "proxy hosts' addresses only (%s), or leave %s empty for exactly that."
                           % (VAR_PEER, name, _names(itself), _names([sources[o] for o in names if o != name]),
                              VAR_PEER), [name], [VAR_PEER])
            missing = [o for o in names if o != name and sources[o] not in peers
                       and not set(own.get(o, [])) & set(peers)]
            if missing:
                report.add("peer_missing",
                           "%s on %s (%s) leaves out %s of group '%s': %s would not hear %s's advertisements and "
                           "would take the floating address as well (two holders). List every other proxy host "
                           "(%s), or leave %s empty for exactly that."
                           % (VAR_PEER, name, _names(peers), _names(["%s (%s)" % (o, sources[o]) for o in missing]),
                              group, _names(missing), name, _names([sources[o] for o in names if o != name]),
                              VAR_PEER), [name] + missing, [VAR_PEER])

    if report.errors:
        return result
    result["virtual_ipaddress"] = "%s/%d" % (vip, prefix)
    result["virtual_router_id"] = vrid
    for name in names:
        peers = [str(p) for p in hosts[name].get("unicast_peer") or []]
        result["hosts"][name] = {
            "unicast_src_ip": sources[name],
            "unicast_peer": peers or [sources[other] for other in names if other != name],
        }
    return result


def format_errors(errors):
    """One message for ``fail_json``: every error, numbered."""
    lines = ["The floating address (keepalived) cannot work with these settings; nothing was changed. "
             "Change them and run again:"]
    for index, error in enumerate(errors, 1):
        lines.append("%d) %s" % (index, error["message"]))
    return "\n".join(lines)


def summarize(statuses, virtual_ipaddress=""):
    """Which host holds the floating address, from every host's host_status.

    Returns ``{"holders": [...], "address": ..., "hosts": {name: {...}}, "ok": bool, "message": str}``;
    ``ok`` when exactly one host holds it.
    """
    holders = sorted(name for name, status in statuses.items() if status.get("holds_address"))
    address = str(virtual_ipaddress or "").split("/", maxsplit=1)[0]
    parts = []
    for name in sorted(statuses):
        status = statuses[name]
        state = status.get("vrrp_state") if status.get("vrrp_state_current") else ""
        service = status.get("service_state") or "unknown"
        parts.append("%s %s" % (name, state or ("keepalived " + service)))
    if len(holders) == 1:
        message = "The floating address %s is on %s. %s." % (address, holders[0], "; ".join(parts))
    elif not holders:
        message = ("No proxy holds the floating address %s: clients get no answer there. %s. See journalctl -u "
                   "keepalived.service on each." % (address, "; ".join(parts)))
    else:
        message = ("%s hold the floating address %s at once (split brain: the peers do not hear each other's "
                   "advertisements - a firewall dropping IP protocol 112, or different settings). %s."
                   % (" and ".join(holders), address, "; ".join(parts)))
    return {"holders": holders, "address": address, "hosts": statuses, "ok": len(holders) == 1, "message": message}


# ------------------------------------------------------------------ the engines check (on a proxy host)


def engines_verdict(text, age, stale_after):
    """Whether this proxy has an engine in rotation: ``(ok, why)``.

    ``text`` is the membership checker's state file (``_upstream``: ``in_rotation`` lists the
    members nginx runs whose latest probe passed, drained engines left out), ``age`` seconds
    since it was written (this host's clock), None when there is none. Not ok when the file is
    missing, unreadable, older than ``stale_after`` seconds (the checker stopped: nginx's
    upstream is frozen), or lists no engine in rotation.
    """
    if text is None:
        return False, "no state file of the membership checker"
    if age is not None and age > stale_after:
        return False, "the membership checker's state is %.0fs old (more than %gs)" % (age, stale_after)
    try:
        state = json.loads(text)
    except ValueError:
        return False, "the membership checker's state file is not JSON"
    rotation = state.get("in_rotation") if isinstance(state, dict) else None
    if not isinstance(rotation, list) or not rotation:
        return False, "no engine in rotation"
    return True, "in rotation: %s" % ", ".join(str(name) for name in rotation)


def main(argv=None, clock=time.time):
    """keepalived's engines check: exit 0 when this proxy has an engine in rotation, 1 when not."""
    parser = argparse.ArgumentParser(description="Exit 0 when this proxy has an engine in rotation (keepalived's "
                                                 "vrrp_script), 1 when not.")
    parser.add_argument("--state-file", required=True, help="the membership checker's state file")
    parser.add_argument("--stale-after", type=float, default=30.0, help="seconds after which it counts as stale")
    args = parser.parse_args(argv)
    try:
        with open(args.state_file, encoding="utf-8") as handle:
            text = handle.read(1 << 20)
            # The file's age on this host's clock: the checker and this check share it.
            age = clock() - os.fstat(handle.fileno()).st_mtime
    except OSError:
        text, age = None, None
    ok, why = engines_verdict(text, age, args.stale_after)
    sys.stderr.write(why + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
