# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a playbook run under ``--limit`` needs from hosts the limit leaves out. Pure logic.

``ansible-playbook --limit`` narrows every play to the hosts it names; a play then
sees nothing of the others but their inventory variables - no facts, no results of
their tasks. Each playbook of the collection needs something else from hosts outside
its own plays, and this module says, per playbook, what, and what to do about it:

========================  ==============================================================
playbook                  what it needs from hosts outside the limit
========================  ==============================================================
deploy                    the proxy hosts' addresses (the engines' firewall admits them
                          by their default IPv4 address, from their facts): gathered;
                          the split's other ranks (the split deploys as one group, one share,
                          ranks 1..N-1 need rank 0's link address): refused without them; every
                          proxy host when they share a floating address (keepalived's
                          VRRP peers are planned from the proxies in the run): refused
switch, switch_model      every engine and proxy host (the switch stops, starts, locks
                          and records all of them; the probe client and the report run
                          on the first proxy): refused without them
status                    every engine and proxy host and the controller's own play
                          (localhost puts the view together): refused without them
peers                     the proxy hosts' addresses (connections are classed by them):
                          gathered
metrics, prometheus_config, the host they run on (``metrics_from``, the first proxy host,
chat, tune                ``tune_host``): refused when the limit leaves it out - the run
                          would do nothing and exit 0
memory_guard,             nothing: each host works alone
tool_gate_spread
========================  ==============================================================

"Gathered" means the run reads the network facts of those hosts (``setup`` delegated to
them, read-only) before anything changes; a host that cannot be read then is refused
(``gathered``). Standard library only; nothing here connects anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_check import truncate

# Playbook names as the check takes them, and the files an operator runs (named in messages as the run's
# playbook_dir runs them: playbook_name).
PLAYBOOKS = {
    "deploy": ("deploy.yml",),
    "switch": ("switch-to-replicas.yml", "switch-to-split.yml"),
    "move_groups": ("move-groups.yml",),
    "switch_model": ("switch-model.yml",),
    "status": ("status.yml",),
    "peers": ("peers.yml",),
    "metrics": ("metrics.yml",),
    "prometheus_config": ("prometheus-config.yml",),
    "chat": ("chat.yml",),
    "tune": ("tune-concurrency.yml",),
    "memory_guard": ("memory-guard.yml",),
    "tool_gate_spread": ("tool-gate-spread.yml",),
}
# Playbooks that act on every engine and proxy host at once.
WHOLE_SITE = ("switch", "move_groups", "switch_model", "status")
# Playbooks that run on one host and need nothing else: (the variable that names it, its default).
READERS = {
    "metrics": ("metrics_from", "the first proxy host"),
    "prometheus_config": (None, "the first proxy host"),
    "chat": (None, "the first proxy host"),
    "tune": ("tune_host", "the first engine host"),
}
CONTROLLER = ("localhost", "127.0.0.1")


class LimitError(ValueError):
    """The arguments cannot be checked (an unknown playbook)."""


def _ordered(names, order):
    """``names`` in the order of ``order`` (the inventory's), then the rest as given."""
    names = list(dict.fromkeys(names))
    return [n for n in order if n in names] + [n for n in names if n not in order]


def _limit_text(hosts):
    return ",".join(hosts)


def limit_patterns(limit):
    """The patterns of a ``--limit`` string (``a,b:c:&d:!e``) without their ``&``/``!`` marks, excluded ones dropped."""
    patterns = []
    for part in (limit or "").replace(":", ",").split(","):
        part = part.strip()
        if not part or part.startswith("!"):
            continue
        patterns.append(part.lstrip("&"))
    return patterns


