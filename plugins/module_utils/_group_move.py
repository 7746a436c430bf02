# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One group move (issue 37): what the next step from the grouping that runs to a target grouping does.

Pure logic, no I/O. A change of grouping is a sequence of moves (``_engine_groups.group_moves``); a run does the
first one of what is left, reading again what runs before the next, so a move with nothing left to do ends at once
and an interrupted change goes on from where it stopped. :func:`move_plan` says, for that move: the hosts it
touches and, per host, what stops and what starts (the replicas' unit, or the split's with its rank in its new
group); the groups that keep serving meanwhile; the proxy members to drain and to admit; the capacity left during
the move (groups and hosts serving, and KV tokens where ``_kv_cache_plan.plan_groupings`` gives them); the hosts the
tool-calling gate tests (each new group's API host, its rank 0); the rollback of a failed new group (only the groups
the move touched that share hosts with it come back; the groups that serve are never touched); whether the model is
away (no group serves meanwhile: two hosts, or a model that needs every host); and the announcement and dry run, in
the words of the two-topology switch (``_switch_plan``), which is the two-host case of this one.

Inputs, by inventory host name: ``current`` and ``target`` are groupings (lists of groups, each in rank order);
``failed``: the hosts whose start or gate failed in this run (None: nothing started yet); ``lost``: the hosts no
longer in the run (counted as failed; an old group that needs one cannot come back).
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import api_hosts, group_moves
from ansible_collections.factory_floor.llm.plugins.module_utils._group_record import kind_of, running_grouping

UNITS = tr.UNITS


def current_grouping(engines, units, records=None, head=None):
    """The grouping that runs now, from each host's ``systemctl is-active`` states (``units``, in
    ``_topology_record.UNIT_ORDER``) and, where given, its topology record (``records``: per host the
    ``topology_record`` module's result, whose ``record`` places a split host in its group):
    ``_group_record.running_grouping``'s result."""
    observed = {}
    for host in engines:
        seen = (records or {}).get(host) or {}
        states = (units or {}).get(host)
        observed[host] = {"record": seen.get("record") if isinstance(seen, dict) else None,
                          "runs": tr.runs(states) if states else None}
    return running_grouping(engines, observed, head)


def _key(group):
    return frozenset(group)


def _words(groups):
    return ", ".join("[%s]" % ", ".join(group) for group in groups) or "nothing"


def _hosts(groups):
    return [host for group in groups for host in group]


def restorable(groups, lost=()):
    """The groups of ``groups`` that can be started again: those with no host in ``lost``."""
    lost = set(lost or ())
    return [list(group) for group in groups if not lost & set(group)]


def _parts(step):
    """The step's stopped and started groups cut into parts that share hosts: each part rolls back on its own."""
    parts = []
    tagged = [("stop", group) for group in step["stop"]] + [("start", group) for group in step["start"]]
    for side, group in tagged:
        joined = [part for part in parts if set(_hosts(part["stop"] + part["start"])) & set(group)]
        part = {"stop": [], "start": []}
        for other in joined:
            part["stop"] += other["stop"]
            part["start"] += other["start"]
            parts.remove(other)
        part[side].append(group)
        parts.append(part)
    return parts


def _place(group, host):
    return {"topology": kind_of(group), "unit": UNITS[kind_of(group)], "group": list(group),
            "rank": list(group).index(host)}


def capacity(groups, total_groups, kv_tokens=None):
    """What serves: ``groups_serving`` of ``groups_total``, their hosts, and their KV tokens (the sum over the groups
    of ``kv_tokens[size]``, tokens; None when a size is not in ``kv_tokens``)."""
    kv_tokens = {int(size): tokens for size, tokens in (kv_tokens or {}).items()}
    sizes = [len(group) for group in groups]
    kv = sum(kv_tokens[size] for size in sizes) if kv_tokens and all(size in kv_tokens for size in sizes) else None
    return {"groups_serving": len(groups), "groups_total": len(total_groups), "hosts_serving": sum(sizes),
            "hosts_total": sum(len(group) for group in total_groups), "kv_tokens_serving": kv}


def kv_by_size(groupings):
    """``{size: kv_tokens}`` from ``_kv_cache_plan.plan_groupings``'s result (each grouping's ``sizes`` and
    ``kv_tokens``, tokens per group)."""
    found = {}
    for option in groupings or []:
        for size, tokens in zip(option.get("sizes") or [], option.get("kv_tokens") or []):
            found.setdefault(int(size), tokens)
    return found


def timeline(current, target, replica_fits=True, kv_tokens=None):
    """Every move from ``current`` to ``target`` with the capacity left during each: what the report shows per move
    before the first starts (``number``, ``stop``, ``start``, ``serving``, ``away``, ``capacity``: :func:`capacity`
    of the groups serving during the move, with ``before`` it)."""
    rows = []
    for number, step in enumerate(group_moves(current, target, replica_fits), 1):
        total = step["serving"] + step["stop"]
        rows.append(dict(step, number=number, capacity=dict(capacity(step["serving"], total, kv_tokens),
                                                            before=capacity(total, total, kv_tokens))))
    return rows


