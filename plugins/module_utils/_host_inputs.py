# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the controller's cross-host decisions read from the hosts' variables, on the controller.

The action plugins of ``switch_plan`` and ``site_status`` (and the ``site_check_report`` filter) call these with Ansible's ``hostvars``
(or a dict of dicts in the tests): each returns the module arguments the role tasks used to
assemble in Jinja from every host's facts and registered results, read the same way - a host
missing from ``hostvars``, or one that did not set the variable, gives that argument's empty
value. Pure logic; the names of the facts are the roles' (their ``meta/argument_specs.yml`` and
the comments of the tasks that set them).
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import notes_of
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import engine_probe_url

# switch_plan, procedure switch: what switch_preflight registered on each engine host (systemctl is-active of the
# engine units, the topology record read), what the maintenance_window role noted there, the tool gate's facts on the
# first engine host and on the incumbent's host, and each proxy host's drains (the nginx_proxy role's drained).
UNITS = "__vllm_switch_units"
RECORDS_SEEN = "__vllm_switch_records_seen"
NOTES = "maintenance_window_host"  # read with _maintenance_window.notes_of (ansible_facts first)
GATED = "tool_gate_gated"
BAR = "tool_gate_bar"
INCUMBENT = "tool_gate_incumbent"
KNOWN = "tool_gate_known"
DRAINS = "nginx_proxy_drained"
# switch_plan, procedure record: the topology record switch_record read on each engine host.
RECORD_SEEN = "__vllm_switch_record_seen"
# rolling_restart_plan: each proxy host's rotation (the nginx_proxy role's rotation entry point).
ROTATION = "nginx_proxy_rotation"
# site_status: what each role's status entry point read on its hosts.
ENGINE_STATUS = "vllm_status"
PROXY_STATUS = "nginx_proxy_status"
# site_check_report: what site_check.yml noted on each host, and the model manifest and link it read there.
SITE_CHECK = "site_check"
SITE_CHECK_MANIFEST = "__site_check_manifest"
SITE_CHECK_INFO = "__site_check_info"
LINK_SEEN = "__vllm_split_link_seen"
KEEPALIVED_STATUS = "keepalived_status"

_MISSING = object()


def fact(hostvars, host, name, default=None):
    """``hostvars[host][name]``, or ``default`` when the host or its variable is not there (Jinja's ``default``:
    a variable set to null is null)."""
    if not host or host not in hostvars:
        return default
    host_vars = hostvars[host]
    return host_vars[name] if name in host_vars else default


def per_host(hostvars, hosts, name, default=_MISSING):
    """``{host: its variable name}`` for every host of ``hosts``, in that order (``{}`` where it has none)."""
    return {host: fact(hostvars, host, name, {} if default is _MISSING else default) for host in hosts or ()}


def _notes(hostvars, hosts):
    """``{host: what it noted during the run}`` for every host of ``hosts`` (``{}`` where it noted nothing)."""
    return {host: notes_of(hostvars[host], {}) if host and host in hostvars else {} for host in hosts or ()}


def switch_inputs(hostvars, engines, proxies=(), incumbent_host=""):
    """switch_plan's arguments for a topology switch from what the hosts said so far.

    ``incumbent_host`` is the host of the previous decision's incumbent (empty before the first one): its stored
    tool-calling score is the announcement's, and the new build's stored score it looked up (``tool_gate_known``)
    decides when the gate runs. ``min_score`` is left out when the first engine host holds no bar.
    """
    engines = list(engines or ())
    first = engines[0] if engines else None
    units = {}
    for host in engines:
        seen = fact(hostvars, host, UNITS, {})
        units[host] = seen.get("stdout_lines", []) if isinstance(seen, dict) else []
    inputs = {
        "units": units,
        "drains": [fact(hostvars, host, DRAINS, {}) for host in proxies or ()],
        "gated": fact(hostvars, first, GATED, False),
        "incumbent_score": fact(hostvars, incumbent_host, INCUMBENT, {}) if incumbent_host else {},
        # Looked up where the incumbent was (tool_gate's incumbent entry point): the new build's stored score.
        "known_build": fact(hostvars, incumbent_host, KNOWN, {}) if incumbent_host else {},
        "notes": _notes(hostvars, engines),
        "records": per_host(hostvars, engines, RECORDS_SEEN),
    }
    gate_bar = fact(hostvars, first, BAR, {})
    if isinstance(gate_bar, dict) and gate_bar.get("min_score") is not None:
        inputs["min_score"] = gate_bar["min_score"]
    return inputs