def check_limit(playbook, hosts, engines, proxies, split_hosts=None, topology="replicas", firewall=True,
                keepalived=False, reader=None, inventory=None, limit="", addresses=None, gathered=False,
                gather_errors=None, engine_group="gb10", proxy_group="proxy", playbook_dir=None):
    """What ``playbook`` run on ``hosts`` (the hosts ``--limit`` lets in) lacks, and what to do.

    ``engines``, ``proxies`` and ``split_hosts``: the inventory's engine, proxy and split
    groups (host names, in inventory order). ``topology``: the inventory's. ``firewall``:
    the engines' firewall is managed (``vllm_firewall``). ``keepalived``: the proxy hosts
    share a floating address. ``reader``: the host a one-host playbook runs on.
    ``inventory``: every inventory host (a reader outside it - ``localhost`` - is not
    checked). ``limit``: the ``--limit`` text, for messages ("" without one).
    ``addresses``: hosts whose address is known (their facts have a default IPv4
    address); a host of the run without one is left to its own play's fact gathering.
    ``gathered``: facts were gathered (the run's own and the hosts of an earlier
    ``gather``); a host still without an address is refused (``gather_errors``: why,
    per host). ``playbook_dir``: the run's, to name the playbooks as the operator runs them.

    Returns ``{"errors": [{"check", "message", "hosts", "limit"}], "gather": [...],
    "outside": [...]}`` - ``gather``: hosts outside the run whose network facts the run
    must read before anything changes; ``outside``: engine and proxy hosts the limit
    leaves out.
    """
    if playbook not in PLAYBOOKS:
        raise LimitError("playbook must be one of %s, got %r" % (", ".join(sorted(PLAYBOOKS)), playbook))
    order = list(engines or []) + [p for p in proxies or [] if p not in (engines or [])]
    in_run = set(hosts or [])
    site = _ordered(list(engines or []) + list(proxies or []), order)
    outside = [h for h in site if h not in in_run]
    errors = []
    gather = []
    name = " / ".join(playbook_name(file_name, playbook_dir) for file_name in PLAYBOOKS[playbook])
    shown = limit or ",".join(_ordered(in_run, order))
    intro = "%s with --limit %s" % (name, shown)

    def error(check, message, missing, suggested):
        errors.append({"check": check, "message": message, "hosts": missing, "limit": suggested})

    def whole():
        groups = "%s:%s" % (engine_group, proxy_group)
        if playbook == "status":
            groups += ":localhost"
        return "Run it without --limit (or --limit '%s')" % groups

    if playbook in WHOLE_SITE:
        missing = outside
        if missing:
            why = {
                "switch": "a switch stops, starts, locks and records every engine host at once, puts them in the "
                          "rotation of every proxy host, and runs its probe client and report on the first proxy "
                          "host; a switch of some hosts would leave the others on the other topology",
                "move_groups": "a group move reads what every engine host runs to plan its move, locks and records "
                               "every engine host, and runs its probe client and report on the first proxy host",
                "switch_model": "the upgrade decides over every replica (one carries the load while another "
                                "restarts), checks every proxy's rotation, and runs its probe client and report on "
                                "the first proxy host",
                "status": "the view is of the whole site: a host left out would show as not read, and the engines' "
                          "peers report would class the connections of a proxy left out as clients bypassing the "
                          "proxy",
            }[playbook]
            error("whole_site", "%s: %s, but %s %s left out. %s. Nothing has changed."
                  % (intro, why, ", ".join(missing), "is" if len(missing) == 1 else "are", whole()),
                  missing, "")
        if playbook == "status" and limit and not any(p in CONTROLLER for p in limit_patterns(limit)):
            error("controller", "%s: the view is put together in a play on localhost (the controller), which a "
                                "--limit that does not name it leaves out, so nothing would be printed. Run it "
                                "without --limit, or add localhost (--limit '%s,localhost'). Nothing has changed."
                  % (intro, limit), ["localhost"], "%s,localhost" % limit)
        return {"errors": errors, "gather": gather, "outside": outside}

    if playbook in READERS:
        variable, default = READERS[playbook]
        if reader and (inventory is None or reader in inventory) and reader not in in_run:
            how = ("-e %s=<a host in the limit>, " % variable) if variable else ""
            error("reader", "%s: it runs on %s (%s%s), which the limit leaves out: it would do nothing and exit 0. "
                            "Use --limit %s, %sor no --limit."
                  % (intro, reader, variable + ", default " if variable else "", default, reader, how),
                  [reader], reader)
        return {"errors": errors, "gather": gather, "outside": outside}

    if playbook in ("memory_guard", "tool_gate_spread"):
        return {"errors": errors, "gather": gather, "outside": outside}

    engines_in_run = [h for h in engines or [] if h in in_run]
    if playbook == "deploy":
        split = list(split_hosts or engines or [])
        split_in = [h for h in split if h in in_run]
        if topology == "split" and split_in and len(split_in) < len(split):
            missing = [h for h in split if h not in in_run]
            suggested = _limit_text(_ordered(list(in_run) + missing, order))
            # Two hosts are a pair; a larger group says "every rank" (the same refusal).
            words = (("as a pair - both ranks restart", "the tighter host's", "rank 1 is")
                     if len(split) == 2 else ("as one group - its %d ranks restart" % len(split), "the tightest host's",
                                              "every other rank is"))
            error("split_pair",
                  "%s: the split deploys %s together with one gpu_memory_utilization (%s) and %s given rank 0's "
                  "address on the link - but %s is left out. Use --limit %s, or no --limit. Nothing has changed."
                  % ((intro,) + words + (", ".join(missing), suggested)), missing, suggested)
        proxies_in = [h for h in proxies or [] if h in in_run]
        if keepalived and proxies_in and len(proxies_in) < len(proxies or []):
            missing = [h for h in proxies if h not in in_run]
            suggested = _limit_text(_ordered(list(in_run) + missing, order))
            error("proxy_peers",
                  "%s: the proxy hosts share a floating address, and each one's keepalived is written with the "
                  "others as its VRRP peers, planned from the proxy hosts in the run; %s %s left out, so %s would "
                  "be written without %s as a peer and both could hold the address. Use --limit %s, or no --limit "
                  "(%s restarts changed replicas one at a time by itself, while another serves). Nothing "
                  "has changed." % (intro, ", ".join(missing), "is" if len(missing) == 1 else "are",
                                    ", ".join(proxies_in), ", ".join(missing), suggested, name),
                  missing, suggested)
        needs_addresses = bool(firewall) and bool(engines_in_run)
        what = ("the engines' firewall admits the proxy hosts by address (their default IPv4 address, from their "
                "facts) and a firewall written without one shuts that proxy out of %s" % ", ".join(engines_in_run))
    else:   # peers
        needs_addresses = bool(engines_in_run)
        what = ("the peers report classes connections to %s by the proxy hosts' addresses (their default IPv4 "
                "address, from their facts); a proxy without one would show as a client bypassing the proxy"
                % ", ".join(engines_in_run))

    if needs_addresses:
        known = set(addresses or [])
        unknown = [h for h in proxies or [] if h not in known]
        if unknown and not gathered:
            # The hosts of the run get their facts from their own plays; the others must be asked.
            gather = [h for h in unknown if h not in in_run]
        elif unknown:
            reasons = gather_errors or {}
            error("proxy_address",
                  "%s: %s; the address of %s could not be read (%s). Nothing has changed. Bring %s back, or, if it is "
                  "gone, take it out of group %s."
                  % (intro, what, ", ".join(unknown),
                     "; ".join("%s: %s" % (h, reasons.get(h) or "its facts have no default IPv4 address")
                               for h in unknown),
                     ", ".join(unknown), proxy_group),
                  unknown, "")
    return {"errors": errors, "gather": gather, "outside": outside}