def move_plan(current, target, engines=None, replica_fits=True, kv_tokens=None, failed=None, lost=(), gated=True,
              members=None, number=1):
    """The plan of the next move from ``current`` to ``target`` (the first of ``group_moves``), from what this run
    has seen so far.

    ``engines``: the engine hosts in inventory order (the order hosts are named in); ``kv_tokens``: ``{size:
    tokens}`` (:func:`kv_by_size`); ``gated``: whether the new groups pass the tool-calling gate before they join
    (else ``gate_hosts`` is empty); ``members``: the proxy's members (``_engine_groups.proxy_members``), None for
    every API host; ``number``: this move's number in the change, for the words.

    Returns ``todo`` (a move is left), ``moves`` (the timeline of every move left, :func:`timeline`), ``remaining``,
    ``move`` (``stop``, ``start``, ``serving``, ``away``: the step), ``touched`` (its hosts), ``hosts`` (per touched
    host ``stops`` and ``starts``: ``{topology, unit, group, rank}`` or None), ``serving`` (the groups that keep
    serving), ``drain`` and ``admit`` (proxy members), ``capacity`` (during the move; ``before`` and ``after`` it),
    ``away``, ``gate_hosts``, ``rollback`` (``needed``, ``stop``: the new groups stopped again, ``start``: the old
    groups back, ``hosts``, ``lost_groups``: old groups that cannot come back), ``after`` (the grouping once the move
    is done, rolled back where it failed), ``announcement`` and ``dry_run``.
    """
    engines = list(engines or _hosts(current) + [h for h in _hosts(target) if h not in _hosts(current)])
    current = [list(group) for group in current or []]
    target = [list(group) for group in target or []]
    moves = timeline(current, target, replica_fits, kv_tokens)
    plan = {"current": current, "target": target, "number": number, "moves": moves, "remaining": len(moves),
            "todo": bool(moves)}
    if not moves:
        plan.update(move={}, touched=[], hosts={}, serving=current, drain=[], admit=[], away=False, gate_hosts=[],
                    rollback={"needed": False, "stop": [], "start": [], "hosts": [], "lost_groups": []},
                    after=current, failed_hosts=[], lost_hosts=[],
                    capacity=dict(capacity(current, current, kv_tokens), before=capacity(current, current, kv_tokens),
                                  after=capacity(current, current, kv_tokens)))
        plan["announcement"] = "Already on %s: no group to move, nothing will stop." % _words(target)
        plan["dry_run"] = ["Dry run of the group moves to %s: nothing to move, every group already runs as the target "
                           "says." % _words(target)]
        return plan
    step = {key: moves[0][key] for key in ("stop", "start", "serving", "away")}
    touched = [host for host in engines if host in set(_hosts(step["stop"] + step["start"]))]
    hosts = {}
    for host in touched:
        old = [group for group in step["stop"] if host in group]
        new = [group for group in step["start"] if host in group]
        hosts[host] = {"stops": _place(old[0], host) if old else None, "starts": _place(new[0], host) if new else None}
    lost_hosts = [host for host in engines if host in set(lost or ())]
    failed_hosts = [host for host in engines if host in set(failed or ()) | set(lost_hosts)]
    rollback = {"needed": False, "stop": [], "start": [], "hosts": [], "lost_groups": []}
    kept, gate, after = [], [], list(step["serving"])
    for part in _parts(step):
        broken = [group for group in part["start"] if set(group) & set(failed_hosts)]
        back = restorable(part["stop"], lost_hosts)
        # An old group that needs a lost host cannot come back; the part rolls back when some old group can (or
        # none ran: the new groups just stop), as the two-topology switch does (the split needs every host).
        if broken and (back or not part["stop"] or not lost_hosts):
            rollback["needed"] = True
            rollback["stop"] += part["start"]
            rollback["start"] += back
            rollback["lost_groups"] += [g for g in part["stop"] if g not in back]
            after += back
            continue
        good = [group for group in part["start"] if group not in broken]
        kept += good
        after += good
        if not broken or not back:
            gate += api_hosts(good)
    place = {host: number for number, host in enumerate(engines)}
    after.sort(key=lambda group: place.get(group[0], len(place)))
    rollback["hosts"] = [host for host in touched if host in set(_hosts(rollback["stop"] + rollback["start"]))]
    members = None if members is None else set(members)
    plan.update(
        move=step, touched=touched, hosts=hosts, serving=step["serving"], away=step["away"],
        drain=[host for host in api_hosts(step["stop"]) if members is None or host in members],
        admit=[host for host in api_hosts(kept) if members is None or host in members],
        gate_hosts=[host for host in engines if host in gate] if gated else [], rollback=rollback, after=after,
        failed_hosts=failed_hosts, lost_hosts=lost_hosts,
        capacity=dict(moves[0]["capacity"], after=capacity(after, after, kv_tokens)))
    plan["announcement"] = announcement(plan, gated)
    plan["dry_run"] = dry_run(plan, gated)
    return plan


