# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a grouping on each engine host (issue 37), and the grouping that runs now. Pure logic, no I/O.

Today each engine host's topology record (``_topology_record``, ``/var/lib/factory-floor/topology.json``) names
``replicas`` or ``split``. A site of engine groups records, next to those fields, three more::

    {"topology": "split", "grouping": [["spark-a", "spark-b"], ["spark-c"]], "group": ["spark-a", "spark-b"],
     "rank": 0, "since": ..., "by": ..., "playbook": ..., "run": ..., "note": ..., "model": ...}

- ``grouping``: the site's whole grouping as one move left it, every group in rank order (rank 0 first). It is one
  decision (:func:`grouping_writes`) written to every engine host alike, so the hosts hold the same list, and the
  next move's "what runs now" reads any of them;
- ``group`` and ``rank``: this host's group in that list and its place in it (derived from ``grouping``; a record
  whose ``group``/``rank`` do not match its ``grouping`` is refused as unreadable, so no host reads a group of its
  own making);
- ``topology`` stays the host's engine unit: ``replicas`` for a group of one, ``split`` for a group of two or more,
  so that today's readers (deploy.yml's refusal, the status view) read it as before.

A record without ``grouping`` (written before groups) is read as the grouping its topology stands for: ``replicas``
a group of its own host, ``split`` the two-topology site's one group of every engine host that records or runs
``split``, the head first (:func:`_engine_groups.grouping_of`).

Inputs follow ``_topology_record.compare``: ``observed`` is per host the ``topology_record`` module's result,
``record`` (the parsed record or None) and ``runs`` (``replicas``, ``split``, ``none``, ``both``, or None when the
units were not read).
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import api_hosts, grouping_of

# The record's fields a grouping adds (after _topology_record.FIELDS).
FIELDS = ("grouping", "group", "rank")
KINDS = ("replicas", "split")


def kind_of(group):
    """The engine unit a host of ``group`` runs: ``replicas`` (a group of one) or ``split`` (two or more)."""
    return "replicas" if len(group) == 1 else "split"


def _valid_grouping(value):
    if not isinstance(value, list) or not value:
        return False
    seen = set()
    for group in value:
        if not isinstance(group, list) or not group or not all(isinstance(h, str) and h for h in group):
            return False
        if seen & set(group) or len(set(group)) != len(group):
            return False
        seen |= set(group)
    return True


def parse_fields(data, topology=None):
    """The grouping fields of a record's JSON object ``data``: {} when it has no ``grouping`` (an old record), else
    ``grouping``, ``group``, ``rank`` and, when they do not hold together, ``grouping_error`` saying why.

    ``topology``: the record's own ``topology``; it must be the unit kind of the host's group.
    """
    if not isinstance(data, dict) or "grouping" not in data:
        return {}
    grouping, group, rank = data.get("grouping"), data.get("group"), data.get("rank")
    fields = {"grouping": grouping, "group": group, "rank": rank}
    if not _valid_grouping(grouping):
        fields["grouping_error"] = "grouping %r is not a list of host lists with every host once" % (grouping,)
    elif group not in grouping:
        fields["grouping_error"] = "group %r is not one of its grouping %r" % (group, grouping)
    elif isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(group):
        fields["grouping_error"] = "rank %r is not a place in its group %r" % (rank, group)
    elif topology is not None and topology != kind_of(group):
        fields["grouping_error"] = "topology %s is not what a group of %d runs (%s)" % (
            topology, len(group), kind_of(group))
    return fields


def record_of(grouping, host):
    """What ``host``'s record holds of ``grouping`` (groups in rank order): ``topology`` (its unit), ``grouping``,
    ``group``, ``rank``; None when the host is in no group."""
    for group in grouping or []:
        if host in group:
            return {"topology": kind_of(group), "grouping": [list(g) for g in grouping], "group": list(group),
                    "rank": list(group).index(host)}
    return None


def host_view(observed, host):
    """One host's record and what it runs, or None when it could not be read."""
    seen = (observed or {}).get(host)
    if not isinstance(seen, dict) or not seen or seen.get("unreachable") or seen.get("failed"):
        return None
    return {"record": seen.get("record"), "runs": seen.get("runs") or None}