def format_errors(errors):
    """The errors as one message, numbered."""
    if len(errors) == 1:
        return errors[0]["message"]
    return " ".join("(%d) %s" % (index + 1, e["message"]) for index, e in enumerate(errors))


# ------------------------------------------------------------------ what the check reads from the other hosts

def _host(hostvars, host):
    return hostvars[host] if host in hostvars else {}


def keepalived_runs(proxies, first_enabled):
    """Whether the proxy hosts share a floating address: two or more of them, and ``keepalived_enabled`` (as set
    for the first, the keepalived role's default true) not false."""
    return len(proxies or []) >= 2 and bool(first_enabled)


def known_addresses(inventory, hostvars):
    """The hosts of ``inventory`` whose facts hold a default IPv4 address (``ansible_facts.default_ipv4.address``)."""
    known = []
    for host in inventory or []:
        facts = _host(hostvars, host).get("ansible_facts")
        ipv4 = facts.get("default_ipv4") if isinstance(facts, Mapping) else None
        if isinstance(ipv4, Mapping) and "address" in ipv4:
            known.append(host)
    return known


def gather_errors(inventory, hostvars, register):
    """Why a host of an earlier gather could not be read, by host: every inventory host's registered result
    ``register`` (a delegated ``setup`` loop, run from one host of a play), its unreachable or failed items'
    messages (300 characters at most)."""
    errors = {}
    for host in inventory or []:
        gathered = _host(hostvars, host).get(register)
        results = gathered.get("results") if isinstance(gathered, Mapping) else None
        for result in results or []:
            if not isinstance(result, Mapping) or "item" not in result:
                continue
            if result.get("unreachable") or result.get("failed"):
                errors[result["item"]] = truncate(str(result.get("msg") or ""), 300)
    return errors