def _unit_words(groups, role):
    """``vllm-split.service on spark-a (rank 0), spark-b (rank 1)``, one clause per group."""
    words = []
    for group in groups:
        unit = UNITS[kind_of(group)]
        if len(group) == 1:
            words.append("%s on %s (a replica)" % (unit, group[0]))
        else:
            api = ", serves the API" if role == "start" else ""
            ranks = ["%s (rank %d%s)" % (host, rank, "" if rank else api) for rank, host in enumerate(group)]
            words.append("%s on %s" % (unit, ", ".join(ranks)))
    return "; ".join(words) or "nothing"


def _capacity_words(cap):
    plural = "" if cap["groups_total"] == 1 else "s"
    words = "%d of %d group%s, %d of %d hosts" % (cap["groups_serving"], cap["groups_total"], plural,
                                                  cap["hosts_serving"], cap["hosts_total"])
    before = cap.get("before") or {}
    if cap.get("kv_tokens_serving") is not None and before.get("kv_tokens_serving"):
        words += ", {:,} of {:,} KV tokens".format(cap["kv_tokens_serving"], before["kv_tokens_serving"])
    return words


def _meanwhile(plan):
    if plan["away"]:
        return ("no other group serves: the model is away for one start-up of the new group%s (clients get 503)"
                % ("s" if len(plan["move"]["start"]) > 1 else ""))
    serving = plan["serving"]
    return "%s %s meanwhile: %s" % (_words(serving), "serves" if len(serving) == 1 else "serve",
                                    _capacity_words(plan["capacity"]))


def _capital(text):
    return text[:1].upper() + text[1:]


def announcement(plan, gated=True):
    """The sentence a move prints before anything stops: what stops, what serves meanwhile, what a failure does."""
    step = plan["move"]
    more = plan["remaining"] - 1
    text = ("Group move %d toward %s: stopping %s, starting %s; %s." % (
        plan["number"], _words(plan["target"]), _words(step["stop"]), _words(step["start"]), _meanwhile(plan)))
    if gated:
        text += (" The tool-calling gate tests %s directly before %s the proxy." % (
            ", ".join(api_hosts(step["start"])), "it joins" if len(step["start"]) == 1 else "each joins"))
    else:
        text += " The tool-calling gate is off: the new groups take traffic untested."
    text += (" If a new group does not serve%s, the groups it took hosts from are started again (a rollback), the "
             "others are not touched, and no further move runs." % (" or fails the gate" if gated else ""))
    if more:
        text += " %d more move%s after this one." % (more, "" if more == 1 else "s")
    return text


def dry_run(plan, gated=True):
    """The plan a dry run of a move prints, one line each, as the two-topology switch's dry run does."""
    step = plan["move"]
    lines = ["Dry run of group move %d toward %s: this is what a run would do. Nothing was changed, no tool-calling "
             "test was sent, no lock was taken." % (plan["number"], _words(plan["target"])),
             "Stops: %s (%s drained from the proxy, in-flight requests finishing, before it stops)." % (
                 _unit_words(step["stop"], "stop"), ", ".join(plan["drain"]) or "nothing"),
             "Starts: %s, rendered and checked before anything stops; its watchdog after it serves." % (
                 _unit_words(step["start"], "start")),
             "%s." % _capital(_meanwhile(plan))]
    if gated:
        lines.append("Gated: yes - the tool-calling gate tests %s directly before %s the proxy." % (
            ", ".join(api_hosts(step["start"])), "it joins" if len(step["start"]) == 1 else "each joins"))
    else:
        lines.append("Gated: no - the new groups take traffic untested.")
    lines.append("If a new group does not serve%s: %s started again on %s (a rollback), %s, and the run fails." % (
        " or fails the gate" if gated else "", _words(step["stop"]), ", ".join(plan["touched"]),
        "the groups that serve are not touched" if step["serving"] else "nothing else serves meanwhile"))
    for row in plan["moves"][1:]:
        lines.append("Then move %d: stops %s, starts %s; %s." % (
            plan["number"] + row["number"] - 1, _words(row["stop"]), _words(row["start"]),
            "the model is away" if row["away"] else "%s serve%s (%s)" % (
                _words(row["serving"]), "s" if len(row["serving"]) == 1 else "", _capacity_words(row["capacity"]))))
    lines.append("To run it: the same command without -e switch_dry_run=true (and without --check).")
    return lines
