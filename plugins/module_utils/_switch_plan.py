# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a topology switch decides, from what the hosts say. Pure logic, no I/O.

A switch (playbooks/switch.yml) asks this at three points with what it has seen so far:
before anything stops (is there anything to do, is it finishing an interrupted switch,
which topology serves now, is the new one gated, what to announce), after the new
engines started (which of them the tool-calling gate tests) and after the gate (roll
back or not, which engines rejoin the proxy, which ones the proxy must have in rotation).

Inputs, by host inventory name:
- ``units``: the states ``systemctl is-active vllm-replica.service vllm-split.service``
  printed on each engine host, in that order (see :data:`UNIT_ORDER`);
- ``drains``: what each proxy host's drain files say, host -> holder ("" for none); a
  holder ``switch-to-*`` is a switch's own drain, left behind if that switch was
  interrupted;
- ``failed``: the engine hosts whose start or gate failed in this run;
- ``play_hosts``: the engine hosts still in the run (Ansible's ``ansible_play_hosts``): an
  engine host that is not (unreachable, or dropped after a failure) is *lost*. What it runs
  and whether its engine passed the gate are unknown: a lost host counts as failed, is never
  taken off the proxy's drain list, and the old topology comes back only where it can
  without it (each replica on its own host; the split needs every engine host);
- ``notes``: what each engine host noted (the maintenance window's); the gate's verdict is
  its ``gate``. In a gated switch an engine rejoins the proxy only with a passing verdict
  of its own (the split: rank 0's): no verdict is a failure.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr
from ansible_collections.factory_floor.llm.plugins.module_utils import _group_move as gm
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import (
    api_hosts, check_grouping, grouping_of, proxy_members, split_rank)
from ansible_collections.factory_floor.llm.plugins.module_utils._group_record import grouping_writes, kind_of
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name
from ansible_collections.factory_floor.llm.plugins.module_utils._running_topology import BOTH, running_topology

# The topologies in the order of the states in ``units``.
UNIT_ORDER = ("replicas", "split")
# Each topology's engine role and unit: the site role's _site_topologies (a unit test keeps them equal).
ROLES = {"replicas": "vllm_replica", "split": "vllm_split"}
UNITS = {"replicas": "vllm-replica.service", "split": "vllm-split.service"}
SWITCH_HOLDER = "switch-to-"
# When a gated switch runs the tool-calling gate (``gate_mode``): before the new engines join the proxy (the model is
# away meanwhile), or after, while they serve - for a build that passed it on this site's engine hosts before.
BEFORE_ADMISSION = "before_admission"
AFTER_ADMISSION = "after_admission"


def other(topology):
    return "split" if topology == "replicas" else "replicas"


def api_engines(topology, engines, head):
    """The engines that serve the API: every replica, or the split's rank 0."""
    return list(engines) if topology == "replicas" else [head]


def _running(states):
    """The topologies whose unit runs on one host, as ``running_topology`` reads them (active, activating or
    reloading; both when ``Conflicts=`` failed)."""
    host_runs = running_topology({"host": states})
    if host_runs == BOTH:
        return list(UNIT_ORDER)
    return [host_runs] if host_runs in UNIT_ORDER else []


def _merge_drains(drains):
    merged = {}
    for proxy in drains or []:
        merged.update(proxy or {})
    return merged


def decide(topology, engines, head, units, drains=(), gated=False):
    """Before anything stops: what there is to do.

    ``on_target``: every engine host runs the target's unit and not the other's.
    ``heal_hosts``: on the target, the engines an interrupted switch left drained; the
    run finishes that switch instead of doing nothing. ``drained_other``: engines
    drained by anyone else, left alone. ``incumbent``: the topology that serves now and
    the host of its API engine (nothing when on the target). ``gated``: the new (or
    healed) topology is gated on its tool calling (``gated`` is tool_gate's verdict
    for the target topology).
    """
    expected = ["active" if name == topology else "inactive" for name in UNIT_ORDER]
    on_target = bool(engines) and all(list(units.get(host) or []) == expected for host in engines)
    merged = _merge_drains(drains)
    by_switch = {host: holder for host, holder in merged.items() if (holder or "").startswith(SWITCH_HOLDER)}
    heal_hosts = [host for host in engines if host in by_switch] if on_target else []
    holders = []
    for holder in by_switch.values():
        if holder not in holders:
            holders.append(holder)
    drained_other = {host: holder for host, holder in merged.items() if host in engines and host not in by_switch}
    incumbent = {"topology": "", "host": ""}
    if not on_target:
        if "split" in _running(units.get(head)):
            incumbent = {"topology": "split", "host": head}
        else:
            replicas = [host for host in engines if "replicas" in _running(units.get(host))]
            if replicas:
                incumbent = {"topology": "replicas", "host": replicas[0]}
    heal = bool(heal_hosts)
    return {
        "topology": topology,
        "other": other(topology),
        "role": ROLES[topology],
        "unit": UNITS[topology],
        "other_unit": UNITS[other(topology)],
        "roles": dict(ROLES),
        "units": dict(UNITS),
        "on_target": on_target,
        "heal": heal,
        "heal_hosts": heal_hosts,
        "heal_holders": holders,
        "drained_other": drained_other,
        "incumbent": incumbent,
        "gated": bool(gated) and (not on_target or heal),
        "api_engines": api_engines(topology, engines, head),
    }


def owed_gate(plan, engines, gated=False):
    """On the target with nothing a switch drained: whether an interrupted switch owes its gate.

    A switch that admitted its engines at the cut-over (``gate_mode`` :data:`AFTER_ADMISSION`) and was killed before
    the gate's verdict leaves them serving ungated, nothing drained, and the topology records it never wrote:
    ``records_behind`` - every engine host's record (``plan["records"]``, :func:`records_view`) names the other
    topology while its units run the target. A host with no record is not behind: a site deployed before records
    existed would otherwise run a gate whose failure rolls back to a topology it may never have run. With ``gated``
    (the target in tool_gate_topologies) the re-run
    owes that gate (``owed_gate``): it gates the engines while they serve, against their build's own last passing
    score, without stopping anything; a failure rolls back as after admission, a pass writes the records. Returns
    ``records_behind``, ``owed_gate`` and ``gated`` (the plan's, or the owed gate's).
    """
    view = plan.get("records") or {}
    seen = view.get("hosts") or {}
    behind = bool(plan["on_target"] and not plan["heal"] and engines and seen) and all(
        (seen.get(host) or {}).get("read") and (seen.get(host) or {}).get("recorded") == plan["other"]
        for host in engines)
    owed = behind and bool(gated)
    return {"records_behind": behind, "owed_gate": owed, "gated": plan["gated"] or owed}


def _recorded_words(plan):
    """What the records behind say, in words: "still name split", "name no topology"."""
    recorded = (plan.get("records") or {}).get("recorded")
    return "still name %s" % recorded if recorded in tr.TOPOLOGIES else "name no topology"


def gate_mode(plan, known_build=None):
    """When the gate runs, and why: ``(mode, why)``; ("", why) when the switch is not gated.

    ``known_build``: the tool_gate role's ``tool_gate_known`` for the new topology's build (its ``known``, the
    ``score`` and ``measured_at`` of its last passing score on this site's engine hosts, ``why`` in words). A build
    that passed here joins the proxy as soon as it serves and is gated after (:data:`AFTER_ADMISSION`); any other,
    and the engines an interrupted switch left drained, are gated before (:data:`BEFORE_ADMISSION`).
    """
    known_build = known_build or {}
    if not plan["gated"]:
        return "", "the tool-calling gate is off for %s" % plan["topology"]
    if plan.get("owed_gate"):
        return AFTER_ADMISSION, ("the engine hosts run %s but their topology records %s: the switch that admitted "
                                 "these engines was interrupted before its gate's verdict (an owed gate)" % (
                                     plan["topology"], _recorded_words(plan)))
    if plan["on_target"]:
        return BEFORE_ADMISSION, "finishing an interrupted switch: its engines stay drained until they pass"
    if not known_build:
        return BEFORE_ADMISSION, "the new build's stored scores were not looked up (nothing serves now to compare with)"
    if not _true(known_build.get("known")):
        return BEFORE_ADMISSION, known_build.get("why") or "the new build has no passing score stored here"
    return AFTER_ADMISSION, known_build.get("why") or "the new build passed the gate here before"


def gate_split(plan, hosts):
    """The engines a gate's suite is split over: every engine it tests, when it tests two or more before they join
    the proxy in a switch (the replicas of a build not gated here); [] otherwise - one engine (the split's rank 0)
    runs the whole suite, as after admission and when finishing an interrupted switch. Each runs its share one case
    at a time, all at once: the gate takes about 1/len of the time, its verdict is over every case (tool_gate)."""
    if plan.get("gate_mode") != BEFORE_ADMISSION or plan["heal"] or plan["on_target"] or len(hosts) < 2:
        return []
    return list(hosts)


def _split_words(plan):
    """How the announcement says a split suite, "" when the gate runs the whole suite on each engine."""
    if not gate_split(plan, plan["api_engines"]):
        return ""
    return (", its suite split over the %d new engines (each case alone on its engine, about 1/%d of the time; one "
            "verdict over every case)" % (len(plan["api_engines"]), len(plan["api_engines"])))


def lost(engines, play_hosts=None):
    """The engine hosts no longer in the run (``play_hosts`` None: every one is)."""
    if play_hosts is None:
        return []
    return [host for host in engines if host not in set(play_hosts)]


def can_roll_back(plan, engines, lost_hosts=()):
    """Whether the old topology can be started again on the engine hosts still in the run.

    The replicas come back host by host (a lost host keeps what it has); the split needs
    every engine host, so it cannot come back without one.
    """
    lost_hosts = set(lost_hosts or [])
    if not lost_hosts:
        return True
    # The group moves' rule (_group_move.restorable): an old group comes back when none of its hosts is lost.
    return bool(gm.restorable(grouping_of(engines, plan["other"]), lost_hosts))


def passed_gate(engines, notes=None):
    """The engine hosts whose notes hold a passing tool-calling verdict (``gate.passed``)."""
    notes = notes or {}
    return [host for host in engines if ((notes.get(host) or {}).get("gate") or {}).get("passed") in (True, "true", "True")]


def gate_hosts(plan, engines, head, failed=(), lost_hosts=()):
    """After the new engines started: the engines the tool-calling gate tests.

    A switch gates every new engine, all or nothing (none when any failed to start: the
    old topology comes back). When the old topology cannot come back (an engine host is
    lost and the old one is the split), the gate tests each new engine that did start, so
    that those that pass can serve. A re-run that finishes an interrupted switch gates
    each drained engine that serves (replicas), or rank 0 (split). A lost host is never
    gated (nothing can reach it).
    """
    if not plan["gated"]:
        return []
    failed = set(failed or []) | set(lost_hosts or [])
    back = can_roll_back(plan, engines, lost_hosts)
    hosts = []
    for host in api_engines(plan["topology"], engines, head):
        if host in failed:
            continue
        if plan["heal"]:
            if host in plan["heal_hosts"] or plan["topology"] == "split":
                hosts.append(host)
        elif not failed or not back:
            hosts.append(host)
    return hosts


def conclude(plan, engines, head, failed=(), lost_hosts=(), passed=()):
    """After the gate: roll back or not, who rejoins the proxy, who must be in rotation.

    ``rollback``: a switch whose new engine failed to start or failed the gate, or whose
    engine host was lost, puts the old topology back where it can (:func:`can_roll_back`);
    never when finishing an interrupted switch (the old topology is long gone; going back
    is a switch of its own). ``undrain``: the engines to take off the drain list now - in a
    gated switch that is not rolled back, each one with a passing verdict in ``passed``
    (the split: every engine host once rank 0 passed and none failed); finishing an
    interrupted switch, ``heal_ready``, each drained engine that serves and passed (gated),
    or for split every drained engine once rank 0 did. A lost host is never undrained: its
    engine never reaches a client without a verdict. ``heal_left``: the ones that stay
    drained. ``expected_in_rotation``: the engines of the topology that serves now that the
    proxy must have in rotation (not those left drained, nor lost, nor failed and not
    rolled back, nor, on the target, those drained by anyone else). ``lost_hosts``: the
    engine hosts no longer in the run. With ``gate_mode`` :data:`AFTER_ADMISSION` the new
    engines joined the proxy at the cut-over and were gated while they served: nothing is
    undrained after the gate, and ``proxy_drain`` takes out again every engine host on a
    rollback (before the old topology stops its new engine), else each failed or lost one
    (the split: every engine host once one failed). ``proxy_drain``: ``{hosts, state}``,
    the drain list's change after the gate (``present`` for those, else ``absent`` for
    ``undrain``).
    """
    lost_hosts = [host for host in engines if host in set(lost_hosts or [])]
    failed = [host for host in engines if host in set(failed or []) or host in lost_hosts]
    passed = set(passed or [])
    topology, gated = plan["topology"], plan["gated"]
    rollback = bool(failed) and not plan["heal"] and can_roll_back(plan, engines, lost_hosts)
    ready = []
    if plan["heal"]:
        if topology == "replicas":
            ready = [host for host in plan["heal_hosts"] if host not in failed and (not gated or host in passed)]
        elif head not in failed and (not gated or head in passed):
            ready = [host for host in plan["heal_hosts"] if host not in lost_hosts]
    left = [host for host in plan["heal_hosts"] if host not in ready]
    undrain = ready
    # Admitted at the cut-over (a known build): nothing rejoins after the gate; what failed leaves again.
    # An owed gate (on the target) is the after-admission gate the interrupted switch did not finish.
    after = plan.get("gate_mode") == AFTER_ADMISSION and not plan["heal"] and (
        not plan["on_target"] or bool(plan.get("owed_gate")))
    redrain = []
    if after:
        undrain = []
        if rollback or (topology == "split" and failed):
            redrain = list(engines)
        else:
            redrain = list(failed)
    elif gated and not plan["heal"] and not plan["on_target"] and not rollback:
        if topology == "replicas":
            undrain = [host for host in engines if host not in failed and host in passed]
        else:
            undrain = list(engines) if not failed and head in passed else []
    joined = gated and not plan["heal"] and not plan["on_target"] and bool(undrain)
    serving = other(topology) if rollback else topology
    switched_gated = gated and not plan["heal"] and not plan["on_target"] and not rollback
    expected = [host for host in api_engines(serving, engines, head)
                if host not in left and host not in lost_hosts and (rollback or host not in failed)
                and not (plan["on_target"] and host in plan.get("drained_other", {}))
                and (not switched_gated or after or host in undrain)]
    return {
        # Not "failed": Ansible reads that key of a module's result as the task's failure.
        "failed_hosts": failed,
        "lost_hosts": lost_hosts,
        "rollback": rollback,
        "serving_topology": serving,
        "joined": joined,
        "undrain": undrain,
        "heal_ready": ready,
        "heal_left": left,
        # Not those left drained: by this run's heal or, on the target, by anyone else (a switch
        # drains every engine at its cut-over and lets them all back, an on-target run touches no one's drain).
        "expected_in_rotation": expected,
        # What switch_gate does on the proxies once the gate ran: one drain_proxies step, never both ways at once.
        "proxy_drain": ({"hosts": redrain, "state": "present"} if redrain else {"hosts": undrain, "state": "absent"}),
    }


def _minutes(seconds):
    return round(float(seconds) / 60, 1)


def announcement(plan, startup=None, incumbent_score=None):
    """The sentence the switch prints before anything stops: the outage it expects."""
    topology = plan["topology"]
    startup = startup or {}
    if plan["on_target"]:
        if plan["heal"]:
            hosts = plan["heal_hosts"]
            text = ("Already on %s, but %s %s still drained from the proxy by an interrupted %s run. Finishing it: nothing "
                    "stops or starts; once %s" % (
                        topology, ", ".join(hosts), "is" if len(hosts) == 1 else "are", " / ".join(plan["heal_holders"]),
                        "they serve" if topology == "replicas" else "rank 0 serves"))
            if plan["gated"]:
                text += (", the tool-calling gate tests %s directly, against tool_gate_min_score and its own build's last "
                         "passing score minus tool_gate_tolerance (the incumbent is gone), and each engine that passes "
                         "rejoins the proxy. One that fails stays drained and the run fails, naming the way on."
                         % ("each of them" if topology == "replicas" else "rank 0"))
            else:
                text += ", they rejoin the proxy (the tool-calling gate is off for %s: untested)." % topology
        elif plan.get("owed_gate"):
            text = ("Already on %s, but the engine hosts' topology records %s: the switch that admitted these engines was "
                    "interrupted before its tool-calling gate's verdict, and they serve ungated. Running the gate it owes "
                    "(owed gate): nothing stops or starts; the gate tests %s directly while %s, against "
                    "tool_gate_min_score and the build's own last passing score minus tool_gate_tolerance. If one fails, "
                    "the new engines leave the proxy again, %s %s started again and the run fails; once they pass, "
                    "each host records %s." % (
                        topology, _recorded_words(plan), ", ".join(plan["api_engines"]),
                        "it serves" if len(plan["api_engines"]) == 1 else "they serve", _the(plan["other"]),
                        "is" if plan["other"] == "split" else "are", topology))
        else:
            text = "Already on %s: checking that it serves, nothing will stop." % topology
        others = plan["drained_other"]
        if others:
            text += (" Drained by someone else, left as %s: %s; the proxy sends nothing there until its drain file is "
                     "removed (nginx_proxy drain entry point, state absent)."
                     % ("it is" if len(others) == 1 else "they are",
                        ", ".join("%s (%s)" % (host, holder or "no holder") for host, holder in others.items())))
        return text
    seconds, gate_seconds = float(startup.get(topology) or 0), float(startup.get(topology + "_gate") or 0)
    text = ("Switching to %s. The model will be away for about one %s's start-up (%s" % (
        topology, "replica" if topology == "replicas" else "split",
        "%s min, last measured)" % _minutes(seconds) if seconds > 0 else "not measured yet on these hosts; 5 to 20 min on GB10)"))
    if not plan["gated"]:
        return text + (". The tool-calling gate is off for %s (tool_gate_topologies): the new engines take traffic untested."
                       % topology)
    incumbent, score = plan["incumbent"], incumbent_score or {}
    timed = "%d s last time" % int(round(gate_seconds, 0)) if gate_seconds > 0 else "not timed yet here"
    if plan.get("gate_mode") == AFTER_ADMISSION:
        text += (". %s: the engines join as soon as they serve, the gate runs after (%s), testing each new engine "
                 "directly while it serves. It must reach tool_gate_min_score" % (_capital(plan["gate_mode_why"]), timed))
    else:
        text += (" plus the tool-calling gate, which tests each new engine directly before it joins the proxy%s (%s). "
                 "It must reach tool_gate_min_score" % (_split_words(plan), timed))
    if score.get("score") is not None:
        text += (" and stay within tool_gate_tolerance of the incumbent build %s (%s), which scores %s%s"
                 % (str(score.get("build_id", ""))[:16], incumbent["topology"], score["score"],
                    " (measured now)" if score.get("measured_now") else " (stored)"))
    elif _true(score.get("would_measure")):
        text += ("; no score is stored for the incumbent build %s (%s): a run measures it first, while it serves"
                 % (str(score.get("build_id", ""))[:16], incumbent["topology"]))
    elif "build_id" in score:
        text += "; no score is stored for the incumbent build %s (%s)" % (str(score["build_id"])[:16], incumbent["topology"])
    else:
        text += "; nothing serves now, so there is no incumbent to compare with"
    return text + ". If it fails, %sthe %s is started again." % (
        "the new engines leave the proxy again and " if plan.get("gate_mode") == AFTER_ADMISSION else "",
        incumbent["topology"] or "old topology")


def _capital(text):
    return text[:1].upper() + text[1:]


def noted_failed(engines, notes=None):
    """The engine hosts whose notes (the maintenance window's, per host) say ``failed``."""
    notes = notes or {}
    return [host for host in engines if (notes.get(host) or {}).get("failed")]


def startup_records(plan, engines, notes=None):
    """After the gate: per engine host, the start-up this switch measured, for the next announcement.

    Seconds by name, from the host's own notes: ``<topology>`` from its old engine's stop
    (``old_stopped``) to its new one serving (``serving``), and ``<topology>_gate`` from
    serving to the gate's verdict (``gate_done``) when the gate ran. Only after a switch
    that went through (not on the target, no rollback) and for a host whose engine
    served (the split's rank 1 serves no API: it records nothing).
    """
    if plan["on_target"] or plan["rollback"]:
        return {}
    topology, records = plan["topology"], {}
    for host in engines:
        events = (((notes or {}).get(host) or {}).get("events")) or {}
        if events.get("serving") is None or events.get("old_stopped") is None:
            continue
        serving = float(events["serving"])
        record = {topology: round(serving - float(events["old_stopped"]), 1)}
        if "gate_done" in events:
            record[topology + "_gate"] = round(float(events["gate_done"]) - serving, 1)
        records[host] = record
    return records


def gate_bar_refusal(topology, min_score, incumbent_score=None, why="", playbook_dir=None):
    """Why a gated run stops before anything changes when its gate has no bar ("" when it has one).

    With ``tool_gate_min_score`` at 0 (its default) the only bar is the incumbent's score
    minus ``tool_gate_tolerance``; without that score, a candidate that passes a single case
    passes the gate. ``min_score`` None: not known yet (no refusal). ``why``: why there is no
    incumbent score, in words. ``playbook_dir``: the run's, to name a playbook as the operator runs it.
    """
    if min_score is None or float(min_score) > 0 or (incumbent_score or {}).get("score") is not None:
        return ""
    if _true((incumbent_score or {}).get("would_measure")):
        return ""  # check mode (a dry run): a run measures the incumbent first, and has that score as its bar
    return ("The tool-calling gate has no bar for %s: tool_gate_min_score is %s and there is no incumbent score to compare "
            "with (%s), so a candidate that passes a single case would pass. Nothing was changed. Set tool_gate_min_score "
            "above 0 in the inventory (group_vars/gb10.yml; %s measures a good build's spread to "
            "choose it), or for this run -e tool_gate_min_score=N; or score the build that serves now while it serves "
            "(tool_gate_measure_incumbent: true)%s."
            % (topology or "the new build", _number(min_score), why or "none is stored",
               playbook_name("tool-gate-spread.yml", playbook_dir),
               ("; or leave %s out of tool_gate_topologies (its new engines then take traffic untested, and the switch says "
                "so)" % topology) if topology else ""))


def _true(value):
    """A flag as Ansible may hand it over (a bool, or its text)."""
    return value is True or str(value).lower() in ("true", "yes", "1")


def _number(value):
    value = float(value)
    return "%d" % value if value == int(value) else "%s" % value


def _no_incumbent_words(plan, incumbent_score):
    if plan["heal"]:
        return "finishing an interrupted switch: the build that served before is gone"
    if plan.get("owed_gate"):
        return "an owed gate: the build that served before the interrupted switch is gone"
    if not plan["incumbent"]["host"]:
        return "nothing serves now"
    build = (incumbent_score or {}).get("build_id")
    if not build:
        return "no score is known for the build the %s serves now" % plan["incumbent"]["topology"]
    return "no score is stored for the incumbent build %s (%s), and it was not measured" % (
        str(build)[:16], plan["incumbent"]["topology"])


def records_view(engines, records):
    """What every engine host's topology record says next to what its units run (``_topology_record.compare``).

    ``records``: per host, the ``topology_record`` module's result there (read with
    ``units``); None when not given.
    """
    if not records:
        return None
    return tr.compare(engines, records)


def switch_plan(topology, engines, head, units, drains=(), gated=False, startup=None, incumbent_score=None, failed=None,
                notes=None, play_hosts=None, min_score=None, records=None, playbook_dir=None, models=None,
                served_model_name="", known_build=None):
    """Everything the switch asks, from what it has seen so far (``failed`` None: nothing started yet).

    ``notes``: what each engine host noted so far (the maintenance window's); a host
    whose notes say ``failed`` counts as failed too, and its ``gate`` verdict decides
    whether it rejoins the proxy. ``play_hosts``: the engine hosts still in the run (None:
    all); the others are lost (:func:`lost`). ``min_score``: tool_gate_min_score, for
    ``refusal`` (a gated switch whose gate has no bar). ``records``: each engine host's
    topology record as read with its units, for ``records`` (their disagreements, named
    in the announcement) and, on the target, ``records_behind`` and ``owed_gate`` (:func:`owed_gate`:
    an interrupted switch's gate that this run owes). ``playbook_dir``: the run's, for the refusal's words. ``models`` (each
    topology's model directory) and ``served_model_name``: for the dry run's words on the model.
    ``known_build``: the tool_gate role's ``tool_gate_known`` for the new build, for ``gate_mode``
    (:func:`gate_mode`); ``admit_at_cut_over``: the cut-over lets the new engines join the proxy as
    soon as they serve (an ungated switch, or a gated one after admission).
    """
    plan = decide(topology, engines, head, units, drains, gated)
    plan["records"] = records_view(engines, records)
    plan.update(owed_gate(plan, engines, gated))
    plan["known_build"] = dict(known_build or {})
    plan["gate_mode"], plan["gate_mode_why"] = gate_mode(plan, known_build)
    plan["admit_at_cut_over"] = not plan["gated"] or plan["gate_mode"] == AFTER_ADMISSION
    if notes:
        failed = list(failed or []) + [host for host in noted_failed(engines, notes) if host not in (failed or [])]
    lost_hosts = lost(engines, play_hosts)
    plan["incumbent_score"] = dict(incumbent_score or {})
    plan["announcement"] = announcement(plan, startup, incumbent_score)
    if plan["records"] and not plan["records"]["agrees"]:
        plan["announcement"] += (" %s This switch records on each host what it runs once every host's outcome is known."
                                 % tr.disagreement(plan["records"]))
    plan["refusal"] = (gate_bar_refusal(topology, min_score, incumbent_score, _no_incumbent_words(plan, incumbent_score),
                                        playbook_dir) if plan["gated"] else "")
    plan["gate_hosts"] = gate_hosts(plan, engines, head, failed, lost_hosts)
    plan["gate_split"] = gate_split(plan, plan["gate_hosts"])
    plan.update(conclude(plan, engines, head, failed, lost_hosts, passed_gate(engines, notes)))
    plan["startup_records"] = startup_records(plan, engines, notes)
    plan["dry_run"] = dry_run(plan, engines, head, units, startup, incumbent_score, min_score, models, served_model_name)
    plan["move"] = group_move(plan, engines, head, units, records, failed, lost_hosts)
    return plan


def group_move(plan, engines, head, units, records=None, failed=None, lost_hosts=()):
    """The switch as a group move (``_group_move.move_plan``): from the grouping the units (and records) say runs to
    the target topology's grouping. The two-topology switch is its two-host case; its own keys above keep their
    words, this one gives the group moves' view (the hosts touched, what stops and starts on each, the capacity)."""
    current = gm.current_grouping(engines, units, records, head)["grouping"]
    return gm.move_plan(current, grouping_of(engines, plan["topology"], head), engines, failed=failed,
                        lost=lost_hosts, gated=plan["gated"], members=proxy_members(engines))


def record_writes(plan, engines, observed, models=None):
    """At the end of a switch, once every host's outcome is known: what to write in each engine host's topology record.

    One decision for every host, from what each one runs now (``observed``: per host the
    ``topology_record`` module's result, read with ``units``; absent for a host that could
    not be read). A host is recorded on the topology whose engine unit runs there - the
    target after a switch that went through, the old one after a rollback - with that
    topology's model (``models``, by topology); a host that runs none or both, or could not
    be read, keeps its record and is named in ``unrecorded``. A switch that went through
    rewrites the record of each host that runs the target (this run, this time); otherwise
    only a record that names another topology or model is written.

    Returns ``write`` ({host: {topology, model, note}}) and ``unrecorded`` ({host: why}).
    """
    models = models or {}
    went_through = not plan["on_target"] and not plan["rollback"]
    note = "the switch to %s rolled back" % plan["topology"] if plan["rollback"] else ""
    write, unrecorded = {}, {}
    view = tr.compare(engines, observed)
    for host in engines:
        seen = view["hosts"][host]
        if not seen["read"]:
            unrecorded[host] = ("lost from the run (unreachable or failed)" if host in (plan.get("lost_hosts") or [])
                                else "could not be read")
            continue
        running = seen["runs"]
        if running not in tr.TOPOLOGIES:
            unrecorded[host] = ("no engine unit runs there" if running == tr.NONE else
                                "both topologies' engine units run there" if running == tr.BOTH else
                                "its engine units could not be read")
            continue
        model = models.get(running) or ""
        if (went_through and running == plan["topology"]) or seen["recorded"] != running or (
                model and seen["model"] != model):
            write[host] = {"topology": running, "model": model, "note": note}
    return {"write": write, "unrecorded": unrecorded}


# --- The rolling upgrade (switch-model.yml) -----------------------------------------------------
#
# ``replicas``: per engine host, what it serves now and what it is to serve: ``running`` (the
# model directory vLLM lists as root), ``running_image`` (its container's image ID, "" with
# the venv runtime), ``model``, ``image`` and ``image_id`` (the candidate's) - or these three
# under ``candidate``, next to ``old`` (the build a failed replica gets back), as the
# model_upgrade role's check entry point notes them.


def _keep16(text):
    """Jinja's ``truncate(16, true, '')`` (leeway 5): the build id's first 16 characters."""
    text = str(text)
    return text if len(text) <= 21 else text[:16]


def upgrade_done(replica: dict) -> bool:
    """Whether a replica serves the candidate already: its model, and (container runtime) in its image."""
    if replica.get("running") != replica.get("model"):
        return False
    return not replica.get("image") or bool(replica.get("image_id")) and replica.get("running_image") == replica["image_id"]


def upgrade_target(model="", image=""):
    """What the replicas are upgraded to, in words: the new model directory, on the new image."""
    return " on ".join(([model] if model else []) + (["image " + image] if image else []))


def _candidate(replica: dict) -> dict:
    """A replica's observation with the candidate's model, image and image_id at the top level."""
    candidate = replica.get("candidate")
    if not isinstance(candidate, dict):
        return replica
    return dict(replica, **{key: candidate.get(key, "") for key in ("model", "image", "image_id")})


def upgrade_plan(engines, replicas, target="", startup=None, incumbents=None, notes=None, model="", image="",
                 min_score=None, playbook_dir=None):
    """What the rolling upgrade does, from what the replicas serve and what happened so far.

    ``todo``: the replicas that do not serve the candidate yet, in inventory order. ``stop``:
    a replica failed, so the ones after it keep the old build. ``roll_back``: the replicas
    upgraded in this run that go back to the old build because one failed - not when the
    failed one could not get its old build back (the upgraded one is then the only one
    serving). ``announcement``: what the preflight prints. ``target``: ``target``, else worded
    from ``model`` and ``image`` (what the operator asked for). ``report``: what the report
    needs of the plan (switch_report's ``plan``), with the first replica's old build.
    ``refusal``: why the upgrade stops before anything changes when its gate has no bar
    (``min_score``, tool_gate_min_score, at 0 and a replica to upgrade whose build has no
    score in ``incumbents``); "" otherwise, or while ``min_score`` is None (not known yet). ``playbook_dir``: the run's,
    for the refusal's words.
    """
    notes = notes or {}
    target = target or upgrade_target(model, image)
    todo = [host for host in engines if not upgrade_done(_candidate(replicas.get(host) or {}))]
    failed = [host for host in engines if (notes.get(host) or {}).get("failed")]
    restore_failed = [host for host in engines if (notes.get(host) or {}).get("restore_failed")]
    upgraded = [host for host in engines if (notes.get(host) or {}).get("upgraded")]
    refusal = ""
    for host in todo:
        incumbent = (incumbents or {}).get(host) or {}
        refusal = gate_bar_refusal("", min_score, incumbent, "no score is stored for the build %s serves (%s, build %s), "
                                   "and it was not measured" % (host, incumbent.get("model_path", "?"),
                                                                _keep16(incumbent.get("build_id", "?"))), playbook_dir)
        if refusal:
            break
    return {
        "todo": todo,
        "refusal": refusal,
        "stop": bool(failed),
        "roll_back": upgraded if failed and not restore_failed else [],
        "announcement": upgrade_announcement(engines, todo, target, startup, incumbents),
        "dry_run": upgrade_dry_run(engines, todo, target, startup, incumbents, min_score),
        "target": target,
        "report": {"target": target, "todo": todo,
                   "old": dict((replicas.get(engines[0]) or {}).get("old") or {}) if engines else {},
                   "switch_model": model, "switch_image": image},
    }


def upgrade_announcement(engines, todo, target, startup=None, incumbents=None):
    """The sentence the upgrade prints before anything changes."""
    if not todo:
        return "Every replica already serves %s: nothing to do." % target
    seconds = float((startup or {}).get("replicas") or 0)
    scores = []
    for host in todo:
        incumbent = (incumbents or {}).get(host) or {}
        score = incumbent.get("score")
        scores.append("%s %s (build %s) scores %s" % (host, incumbent.get("model_path", "?"),
                                                      _keep16(incumbent.get("build_id", "?")),
                                                      score if score is not None else
                                                      "nothing stored (measured first, while it serves)"
                                                      if _true(incumbent.get("would_measure")) else "nothing stored"))
    return ("Upgrading %s to %s, one replica at a time. Each leaves the proxy for about one replica start-up (%s) plus "
            "the tool-calling test; %s. Each is compared with the build it serves now: %s." % (
                ", ".join(todo), target,
                "%s min, last measured" % _minutes(seconds) if seconds > 0 else "not measured yet here; 5 to 13 min on GB10",
                "the other replica serves meanwhile" if len(engines) >= 2 else
                "it is the only replica (switch_model_allow_outage): the model is down meanwhile, clients get 503",
                "; ".join(scores)))


# --- The dry run (switch_dry_run, or --check): the plan, printed after the preflight ---------------


def _minutes_text(seconds):
    return "%s min" % _minutes(seconds)


def _away(kind, startup, name, gated):
    """How long the model (or a replica) is away, from the start-ups the maintenance window recorded here."""
    startup = startup or {}
    seconds, gate = float(startup.get(name) or 0), float(startup.get(name + "_gate") or 0)
    gate_words = ""
    if gated:
        gate_words = (" plus its tool-calling gate (%d s last time)" % int(round(gate)) if gate > 0
                      else " plus its tool-calling gate (not timed yet here)")
    if seconds <= 0:
        return "one %s start-up, not measured yet on these hosts (5 to 20 min on GB10)%s" % (kind, gate_words)
    return "about %s - the %s start-up last measured on these hosts (%s)%s" % (
        _minutes_text(seconds + (gate if gated else 0)), kind, _minutes_text(seconds), gate_words)


def _incumbent_words(plan, score):
    incumbent, score = plan["incumbent"], score or {}
    if not incumbent["host"]:
        return "nothing serves now, so there is no incumbent to compare with"
    build = str(score.get("build_id", ""))[:16]
    if score.get("score") is not None:
        return "the incumbent build %s (%s) scores %s (%s)" % (
            build, incumbent["topology"], score["score"], "measured now" if _true(score.get("measured_now")) else "stored")
    if _true(score.get("would_measure")):
        return ("the incumbent build %s (%s) has no stored score: a run measures it first, while it serves (%s chat "
                "completions)" % (build, incumbent["topology"], score.get("would_send", "?")))
    if build:
        return "no score is stored for the incumbent build %s (%s), and it is not measured" % (build, incumbent["topology"])
    return "the incumbent's build is not known"


# Each topology's model directory, as the inventory sets it (the vllm role's _vllm_topologies).
MODEL_VARIABLES = {"replicas": "vllm_model", "split": "vllm_split_model"}


def _the(topology):
    return "the replicas" if topology == "replicas" else "the split"


def _serve(topology):
    return "serve" if topology == "replicas" else "serves"


def model_words(plan, models=None, served_model_name=""):
    """What a dry run's "Starts:" line says of the model: the directory the new topology serves (``models``, by
    topology: vllm_model, vllm_split_model) under ``served_model_name``, and plainly whether it is the one that
    serves now (the incumbent's). Returns (words after the engines, a sentence after the line); both "" without the
    target's directory in ``models``."""
    models = models or {}
    topology, incumbent = plan["topology"], plan["incumbent"]["topology"]
    new = str(models.get(topology) or "")
    if not new:
        return "", ""
    name = " as %s" % served_model_name if served_model_name else ""
    old = str(models.get(incumbent) or "") if incumbent else ""
    if not old:
        return " with %s%s" % (new, name), ""
    if old == new:
        return " with %s%s (the model directory %s %s now)" % (
            new, name, _the(incumbent), _serve(incumbent)), ""
    return " with %s%s" % (new, name), (
        " Another model: %s %s %s (%s), not %s which %s %s now, under the same %s: clients that ask for %s get its "
        "answers." % (_the(topology), _serve(topology), new, MODEL_VARIABLES[topology], old, _the(incumbent),
                      _serve(incumbent), "name %s" % served_model_name if served_model_name else "served model name",
                      served_model_name or "it"))


def _other_ranks(engines, head):
    """``spark-b (rank 1)``, or ``spark-b (rank 1), spark-c (rank 2)``: the split's ranks other than the head's, as the
    vllm_split role numbers them (split_rank); every other engine host as rank 1 when the head is none of them."""
    others = split_rank(list(engines), head, head)["others"] or [
        {"host": host, "rank": 1} for host in engines if host != head]
    if len(others) <= 1 or len({other["rank"] for other in others}) == 1:
        return "%s (rank 1)" % ", ".join(other["host"] for other in others)
    return ", ".join("%s (rank %d)" % (other["host"], other["rank"]) for other in others)


def dry_run(plan, engines, head, units, startup=None, incumbent_score=None, min_score=None, models=None,
            served_model_name=""):
    """The plan a dry run of a topology switch prints, one line each: what stops, what starts, how long the model
    is away (from ``startup``, the start-ups the maintenance window recorded on these hosts), what is gated, what a
    failure does. ``units``: each engine host's states, as for :func:`decide`. ``models``: each topology's model
    directory, ``served_model_name`` the name clients ask for: the "Starts:" line names the model the new topology
    serves, and says so plainly when it is not the one that serves now (:func:`model_words`)."""
    topology, other_topology = plan["topology"], plan["other"]
    lines = ["Dry run of the switch to %s: this is what a run would do. Nothing was changed, no tool-calling test was "
             "sent, no lock was taken." % topology]
    if plan["on_target"]:
        if plan["heal"]:
            hosts = plan["heal_hosts"]
            lines.append("Stops and starts: nothing - every engine host already runs %s (%s)." % (topology, plan["unit"]))
            lines.append("Finishes an interrupted %s run: %s %s drained from the proxy; %s" % (
                " / ".join(plan["heal_holders"]), ", ".join(hosts), "is" if len(hosts) == 1 else "are",
                ("the tool-calling gate tests %s directly (against tool_gate_min_score and the build's own last passing "
                 "score minus tool_gate_tolerance), and each that passes rejoins the proxy."
                 % ("each of them" if topology == "replicas" else "rank 0"))
                if plan["gated"] else "they rejoin the proxy untested (the tool-calling gate is off for %s)." % topology))
        elif plan.get("owed_gate"):
            lines.append("Stops and starts: nothing - every engine host already runs %s (%s)." % (topology, plan["unit"]))
            lines.append("Owed gate: the engine hosts' topology records %s, so the switch that admitted these engines "
                         "was interrupted before its gate's verdict; the tool-calling gate tests %s directly while %s, "
                         "against tool_gate_min_score (%s) and the build's own last passing score minus "
                         "tool_gate_tolerance. If one fails: the new engines leave the proxy again and the %s %s started "
                         "again (a rollback), and the run fails; once they pass, each host records %s." % (
                             _recorded_words(plan), ", ".join(plan["api_engines"]),
                             "it serves" if len(plan["api_engines"]) == 1 else "they serve",
                             _number(min_score) if min_score is not None else "?", plan["other"],
                             "is" if plan["other"] == "split" else "are", topology))
        else:
            lines.append("Stops and starts: nothing - every engine host already runs %s (%s); a run checks that it "
                         "serves and is in the proxy's rotation." % (topology, plan["unit"]))
    else:
        running = [host for host in engines if other_topology in _running((units or {}).get(host))]
        lines.append("Stops: %s on %s (each host's %s watchdog disabled --now first; %s drained from the proxy, "
                     "in-flight requests finishing, before it stops)." % (
                         plan["other_unit"], ", ".join(running) or "no host (it does not run)", other_topology,
                         ", ".join(api_engines(other_topology, [h for h in engines if h in running], head)
                                   if running else []) or "nothing"))
        if topology == "split":
            starts = "%s on %s (rank 0, serves the API) and %s" % (plan["unit"], head, _other_ranks(engines, head))
        else:
            starts = "%s on %s (one replica each)" % (plan["unit"], ", ".join(engines))
        served, other_model = model_words(plan, models, served_model_name)
        lines.append("Starts: %s%s, rendered and checked before anything stops; its watchdog after it serves.%s"
                     % (starts, served, other_model))
        kind = "replica" if topology == "replicas" else "split"
        after = plan.get("gate_mode") == AFTER_ADMISSION
        away = _away(kind, startup, topology, plan["gated"] and not after)
        lines.append("The model is away: %s%s." % (away, " (the gate runs after the engines joined the proxy)" if after else ""))
        if after:
            lines.append("Gated: yes, after admission - %s: the engines join as soon as they serve, the gate runs after: "
                         "it tests %s directly while %s, which must reach tool_gate_min_score (%s) and stay within "
                         "tool_gate_tolerance of the incumbent's score; %s." % (
                             plan["gate_mode_why"], ", ".join(plan["api_engines"]),
                             "it serves" if len(plan["api_engines"]) == 1 else "they serve",
                             _number(min_score) if min_score is not None else "?",
                             _incumbent_words(plan, incumbent_score)))
        elif plan["gated"]:
            lines.append("Gated: yes - the tool-calling gate tests %s directly before %s joins the proxy%s: %s must "
                         "reach tool_gate_min_score (%s) and stay within tool_gate_tolerance of the incumbent's score; "
                         "%s." % (", ".join(plan["api_engines"]), "it" if len(plan["api_engines"]) == 1 else "each",
                                  _split_words(plan), "it" if len(plan["api_engines"]) == 1 else "each",
                                  _number(min_score) if min_score is not None else "?",
                                  _incumbent_words(plan, incumbent_score)))
        else:
            lines.append("Gated: no - %s is not in tool_gate_topologies: the new engines take traffic untested." % topology)
        lines.append("If a new engine does not serve%s: %sthe %s %s started again (a rollback), and the run fails."
                     % (" or fails the gate" if plan["gated"] else "",
                        "the new engines leave the proxy again and " if after else "", other_topology,
                        "is" if other_topology == "split" else "are"))
    if plan["drained_other"]:
        lines.append("Left alone: %s, drained by someone else." % ", ".join(
            "%s (%s)" % (host, holder or "no holder") for host, holder in plan["drained_other"].items()))
    if plan.get("records") and not plan["records"]["agrees"]:
        lines.append("Records: %s" % tr.disagreement(plan["records"]))
    lines.append("To run it: the same command without -e switch_dry_run=true (and without --check).")
    return lines


def upgrade_dry_run(engines, todo, target, startup=None, incumbents=None, min_score=None):
    """The plan a dry run of the rolling upgrade (switch-model.yml) prints, one line each."""
    lines = ["Dry run of the upgrade to %s: this is what a run would do. Nothing was changed, no tool-calling test was "
             "sent, no lock was taken." % target]
    if not todo:
        lines.append("Every replica already serves %s: nothing would change." % target)
        return lines
    left = [host for host in engines if host not in todo]
    lines.append("Upgrades, one replica at a time, in this order: %s%s." % (
        ", ".join(todo), (" (%s already serve%s it: left as %s)" % (", ".join(left), "s" if len(left) == 1 else "",
                                                                    "it is" if len(left) == 1 else "they are"))
        if left else ""))
    lines.append("Each: leaves the proxy (its in-flight requests finish, up to switch_drain_timeout), stops "
                 "vllm-replica.service, starts it on %s, is gated, and rejoins the proxy." % target)
    lines.append("Each is away: %s; %s." % (
        _away("replica", startup, "replicas", True),
        "the model stays up, the other replica serves meanwhile" if len(engines) >= 2 else
        "it is the only replica (switch_model_allow_outage): the model is down meanwhile, clients get 503"))
    scores = []
    for host in todo:
        incumbent = (incumbents or {}).get(host) or {}
        score = incumbent.get("score")
        scores.append("%s's build %s %s" % (host, _keep16(incumbent.get("build_id", "?")),
                                            "scores %s" % score if score is not None else
                                            "has no stored score: a run measures it first, while it serves (%s chat "
                                            "completions)" % incumbent.get("would_send", "?")
                                            if _true(incumbent.get("would_measure")) else "has no stored score"))
    lines.append("Gated: yes - each candidate must reach tool_gate_min_score (%s) and stay within tool_gate_tolerance of "
                 "the build it replaces: %s." % (_number(min_score) if min_score is not None else "?", "; ".join(scores)))
    lines.append("If a replica fails: it gets its old build back, the replicas already upgraded go back too, the others "
                 "are not touched, and the run fails.")
    lines.append("To run it: the same command without -e switch_dry_run=true (and without --check).")
    return lines


# --- A group move (move_groups.yml, procedure "move"): one move from the grouping that runs to a target ----------
#
# The decision is _group_move.move_plan's; this adds what the topology_switch role's entry points read of a switch
# (the same keys, so the serving wait, the gate, the rollback, the rotation wait and the release run unchanged) and a
# view per engine host (``views``): each host's own new unit, group and rank, which switch_plan.yml sets as that
# host's vllm_switch_plan, so that each host acts on its own part of the move.

MOVE_HOLDER = "move-groups"


def move_target(engines, move_to=None, declared=None, head=None, replica_fits=True):
    """The grouping a move goes to - ``move_to`` (a list of host lists), else ``declared`` (site_engine_groups) - and
    what is wrong with it: ``(grouping, errors)``; each error says what to change."""
    grouping = move_to if move_to else declared
    if not grouping:
        return [], ["a group move needs its target: -e '{\"move_to\": [[\"spark-a\", \"spark-b\"], [\"spark-c\"]]}' "
                    "(a list of host lists, every engine host in one), or site_engine_groups in group_vars/all.yml"]
    errors = check_grouping(grouping, engines, replica_fits=replica_fits)
    if errors:
        return [], ["%s (move_to or site_engine_groups)" % error for error in errors]
    return [[str(host) for host in group] for group in grouping], []


def _group_of(grouping, host):
    for group in grouping or []:
        if host in group:
            return list(group)
    return []


def move_views(plan, engines, current):
    """Per engine host, what its part of the move is, in a switch's words: ``in_move`` (the move touches it),
    ``topology`` (the unit kind it
    runs once the move is done), ``unit``, ``role``, ``other`` and ``other_unit`` (what it ran before, which a rollback
    starts again), ``group`` and ``rank`` (its place in its new group), ``split_hosts`` and ``split_head`` (the group
    its split rank rendezvous with: the new one, or the old one on a rollback; [] for a replica), ``rollback`` (its old
    group comes back on it), ``serving_topology`` (what it runs after this decision: the watchdog it gets)."""
    back = {host for group in plan["move_rollback"]["start"] for host in group}
    views = {}
    for host in engines:
        move = plan["hosts"].get(host) or {}
        old = move.get("stops") or {}
        new = move.get("starts") or {}
        now = _group_of(current, host)
        group = new.get("group") or now
        kind = new.get("topology") or kind_of(group or [host])
        was = old.get("topology") or kind_of(now or [host])
        rollback = host in back
        split_hosts = (old.get("group") or now) if rollback else group
        views[host] = {
            "in_move": host in plan["touched"], "topology": kind, "unit": UNITS[kind], "role": ROLES[kind],
            "other": was, "other_unit": UNITS[was], "group": group, "rank": group.index(host) if host in group else None,
            "old_group": old.get("group") or now, "rollback": rollback,
            "serving_topology": was if rollback else kind,
            "split_hosts": split_hosts if len(split_hosts) > 1 else [],
            "split_head": split_hosts[0] if len(split_hosts) > 1 else "",
        }
    return views


def move_switch_plan(engines, head, units, target, drains=(), gated=False, incumbent_score=None, failed=None,
                     notes=None, play_hosts=None, min_score=None, records=None, playbook_dir=None, kv_tokens=None,
                     members=None, known_build=None, number=1, errors=(), declared=None):
    """Everything a group move asks, from what it has seen so far (``failed`` None: nothing started yet).

    ``target``: the grouping to go to (:func:`move_target`; ``errors`` its errors, which refuse the move). The move
    is the first of ``_group_move.move_plan`` from the grouping the units and records say runs
    (``_group_move.current_grouping``); ``members``: the proxy's members (None: ``proxy_members`` of the engines and
    ``declared``, site_engine_groups, as nginx_proxy_backends defaults to).
    Returns move_plan's keys, the keys a switch's entry points read (``on_target``, ``gated``, ``gate_hosts``,
    ``api_engines``, ``rollback`` - a bool, as a switch's; move_plan's own is ``move_rollback`` -, ``undrain``,
    ``proxy_drain``, ``expected_in_rotation``, ...) and ``views``
    (:func:`move_views`), ``procedure`` "move", ``holder`` (the drain files' holder) and ``refusal``.
    """
    running = gm.current_grouping(engines, units, records, head)
    current = running["grouping"]
    failed = list(failed or [])
    if notes:
        failed += [host for host in noted_failed(engines, notes) if host not in failed]
    lost_hosts = lost(engines, play_hosts)
    members = list(members) if members is not None else proxy_members(engines, declared)
    plan = gm.move_plan(current, target, engines, kv_tokens=kv_tokens, failed=failed, lost=lost_hosts,
                        gated=bool(gated), members=members, number=number)
    merged = _merge_drains(drains)
    drained_other = {host: holder for host, holder in merged.items()
                     if host in engines and not str(holder or "").startswith(MOVE_HOLDER)}
    on_target = not plan["todo"]
    heal_hosts = [host for host in api_hosts(current)
                  if on_target and str(merged.get(host) or "").startswith(MOVE_HOLDER)]
    gated = bool(gated) and (not on_target or bool(heal_hosts))
    passed = set(passed_gate(engines, notes))
    problems = list(errors or [])
    problems += ["%s: %s" % (host, why) for host, why in running["idle"].items()
                 if host not in lost_hosts and why != "no engine unit runs there"]
    missing = [host for host in api_hosts(target) if host not in members]
    if missing:
        problems.append("the proxy does not balance to %s, the API host%s of a target group (nginx_proxy_backends, "
                        "by default site_engine_groups' first hosts): leave site_engine_groups empty, or list every "
                        "host that may serve the API, and apply it with %s first"
                        % (", ".join(missing), "" if len(missing) == 1 else "s",
                           playbook_name("deploy.yml", playbook_dir)))
    stopped = [group for group in plan["move"].get("stop", []) if group]
    serving_now = stopped + [group for group in plan["serving"] if group not in stopped]
    incumbent = ({"topology": kind_of(serving_now[0]), "host": serving_now[0][0]} if serving_now and not on_target
                 else {"topology": "", "host": ""})
    if on_target:
        gate = [host for host in heal_hosts if host not in failed] if gated else []
        undrain = [host for host in heal_hosts if host not in failed and (not gated or host in passed)]
    else:
        gate = plan["gate_hosts"]
        undrain = [host for host in plan["admit"] if host in passed] if gated else []
    left = [host for host in heal_hosts if host not in undrain]
    expected = [host for host in api_hosts(plan["after"]) if host in members and host not in lost_hosts
                and host not in drained_other and host not in left and host not in failed
                and (not gated or on_target or host in undrain or host not in plan["admit"])]
    if plan["rollback"]["needed"]:
        expected += [host for host in api_hosts(plan["rollback"]["start"]) if host in members and host not in expected]
    expected = [host for host in engines if host in expected]
    words = " ".join("[%s]" % ", ".join(group) for group in target)
    plan.update({
        "procedure": "move", "holder": MOVE_HOLDER, "current_grouping": running, "topology": words,
        "other": " ".join("[%s]" % ", ".join(group) for group in current), "on_target": on_target,
        "heal": bool(heal_hosts), "heal_hosts": heal_hosts, "heal_holders": [MOVE_HOLDER] if heal_hosts else [],
        "heal_ready": undrain if heal_hosts else [], "heal_left": left, "drained_other": drained_other,
        "incumbent": incumbent, "incumbent_score": dict(incumbent_score or {}), "known_build": dict(known_build or {}),
        "gated": gated, "gate_mode": BEFORE_ADMISSION if gated else "",
        "gate_mode_why": ("the other groups serve meanwhile: the new groups are gated before they join" if gated
                          else "the tool-calling gate is off for the new groups"),
        "admit_at_cut_over": not gated, "gate_split": [],
        "gate_topology": kind_of(plan["move"]["start"][0]) if plan["move"].get("start") else (
            kind_of(_group_of(current, heal_hosts[0])) if heal_hosts else ""), "gate_hosts": [h for h in gate if h not in failed],
        "api_engines": [host for host in plan["touched"] if (plan["hosts"][host].get("starts") or {}).get("rank") == 0],
        "rollback": plan["rollback"]["needed"], "move_rollback": plan["rollback"], "undrain": undrain, "joined": gated and bool(undrain),
        "proxy_drain": {"hosts": undrain, "state": "absent"}, "expected_in_rotation": expected,
        "startup_records": {}, "records": records_view(engines, records) if records else None,
        "refusal": "" if problems else (
            gate_bar_refusal("the new groups", min_score, incumbent_score, _no_incumbent_words(
                dict(plan, heal=bool(heal_hosts), incumbent=incumbent), incumbent_score), playbook_dir)
            if gated else ""),
    })
    if problems:
        plan["refusal"] = ("The group move cannot run; nothing was changed. %s." % "; ".join(problems))
    plan["views"] = move_views(plan, engines, current)
    if heal_hosts:
        plan["announcement"] = ("Already on %s, but %s %s still drained from the proxy by an interrupted group move. "
                                "Finishing it: nothing stops or starts; %s." % (
                                    words, ", ".join(heal_hosts), "is" if len(heal_hosts) == 1 else "are",
                                    "the tool-calling gate tests each directly, and each that passes rejoins the proxy"
                                    if gated else "they rejoin the proxy (untested: the gate is off)"))
    return plan


def move_record_writes(plan, engines, observed, head=None, models=None):
    """At the end of a group move: every engine host's record (``_group_record.grouping_writes``: the grouping that
    runs now, one list for all, each host's ``group`` and ``rank`` in it, ``topology`` its unit kind, ``model`` that
    kind's directory). Returns ``write``, ``unrecorded`` (a lost host named so) and ``grouping``."""
    note = "group move %d rolled back" % plan.get("number", 1) if plan.get("rollback") else ""
    found = grouping_writes(engines, observed, head, plan.get("touched") or [], note, models)
    lost_hosts = plan.get("lost_hosts") or []
    unrecorded = {host: ("lost from the run (unreachable or failed)" if host in lost_hosts else why)
                  for host, why in found["unrecorded"].items()}
    return {"write": found["write"], "unrecorded": unrecorded, "grouping": found["grouping"]}
