# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a topology switch looked like from a client's side.

Input: the probe client's records (one per request through the proxy, see
_host/probe_client.py) and the switch's timeline (epoch seconds of named events).
Output: machine-readable numbers plus a table for people. Pure logic.

Definitions (all times epoch seconds, durations seconds):
- ``downtime``: the longest stretch with no successful answer, measured from the
  end of the last 200 before it to the end of the first 200 after it;
- ``first_serving``: the timeline's ``first_serving`` event (the first engine of
  the new topology passed its health probe), falling back to ``in_rotation``;
- ``after_serving``: every non-200 a client saw that *started* after
  first_serving; the product promises none (a switch never leaves clients without a model).
- ``ok_with_failures``: the outcome of a switch or an upgrade that went through (``ok``)
  while more requests than ``max_failures_after_serving`` failed after first_serving,
  when the caller sets that bar (both set 0: once a new engine serves, and throughout an
  upgrade, no request may fail). It fails the run: the new topology or build is kept
  (rolling back would cost another outage), but a client saw what the product promises
  it never sees, and automation must not read it as ``ok``.

The probe client appends to its log, so it may also hold an earlier switch's
requests: only those that started at or after the timeline's ``start`` count.

Clocks: the timeline's events are times on the controller's clock (the roles note them
with ``now()``; vllm_health's ``ended_at`` is set by its action plugin when the result
arrives). The probe client stamps its records with the clock of the host it runs on, the
proxy host, which may be minutes off. Its records are moved onto the controller's clock
(:func:`on_controller_clock`) by ``clock_offset``, how far the proxy host's clock is ahead
of the controller's, measured when the report is built (the switch_report action plugin:
the controller's time before and after reading the host's clock, to within half that
round trip), before anything is compared; so which requests failed "after the first engine
served" never depends on the hosts' clocks agreeing. The report keeps the offset and its
bound (``clock``) and says so in a line when the offset is over ``CLOCK_LINE_ABOVE`` seconds.
"""

from __future__ import annotations

import json

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import notes_of
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

# Events the switch playbook records, in the order they normally happen.
TIMELINE_ORDER = (
    "start", "preflight_done", "lock_taken", "drained", "old_stopped", "new_started",
    "first_serving", "all_serving", "in_rotation", "gate_started", "gate_done", "rollback_started",
    "rollback_serving", "lock_released", "end",
)


# The table says how far the proxy host's clock is off the controller's above this, seconds.
CLOCK_LINE_ABOVE = 1.0


def on_controller_clock(records, offset):
    """The probe client's records with ``t`` and ``end`` on the controller's clock.

    ``offset``: seconds the clock of the host that wrote them is ahead of the controller's
    (negative: behind). The records are copies; the log is left as the host wrote it.
    """
    offset = float(offset or 0.0)
    if not offset:
        return list(records)
    moved = []
    for record in records:
        record = dict(record, t=float(record["t"]) - offset)
        if record.get("end") is not None:
            record["end"] = float(record["end"]) - offset
        moved.append(record)
    return moved


def clock_summary(offset, bound=None):
    """The report's ``clock``: ``proxy_offset`` (s the proxy host's clock is ahead of the controller's) and
    ``bound`` (s either side it was measured to; None when it was not measured)."""
    return {"proxy_offset": round(float(offset or 0.0), 3), "bound": None if bound is None else round(float(bound), 3)}


def clock_line(clock):
    """The table's line about the proxy host's clock, or None when it is within CLOCK_LINE_ABOVE of the controller's."""
    offset = float((clock or {}).get("proxy_offset") or 0.0)
    if abs(offset) <= CLOCK_LINE_ABOVE:
        return None
    bound = (clock or {}).get("bound")
    return ("clocks: the proxy host's clock is %.1f s %s the controller's%s; the probe client's times are counted on "
            "the controller's clock, as the timeline's events" % (
                abs(offset), "ahead of" if offset > 0 else "behind",
                " (measured to within %.2f s)" % bound if bound is not None else ""))