def recorded_grouping(engines, observed, head=None):
    """The grouping the engine hosts' records say, and each disagreement in words.

    Records with ``grouping`` must all hold the same one (one decision written to all); old records are read as
    their topology's grouping (:func:`_engine_groups.grouping_of` over the hosts recording ``split``, ``head``
    first). Returns ``grouping`` (None when no record could be read, or they disagree), ``old`` (True when read
    from old records only) and ``disagreements``.
    """
    written, old, problems = {}, {}, []
    for host in engines:
        view = host_view(observed, host)
        record = (view or {}).get("record") or {}
        if record.get("grouping_error"):
            problems.append("%s's grouping record cannot be read (%s)" % (host, record["grouping_error"]))
        elif record.get("grouping") is not None:
            written[host] = record["grouping"]
        elif record.get("topology") in KINDS:
            old[host] = record["topology"]
    kinds = {repr(g) for g in written.values()}
    if len(kinds) > 1:
        problems.append("the hosts' records hold different groupings: %s" % "; ".join(
            "%s %s" % (host, _words(grouping)) for host, grouping in written.items()))
    if written and old:
        problems.append("%s %s no grouping (written before groups) while %s %s one" % (
            ", ".join(old), "holds" if len(old) == 1 else "hold", ", ".join(written),
            "holds" if len(written) == 1 else "hold"))
    if problems:
        return {"grouping": None, "old": False, "disagreements": problems}
    if written:
        return {"grouping": next(iter(written.values())), "old": False, "disagreements": []}
    if not old:
        return {"grouping": None, "old": False, "disagreements": []}
    split = [host for host in engines if old.get(host) == "split"]
    grouping = [[host] for host in engines if old.get(host) == "replicas"] + grouping_of(split, "split", head)
    return {"grouping": _ordered(grouping, engines), "old": True, "disagreements": []}


def _ordered(grouping, engines):
    """``grouping``'s groups in the order of their first host in ``engines``."""
    place = {host: number for number, host in enumerate(engines)}
    return sorted(grouping, key=lambda group: place.get(group[0], len(place)))


def _words(grouping):
    return " ".join("[%s]" % ", ".join(group) for group in grouping or []) or "nothing"


def running_grouping(engines, observed, head=None):
    """The grouping that runs now: what the next move starts from.

    A host that runs the replicas' unit is a group of its own. The hosts that run the split's unit are grouped as
    their records say (each recorded group whose every host runs ``split`` and records that same grouping); the
    others that run ``split`` (old records, no record, a group some host left) are one group, ``head`` first (the
    two-topology site's split). A host that runs nothing, both, or could not be read is in no group and named in
    ``idle``. Returns ``grouping`` (in engine order), ``idle`` ({host: why}), ``recorded``
    (:func:`recorded_grouping`'s), ``agrees`` (the records say what runs) and ``disagreements``.
    """
    runs, idle = {}, {}
    for host in engines:
        view = host_view(observed, host)
        if view is None:
            idle[host] = "could not be read"
        elif view["runs"] in KINDS:
            runs[host] = view["runs"]
        else:
            idle[host] = {"none": "no engine unit runs there", "both": "both engine units run there"}.get(
                view["runs"], "its engine units could not be read")
    recorded = recorded_grouping(engines, observed, head)
    grouping = [[host] for host in engines if runs.get(host) == "replicas"]
    left = [host for host in engines if runs.get(host) == "split"]
    for group in recorded["grouping"] or []:
        if len(group) > 1 and all(host in left for host in group):
            grouping.append(list(group))
            left = [host for host in left if host not in group]
    if left:
        grouping.extend(grouping_of(left, "split", head))
    grouping = _ordered(grouping, engines)
    problems = list(recorded["disagreements"])
    if recorded["grouping"] is not None and _key(recorded["grouping"]) != _key(grouping):
        problems.append("the records say %s, the engine units run %s" % (_words(recorded["grouping"]), _words(grouping)))
    return {"grouping": grouping, "idle": idle, "recorded": recorded, "agrees": not problems,
            "disagreements": problems}


def _key(grouping):
    """A grouping as a set of groups in rank order (the order of the groups does not matter, of their hosts it does)."""
    return {tuple(group) for group in grouping or []}


def grouping_writes(engines, observed, head=None, touched=(), note="", models=None):
    """Once a move's outcome is known: what to write in each engine host's record, one decision for all.

    The grouping written is the one that runs now (:func:`running_grouping` of ``observed``, read after the move),
    the same list on every host; each host's ``group`` and ``rank`` are its place in it. A host whose record does
    not hold that grouping, or that the move touched (``touched``: this run, this time), is written; a host in no
    group keeps its record and is named in ``unrecorded``. ``models``: each unit kind's model directory
    (``replicas``, ``split``), written as ``model``.

    Returns ``grouping``, ``write`` ({host: fields}) and ``unrecorded`` ({host: why}).
    """
    models = models or {}
    running = running_grouping(engines, observed, head)
    grouping = running["grouping"]
    write = {}
    for host in engines:
        fields = record_of(grouping, host)
        if fields is None:
            continue
        record = (host_view(observed, host) or {}).get("record") or {}
        model = models.get(fields["topology"]) or ""
        if (host in (touched or ()) or record.get("grouping") != grouping or record.get("group") != fields["group"]
                or record.get("rank") != fields["rank"] or (model and record.get("model") != model)):
            write[host] = dict(fields, model=model, note=note)
    return {"grouping": grouping, "write": write, "unrecorded": dict(running["idle"]),
            "api_hosts": api_hosts(grouping)}
