# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The refusals of the engine service roles' own preflights: the split's layout, the watchdog's settings, the
firewall's clients.

Pure logic, standard library only. Behind ``factory_floor.llm.vllm_role_check``, whose action plugin reads, on the
controller, the variables each check names in ``VARIABLES`` (as the task sees them) and passes what the role's tasks
read on the host as ``observed``. Each check returns a list of errors - check id, hosts, variables, message - in the
shape of ``_vllm_check``'s; the messages are the words the roles' ``assert`` tasks said before.

* ``split`` (the vllm_split role's ``preflight``): a layout the split cannot run on - fewer than ``SPLIT_HOSTS``
  machines in its group, this host not one of them (one rank per host), a head outside the group, tensor x pipeline
  parallel size other than the group's size, this rank's direct link or the head's address unset - and a
  tensor-parallel size the model's heads cannot be split over (``observed``: ``model_config``, the ``slurp`` of the
  model's ``config.json``; ``_engine_groups.split_sizes``), each a refusal of its own.
* ``watchdog`` (the vllm_watchdog role's preflight): a setting the watchdog cannot run with; with the split, a group
  it cannot watch. ``watchdog_topology`` (its ``disable`` entry point): a topology other than ``replicas``/``split``.
* ``firewall`` (the vllm role's ``firewall``): a ``vllm_allowed_clients`` entry nftables cannot match.
"""

from __future__ import annotations

import base64
import json
import re

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import split_sizes
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_check import (
    TOPOLOGIES, _Errors, _length, _text, format_errors)

CHECKS = ("split", "watchdog", "watchdog_topology", "firewall")

# The fewest machines a split runs on (one model, tensor parallelism over a group of them, one rank each).
SPLIT_HOSTS = 2

VARIABLES = {
    "split": ("inventory_hostname", "vllm_split_group", "_vllm_split_hosts", "vllm_split_head",
              "vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size", "vllm_link_interface",
              "vllm_link_address", "vllm_split_model", "_vllm_split_head_address"),
    "watchdog": ("inventory_hostname", "vllm_watchdog_topology", "vllm_served_model_name", "vllm_watchdog_interval",
                 "vllm_watchdog_stall_window", "vllm_watchdog_probe_timeout", "vllm_watchdog_startup_grace",
                 "vllm_watchdog_dead_confirm", "vllm_watchdog_down_confirm", "vllm_watchdog_max_restarts",
                 "vllm_watchdog_restart_window", "vllm_watchdog_backoff", "vllm_watchdog_backoff_max",
                 "vllm_watchdog_request_timeout", "vllm_watchdog_lock_stale_after", "vllm_watchdog_split_group",
                 "_vllm_watchdog_split_hosts", "vllm_watchdog_split_head", "vllm_link_address",
                 "vllm_watchdog_status_port", "vllm_watchdog_pair_ack_timeout", "vllm_watchdog_pair_skew"),
    "watchdog_topology": ("vllm_watchdog_topology",),
    "firewall": ("vllm_allowed_clients",),
}

# Read only where they matter (the watchdog's split layout, a split's model); undefined, they are absent.
OPTIONAL = frozenset(("vllm_watchdog_split_group", "_vllm_watchdog_split_hosts", "vllm_watchdog_split_head",
                      "vllm_link_address", "vllm_watchdog_status_port", "vllm_watchdog_pair_ack_timeout",
                      "vllm_watchdog_pair_skew", "vllm_split_model", "_vllm_split_head_address"))

# nftables matches addresses: IPv4 with an optional prefix length, or anything with a colon (IPv6).
_IPV4 = re.compile(r"^([0-9]{1,3}\.){3}[0-9]{1,3}(/[0-9]{1,2})?$")


def _list(value):
    return list(value) if isinstance(value, (list, tuple)) else []


# ------------------------------------------------------------------------------- split

def split_layout_ok(hosts, head, tensor_parallel_size, pipeline_parallel_size, interface, address,
                    needed=None):
    """Whether the split can run on ``hosts`` (the group's machines, in order): ``needed`` of them (None: two or
    more), ``head`` among them, tensor x pipeline parallel size equal to their number, and this host's direct link
    set."""
    return ((len(hosts) == needed if needed else len(hosts) >= SPLIT_HOSTS) and head in hosts
            and jinja_int(tensor_parallel_size) * jinja_int(pipeline_parallel_size) == len(hosts)
            and _length(interface) > 0 and _length(address) > 0)


def model_config_read(v):
    """The ``slurp`` arguments of the split model's ``config.json`` on the host, or None when ``vllm_split_model`` is
    not a path (a hub name: nothing to read)."""
    model = str(v.get("vllm_split_model") or "")
    return {"src": model + "/config.json"} if model.startswith("/") else None


def model_heads(model_config):
    """``(num_attention_heads, num_key_value_heads)`` of a model from the ``slurp`` of its ``config.json`` (its text
    model's for a multimodal one); 0 for what was not read or is not said (key/value heads: then as many as the
    attention heads, as in transformers' configs)."""
    content = (model_config or {}).get("content")
    if content is None:
        return 0, 0
    config = json.loads(base64.b64decode(content))
    text = config.get("text_config") or {}
    heads = jinja_int(config.get("num_attention_heads", text.get("num_attention_heads", 0)))
    kv_heads = config.get("num_key_value_heads", text.get("num_key_value_heads"))
    return heads, jinja_int(kv_heads) if kv_heads is not None else heads


def attention_heads(model_config):
    """The attention heads of a model from the ``slurp`` of its ``config.json``; 0 when not read or not said."""
    return model_heads(model_config)[0]


def _shapes(machines, allowed):
    """``T x P`` for every tensor-parallel size the heads allow that, with pipeline parallelism, fills ``machines``."""
    return ", ".join("vllm_split_tensor_parallel_size %d x vllm_split_pipeline_parallel_size %d" % (t, machines // t)
                     for t in allowed if machines and machines % t == 0)


def check_split(v, observed):
    errors = _Errors()
    hosts = [_text(host) for host in _list(v.get("_vllm_split_hosts"))]
    host = _text(v.get("inventory_hostname"))
    group = "group '%s' (vllm_split_group)" % v.get("vllm_split_group")
    tensor = v.get("vllm_split_tensor_parallel_size")
    pipeline = v.get("vllm_split_pipeline_parallel_size")
    head = _text(v.get("vllm_split_head"))
    if len(hosts) < SPLIT_HOSTS:
        listed = ", ".join(hosts) or "none"
        errors.add("split_hosts", (
            "The split runs one model over two or more machines, one rank each, but %s has %d: %s. Add machines to "
            "it, or run topology 'replicas' (one full copy per machine)." % (group, len(hosts), listed)),
            hosts=[host], variables=["vllm_split_group"])
    elif host not in hosts:
        errors.add("split_member", (
            "%s would run a rank of the split but is not in %s (%s): each rank runs on one host of the group. Add %s "
            "to the group, or leave it out of the play (--limit)." % (host, group, ", ".join(hosts), host)),
            hosts=[host], variables=["vllm_split_group"])
    if hosts and head not in hosts:
        errors.add("split_head", (
            "vllm_split_head (%s) is not in %s (%s): set it to one of them, or remove it (the group's first host is "
            "the head, rank 0)." % (head, group, ", ".join(hosts))), hosts=[host], variables=["vllm_split_head"])
    if len(hosts) >= SPLIT_HOSTS and jinja_int(tensor) * jinja_int(pipeline) != len(hosts):
        errors.add("split_parallel", (
            "vllm_split_tensor_parallel_size x vllm_split_pipeline_parallel_size (%s x %s) must equal the number of "
            "machines in %s (%d, one rank each): set vllm_split_tensor_parallel_size %d and "
            "vllm_split_pipeline_parallel_size 1 (or another pair whose product is %d)."
            % (tensor, pipeline, group, len(hosts), len(hosts), len(hosts))),
            hosts=[host], variables=["vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size"])
    if _length(v.get("vllm_link_interface")) == 0 or _length(v.get("vllm_link_address")) == 0:
        errors.add("split_link", (
            "Every rank needs its direct link: vllm_link_interface / vllm_link_address on %s are '%s' / '%s'. Set both "
            "in its host_vars (the interface of the link and this host's address on it)."
            % (host, v.get("vllm_link_interface"), v.get("vllm_link_address"))),
            hosts=[host], variables=["vllm_link_interface", "vllm_link_address"])
    elif "_vllm_split_head_address" in v and _length(v.get("_vllm_split_head_address")) == 0 and head in hosts:
        errors.add("split_head_link", (
            "The head %s has no known address on the direct link, so rank %s cannot meet it (--master-addr): set "
            "vllm_link_address in %s's host_vars, or gather its facts in this run (its vllm_link_interface's address)."
            % (head, host, head)), hosts=[host, head], variables=["vllm_link_address"])
    heads, kv_heads = model_heads(observed.get("model_config"))
    size = jinja_int(tensor)
    allowed = split_sizes(heads, kv_heads, most=max(8, size, len(hosts)))
    if heads > 0 and size not in allowed:
        # Size 1 always fits the heads, so some tensor x pipeline shape always fills the group.
        larger = " or ".join(str(one) for one in allowed if one > 1)
        fix = (" Over the %d machines of %s: %s%s." % (
            len(hosts), group, _shapes(len(hosts), allowed),
            "; or make the group %s machines (tensor parallelism alone)" % larger if larger else "")
            if len(hosts) >= SPLIT_HOSTS else "")
        errors.add("split_heads", (
            "%s has num_attention_heads %d and num_key_value_heads %d, which vllm_split_tensor_parallel_size=%s cannot "
            "split: vLLM would refuse to start. Tensor-parallel sizes that work: %s.%s"
            % (v.get("vllm_split_model"), heads, kv_heads, tensor, ", ".join(str(one) for one in allowed), fix)),
            hosts=[host], variables=["vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size"])
    return errors


# ------------------------------------------------------------------------------- watchdog

# (variable, bound, inclusive): the watchdog's durations (seconds) and budget, as its preflight checked them.
_WATCHDOG_BOUNDS = (
    ("vllm_watchdog_interval", 0, False), ("vllm_watchdog_probe_timeout", 0, False),
    ("vllm_watchdog_startup_grace", 0, False), ("vllm_watchdog_dead_confirm", 0, False),
    ("vllm_watchdog_down_confirm", 0, True), ("vllm_watchdog_restart_window", 0, False),
    ("vllm_watchdog_backoff", 0, True), ("vllm_watchdog_backoff_max", 0, False),
    ("vllm_watchdog_request_timeout", 0, False), ("vllm_watchdog_lock_stale_after", 0, False),
)


def watchdog_settings_ok(v):
    """Whether the watchdog can run with ``v``'s settings (topology, served name, durations, restart budget)."""
    bounds = all(jinja_float(v.get(name)) >= bound if inclusive else jinja_float(v.get(name)) > bound
                 for name, bound, inclusive in _WATCHDOG_BOUNDS)
    return (v.get("vllm_watchdog_topology") in TOPOLOGIES and _length(v.get("vllm_served_model_name")) > 0 and bounds
            and jinja_float(v.get("vllm_watchdog_stall_window")) >= jinja_float(v.get("vllm_watchdog_interval"))
            and jinja_int(v.get("vllm_watchdog_max_restarts")) >= 1)


def watchdog_split_ok(v, hosts):
    """Whether the split watchdog can watch ``hosts`` (two or more, this host and the head among them) from here."""
    return (len(hosts) >= 2 and _text(v.get("inventory_hostname")) in hosts
            and _text(v.get("vllm_watchdog_split_head")) in hosts and _length(v.get("vllm_link_address")) > 0
            and 1 <= jinja_int(v.get("vllm_watchdog_status_port")) <= 65535
            and jinja_float(v.get("vllm_watchdog_pair_ack_timeout")) > 0 and jinja_float(v.get("vllm_watchdog_pair_skew")) > 0)


def check_watchdog(v, observed):
    del observed  # reads nothing from the host
    errors = _Errors()
    host = v.get("inventory_hostname")
    if not watchdog_settings_ok(v):
        now = ", ".join(_text(v.get(name)) for name in (
            "vllm_watchdog_probe_timeout", "vllm_watchdog_startup_grace", "vllm_watchdog_dead_confirm",
            "vllm_watchdog_restart_window", "vllm_watchdog_backoff_max", "vllm_watchdog_request_timeout",
            "vllm_watchdog_lock_stale_after", "vllm_watchdog_down_confirm", "vllm_watchdog_backoff",
            "vllm_watchdog_max_restarts"))
        errors.add("watchdog_settings", (
            "The watchdog on %s needs vllm_watchdog_topology 'replicas' or 'split' (now '%s'), vllm_served_model_name "
            "set (the 1-token probe asks for it; now '%s'), vllm_watchdog_interval > 0 s (%s), "
            "vllm_watchdog_stall_window >= the interval (%s), and vllm_watchdog_probe_timeout, _startup_grace, "
            "_dead_confirm, _restart_window, _backoff_max, _request_timeout, _lock_stale_after > 0 s, _down_confirm "
            "and _backoff >= 0 s, _max_restarts >= 1 (now %s)."
            % (host, v.get("vllm_watchdog_topology"), v.get("vllm_served_model_name"), v.get("vllm_watchdog_interval"),
               v.get("vllm_watchdog_stall_window"), now)),
            hosts=[host], variables=[name for name, _bound, _inclusive in _WATCHDOG_BOUNDS])
    hosts = [_text(name) for name in _list(v.get("_vllm_watchdog_split_hosts"))]
    if v.get("vllm_watchdog_topology") == "split" and not watchdog_split_ok(v, hosts):
        values = (v.get("vllm_watchdog_split_group"), ", ".join(hosts) or "none", host,
                  v.get("vllm_watchdog_split_head"), v.get("vllm_link_address", ""), v.get("vllm_watchdog_status_port"))
        message = ("The split watchdog needs two or more machines in group '%s' (now %s) with %s and "
                   "vllm_watchdog_split_head (%s) among them, this host's direct-link address vllm_link_address (now "
                   "'%s'; gather facts or set it), vllm_watchdog_status_port in 1-65535 (%s) and "
                   "vllm_watchdog_pair_ack_timeout, vllm_watchdog_pair_skew > 0 s." % values)
        errors.add("watchdog_split", message, hosts=[host],
                   variables=["vllm_watchdog_split_group", "vllm_watchdog_split_head", "vllm_link_address",
                              "vllm_watchdog_status_port", "vllm_watchdog_pair_ack_timeout", "vllm_watchdog_pair_skew"])
    return errors


def check_watchdog_topology(v, observed):
    del observed
    errors = _Errors()
    if v.get("vllm_watchdog_topology") not in TOPOLOGIES:
        errors.add("watchdog_topology", "vllm_watchdog_topology must be 'replicas' or 'split', got '%s'."
                   % v.get("vllm_watchdog_topology"), variables=["vllm_watchdog_topology"])
    return errors


# ------------------------------------------------------------------------------- firewall

def not_addresses(clients):
    """The entries of ``clients`` nftables cannot match: neither IPv4 (with an optional prefix) nor IPv6."""
    return [client for client in _list(clients) if not _IPV4.match(_text(client)) and ":" not in _text(client)]


def check_firewall(v, observed):
    del observed
    errors = _Errors()
    wrong = not_addresses(v.get("vllm_allowed_clients"))
    if wrong:
        errors.add("allowed_clients", "vllm_allowed_clients must hold IPv4/IPv6 addresses or CIDRs (nftables matches "
                   "addresses); not addresses: %s." % (wrong,), variables=["vllm_allowed_clients"])
    return errors


_CHECK_FUNCTIONS = {
    "split": check_split,
    "watchdog": check_watchdog,
    "watchdog_topology": check_watchdog_topology,
    "firewall": check_firewall,
}


def check(name, variables, observed=None):
    """Run the check ``name`` (one of ``CHECKS``) over ``variables`` (by name, as in ``VARIABLES[name]``; an
    undefined OPTIONAL one absent) and ``observed``. A list of errors, empty when nothing is refused."""
    if name not in _CHECK_FUNCTIONS:
        raise ValueError("check must be one of %s, not %r" % (", ".join(CHECKS), name))
    return _CHECK_FUNCTIONS[name](dict(variables), dict(observed or {}))


__all__ = ["CHECKS", "VARIABLES", "OPTIONAL", "SPLIT_HOSTS", "check", "format_errors", "split_layout_ok", "model_heads",
           "attention_heads", "watchdog_settings_ok", "watchdog_split_ok", "not_addresses"]