def load_records(text):
    """Parse JSON lines, skipping a torn last line (the client may be stopped mid-write)."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    records.sort(key=lambda r: r["t"])
    return records


def longest_gap(records):
    """(seconds, from, to) of the longest stretch without a 200, by completion time."""
    ok_ends = sorted(r["end"] for r in records if r.get("status") == 200)
    failures = [r for r in records if r.get("status") != 200]
    if not failures:
        return 0.0, None, None
    best = (0.0, None, None)
    # A gap is bounded by two consecutive successes with at least one failure between.
    bounds = [records[0]["t"]] + ok_ends + [records[-1]["end"]]
    for begin, finish in zip(bounds, bounds[1:]):
        if any(begin <= f["t"] <= finish for f in failures) and finish - begin > best[0]:
            best = (finish - begin, begin, finish)
    return round(best[0], 3), best[1], best[2]


def _by_status(records):
    """Request counts by HTTP status, keyed by the status as a string ("0": no HTTP answer)."""
    counts = {}
    for record in records:
        key = str(record.get("status"))
        counts[key] = counts.get(key, 0) + 1
    return counts


def summarize(records, timeline, engines=None, tool_score=None, outcome="ok", reason=None,
              max_failures_after_serving=None, clock=None):
    """Return the report dict (see module docstring for definitions).

    With ``max_failures_after_serving`` (a number of requests), an ``ok`` outcome with
    more failures after first_serving than that becomes ``ok_with_failures``, and the
    reason (unless given) says how many failed. ``records`` are on the timeline's clock
    (:func:`on_controller_clock`); ``clock`` (:func:`clock_summary`) is reported as given.
    """
    timeline = {k: float(v) for k, v in (timeline or {}).items() if v is not None}
    if "start" in timeline:
        records = [r for r in records if r["t"] >= timeline["start"]]
    by_status = _by_status(records)
    first_serving = timeline.get("first_serving", timeline.get("in_rotation"))
    after = [r for r in records if first_serving is not None and r["t"] >= first_serving and r.get("status") != 200]
    gap, gap_from, gap_to = longest_gap(records) if records else (0.0, None, None)
    start = timeline.get("start", records[0]["t"] if records else None)
    if outcome == "ok" and max_failures_after_serving is not None and len(after) > max_failures_after_serving:
        outcome = "ok_with_failures"
        reason = reason or ("%d of %d requests through the proxy were not answered 200 after the model served "
                            "(by status %s); the bar is %d"
                            % (len(after), len(records), json.dumps(_by_status(after), sort_keys=True),
                               max_failures_after_serving))
    report = {
        "outcome": outcome,
        "reason": reason,
        "requests": len(records),
        "by_status": by_status,
        "count_200": by_status.get("200", 0),
        "count_502": by_status.get("502", 0),
        "count_503": by_status.get("503", 0),
        "count_no_answer": by_status.get("0", 0),
        "downtime": gap,
        "downtime_from": gap_from,
        "downtime_to": gap_to,
        "first_serving": first_serving,
        "failures_after_serving": len(after),
        "count_502_after_serving": sum(1 for r in after if r.get("status") == 502),
        "failures_after_serving_sample": after[:5],
        "startup": (round(first_serving - timeline["old_stopped"], 3)
                    if first_serving is not None and "old_stopped" in timeline else None),
        "timeline": {k: round(v - start, 3) for k, v in sorted(timeline.items(), key=lambda kv: kv[1])}
        if start is not None else {},
        "engines": engines or {},
        "tool_score": tool_score,
        "clock": clock if clock is not None else clock_summary(0.0),
    }
    report["table"] = table(report)
    return report


def table(report):
    """Lines for people; the numbers are the same as the dict's."""
    lines = ["switch outcome: %s%s" % (report["outcome"], " (%s)" % report["reason"] if report["reason"] else "")]
    lines.append("timeline (s since start):")
    for name, offset in report["timeline"].items():
        lines.append("  %-18s %8.1f" % (name, offset))
    lines.append("seconds without a model (longest gap between answers): %.1f" % report["downtime"])
    if report["startup"] is not None:
        lines.append("new topology start-up (old stopped -> first engine serving): %.1f s" % report["startup"])
    lines.append("probe client through the proxy: %d requests, by status %s"
                 % (report["requests"], json.dumps(report["by_status"], sort_keys=True)))
    lines.append("502 seen: %d; failures after the first engine served: %d (502: %d)"
                 % (report["count_502"], report["failures_after_serving"], report["count_502_after_serving"]))
    if clock_line(report.get("clock")):
        lines.append(clock_line(report.get("clock")))
    for name, engine in sorted(report["engines"].items()):
        lines.append("engine %-10s %s" % (name, engine))
    if report["tool_score"] is not None:
        lines.append("tool-calling score: %s" % report["tool_score"])
    return lines


# --- The switch's and the upgrade's whole report, from the per-host observations ------------
#
# ``hosts`` is a list, in inventory order, of what each engine host noted during the run:
#   name            its inventory name
#   events          {event: epoch seconds} this host noted (drained, old_stopped,
#                   serving, gate_done, in_rotation, failed, restored, rollback_started,
#                   rollback_serving)
#   health          the vllm_health status of its start-up wait (None: not probed)
#   gate            the tool-calling gate's verdict on it (tool_gate_result; {} when none)
#   reason          why it failed, when it did
#   failed, upgraded, restore_failed, rollback_failed   (bool) what happened to it
# ``plan`` is what the run decided (switch_plan's output for a switch, the upgrade's
# preflight for an upgrade) plus what the closing play read (inventory record, proxy).


