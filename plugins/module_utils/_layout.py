# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether an inventory describes a layout that can work, and what to change when not.

Pure logic, standard library only: no Ansible imports. The input is what the
inventory says: the groups the playbooks use and, per host, the inventory
variables listed in ``HOST_VARS`` that are set for it (unset ones are absent
and take the roles' defaults, ``DEFAULTS``). Nothing here connects anywhere.

Layouts that cannot work (each found error names the host or the variable and
says what to change):

* ``topology`` other than ``replicas`` / ``split``;
* a host listed in both topologies. This collection names the site's topology
  with the variable ``topology`` (there are no per-topology groups), so that is
  a host whose ``topology`` (host_vars, a group's vars) differs from the other
  hosts' - it would run one topology's units while the rest of the site runs
  the other's; and, for inventories that list hosts under groups named after
  the topologies (``replicas``, ``split``; not the engine, proxy or split
  group), a host in both of them;
* no engine host, while the proxy group has hosts (a proxy with no replicas),
  or no proxy host (clients always go through the proxy);
* two engines on one machine with the same ``vllm_port``, two engines the proxy
  would reach at the same ``address:port``, and the proxy's port equal to an
  engine's ``vllm_port`` on the machine that runs both;
* an engine the proxy cannot reach: ``nginx_proxy_backend_address`` or
  ``vllm_listen_host`` on loopback while a proxy runs on another machine, or
  ``nginx_proxy_backend_address`` on loopback while vLLM listens on one other
  address only (``vllm_listen_host`` set to the machine's own);
* ``split`` on fewer than two machines, its group not the engine group,
  two ranks on one machine, ``vllm_split_head`` outside the group, ranks that
  disagree on the parallel sizes, ``vllm_split_tensor_parallel_size`` x
  ``vllm_split_pipeline_parallel_size`` not equal to the hosts given, and a
  tensor-parallel size the declared heads (``site_engine_groups_num_attention_heads``)
  cannot be split over (a split over all N engine hosts, N > 2, is run as one group);
* a declared ``site_engine_groups`` (``_engine_groups.check_grouping``) with a host outside the
  engine group or in no or two groups, a group size the model's heads cannot be split over, or two
  hosts of a group on one machine; engine hosts that disagree on it; and, outside a group move
  (move_groups.yml, which runs any of them), a grouping other than the topology's own (every host its own
  group for ``replicas``, every engine host in one group with ``vllm_split_head`` first for ``split``);
* in a group move, a target (``move_to``) that ``check_grouping`` refuses.

A machine is identified by where Ansible connects: ``ansible_host`` (default,
the inventory name) and ``ansible_port`` when set to other than ssh's 22;
``ansible_connection=local`` and loopback addresses without a port are the
controller itself.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_groups
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import WILDCARD_HOSTS

TOPOLOGIES = ("replicas", "split")
# Groups named after the topologies: read as "the hosts of that topology" when an
# inventory has them (and does not use them as its engine, proxy or split group).
TOPOLOGY_GROUPS = TOPOLOGIES
# ssh's port: an ansible_port of 22 is the same machine as no ansible_port.
SSH_PORT = 22

# Group names and defaults as the roles and playbooks have them (a unit test
# compares them with roles/*/defaults/main.yml).
ENGINE_GROUP = "gb10"   # the playbooks' engine hosts; site_engine_group
PROXY_GROUP = "proxy"   # the playbooks' proxy hosts; site_proxy_group
SPLIT_GROUP = "gb10"    # vllm_split_group
DEFAULTS = {
    "vllm_port": 8000,                        # roles/vllm
    "vllm_listen_host": "0.0.0.0",            # roles/vllm
    "site_proxy_port": 8080,                  # roles/site
    "vllm_split_tensor_parallel_size": 2,     # roles/vllm_split
    "vllm_split_pipeline_parallel_size": 1,   # roles/vllm_split
}

# The inventory variables the check reads for each host.
HOST_VARS = (
    "topology",
    "ansible_host",
    "ansible_port",
    "ansible_connection",
    "vllm_port",
    "vllm_listen_host",
    "site_proxy_port",
    "nginx_proxy_backend_address",
    "vllm_split_head",
    "vllm_split_tensor_parallel_size",
    "vllm_split_pipeline_parallel_size",
    "vllm_served_model_name",
    "site_engine_groups",
    "site_engine_groups_num_attention_heads",
    "site_engine_groups_num_key_value_heads",
)

_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_CONTROLLER = "the controller (ansible_connection=local)"


def is_loopback(address):
    """True for ``localhost``, ``127.0.0.0/8`` and ``::1``."""
    if address is None:
        return False
    text = str(address).strip().lower().strip("[]")
    if text in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def machine_of(name, hostvars):
    """A key naming the machine an inventory host is, and how to say it."""
    if str(hostvars.get("ansible_connection") or "") == "local":
        return "local", _CONTROLLER
    address = str(hostvars.get("ansible_host") or name)
    port = hostvars.get("ansible_port")
    if port not in (None, "") and _whole(port) != SSH_PORT:
        return "%s:%s" % (address.lower(), port), "ansible_host %s, ansible_port %s" % (address, port)
    if is_loopback(address):
        return "local", _CONTROLLER
    return address.lower(), "ansible_host %s" % address


def _whole(value):
    """``value`` as an int when it is a whole number (int or digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _names(hosts):
    return ", ".join(hosts) if hosts else "none"


def _where(host):
    return "host_vars/%s.yml" % host


class _Report:
    """Collects errors as dicts: check id, hosts, variables and the message."""

    def __init__(self):
        self.errors = []

    def add(self, check, message, hosts=(), variables=()):
        self.errors.append({
            "check": check,
            "hosts": sorted(set(hosts)),
            "variables": list(variables),
            "message": message,
        })


def _setting(hostvars, key):
    return hostvars.get(key, DEFAULTS.get(key))


def _port(report, host, hostvars, key, fallback_key=None):
    """A port setting of ``host`` as an int, or None after reporting it."""
    if key in hostvars or fallback_key is None:
        name, value = key, _setting(hostvars, key)
    else:
        name, value = fallback_key, _setting(hostvars, fallback_key)
    port = _whole(value)
    if port is None or not 1 <= port <= 65535:
        report.add("port_value", "%s on %s is %r: set a whole number 1-65535 in %s." % (name, host, value, _where(host)),
                   [host], [name])
        return None
    return port


def _check_topology_agrees(report, hosts, hostvars, topology):
    by_value = {}
    for host in hosts:
        value = hostvars.get(host, {}).get("topology")
        by_value.setdefault("not set" if value in (None, "") else repr(str(value)), []).append(host)
    if len(by_value) <= 1:
        return
    # The value most hosts carry is the site's, and on a tie the topology this run
    # brings the site to; the others are the ones to fix.
    ranked = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0] != repr(str(topology)), item[0]))
    odd = [host for value, group in ranked[1:] for host in group]
    said = "; ".join("%s on %s" % (value, _names(group)) for value, group in ranked)
    report.add(
        "topology_differs",
        "The hosts disagree on topology (%s): a host runs one topology, the site's, so %s would run the other "
        "topology's units next to the rest, or fail half-way. Set topology once for the whole site, in "
        "group_vars/all.yml, and remove it from the host_vars or group_vars that give %s another value."
        % (said, _names(odd), _names(odd)),
        odd, ["topology"])


def _check_topology_groups(report, groups, topology, used):
    """A host under both groups named after the topologies (when the inventory has them)."""
    if any(name in used or name not in groups for name in TOPOLOGY_GROUPS):
        return
    first, second = (groups[name] for name in TOPOLOGY_GROUPS)
    both = [host for host in first if host in second]
    if not both:
        return
    if topology in TOPOLOGY_GROUPS:
        drop = [name for name in TOPOLOGY_GROUPS if name != topology][0]
        fix = "this run brings the site to topology %r. Remove %s from group '%s'" % (topology, _names(both), drop)
    else:
        fix = "remove %s from one of them" % _names(both)
    report.add(
        "topology_groups",
        "%s %s listed in both group '%s' and group '%s': a machine runs one topology's units, the site's; %s in "
        "hosts.yml (the site's topology is the variable topology, set once in group_vars/all.yml)."
        % (_names(both), "is" if len(both) == 1 else "are", TOPOLOGY_GROUPS[0], TOPOLOGY_GROUPS[1], fix),
        both, ["topology"])


def _group_state(groups, group):
    return "is not in the inventory" if group not in groups else "has no hosts"


def no_engines_message(groups, engine_group=ENGINE_GROUP, proxy_group=PROXY_GROUP):
    """What to change when ``engine_group`` has no host (``groups``: group name -> hosts)."""
    state = _group_state(groups, engine_group)
    proxies = list(groups.get(proxy_group) or [])
    if proxies:
        return ("Group '%s' %s, so the proxy on %s (group '%s') has no replica to send requests to. List the GB10 "
                "machine(s) under %s in hosts.yml; one is enough, and it can run the proxy too."
                % (engine_group, state, _names(proxies), proxy_group, engine_group))
    return "Group '%s' %s: list the GB10 machine(s) under %s in hosts.yml." % (engine_group, state, engine_group)


def no_proxy_message(groups, proxy_group=PROXY_GROUP):
    """What to change when ``proxy_group`` has no host."""
    return ("Group '%s' %s: every client goes through the proxy (nginx least_conn). List the host that runs it under "
            "%s in hosts.yml; on one machine, list the GB10 host itself (the proxy listens on site_proxy_port, "
            "vLLM on vllm_port)." % (proxy_group, _group_state(groups, proxy_group), proxy_group))


def check_layout(topology, groups, hostvars, engine_group=ENGINE_GROUP, proxy_group=PROXY_GROUP,
                 split_group=SPLIT_GROUP, move=False, move_to=None):
    """Check a layout; return ``{"errors": [...], "layout": {...}}``.

    ``groups`` maps group names to inventory host names (missing groups are
    absent); ``hostvars`` maps each host to the ``HOST_VARS`` set for it.
    ``errors`` is empty when the layout can work. Each error is a dict with
    ``check`` (an id), ``hosts``, ``variables`` and ``message``.

    ``move``: the run is a group move (move_groups.yml), which runs any grouping ``check_grouping`` accepts: a
    declared ``site_engine_groups`` of several groups is not refused then, and ``move_to`` (the move's target, a list
    of host lists) is checked as a declared grouping is.
    """
    report = _Report()
    groups = {name: list(members or []) for name, members in (groups or {}).items()}
    hostvars = {name: dict(values or {}) for name, values in (hostvars or {}).items()}
    engines = groups.get(engine_group, [])
    proxies = groups.get(proxy_group, [])
    split_hosts = groups.get(split_group, [])
    everyone = []
    for host in engines + proxies + (split_hosts if topology == "split" else []):
        if host not in everyone:
            everyone.append(host)

    def hv(host):
        return hostvars.get(host, {})

    # --- topology
    if topology not in TOPOLOGIES:
        report.add("topology",
                   "topology is %r: set it to 'replicas' (one full copy per machine behind the proxy) or 'split' "
                   "(one model over two machines) in group_vars/all.yml." % (topology,), [], ["topology"])
    _check_topology_agrees(report, everyone, hostvars, topology)
    _check_topology_groups(report, groups, topology, (engine_group, proxy_group, split_group))

    # --- groups
    if not engines:
        report.add("no_engines", no_engines_message(groups, engine_group, proxy_group), proxies, [])
    if not proxies:
        report.add("no_proxy", no_proxy_message(groups, proxy_group), [], [])

    machines = {host: machine_of(host, hv(host)) for host in everyone}

    # --- split
    split = {"head": None, "tensor_parallel_size": None, "pipeline_parallel_size": None}
    if topology == "split" and engines:
        _check_split(report, engines, split_hosts, engine_group, split_group, hv, machines, split)

    # --- the declared grouping (site_engine_groups)
    if engines:
        _check_engine_groups(report, topology, engines, engine_group, hv, machines, split, move)
    if engines and move and move_to:
        _check_move_to(report, engines, engine_group, hv, machines, move_to)

    # --- engines that serve the API: every replica, or the split's head
    if topology == "split":
        serving = [split["head"]] if split["head"] in engines else []
    else:
        serving = list(engines)

    vllm_ports = {host: _port(report, host, hv(host), "vllm_port") for host in serving}
    proxy_ports = {host: _port(report, host, hv(host), "site_proxy_port") for host in proxies}

    # two engines on one machine on one port
    by_machine_port = {}
    for host in serving:
        if vllm_ports[host] is not None:
            by_machine_port.setdefault((machines[host][0], vllm_ports[host]), []).append(host)
    for (machine, port), hosts in sorted(by_machine_port.items()):
        if len(hosts) > 1:
            taken = [p for (m, p) in by_machine_port if m == machine]
            report.add(
                "port_shared",
                "%s are the same machine (%s) and each runs a replica on vllm_port %d: only one can listen there. "
                "Give %s another vllm_port (for example %d) in %s, or remove the duplicate host."
                % (" and ".join(hosts), machines[hosts[0]][1], port, hosts[-1], max(taken) + 1, _where(hosts[-1])),
                hosts, ["vllm_port"])

    # two engines the proxy reaches at one address:port
    by_endpoint = {}
    for host in serving:
        if vllm_ports[host] is not None:
            address = str(hv(host).get("nginx_proxy_backend_address") or host).lower()
            by_endpoint.setdefault("%s:%d" % (address, vllm_ports[host]), []).append(host)
    for endpoint, hosts in sorted(by_endpoint.items()):
        if len(hosts) > 1 and len({machines[host][0] for host in hosts}) > 1:
            report.add(
                "upstream_shared",
                "%s would all be reached by the proxy at %s (nginx_proxy_backend_address:vllm_port), so one engine "
                "would get every one's share. Set nginx_proxy_backend_address of %s to that machine's own address in %s."
                % (" and ".join(hosts), endpoint, hosts[-1], _where(hosts[-1])),
                hosts, ["nginx_proxy_backend_address", "vllm_port"])

    # the proxy and an engine on one machine, one port
    for proxy in proxies:
        for host in serving:
            if machines[proxy][0] != machines[host][0]:
                continue
            if proxy_ports[proxy] is not None and proxy_ports[proxy] == vllm_ports[host]:
                variable = "site_proxy_port"
                who = ("%s runs both the proxy and vLLM" % host if proxy == host else
                       "%s runs the proxy and %s vLLM on the same machine (%s)" % (proxy, host, machines[host][1]))
                report.add(
                    "proxy_port_shared",
                    "%s, both on port %d (%s and vllm_port): only one can listen there. Keep them apart: clients use "
                    "the proxy's port (site_proxy_port, 8080 by default), the proxy reaches vLLM on vllm_port (8000 by "
                    "default); change %s (group_vars/all.yml or %s) or vllm_port."
                    % (who, vllm_ports[host], variable, variable, _where(proxy)),
                    sorted({proxy, host}), [variable, "vllm_port"])

    # engines the proxy cannot reach
    for host in serving:
        elsewhere = [proxy for proxy in proxies
                     if machines[proxy][0] != machines[host][0]]
        address = hv(host).get("nginx_proxy_backend_address")
        listen = _setting(hv(host), "vllm_listen_host")
        # vLLM bound to one address answers there only, not on loopback
        specific = str(listen).strip().strip("[]") not in WILDCARD_HOSTS and not is_loopback(listen)
        if is_loopback(address) and specific and len(elsewhere) < len(proxies):
            report.add(
                "loopback_backend_listen_specific",
                "nginx_proxy_backend_address of %s is %s, but vLLM there listens on vllm_listen_host=%s only, so the "
                "proxy on that machine would find nothing at %s. Set nginx_proxy_backend_address to %s in %s, or "
                "vllm_listen_host to 0.0.0.0 (the firewall keeps other clients off the port)."
                % (host, address, listen, address, listen, _where(host)),
                [host], ["nginx_proxy_backend_address", "vllm_listen_host"])
        if not elsewhere:
            continue
        if is_loopback(address):
            report.add(
                "loopback_backend",
                "nginx_proxy_backend_address of %s is %s, but the proxy runs on %s, another machine: there %s is the "
                "proxy itself. A loopback address works only when the proxy runs on the engine's machine; set %s's "
                "own address in %s, or remove it (the default is the inventory name)."
                % (host, address, _names(elsewhere), address, host, _where(host)),
                [host] + elsewhere, ["nginx_proxy_backend_address"])
        if is_loopback(listen):
            report.add(
                "loopback_listen",
                "vLLM on %s listens on vllm_listen_host=%s, which the proxy on %s (another machine) cannot reach. "
                "Set vllm_listen_host to 0.0.0.0 in %s (the firewall keeps other clients off the port), or run the "
                "proxy on %s." % (host, listen, _names(elsewhere), _where(host), host),
                [host] + elsewhere, ["vllm_listen_host"])

    layout = {
        "topology": topology,
        "engines": engines,
        "proxies": proxies,
        "serving": serving,
        "split": split if topology == "split" else None,
        "machines": _machine_table(everyone, machines),
        "upstream": sorted(by_endpoint),
    }
    return {"errors": report.errors, "layout": layout}


def _machine_table(hosts, machines):
    table = {}
    for host in hosts:
        table.setdefault(machines[host][1], []).append(host)
    return table


def _check_split(report, engines, split_hosts, engine_group, split_group, hv, machines, split):
    """The split's own checks; fills ``split`` with the head and parallel sizes."""
    if split_group != engine_group and sorted(split_hosts) != sorted(engines):
        only_engines = [host for host in engines if host not in split_hosts]
        only_split = [host for host in split_hosts if host not in engines]
        report.add(
            "split_group",
            "With topology 'split' every engine host runs a rank, so group '%s' (the engines) and vllm_split_group "
            "'%s' must hold the same hosts; only in %s: %s; only in %s: %s. Set vllm_split_group to '%s' or make the "
            "groups equal." % (engine_group, split_group, engine_group, _names(only_engines), split_group,
                               _names(only_split), engine_group),
            only_engines + only_split, ["vllm_split_group"])
        return
    hosts = split_hosts if split_hosts else engines
    group_said = "group '%s' (vllm_split_group)" % split_group
    if len(hosts) < 2:
        report.add(
            "split_hosts",
            "topology 'split' runs one model over two or more machines, one rank each, but %s has %d: %s. To fix, add "
            "a second machine to %s, or keep topology 'replicas' (one full copy per machine)."
            % (group_said, len(hosts), _names(hosts), split_group),
            hosts, ["topology", "vllm_split_group"])

    # every rank is started with the same sizes and the same head
    values = {}
    for key in ("vllm_split_head", "vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size"):
        seen = {}
        for host in hosts:
            default = hosts[0] if key == "vllm_split_head" else DEFAULTS[key]
            seen.setdefault(str(hv(host).get(key, default)), []).append(host)
        if len(seen) > 1:
            report.add(
                "split_settings_differ",
                "The split's hosts disagree on %s (%s): every rank must be started with the same value. Set it once "
                "in group_vars/%s.yml." % (key, "; ".join("%s on %s" % (value, _names(group))
                                                          for value, group in sorted(seen.items())), split_group),
                [host for group in seen.values() for host in group], [key])
        first = hosts[0] if hosts else None
        values[key] = hv(first).get(key, first if key == "vllm_split_head" else DEFAULTS[key]) if first else None

    head = values["vllm_split_head"]
    if hosts and head not in hosts:
        report.add(
            "split_head",
            "vllm_split_head is %r, which is not in %s: set it to one of %s (or remove it: the default is the first "
            "host)." % (head, group_said, _names(hosts)),
            [], ["vllm_split_head"])
    split["head"] = head if head in hosts else None

    tensor = _whole(values["vllm_split_tensor_parallel_size"])
    pipeline = _whole(values["vllm_split_pipeline_parallel_size"])
    split["tensor_parallel_size"], split["pipeline_parallel_size"] = tensor, pipeline
    for key, size in (("vllm_split_tensor_parallel_size", tensor), ("vllm_split_pipeline_parallel_size", pipeline)):
        if size is None or size < 1:
            report.add("split_parallel", "%s is %r: set a whole number >= 1 in group_vars/%s.yml."
                       % (key, values[key], split_group), [], [key])
    if len(hosts) >= 2 and tensor and pipeline and tensor >= 1 and pipeline >= 1 and tensor * pipeline != len(hosts):
        report.add(
            "split_parallel",
            "vllm_split_tensor_parallel_size (%d) x vllm_split_pipeline_parallel_size (%d) = %d ranks, but the split "
            "runs one rank on each of the %d hosts in %s (%s). Make the product %d: on GB10, "
            "vllm_split_tensor_parallel_size %d and vllm_split_pipeline_parallel_size 1 (group_vars/%s.yml)."
            % (tensor, pipeline, tensor * pipeline, len(hosts), group_said, _names(hosts), len(hosts), len(hosts),
               split_group),
            hosts, ["vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size"])
    _check_split_heads(report, hosts, hv, tensor, group_said, split_group)

    # one rank per machine: every pair of the group's hosts on two machines
    first_on = {}
    for host in hosts:
        machine = machines[host][0]
        if machine not in first_on:
            first_on[machine] = host
            continue
        other = first_on[machine]
        report.add(
            "split_machines",
            "The split's %shosts %s and %s are the same machine (%s): the split needs %s machines joined by "
            "their direct link. Point one of them at the other machine (ansible_host in %s)."
            % ("two " if len(hosts) == 2 else "", other, host, machines[host][1],
               "two" if len(hosts) == 2 else "one machine per rank, %d" % len(hosts), _where(host)),
            [other, host] if len(hosts) > 2 else hosts, ["ansible_host"])


def _check_split_heads(report, hosts, hv, tensor, group_said, split_group):
    """A tensor-parallel size the model's heads cannot be split over, where the inventory declares the heads
    (``site_engine_groups_num_attention_heads`` / ``_num_key_value_heads``; the split's own preflight reads the model's
    config.json on the host)."""
    first = hosts[0] if hosts else None
    heads = _whole(hv(first).get("site_engine_groups_num_attention_heads")) if first else None
    kv_heads = _whole(hv(first).get("site_engine_groups_num_key_value_heads")) if first else None
    if not heads or not tensor or tensor < 1:
        return
    allowed = _engine_groups.split_sizes(heads, kv_heads, most=max(8, tensor, len(hosts)))
    if tensor not in allowed:
        sizes = " or ".join(str(size) for size in allowed if size > 1) or "1"
        report.add(
            "split_heads",
            "vllm_split_tensor_parallel_size is %d on %s, but the model's attention heads (%d, "
            "site_engine_groups_num_attention_heads) and key/value heads (%s, site_engine_groups_num_key_value_heads) "
            "split only over %s ranks: make %s %s machines with that tensor-parallel size, or keep topology 'replicas' "
            "(group_vars/%s.yml)." % (tensor, _names(hosts), heads, kv_heads or heads, sizes, group_said, sizes,
                                      split_group),
            hosts, ["vllm_split_tensor_parallel_size", "site_engine_groups_num_attention_heads"])


def _declared(report, engines, engine_group, hv, name):
    """``name``'s value on the engine hosts (None when none sets it), after reporting hosts that disagree."""
    seen = {}
    for host in engines:
        value = hv(host).get(name)
        seen.setdefault(repr(value), (value, []))[1].append(host)
    if len(seen) > 1:
        report.add(
            "engine_groups_differ",
            "The engine hosts disagree on %s (%s): the site has one grouping. Set it once, in group_vars/all.yml, and "
            "remove it from the host_vars or group_vars that give another value."
            % (name, "; ".join("%s on %s" % (_value_words(value), _names(hosts))
                               for value, hosts in seen.values())),
            [host for _value, hosts in seen.values() for host in hosts], [name])
        return None
    return next(iter(seen.values()))[0]


def _json_grouping(grouping):
    return "[%s]" % ", ".join("[%s]" % ", ".join('\"%s\"' % host for host in group) for group in grouping)


def _grouping_words(grouping):
    return "[%s]" % ", ".join("[%s]" % ", ".join(str(host) for host in group) for group in grouping)


def _value_words(value):
    if value is None:
        return "not set"
    if isinstance(value, (list, tuple)) and all(isinstance(group, (list, tuple)) for group in value):
        return _grouping_words(value)
    return repr(value)


def _heads(report, engines, engine_group, hv):
    name = _engine_groups.VARIABLE
    return {key: _whole(_declared(report, engines, engine_group, hv, "%s_%s" % (name, key)))
            for key in ("num_attention_heads", "num_key_value_heads")}


def _check_move_to(report, engines, engine_group, hv, machines, move_to):
    """A group move's target (``move_to``): check_grouping's errors, as for a declared grouping."""
    errors = _engine_groups.check_grouping(move_to, engines, engine_group=engine_group,
                                           machines={host: machines[host][0] for host in engines},
                                           **_heads(report, engines, engine_group, hv))
    for message in errors:
        report.add("move_to", message.replace(_engine_groups.VARIABLE, "move_to") + " (-e move_to=...).", engines,
                   ["move_to"])


def _check_engine_groups(report, topology, engines, engine_group, hv, machines, split, move=False):
    """A declared ``site_engine_groups``: check_grouping's errors, then whether the playbooks run it today (a group
    move runs every grouping check_grouping accepts; the two-topology playbooks run their own only)."""
    name = _engine_groups.VARIABLE
    declared = _declared(report, engines, engine_group, hv, name)
    if declared in (None, []):
        return
    heads = {key: _whole(_declared(report, engines, engine_group, hv, "%s_%s" % (name, key)))
             for key in ("num_attention_heads", "num_key_value_heads")}
    errors = _engine_groups.check_grouping(declared, engines, engine_group=engine_group,
                                           machines={host: machines[host][0] for host in engines}, **heads)
    for message in errors:
        report.add("engine_groups", message + " (in group_vars/all.yml).", engines, [name])
    if errors or move:
        return
    said = _grouping_words(declared)
    if not _engine_groups.is_supported(declared):
        report.add(
            "engine_groups_unsupported",
            "%s is %s: the deploy and the two-topology switches run only the two topologies' groupings (every host "
            "its own group, or one group of every engine host), so this playbook cannot bring the site to it; a "
            "group move does, one move at a time (factory_floor.llm.move_groups -e '{\"move_to\": %s}'). For this "
            "playbook, remove %s "
            "and set topology: replicas (a full copy on each engine host) or topology: split (one model over all the "
            "engine hosts) in group_vars/all.yml." % (name, said, _json_grouping(declared), name),
            engines, [name, "topology"])
        return
    if topology not in TOPOLOGIES:
        return
    wanted = _engine_groups.grouping_of(engines, topology, head=split["head"])
    if _engine_groups.topology_of(declared) != topology:
        report.add(
            "engine_groups_topology",
            "%s is %s, the %s grouping, but this run brings the site to topology %r, whose grouping is %s. Make them "
            "agree: set %s to %s, or remove it (the topology's own grouping), in group_vars/all.yml."
            % (name, said, _engine_groups.topology_of(declared), topology,
               _grouping_words(wanted), name, _grouping_words(wanted)),
            engines, [name, "topology"])
    elif topology == "split" and split["head"] and declared[0][0] != split["head"]:
        report.add(
            "engine_groups_head",
            "%s is %s, whose first host %s is the group's rank 0 (the host that serves the API), but vllm_split_head is "
            "%s. Put %s first in the group, or set vllm_split_head to %s, in group_vars/all.yml."
            % (name, said, declared[0][0], split["head"], split["head"], declared[0][0]),
            engines, [name, "vllm_split_head"])


def format_errors(errors):
    """One message for ``fail_json``: every error, numbered."""
    lines = ["The inventory describes a layout that cannot work; change it and run again:"]
    for index, error in enumerate(errors, 1):
        lines.append("%d) %s" % (index, error["message"]))
    return "\n".join(lines)


# ------------------------------------------------------------------ what the check reads from the inventory

def _flat(values):
    """``values`` with every nested list spread in place and nulls left out, as Ansible's ``flatten`` filter does."""
    out = []
    for value in values:
        if isinstance(value, (list, tuple)):
            out.extend(_flat(value))
        elif value not in (None, "None", "null"):
            out.append(value)
    return out


def _unique(values):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _set_vars(host_vars, names):
    """The variables of ``names`` that are set for a host (``host_vars``: its variables, any mapping)."""
    return {name: host_vars[name] for name in names if name in host_vars}


def inventory_input(groups, hostvars, engine_group=ENGINE_GROUP, proxy_group=PROXY_GROUP, split_group=SPLIT_GROUP,
                    key_vars=()):
    """The check's input read from an inventory: ``groups`` and ``hostvars`` as Ansible has them (any mappings).

    Returns ``(groups, host_vars, api_keys)``: the groups the check needs that the inventory has (the engine, proxy
    and split groups, and ``replicas``/``split`` when present: a host in both is refused), and per host of those
    groups the ``HOST_VARS`` and the ``key_vars`` set for it (unset ones are absent: the roles' defaults apply).
    """
    wanted = {}
    for name in (engine_group, proxy_group, split_group) + TOPOLOGY_GROUPS:
        if name in groups:
            wanted[name] = list(groups[name] or [])
    host_vars, api_keys = {}, {}
    for host in _unique(_flat(wanted.values())):
        one = hostvars[host] if host in hostvars else {}
        host_vars[host] = _set_vars(one, HOST_VARS)
        api_keys[host] = _set_vars(one, key_vars)
    return wanted, host_vars, api_keys


def prometheus_hosts(engines, hostvars, inventory):
    """The engine hosts that set ``vllm_prometheus_hosts`` (``setters``) and the names it lists that ``inventory``
    (``groups['all']``) does not (``unlisted``): topology_record publishes scrape targets there by delegation."""
    setters = [host for host in engines or [] if host in hostvars and "vllm_prometheus_hosts" in hostvars[host]]
    named = _unique(_flat([hostvars[host]["vllm_prometheus_hosts"] for host in setters]))
    return {"setters": setters, "unlisted": [name for name in named if name not in (inventory or [])]}


def prometheus_hosts_errors(found):
    """The refusal of :func:`prometheus_hosts`' ``unlisted`` names (one error, or none): topology_record publishes scrape
    targets on those hosts by delegation, and a name the inventory does not list would fail there after the engines
    changed."""
    unlisted, setters = list(found.get("unlisted") or []), list(found.get("setters") or [])
    if not unlisted:
        return []
    them = "it" if len(unlisted) == 1 else "them"
    message = ("vllm_prometheus_hosts names %s, which the inventory does not list (set for %s): add %s to the inventory, "
               "or remove %s from vllm_prometheus_hosts." % (", ".join(unlisted), ", ".join(setters), them, them))
    return [{"check": "prometheus_hosts", "hosts": sorted(set(setters)), "variables": ["vllm_prometheus_hosts"],
             "message": message}]