def upgrade_inputs(hostvars, engines):
    """switch_plan's arguments for a model upgrade (switch_model.yml): each engine host's stored tool-calling score
    (``tool_gate_incumbent``) and maintenance note, and ``min_score`` from the bar (``tool_gate_bar``) of the first
    engine host that holds one - left out when none does, or when that bar names no ``min_score``."""
    engines = list(engines or ())
    inputs = {"incumbents": per_host(hostvars, engines, INCUMBENT), "notes": _notes(hostvars, engines)}
    for host in engines:
        gate_bar = fact(hostvars, host, BAR, _MISSING)
        if gate_bar is _MISSING:
            continue
        if isinstance(gate_bar, dict) and "min_score" in gate_bar:
            inputs["min_score"] = gate_bar["min_score"]
        break
    return inputs


def site_check_inputs(hostvars, engines, proxies=()):
    """The site check report's inputs (site_check.yml's last play): ``records``, each host's ``site_check`` record for
    the engine and proxy hosts (each once, engine hosts first) that noted one, with its ``groups`` (``engine`` for an
    engine host, then ``proxy`` for a proxy host) put first, and where the host registered ``__site_check_info``
    (``site_host_info``'s result) that result as ``info`` and its OS, version, architecture (``ansible_facts``) and
    virtualization as ``facts``; per engine host among them its
    model manifest (``__site_check_manifest``) and the link it read (``__vllm_split_link_seen``), ``{}`` where it
    has none; and the first of them's ``vllm_link_mtu`` (``mtu``, else null) and ``vllm_runtime`` (``runtime``,
    else ``container``) - null and ``container`` when no engine host noted a record."""
    engines, proxies = list(engines or ()), list(proxies or ())
    hosts = []
    for host in engines + proxies:
        if host not in hosts and SITE_CHECK in hostvars[host]:
            hosts.append(host)
    records = {}
    for host in hosts:
        record = dict({"groups": (["engine"] if host in engines else []) + (["proxy"] if host in proxies else [])},
                      **hostvars[host][SITE_CHECK])
        if SITE_CHECK_INFO in hostvars[host]:
            # What the host showed, where the check got as far as site_host_info: its facts and that module's result.
            info = hostvars[host][SITE_CHECK_INFO]
            facts = fact(hostvars, host, "ansible_facts", {}) or {}
            record["facts"] = {"distribution": facts.get("distribution", ""),
                               "distribution_version": facts.get("distribution_version", ""),
                               "architecture": facts.get("architecture", ""),
                               "virtualization": info["virtualization"]}
            record["info"] = info
        records[host] = record
    checked = [host for host in hosts if host in engines]
    first = checked[0] if checked else None
    return {
        "records": records,
        "manifests": per_host(hostvars, checked, SITE_CHECK_MANIFEST),
        "link": per_host(hostvars, checked, LINK_SEEN),
        "mtu": fact(hostvars, first, "vllm_link_mtu", None),
        "runtime": fact(hostvars, first, "vllm_runtime", "container") if first else "container",
    }


def _flatten(items):
    """Ansible's ``flatten`` filter: nested lists and tuples opened, null items (and the strings ``None``, ``null``)
    left out."""
    flat = []
    for item in items:
        if item is None or item in ("None", "null"):
            continue
        if isinstance(item, (list, tuple)):
            flat.extend(_flatten(item))
        else:
            flat.append(item)
    return flat


def prometheus_hosts(hostvars, engines):
    """The Prometheus hosts the engine hosts name (each one's ``vllm_prometheus_hosts``, a list) in that order, each
    once - compared as Ansible's ``unique`` filter compares (case-insensitive for strings, the first spelling kept)."""
    named = _flatten([fact(hostvars, host, "vllm_prometheus_hosts", []) for host in engines or ()])
    listed, seen = [], set()
    try:
        for host in named:
            key = host.lower() if isinstance(host, str) else host
            if key not in seen:
                seen.add(key)
                listed.append(host)
    except TypeError:  # an unhashable item: Ansible's own unique, exact comparison
        listed = []
        for host in named:
            if host not in listed:
                listed.append(host)
    return listed