def _truncate(text, length, end="..."):
    """Jinja's ``truncate`` filter (leeway 5, words kept whole), so messages read as before."""
    text = str(text)
    if len(text) <= length + 5:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _times(hosts, event):
    return [float(h["events"][event]) for h in hosts if (h.get("events") or {}).get(event) is not None]


def _gates(hosts):
    """{host: verdict} for each host the gate gave a verdict on, in host order."""
    return {h["name"]: h["gate"] for h in hosts if h.get("gate")}


def _gate_started(hosts):
    """When the gate began on each host it gave a verdict on (the verdict's ``started_at``)."""
    return [float(gate["started_at"]) for gate in _gates(hosts).values() if gate.get("started_at") is not None]


def _shares(hosts):
    """A split suite's shares (``{host: {cases, of, started_at, done_at}}``), from the first verdict that has them."""
    for gate in _gates(hosts).values():
        if isinstance(gate.get("shares"), dict):
            return gate["shares"]
    return {}


def switch_timeline(hosts, now, start=None, after_admission=False, owed_gate=False):
    """The topology switch's events, each host's earliest or latest as the report counts them.

    ``first_serving`` is when the first new engine served clients: with the gate, when it
    joined the proxy (``in_rotation``); ``first_healthy`` is then when it passed its health probe.
    ``after_admission`` (a known build, switch_plan's ``gate_mode``): the cut-over let the new
    engines join as soon as they served, so ``in_rotation`` is when the first one served and the
    gate (``gate_started`` to ``gate_done``) comes after it. A suite split over the new engines adds
    ``<host> gate_share_done``, when each engine's share ended. ``owed_gate`` (switch_plan's: a re-run that gates
    the engines an interrupted switch admitted): the gate's start is named ``owed gate``.
    """
    first = (hosts[0].get("events") or {}) if hosts else {}
    in_rotation, healthy = _times(hosts, "in_rotation"), _times(hosts, "serving")
    if after_admission:
        in_rotation = healthy
    # In this order: events at the same second are listed so.
    timeline = {"start": first.get("start") if start is None else float(start), "drained": first.get("drained"),
                "old_stopped": min(_times(hosts, "old_stopped"), default=None),
                "first_serving": min(in_rotation or healthy, default=None),
                "first_healthy": min(healthy) if in_rotation and healthy and not after_admission else None,
                "gate_started": min(_gate_started(hosts), default=None),
                "gate_done": max(_times(hosts, "gate_done"), default=None),
                "in_rotation": min(in_rotation, default=None),
                "all_serving": max(healthy, default=None),
                "rollback_started": min(_times(hosts, "rollback_started"), default=None),
                "rollback_serving": max(_times(hosts, "rollback_serving"), default=None),
                "end": now}
    for host, part in _shares(hosts).items():
        timeline["%s gate_share_done" % host] = part.get("done_at")
    if owed_gate:
        timeline["owed gate"] = timeline.pop("gate_started")
    return {k: v for k, v in timeline.items() if v is not None}


def switch_engines(hosts, lost=()):
    """{host: its health status, with its tool score and verdict when the gate ran on it}; a lost host says so."""
    engines = {}
    for host in hosts:
        gate = host.get("gate") or {}
        line = host.get("health") or "not probed"
        if host["name"] in (lost or ()):
            line = "LOST from the run (unreachable or dropped); last seen " + line
        if gate.get("score") is not None:
            line += ", tool score %s%s" % (gate["score"], " (passed)" if gate.get("passed") else " (FAILED the gate)")
        engines[host["name"]] = line
    return engines


def tool_gate_summary(hosts, plan):
    """The tool-calling gate's part of a switch report: its verdicts and what they cost."""
    topology, gated = plan["topology"], bool(plan.get("gated"))
    gates = _gates(hosts)
    if not gated:
        summary = ["tool-calling gate off for %s (tool_gate_topologies): the new engines took traffic untested" % topology]
    else:
        summary = [gate.get("message") for gate in gates.values()]
        in_rotation, healthy = _times(hosts, "in_rotation"), _times(hosts, "serving")
        started, done = _gate_started(hosts), _times(hosts, "gate_done")
        if plan.get("owed_gate"):
            summary.append("owed gate: %s; %s" % (
                plan.get("gate_mode_why") or "an interrupted switch admitted its engines before its gate's verdict",
                "this run gated them while they served%s, stopping and starting nothing first" % (
                    " (%s s)" % round(max(done) - min(started), 1) if started and done else "")
                if gates else "it did not run (the engines did not serve)"))
        elif plan.get("gate_mode") == "after_admission" and gates:
            summary.append("tool-calling gate after admission: %s, so the new engines joined the proxy as soon as they "
                           "served and the gate ran while they served%s" % (
                               plan.get("gate_mode_why") or "the build passed it here before",
                               " (%s s)" % round(max(done) - min(started), 1) if started and done else ""))
        shares = _shares(hosts)
        if shares:
            summary.append("tool-calling gate: the suite was split over the new engines, each case alone on its engine - "
                           "%s; one verdict over all %s cases" % (", ".join(
                               "%s %d cases in %s s" % (host, len(part.get("cases") or []), round(
                                   float(part.get("done_at") or 0) - float(part.get("started_at") or 0), 1))
                               for host, part in shares.items()), next(iter(shares.values())).get("of")))
        if plan.get("gate_mode") != "after_admission" and in_rotation and healthy:
            summary.append("tool-calling gate: the new engines were healthy %s s before they joined the proxy "
                           "(the gate ran meanwhile; first_serving counts from then)"
                           % round(min(in_rotation) - min(healthy), 1))
        summary = summary or ["tool-calling gate: did not run (the new topology did not come up)"]
    incumbent = (plan.get("incumbent_score") or {}) if (plan.get("incumbent") or {}).get("host") and gated else {}
    # gate_mode (switch_plan's) and each engine's share of a split suite (case ids), for the scenarios' assertions.
    return {"topology": topology, "gated": gated, "incumbent": incumbent, "engines": gates, "summary": summary,
            "gate_mode": plan.get("gate_mode") or "", "owed_gate": bool(plan.get("owed_gate")),
            "shares": {host: list(part.get("cases") or []) for host, part in _shares(hosts).items()}}


