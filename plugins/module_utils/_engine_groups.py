# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Engine groups: how a site's engine hosts are partitioned, and how one grouping becomes another.

Pure logic, standard library only. A *group* is a list of inventory names: one host serves a
replica; two or more serve one model with tensor parallelism over them, the first host being
rank 0 (the one that serves the API and that the proxy balances to). A *grouping* is the list of
a site's groups, every engine host in exactly one. Today's two topologies are groupings by name:
``replicas`` (every host its own group) and ``split`` (one group of every host, the head first).

:func:`check_grouping` says what is wrong with a grouping an inventory declares, each error naming
the host or group and what to change. :func:`group_moves` orders the steps from one grouping to
another so that, where the hosts allow it, some group serves during every step: only the groups a
step touches stop, the groups it leaves alone keep serving.
"""

from __future__ import annotations

TOPOLOGIES = ("replicas", "split")
VARIABLE = "site_engine_groups"


def grouping_of(engines, topology="replicas", head=None):
    """The grouping a topology name stands for, over the engine hosts in inventory order.

    ``split`` puts ``head`` first (the split's rank 0) when it is one of ``engines``.
    """
    engines = list(engines or [])
    if topology == "replicas":
        return [[host] for host in engines]
    if topology == "split":
        if head in engines:
            engines.remove(head)
            engines.insert(0, head)
        return [engines] if engines else []
    raise ValueError("topology must be one of %s, not %r" % (", ".join(TOPOLOGIES), topology))


def topology_of(grouping):
    """``replicas`` or ``split`` when the grouping is one of the two-topology site's, else ``groups``."""
    sizes = [len(group) for group in grouping or []]
    if sizes and all(size == 1 for size in sizes):
        return "replicas"
    if len(sizes) == 1 and sizes[0] > 1:
        return "split"
    return "groups"


def api_hosts(grouping):
    """Each group's first host (its rank 0, the one that serves the API), in the grouping's order."""
    return [group[0] for group in grouping or [] if group]


def is_supported(grouping):
    """Whether today's playbooks run ``grouping``: every host its own group (``replicas``) or one group of every
    engine host (``split``, two or more). Several groups, or groups of mixed sizes, are checked and planned, not yet
    run (the playbooks do not move groups yet)."""
    return topology_of(grouping) in TOPOLOGIES


def proxy_members(engines, grouping=None):
    """The hosts the proxy balances over: each group's first host (its API host), every host once.

    With ``grouping`` declared and other than the two topologies' (``topology_of`` says ``groups``), its
    groups' first hosts. Otherwise the site switches between ``replicas`` and ``split`` without touching
    the proxy, so its members are the API hosts of both groupings: every engine host, in inventory order
    (the split's other rank never answers the membership checker, so it never joins).
    """
    engines = list(engines or [])
    if grouping and topology_of(grouping) == "groups":
        groupings = [grouping]
    else:
        groupings = [grouping_of(engines, topology) for topology in TOPOLOGIES]
    members = []
    for one in groupings:
        for host in api_hosts(one):
            if host not in members:
                members.append(host)
    return members


def split_rank(grouping, host, head=None):
    """Where ``host`` runs in a split: its group, its rank, the group's size and head, the other ranks.

    ``grouping``: one group (a list of host names) or several (a list of such lists, e.g. ``[[a, b], [c, d]]``:
    each group its own rendezvous, on its own head). A group's head (rank 0, the host that serves the API and
    holds the rendezvous) is ``head`` when it is in that group, else the group's first host; the other hosts
    follow in the group's order (ranks 1 to N-1). Returns ``group`` (the hosts in rank order), ``rank``,
    ``nnodes``, ``head``, ``is_head``, ``others`` (``{"host", "rank"}`` of every other rank, in rank order) and
    ``peer``: the host its link check pings - the head for every other rank, rank 1 for the head - so the head's
    link to each rank is tried (with two hosts each pings the other). A host in no group has ``rank`` None,
    ``is_head`` False, ``group`` [] and ``peer`` "" (a site not running the split stops its rank; the preflight
    refuses it before a start).
    """
    groups = grouping if grouping and all(isinstance(g, (list, tuple)) for g in grouping) else [grouping or []]
    for members in groups:
        members = [str(name) for name in members]
        if host not in members:
            continue
        first = head if head in members else members[0]
        ordered = [first] + [name for name in members if name != first]
        rank = ordered.index(host)
        return {"group": ordered, "rank": rank, "nnodes": len(ordered), "head": first, "is_head": rank == 0,
                "others": [{"host": name, "rank": number} for number, name in enumerate(ordered) if name != host],
                "peer": (ordered[1] if len(ordered) > 1 else "") if rank == 0 else first}
    return {"group": [], "rank": None, "nnodes": 0, "head": "", "is_head": False, "others": [], "peer": ""}


def split_sizes(num_attention_heads=None, num_key_value_heads=None, most=8):
    """The tensor-parallel sizes from 1 to ``most`` the model's heads allow, as vLLM checks them.

    vLLM needs the attention heads divisible by the tensor-parallel size; the key/value heads are
    split when there are at least as many as ranks (then divisible), and replicated otherwise (then
    the size must be a multiple of them). Unknown head counts allow every size.
    """
    sizes = []
    for size in range(1, most + 1):
        if num_attention_heads and num_attention_heads % size:
            continue
        kv = num_key_value_heads or num_attention_heads
        if kv and (kv % size if kv >= size else size % kv):
            continue
        sizes.append(size)
    return sizes


def partitions(total, sizes, largest=None):
    """Every multiset of group ``sizes`` adding up to ``total`` hosts, largest group first."""
    if total == 0:
        yield []
        return
    for size in sorted(sizes, reverse=True):
        if size <= total and (largest is None or size <= largest):
            for rest in partitions(total - size, sizes, size):
                yield [size] + rest


def _words(hosts):
    return ", ".join(hosts)


def check_grouping(grouping, engines, engine_group="gb10", num_attention_heads=None, num_key_value_heads=None,
                   machines=None, replica_fits=True):
    """The errors of a declared grouping (``site_engine_groups``), each saying what to change; [] when none.

    ``engines``: the engine group's hosts; ``machines``: host -> the machine it is (``_layout.machine_of``'s
    key), when known; ``replica_fits``: whether the model fits one host (False refuses groups of one).
    """
    example = "e.g. [[spark-a, spark-b], [spark-c]]"
    if not isinstance(grouping, (list, tuple)) or not grouping:
        return ["%s must be a non-empty list of host lists (%s), not %r" % (VARIABLE, example, grouping)]
    errors = []
    seen = {}
    engines = list(engines or [])
    for number, group in enumerate(grouping, 1):
        if not isinstance(group, (list, tuple)) or not group or not all(isinstance(h, str) and h for h in group):
            errors.append("group %d of %s must be a non-empty list of inventory host names (%s), not %r"
                          % (number, VARIABLE, example, group))
            continue
        for host in group:
            if host not in engines:
                errors.append("%s names %s in group %d, which is not in the engine group '%s': add it to that "
                              "group or take it out of %s" % (VARIABLE, host, number, engine_group, VARIABLE))
            elif host in seen:
                errors.append("%s is in group %d and in group %d of %s: list every engine host in exactly one "
                              "group" % (host, seen[host], number, VARIABLE))
            else:
                seen[host] = number
        errors.extend(_check_group(number, list(group), num_attention_heads, num_key_value_heads, machines,
                                   replica_fits))
    for host in engines:
        if host not in seen:
            errors.append("%s is in the engine group '%s' but in no group of %s: add [%s] as a group of its own "
                          "or put it in a group" % (host, engine_group, VARIABLE, host))
    return errors


def _check_group(number, group, heads, kv_heads, machines, replica_fits):
    size = len(group)
    if size == 1:
        if not replica_fits:
            return ["group %d (%s) is one host, and the model does not fit one host: put it in a group with "
                    "another host" % (number, group[0])]
        return []
    errors = []
    allowed = split_sizes(heads, kv_heads, most=max(size, 8))
    if size not in allowed:
        errors.append("group %d (%s) has %d hosts, and tensor parallelism over %d needs the model's attention "
                      "heads (%s) and key/value heads (%s) to split evenly: make its groups %s hosts"
                      % (number, _words(group), size, size, heads, kv_heads or heads,
                         " or ".join(str(s) for s in allowed if s <= max(size, 4))))
    on = {}
    for host in group:
        machine = (machines or {}).get(host)
        if machine is not None and machine in on:
            errors.append("group %d puts %s and %s on one machine (%s): a group spreads one model over machines; "
                          "give each host of the group its own machine" % (number, on[machine], host, machine))
        elif machine is not None:
            on[machine] = host
    return errors


def _key(group):
    return frozenset(group)


def _components(current, target):
    """The changed groups, cut into independent steps: (current groups, target groups) that share hosts."""
    unchanged = {_key(g) for g in current} & {_key(g) for g in target}
    changed_current = [g for g in current if _key(g) not in unchanged]
    changed_target = [g for g in target if _key(g) not in unchanged]
    parent = {}

    def find(host):
        while parent.setdefault(host, host) != host:
            host = parent[host]
        return host

    for group in changed_current + changed_target:
        for host in group[1:]:
            parent[find(host)] = find(group[0])
    parts = {}
    for group in changed_current:
        parts.setdefault(find(group[0]), ([], []))[0].append(group)
    for group in changed_target:
        parts.setdefault(find(group[0]), ([], []))[1].append(group)
    return [parts[root] for root in sorted(parts, key=lambda r: min(h for g in sum(parts[r], []) for h in g))]


def group_moves(current, target, replica_fits=True):
    """The steps from grouping ``current`` to ``target``, in order; [] when they are the same.

    Each step is ``{"stop": [groups], "start": [groups], "serving": [groups], "away": bool}``:
    the groups it stops and starts, the groups that serve while it runs (every group it does not
    touch, as the grouping stands at that step) and whether no group serves (the model is away).
    Groups the two groupings share are never touched. A set of changed groups that share hosts is
    one step when another group serves meanwhile; when none would and ``replica_fits``, it goes
    through groups of one: each multi-host group is first taken apart into replicas, one step each,
    then each new multi-host group is formed from replicas, one step each, so every step leaves the
    others serving. Only where that cannot help (two hosts, or a model that needs a group) is a step
    ``away``.
    """
    state = [list(g) for g in current]
    steps = []

    def step(stop, start):
        stop_keys = {_key(g) for g in stop}
        serving = [g for g in state if _key(g) not in stop_keys]
        steps.append({"stop": [list(g) for g in stop], "start": [list(g) for g in start],
                      "serving": [list(g) for g in serving], "away": not serving})
        state[:] = serving + [list(g) for g in start]

    for stop, start in _components([list(g) for g in current], [list(g) for g in target]):
        others = [g for g in state if _key(g) not in {_key(s) for s in stop}]
        through_replicas = replica_fits and not others and len(stop) + len(start) > 2
        if not through_replicas:
            step(stop, start)
            continue
        for group in stop:
            if len(group) > 1:
                step([group], [[h] for h in group])
        singles = {_key(g) for g in state if len(g) == 1}
        for group in start:
            if len(group) > 1:
                step([[h] for h in group if _key([h]) in singles], [group])
    return steps


def moves_report(current, steps):
    """One line per step for people: what stops, what starts, what serves meanwhile."""
    def names(groups):
        return " ".join("[%s]" % _words(g) for g in groups) or "nothing"

    lines = []
    for number, s in enumerate(steps, 1):
        verb = "serves" if len(s["serving"]) == 1 else "serve"
        counts = (sum(len(g) for g in s["serving"]), sum(len(g) for g in current))
        meanwhile = ("the model is away (no other group serves)" if s["away"]
                     else "%s %s (%d of %d hosts)" % ((names(s["serving"]), verb) + counts))
        lines.append("step %d: stop %s, start %s; meanwhile %s" % (number, names(s["stop"]), names(s["start"]),
                                                                   meanwhile))
    return lines
