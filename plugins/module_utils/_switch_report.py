# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a topology switch looked like from a client's side.

Input: the probe client's records (one per request through the proxy, see
_probe_client.py) and the switch's timeline (epoch seconds of named events).
Output: machine-readable numbers plus a table for people. Pure logic.

Definitions (all times epoch seconds, durations seconds):
- ``downtime``: the longest stretch with no successful answer, measured from the
  end of the last 200 before it to the end of the first 200 after it;
- ``first_serving``: the timeline's ``first_serving`` event (the first engine of
  the new topology passed its health probe), falling back to ``in_rotation``;
- ``after_serving``: every non-200 a client saw that *started* after
  first_serving; the product promises none (MISSION.md item 1).
- ``ok_with_failures``: the outcome of a switch that went through (``ok``) while
  more requests than ``max_failures_after_serving`` failed after first_serving,
  when the caller sets that bar (switch-model.yml: 0, the model serves throughout).

The probe client appends to its log, so it may also hold an earlier switch's
requests: only those that started at or after the timeline's ``start`` count.
"""

from __future__ import annotations

import json

# Events the switch playbook records, in the order they normally happen.
TIMELINE_ORDER = (
    "start", "preflight_done", "lock_taken", "drained", "old_stopped", "new_started",
    "first_serving", "all_serving", "in_rotation", "gate_done", "rollback_started",
    "rollback_serving", "lock_released", "end",
)


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
              max_failures_after_serving=None):
    """Return the report dict (see module docstring for definitions).

    With ``max_failures_after_serving`` (a number of requests), an ``ok`` outcome with
    more failures after first_serving than that becomes ``ok_with_failures``, and the
    reason (unless given) says how many failed.
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
    for name, engine in sorted(report["engines"].items()):
        lines.append("engine %-10s %s" % (name, engine))
    if report["tool_score"] is not None:
        lines.append("tool-calling score: %s" % report["tool_score"])
    return lines