def _heal_report(hosts, plan):
    """What a re-run that finished an interrupted switch did (outcome healed or heal_failed)."""
    ready, left = plan.get("heal_ready") or [], plan.get("heal_left") or []
    why = "; ".join(h["reason"] for h in hosts if h["name"] in left and h.get("reason") is not None) or "it did not serve"
    table = ["already on %s; %s had been left drained by an interrupted %s run (nothing was stopped or started)"
             % (plan["topology"], ", ".join(plan.get("heal_hosts") or []), " / ".join(plan.get("heal_holders") or []))]
    if ready:
        table.append("back in the proxy's rotation: " + ", ".join(ready))
    if left:
        table.append("STILL DRAINED: %s (%s)" % (", ".join(left), why))
    return {"outcome": "heal_failed" if left else "healed", "topology": plan["topology"],
            "drained_by": plan.get("heal_holders") or [], "back_in_rotation": ready, "left_drained": left,
            "reason": why if left else "", "table": table}


def _playbook(plan, name):
    """The playbook ``name`` as the operator runs it, from the run's ``playbook_dir`` (in ``plan``)."""
    return playbook_name(name, plan.get("playbook_dir"))


def _heal_message(report, plan):
    topology = plan["topology"]
    other = "split" if topology == "replicas" else "replicas"
    left = report["left_drained"]
    now = [h for h in plan.get("api_engines") or [] if h not in left and h not in (plan.get("drained_other") or {})]
    rotation = (("In rotation now: %s." % ", ".join(now)) if now
                else "No engine is in the proxy's rotation: clients get 503 with Retry-After.")
    if plan.get("rotation_error"):
        rotation += " (The proxy: %s)" % _truncate(plan["rotation_error"], 300)
    return ("Already on {t}, but {left} could not be put back in the proxy's rotation and {stay} drained: {why}. "
            "{rotation}\nNothing was stopped or started. The ways on: go back to {o}, a switch of its own with its "
            "start-up and its own gate (ansible-playbook -i {inv} {to_other}); or fix the cause and "
            "run {to_this} again, which tests them again; or serve this build although it failed the gate: "
            "run {to_this} again with -e tool_gate_enforce=false (it is measured and stored as failed, then "
            "put back in rotation).").format(
                t=topology, o=other, to_other=_playbook(plan, "switch-to-%s.yml" % other),
                to_this=_playbook(plan, "switch-to-%s.yml" % topology), left=", ".join(left),
                stay="stays" if len(left) == 1 else "stay",
                why=report["reason"], rotation=rotation, inv=" -i ".join(plan.get("inventory_sources") or []))