def link_check_findings(hostvars, hosts, collective=None, transport=None):
    """link_check.yml's findings file: each host's ``vllm_split_link`` (``{}`` where it has none), the collective's
    report and the engine's transport report."""
    return {"hosts": per_host(hostvars, hosts, "vllm_split_link"), "collective": collective, "transport": transport}


def record_inputs(hostvars, engines):
    """switch_plan's ``records`` at the end of a switch: the topology record each engine host read then."""
    return {"records": per_host(hostvars, engines, RECORD_SEEN)}


def restart_inputs(hostvars, proxies):
    """rolling_restart_plan's ``rotations`` for a replica's turn in the rolling restart: every proxy host's rotation."""
    return {"rotations": [fact(hostvars, host, ROTATION, {}) for host in proxies or ()]}


def site_status_inputs(hostvars, engines, proxies=()):
    """site_status's arguments from what the status entry points read on each host, and the inventory's topology
    and split head as the first engine host's variables say (``replicas`` and that host when they are not set).
    ``keepalived`` is the first proxy host's ``keepalived_status`` that is set, left out when none is."""
    engines = list(engines or ())
    first = engines[0] if engines else None
    inputs = {
        "engines": per_host(hostvars, engines, ENGINE_STATUS),
        "proxies": per_host(hostvars, proxies, PROXY_STATUS),
    }
    if first is not None:
        inputs["inventory_topology"] = fact(hostvars, first, "topology", "replicas")
        inputs["split_head"] = fact(hostvars, first, "vllm_split_head", first)
    for host in proxies or ():
        status = fact(hostvars, host, KEEPALIVED_STATUS, _MISSING)
        if status is not _MISSING:
            inputs["keepalived"] = status
            break
    return inputs


def metrics_engines(hostvars, engines, topology):
    """The engines that serve the model now, each on its own address (never the proxy's), as the site_view role's
    observe entry point lists them for metrics.yml and prometheus-config.yml: ``[{name, address, port, url}]``.

    ``replicas``: every host of ``engines``; ``split``: the rank-0 head only (the first engine host's
    ``vllm_split_head``, else that host). The address is the host's ``metrics_address``, else its
    ``nginx_proxy_backend_address`` (what the proxy uses), else its ``ansible_host``, else its inventory name; the
    port the one the engine's own host probes (:func:`engine_probe_url`, the ``vllm_probe_url`` filter's).
    """
    engines = list(engines or ())
    if not engines:
        return []
    names = engines if topology == "replicas" else [fact(hostvars, engines[0], "vllm_split_head", engines[0])]
    listed = []
    for name in names:
        host_vars = hostvars[name] if name in hostvars else {}
        address = name
        for key in ("ansible_host", "nginx_proxy_backend_address", "metrics_address"):
            if key in host_vars:
                address = host_vars[key]
        port = int(engine_probe_url(host_vars).rsplit(":", 1)[-1])
        listed.append({"name": name, "address": address, "port": port, "url": "http://%s:%s" % (address, port)})
    return listed


def engine_endpoint(hostvars, host):
    """Another engine host's endpoint, as a vLLM client module on that host takes it (the vllm action group's
    ``url``, ``api_key``, ``model``): the URL its own host reaches it at (:func:`engine_probe_url` of its variables),
    its ``vllm_api_key`` (left out when empty or not set) and its ``vllm_served_model_name``.

    Raises ``ValueError`` naming what is missing: a host not in the inventory, or without a served model name.
    """
    if not host or host not in hostvars:
        raise ValueError("engine_host %r is not a host of the inventory" % (host,))
    host_vars = hostvars[host]
    if "vllm_served_model_name" not in host_vars:
        raise ValueError("engine_host %s has no vllm_served_model_name in the inventory" % host)
    endpoint = {"url": engine_probe_url(host_vars), "model": host_vars["vllm_served_model_name"]}
    if host_vars.get("vllm_api_key"):
        endpoint["api_key"] = host_vars["vllm_api_key"]
    return endpoint


def restart_pending(hostvars, engines):
    """``[(host, change)]``: the engine hosts of ``engines`` whose engine plan (``vllm_service_plan``, the vllm role's
    plan entry point) says the running engine must restart for its new configuration, in that order."""
    pending = []
    for host in engines or ():
        plan = fact(hostvars, host, "vllm_service_plan", None)
        if isinstance(plan, dict) and plan.get("restart_pending"):
            pending.append((host, plan.get("change")))
    return pending