def switch_report(records, hosts, plan, now, clock=None):
    """The whole report of a topology switch (switch-to-replicas.yml, switch-to-split.yml).

    ``records`` and ``now`` on the controller's clock, as the hosts' events
    (:func:`on_controller_clock`); ``clock`` (:func:`clock_summary`) is reported as given.

    Returns the report dict of :func:`summarize` (or, for a re-run that finished an
    interrupted switch, the heal report; for a switch with nothing to do, outcome
    ``unchanged``) with ``tool_gate``, ``inventory``, ``lines`` (what the playbook
    prints) and ``message`` (why the run fails; empty when it does not). A switch that
    stopped nothing or went through, after which the proxy did not route to every engine
    it should (``rotation_error``), has outcome ``not_in_rotation`` and fails.
    """
    topology, inventory = plan["topology"], plan.get("inventory") or {}
    lost = [h["name"] for h in hosts if h["name"] in (plan.get("lost_hosts") or [])] or list(plan.get("lost_hosts") or [])
    gate = tool_gate_summary(hosts, plan)
    # An owed gate (on the target) is reported as the switch whose gate it finishes: its timeline, outcome and rollback.
    if plan.get("on_target") and not plan.get("heal") and not plan.get("owed_gate"):
        report = {"outcome": "unchanged", "reason": None, "table": ["already on %s: nothing changed" % topology]}
        lines = list(report["table"])
    elif plan.get("on_target") and plan.get("heal"):
        report = _heal_report(hosts, plan)
        lines = report["table"] + gate["summary"]
    else:
        rollback_failed = any(h.get("rollback_failed") for h in hosts)
        outcome = "failed" if rollback_failed else ("rolled_back" if plan.get("rollback") else "ok")
        reason = "; ".join(h["reason"] for h in hosts if h.get("reason") is not None) if plan.get("rollback") else None
        scores = [float(g["score"]) for g in _gates(hosts).values() if g.get("score") is not None]
        # Once a new engine serves, no request through the proxy may fail (the switch's promise).
        timeline = switch_timeline(hosts, now, plan.get("start"), plan.get("gate_mode") == "after_admission",
                                   bool(plan.get("owed_gate")))
        report = summarize(records, timeline, switch_engines(hosts, lost),
                           min(scores) if scores else None, outcome, reason, 0, clock)
        lines = report["table"] + gate["summary"]
    site = plan.get("site") or {}
    if site and not site.get("agrees", True):
        lines = lines + ["topology records: " + "; ".join(site.get("disagreements") or [])]
    if inventory.get("advice") is not None:
        lines = lines + [inventory["advice"]]
    parts = []
    if report["outcome"] in ("rolled_back", "failed"):
        parts.append((("The switch to %s failed and so did the rollback: NO MODEL MAY BE SERVING. " if report["outcome"] == "failed"
                       else "The switch to %s failed and was rolled back; the old topology serves again. ") % (
                           topology + (" (its owed gate: an interrupted switch admitted these engines before the "
                                       "gate's verdict)" if plan.get("owed_gate") else ""))
                      + "\nWhy: %s" % ("see above" if report.get("reason") is None else report["reason"])
                      + (" %s" % inventory.get("advice") if not inventory.get("agrees", True) else "")))
    elif report["outcome"] == "heal_failed":
        parts.append(_heal_message(report, plan))
    if lost:
        if report["outcome"] in ("ok", "ok_with_failures", "heal_failed", "healed"):
            report = dict(report, outcome="host_lost", reason="lost from the run: %s" % ", ".join(lost))
        parts.append(_lost_message(lost, plan))
    if plan.get("rotation_error") and report["outcome"] in ("ok", "ok_with_failures", "unchanged", "healed"):
        parts.append(_rotation_message(plan))
        report = dict(report, outcome="not_in_rotation", reason=plan["rotation_error"])
    if report.get("failures_after_serving") and report["outcome"] in ("ok_with_failures", "not_in_rotation", "host_lost"):
        parts.append(_failures_message(report, plan, "The switch to %s went through (its new engines serve; it is kept, "
                                                     "not rolled back)" % topology))
    if site and not site.get("agrees", True):
        if report["outcome"] in ("ok", "unchanged", "healed"):
            report = dict(report, outcome="not_recorded", reason="; ".join(site.get("disagreements") or []))
        parts.append(_records_message(site, plan))
    report.setdefault("clock", clock if clock is not None else clock_summary(0.0))
    if plan.get("procedure") == "move":
        report = dict(report, move_report=move_report(records, hosts, plan))
        lines = lines + report["move_report"]["lines"]
        # Other groups served throughout: the switch's promise (nothing fails once the new engines serve) is the
        # move's from its start - a request that failed while a group served fails the run.
        failed = report["move_report"]["failed_requests"]
        if report["outcome"] == "ok" and failed and report["move_report"]["served_throughout"]:
            report = dict(report, outcome="ok_with_failures",
                          reason="%d requests through the proxy were not answered 200 while other groups served" % failed)
            parts.append("The group move went through, but %s (by status %s). Look at the proxy's error log and the "
                         "membership checker's journal on the proxy host for the window of the move."
                         % (report["reason"], json.dumps(report["move_report"]["failed_by_status"], sort_keys=True)))
    return dict(report, tool_gate=gate, inventory=inventory, lines=lines, message="\n".join(parts), lost_hosts=lost)


# --- A group move's part of the report (move_groups.yml, switch_plan's procedure move) ------------------------

# The events of a group's timeline, in the order a move notes them.
GROUP_EVENTS = ("drained", "old_stopped", "serving", "gate_done", "in_rotation", "rollback_started",
                "rollback_serving")


def _group_words(group):
    return "[%s]" % ", ".join(group)


def group_timeline(hosts, group, start):
    """A group's events, seconds since ``start`` (the earliest host's for each event), from its hosts' notes."""
    events = {}
    for host in hosts:
        if host.get("name") not in group:
            continue
        for event, at in (host.get("events") or {}).items():
            if at is not None and event in GROUP_EVENTS:
                events[event] = min(events.get(event, float(at)), float(at))
    return {event: round(events[event] - float(start), 1) if start is not None else events[event]
            for event in GROUP_EVENTS if event in events}


def move_report(records, hosts, plan):
    """What a group move's report adds: each group's timeline (the groups the move stopped and started, and those that
    served meanwhile), the capacity left before, during and after the move (``plan["capacity"]``: groups, hosts and KV
    tokens serving), the requests the probe client saw fail since the start, and the time without a model - 0 s when a
    group served throughout (``served_throughout``) and no request failed, else the longest gap between answers.

    ``records`` and ``hosts`` as for :func:`switch_report` (the controller's clock); ``plan``: the move's last decision
    with the run's ``start``. Returns ``moves`` (one object with move_plan's keys), ``groups``, ``capacity``,
    ``failed_requests``, ``failed_by_status``, ``served_throughout``, ``time_without_model`` (seconds),
    ``remaining`` (the moves left after this one) and ``lines``."""
    start = plan.get("start")
    step = plan.get("move") or {}
    window = [r for r in records or [] if start is None or r["t"] >= float(start)]
    failed = [r for r in window if r.get("status") != 200]
    served = bool(plan.get("serving")) and not plan.get("away")
    gap = longest_gap(window)[0] if window else 0.0
    without = 0.0 if served and not failed else gap
    groups = []
    for side, words in (("stop", "stopped"), ("start", "started"), ("serving", "served")):
        for group in (step.get(side) if side != "serving" else plan.get("serving")) or []:
            groups.append({"group": list(group), "role": words, "timeline": group_timeline(hosts, group, start)})
    cap = plan.get("capacity") or {}
    during = {k: v for k, v in cap.items() if k not in ("before", "after")}
    capacity = [dict(cap.get("before") or {}, step="before"), dict(during, step="during"),
                dict(cap.get("after") or {}, step="after")]
    remaining = max(int(plan.get("remaining") or 0) - 1, 0) if plan.get("todo") else 0
    lines = ["group move %s: stopped %s, started %s; %s" % (
        plan.get("number", 1), " ".join(_group_words(g) for g in step.get("stop") or []) or "nothing",
        " ".join(_group_words(g) for g in step.get("start") or []) or "nothing",
        "rolled back" if plan.get("rollback") else "went through" if plan.get("todo") else "nothing to move")]
    for row in groups:
        lines.append("  %s %-7s %s" % (_group_words(row["group"]), row["role"], ", ".join(
            "%s %.1f s" % (event, at) for event, at in row["timeline"].items()) or "(no events)"))
    for row in capacity:
        if row.get("groups_total"):
            lines.append("  capacity %-6s %d of %d groups, %d of %d hosts%s" % (
                row["step"], row["groups_serving"], row["groups_total"], row["hosts_serving"], row["hosts_total"],
                ", {:,} KV tokens".format(row["kv_tokens_serving"]) if row.get("kv_tokens_serving") else ""))
    lines.append("  time without a model: %.1f s%s; failed requests: %d" % (
        without, " (another group served throughout)" if served and not failed else "", len(failed)))
    if remaining:
        lines.append("  %d more move%s to reach %s: run the same command again" % (
            remaining, "" if remaining == 1 else "s", " ".join(_group_words(g) for g in plan.get("target") or [])))
    keys = ("number", "move", "touched", "hosts", "serving", "drain", "admit", "capacity", "away", "gate_hosts",
            "move_rollback", "after")
    return {"moves": [{key: plan.get(key) for key in keys}],
            "groups": groups, "capacity": capacity, "failed_requests": len(failed),
            "failed_by_status": _by_status(failed), "served_throughout": served,
            "time_without_model": round(without, 3), "remaining": remaining, "lines": lines}


def _failures_message(report, plan, head):
    """Why a run that went through still fails: clients saw failed requests after the model served."""
    first = ["%s (%s)" % (round(float(r["t"]) - float(plan["start"]), 1) if plan.get("start") is not None else "?",
                          r.get("status")) for r in report["failures_after_serving_sample"]]
    return ("%s, but the probe client saw %d of %d requests through the proxy fail after the first new engine served (%d "
            "answered 502; by status %s). The first ones, at s since start (HTTP status, 0 = no answer): %s. Compare them "
            "with the timeline above and the proxy host's journal (nginx and factory-floor-upstream.service). Outcome "
            "%s: once an engine serves, no request may fail." % (
                head, report["failures_after_serving"], report["requests"], report["count_502_after_serving"],
                json.dumps(report["by_status"], sort_keys=True), ", ".join(first), report["outcome"]))


def _lost_message(lost, plan):
    """What a switch that lost engine hosts left, the locks it could not release, and the ways on."""
    topology, gated = plan["topology"], bool(plan.get("gated"))
    many = len(lost) > 1
    names = ", ".join(lost)
    words = ["%s dropped out of the run (unreachable over SSH, or a task failed there and Ansible dropped %s): what %s "
             "now is unknown." % (names, "them" if many else "it", "they run" if many else "it runs")]
    if gated and not plan.get("on_target"):
        words.append("%s stay%s drained from the proxy (holder switch-to-%s): %s engine%s reach%s no client without a "
                     "tool-calling verdict." % (names, "" if many else "s", topology, "their" if many else "its",
                                                "s" if many else "", "" if many else "es"))
    elif not gated and not plan.get("on_target"):
        words.append("The gate is off for %s: %s engine%s joined the proxy's rotation at the cut-over and take%s requests "
                     "whenever %s serve%s." % (topology, "their" if many else "its", "s" if many else "", "" if many else "s",
                                               "they" if many else "it", "" if many else "s"))
    if plan.get("rollback"):
        words.append("The other engine hosts went back to %s." % plan.get("other", "the old topology"))
    elif plan.get("undrain"):
        words.append("%s passed the gate and serve%s %s." % (", ".join(plan["undrain"]), "s" if len(plan["undrain"]) == 1
                                                             else "", topology))
    elif gated and not plan.get("on_target"):
        words.append("No engine passed the gate: nothing serves through the proxy.")
    locks = plan.get("lost_locks") or {}
    held = {host: lock for host, lock in locks.items() if host in lost and not (lock or {}).get("released")}
    released = [host for host in lost if (locks.get(host) or {}).get("released")]
    if released:
        words.append("This run's maintenance lock on %s was released (the host answered again at the end)." % ", ".join(
            released))
    for host in lost:
        if host in released:
            continue
        lock = held.get(host) or {}
        words.append("%s still holds this run's maintenance lock (%s, run %s): %s; remove it once %s answers again "
                     "(factory_floor.llm.maintenance_lock state absent with that run, or rm), or the next switch and "
                     "%s refuse until it expires." % (
                         host, lock.get("path") or "its maintenance_window_lock_file", plan.get("run") or "this run",
                         lock.get("error") or "it could not be reached to release it", host,
                         _playbook(plan, "deploy.yml")))
    words.append("The ways on: once %s answer%s again, check %s with %s, then run %s again: "
                 "on the target it gates each engine this run left drained and puts back those that pass; off it, it "
                 "switches again." % (names, "" if many else "s", "them" if many else "it", _playbook(plan, "status.yml"),
                                      _playbook(plan, "switch-to-%s.yml" % topology)))
    return " ".join(words)


def _records_message(site, plan):
    """Why a run fails when the engine hosts' topology records disagree with each other or with what runs."""
    errors = plan.get("record_errors") or {}
    return ("The engine hosts' topology records and what they run disagree: %s.%s %s refuses each host that is not "
            "on the inventory's topology; run %s again once every engine host answers (it records on each "
            "host what it runs), or see %s." % (
                "; ".join(site.get("disagreements") or []),
                "".join(" The record could not be written on %s: %s." % (host, error) for host, error in errors.items()),
                _playbook(plan, "deploy.yml"), _playbook(plan, "switch-to-%s.yml" % plan["topology"]),
                _playbook(plan, "status.yml")))


def _rotation_message(plan):
    """Why a switch that stopped nothing, or went through, still fails: the proxy lacks engines it should route to."""
    topology, script = plan["topology"], _playbook(plan, "switch-to-%s.yml" % plan["topology"])
    head = ("Already on %s, but the proxy does not route to every engine that should serve it" % topology
            if plan.get("on_target") else
            "The switch to %s went through (its engines passed their health check%s), but the proxy does not route to "
            "every one of them" % (topology, " and the tool-calling gate" if plan.get("gated") else ""))
    return ("%s: %s\nNothing is rolled back. See the engines' state (%s) and the proxy's membership "
            "checker (journalctl -u factory-floor-upstream.service on the proxy host); an engine still loading joins by "
            "itself once it serves. Then run %s again: on the target, it stops nothing and checks the rotation again."
            % (head, _truncate(plan["rotation_error"], 400), _playbook(plan, "status.yml"), script))


def upgrade_engines(hosts, plan):
    """{replica: what the upgrade did to it, with its tool score when the gate ran on it}."""
    todo, any_failed = plan.get("todo") or [], any(h.get("failed") for h in hosts)
    engines = {}
    for host in hosts:
        if host["name"] not in todo:
            state = "already on the new model"
        elif host.get("restore_failed"):
            state = "OLD MODEL NOT RESTORED, see the reason"
        elif host.get("failed"):
            state = "failed, old model restored"
        elif host.get("upgraded") and any_failed:
            state = "upgraded, then rolled back"
        elif host.get("upgraded"):
            state = "upgraded"
        else:
            state = "not upgraded (the upgrade stopped before it)"
        score = (host.get("gate") or {}).get("score")
        engines[host["name"]] = state + (", tool score %s" % score if score is not None else "")
    return engines


def upgrade_timeline(hosts, start, now):
    """The upgrade's events, each named after its replica ("spark-a drained")."""
    timeline = {"start": float(start), "first_serving": float(start)}
    for host in hosts:
        for event, at in (host.get("events") or {}).items():
            timeline["%s %s" % (host["name"], event)] = at
    timeline["end"] = now
    return timeline


def upgrade_report(records, hosts, plan, now, clock=None):
    """The whole report of a rolling model (or image) upgrade (switch-model.yml).

    ``records`` and ``now`` on the controller's clock, as :func:`switch_report`'s.

    The model serves the whole time, so with two replicas or more every request that
    was not answered 200 counts against a bar of 0 (``ok_with_failures``).
    """
    todo, target = plan.get("todo") or [], plan["target"]
    any_failed = any(h.get("failed") for h in hosts)
    outcome = ("unchanged" if not todo else "failed" if any(h.get("restore_failed") for h in hosts)
               else "rolled_back" if any_failed else "ok")
    reason = "; ".join(h["reason"] for h in hosts if h.get("reason") is not None) if any_failed else None
    scores = [g["score"] for g in (h.get("gate") or {} for h in hosts) if g.get("score") is not None]
    report = summarize(records, upgrade_timeline(hosts, plan["start"], now), upgrade_engines(hosts, plan),
                       float(min(scores)) if scores else None, outcome, reason,
                       0 if todo and len(hosts) >= 2 else None, clock)
    lines = list(report["table"])
    if report["outcome"] == "unchanged":
        lines.append("every replica already serves %s: nothing changed" % target)
    if report["outcome"] in ("ok", "ok_with_failures"):
        settings = ((["vllm_model: %s" % plan["switch_model"]] if plan.get("switch_model") else [])
                    + (["vllm_container_image: %s" % plan["switch_image"]] if plan.get("switch_image") else []))
        deploy = _playbook(plan, "deploy.yml")
        lines.append("Now set %s in the inventory (and the tool-call parser and chat template if they changed): %s "
                     "and the topology switches render what the inventory says%s."
                     % (" and ".join(settings), deploy, " (and %s refuses while a replica runs another image)" % deploy
                                                        if plan.get("switch_image") else ""))
    message = ""
    if report["outcome"] == "ok_with_failures":
        first = ["%s (%s)" % (round(float(r["t"]) - float(plan["start"]), 1), r.get("status"))
                 for r in report["failures_after_serving_sample"]]
        message = ("Every replica serves %s now (it is kept, not rolled back), but the probe client saw %d of %d requests "
                   "through the proxy fail (%d answered 502; by status %s); the bar is 0 while one replica serves and the "
                   "other restarts. The first ones, at s since start (HTTP status, 0 = no answer): %s. Compare them with "
                   "the timeline above (which replica was out of rotation then) and the proxy's error log. Outcome "
                   "ok_with_failures." % (target, report["failures_after_serving"], report["requests"],
                                          report["count_502_after_serving"], json.dumps(report["by_status"]),
                                          ", ".join(first)))
    elif report["outcome"] == "failed":
        message = ("The upgrade to %s failed and so did putting the old build back: CHECK THE REPLICAS. A replica already "
                   "upgraded keeps %s, so that one serves. " % (target, target))
    elif report["outcome"] == "rolled_back":
        old = plan.get("old") or {}
        kept = [h["name"] for h in hosts if h["name"] not in todo]
        message = ("The upgrade to %s was stopped; every replica this run changed serves the old build (%s%s) again%s. "
                   % (target, old.get("model", ""), (" on %s" % old.get("image", "")) if plan.get("switch_image") else "",
                      (" (%s served %s before this run and keep%s it)" % (", ".join(kept), target, "s" if len(kept) == 1 else ""))
                      if kept else ""))
    if report["outcome"] in ("failed", "rolled_back"):
        message += "\nWhy: %s" % (report["reason"] or "see above")
    return dict(report, lines=lines, message=message)


def noted_hosts(names, hostvars):
    """The report's ``hosts``: per engine host of ``names``, in that order, its name and what it noted during the run
    (the maintenance_note action's fact in ``hostvars``, ``_maintenance_window.notes_of``; nothing when it noted
    nothing)."""
    hosts = []
    for name in names or []:
        noted = notes_of(hostvars[name]) if name in hostvars else None
        host = {"name": name}
        host.update(noted or {})
        hosts.append(host)
    return hosts
