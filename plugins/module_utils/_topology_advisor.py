# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The topology advisor's ranking from stored measurements (issue 38): pure logic, no network, standard library only.

Inputs:

* stored results, a list of ``{grouping, build, measured_load, busiest_hour, switch_seconds_without_model,
  measured_at}``: one per (grouping name, build id). ``measured_load`` and ``busiest_hour`` are replays
  (``_workload_replay_run.replay()``'s report, or only its ``total``) at the site's measured arrival rate and at its
  busiest hour's; ``switch_seconds_without_model`` is the gated switch's longest gap between answers
  (``_switch_report``'s ``downtime``) on the way to that grouping.
* the site (:func:`site_of` reads it from a workload profile): ``arrival_rate_requests_per_s``,
  ``busiest_hour_rate_requests_per_s`` and ``long_context_need_tokens`` (the longest request, prompt + output, that
  one engine group must hold).
* the KV plan per grouping, ``_kv_cache_plan.plan_groupings()``'s list (``sizes``, ``kv_tokens`` per group,
  ``starts``, ``holds_need``).

A grouping is named as the site names it: ``replicas`` (every host its own engine), ``split`` (one group of every
host), else its group sizes (``2+1+1``) - :func:`grouping_name`.

:func:`rank` returns the table (a row per grouping of the KV plan), a recommendation with its reasons, and what it
has not measured. The rule, in order:

1. a grouping that does not start (a group holds less than one ``max_model_len`` request), whose KV capacity is
   short of the long-context need (its smallest group; a request runs inside one group), that errored in a replay
   (any error, or requests not sent at the in-flight bound: it did not take the load), or that has no result for
   this build is not chosen, and the reasons say which;
2. of the others, the most output tokens/s at the busiest hour (at the measured load when a candidate has no
   busiest-hour replay; the table says which basis), the lower TTFT p95 on a tie;
3. the current topology stays unless the best does more than ``margin`` (a fraction, default 0.05) more tokens/s
   than it: a switch costs its seconds without a model, and a smaller difference is within a replay's noise.

Stored results are keyed by build (the engine build and model, whatever id the site gives it: a change of either is
a new build), so :func:`to_measure` names only the groupings with no result for the current build, and
:func:`store` keeps one result per key, the newest.
"""

from __future__ import annotations

SCHEMA = "factory_floor.llm.topology_advice/1"
RESULTS_SCHEMA = "factory_floor.llm.topology_results/1"
DEFAULT_MARGIN = 0.05


class AdvisorError(ValueError):
    """The inputs cannot be ranked (a result without its key, a margin out of range)."""


def grouping_name(sizes):
    """``replicas``, ``split`` or the group sizes joined with ``+``."""
    sizes = [int(s) for s in sizes]
    if sizes and all(s == 1 for s in sizes):
        return "replicas"
    if len(sizes) == 1:
        return "split"
    return "+".join(str(s) for s in sorted(sizes, reverse=True))


def key_of(result):
    try:
        return (str(result["grouping"]), str(result["build"]))
    except (KeyError, TypeError):
        raise AdvisorError("a stored result needs grouping and build, got %r" % (result,)) from None


def store(results, result):
    """``results`` with ``result`` in place of any with its (grouping, build) key."""
    key = key_of(result)
    return [r for r in results or () if key_of(r) != key] + [result]


def site_of(profile, max_model_len=None):
    """The site's loads and long-context need from a workload profile's ``total``.

    The need is the longest prompt plus the longest output the profile saw (each histogram's ``max_at_most``, the
    smallest bucket bound all requests were under), at most ``max_model_len``.
    """
    total = (profile or {}).get("total") or {}
    rows = {r["hour_utc"]: r["arrival_rate_requests_per_s"] for r in total.get("by_hour") or ()}
    busiest = total.get("busiest_hour_utc")
    prompt = (total.get("prompt_length_tokens") or {}).get("max_at_most")
    output = (total.get("output_length_tokens") or {}).get("max_at_most")
    need = prompt + output if prompt is not None and output is not None else None
    if need is not None and max_model_len:
        need = min(need, max_model_len)
    return {"arrival_rate_requests_per_s": total.get("arrival_rate_requests_per_s"), "busiest_hour_utc": busiest,
            "busiest_hour_rate_requests_per_s": rows.get(busiest), "long_context_need_tokens": need}


def _totals(replay):
    """``(total, not_sent)`` of a replay's report or of its ``total`` alone; ``(None, 0)`` when there is none."""
    if not replay:
        return None, 0
    total = replay.get("total", replay)
    not_sent = (replay.get("in_flight_bound") or {}).get("requests_not_sent") or 0
    return total, not_sent


def _p95(total, name):
    return ((total or {}).get(name) or {}).get("p95")


def _errors(load, busiest):
    count, by_status, not_sent = 0, {}, 0
    for replay in (load, busiest):
        total, skipped = _totals(replay)
        not_sent += skipped
        if total:
            count += total.get("errors") or 0
            for status, n in (total.get("errors_by_status") or {}).items():
                by_status[status] = by_status.get(status, 0) + n
    return count, by_status, not_sent


def to_measure(kv_groupings, results, build):
    """Which groupings need a replay for ``build``: ``{run, skipped, stored}`` (names, in the KV plan's order).

    ``skipped`` are those the KV plan rules out (``{grouping, reason}``): measuring them cannot make them chosen.
    A run that was interrupted before its switch reported (``interrupted``, ``_advisor_store.settle``) measured
    nothing: its grouping is run again.
    """
    have = {key_of(r) for r in results or () if not r.get("interrupted")}
    run, skipped, stored = [], [], []
    for option in kv_groupings:
        name = grouping_name(option["sizes"])
        if not option.get("starts", True):
            skipped.append({"grouping": name, "reason": "does not start: a group holds less than one max_model_len "
                                                        "request (KV plan)"})
        elif not option.get("holds_need", True):
            skipped.append({"grouping": name, "reason": "KV capacity short of the long-context need (KV plan)"})
        elif (name, str(build)) in have:
            stored.append(name)
        else:
            run.append(name)
    return {"run": run, "skipped": skipped, "stored": stored}


def _row(option, result, need, current):
    name = grouping_name(option["sizes"])
    # No KV plan for this grouping (kv_tokens absent or null): its capacity is unknown, which excludes nothing.
    kv_min = min(option["kv_tokens"]) if option.get("kv_tokens") else None
    row = {"grouping": name, "sizes": list(option["sizes"]), "current": name == current, "measured": result is not None,
           "kv_tokens_smallest_group": kv_min, "long_context_need_tokens": need, "starts": option.get("starts", True),
           "holds_need": option.get("holds_need", True) if need is None or kv_min is None else kv_min >= need,
           "tokens_per_s_measured_load": None, "tokens_per_s_busiest_hour": None, "requests_per_min_measured_load": None,
           "ttft_p95_seconds": None, "tpot_p95_seconds": None, "latency_at": None, "errors": None,
           "errors_by_status": {}, "requests_not_sent": 0,
           "switch_seconds_without_model": 0.0 if name == current else None, "measured_at": None,
           # Shown, never ranked on: the KV plan's full-context requests of all groups and the sweeps' tokens/s.
           "full_context_requests_total": option.get("total_full_context_requests"),
           "sweep_tokens_per_s": option.get("total_tokens_per_s")}
    if result is None:
        return row
    if result.get("failed"):
        # A candidate whose switch did not go through (rolled back): reported with why, never chosen.
        row.update(failed=result["failed"], measured_at=result.get("measured_at"))
        return row
    load, _skip = _totals(result.get("measured_load"))
    busiest, _skip = _totals(result.get("busiest_hour"))
    latency = busiest if busiest else load
    errors, by_status, not_sent = _errors(result.get("measured_load"), result.get("busiest_hour"))
    row.update(tokens_per_s_measured_load=(load or {}).get("tokens_per_s"),
               tokens_per_s_busiest_hour=(busiest or {}).get("tokens_per_s"),
               requests_per_min_measured_load=(load or {}).get("requests_per_min"),
               ttft_p95_seconds=_p95(latency, "ttft_seconds"), tpot_p95_seconds=_p95(latency, "tpot_seconds"),
               latency_at="busiest_hour" if busiest else "measured_load" if load else None,
               errors=errors, errors_by_status=by_status, requests_not_sent=not_sent,
               measured_at=result.get("measured_at"))
    if name != current:
        row["switch_seconds_without_model"] = result.get("switch_seconds_without_model")
    return row


def _excluded(row):
    """Why ``row`` cannot be chosen, or None."""
    if not row["starts"]:
        return "does not start: its smallest group holds %s KV tokens, less than one max_model_len request" % (
            _cell(row["kv_tokens_smallest_group"], "{:,}"))
    if not row["holds_need"]:
        return ("KV capacity short: its smallest group holds %s tokens, the site's long-context need is %s"
                % (_cell(row["kv_tokens_smallest_group"], "{:,}"), _cell(row["long_context_need_tokens"] or 0, "{:,}")))
    if row.get("failed"):
        return "switch failed: %s" % row["failed"]
    if not row["measured"]:
        return "not measured for this build"
    if row["errors"] or row["requests_not_sent"]:
        words = ", ".join("%s: %d" % (s, n) for s, n in sorted(row["errors_by_status"].items()))
        parts = []
        if row["errors"]:
            parts.append("%d errors (%s)" % (row["errors"], words))
        if row["requests_not_sent"]:
            parts.append("%d requests not sent at the in-flight bound (it did not take the load)"
                         % row["requests_not_sent"])
        return "errored in its replay: " + "; ".join(parts)
    if row["tokens_per_s_measured_load"] is None and row["tokens_per_s_busiest_hour"] is None:
        return "its replay has no tokens/s (nothing succeeded)"
    return None


def rank(results, site, kv_groupings, build, current, margin=DEFAULT_MARGIN):
    """The table, the recommendation and what is not measured, for ``build`` on a site now on ``current``."""
    if not 0 <= margin < 1:
        raise AdvisorError("margin must be a fraction in [0, 1), got %r" % (margin,))
    by_key = {key_of(r): r for r in results or ()}
    need = (site or {}).get("long_context_need_tokens")
    rows = [_row(o, by_key.get((grouping_name(o["sizes"]), str(build))), need, current) for o in kv_groupings]
    if current not in [r["grouping"] for r in rows]:
        raise AdvisorError("the current topology %r is none of the KV plan's groupings (%s)"
                           % (current, ", ".join(r["grouping"] for r in rows)))
    for row in rows:
        row["excluded"] = _excluded(row)
    eligible = [r for r in rows if r["excluded"] is None]
    basis = ("busiest_hour" if eligible and all(r["tokens_per_s_busiest_hour"] is not None for r in eligible)
             else "measured_load")

    def score(row):
        return row["tokens_per_s_" + basis] or 0.0

    reasons = []
    chosen = None
    if eligible:
        best = max(eligible, key=lambda r: (score(r), -(r["ttft_p95_seconds"] or 0.0)))
        here = [r for r in eligible if r["current"]]
        if here and best is not here[0] and score(best) <= score(here[0]) * (1 + margin):
            chosen = here[0]
            reasons.append("stay on %s: %s does %.1f tokens/s at the %s, %s %.1f - within the %d%% margin, not worth a "
                           "switch (%s s without a model)" % (
                               current, best["grouping"], score(best), _basis_words(basis), current, score(here[0]),
                               round(margin * 100), _seconds(best["switch_seconds_without_model"])))
        else:
            chosen = best
            if best["current"]:
                reasons.append("stay on %s: the most tokens/s at the %s (%.1f)"
                               % (current, _basis_words(basis), score(best)))
            elif here:
                reasons.append("switch to %s: %.1f tokens/s at the %s against %.1f on %s (+%.0f%%, more than the "
                               "%d%% margin); the switch costs %s s without a model" % (
                                   best["grouping"], score(best), _basis_words(basis), score(here[0]), current,
                                   (score(best) / score(here[0]) - 1) * 100 if score(here[0]) else 100.0,
                                   round(margin * 100), _seconds(best["switch_seconds_without_model"])))
            else:
                reasons.append("switch to %s: the most tokens/s at the %s (%.1f) of the groupings that qualify; the "
                               "current %s does not qualify; the switch costs %s s without a model" % (
                                   best["grouping"], _basis_words(basis), score(best), current,
                                   _seconds(best["switch_seconds_without_model"])))
    else:
        reasons.append("no recommendation: no grouping qualifies for build %s; stay on %s" % (build, current))
    for row in rows:
        if row["excluded"] is not None:
            reasons.append("%s not chosen: %s" % (row["grouping"], row["excluded"]))
    not_measured = [r["grouping"] for r in rows if not r["measured"] and r["starts"] and r["holds_need"]]
    if not_measured and eligible:
        reasons.append("chosen among the measured groupings only; %s not measured for build %s"
                       % (", ".join(not_measured), build))
    return {
        "schema": SCHEMA,
        "build": str(build),
        "current": current,
        "margin_fraction": margin,
        "basis": basis,
        "site": site,
        "rows": rows,
        "recommendation": {"grouping": chosen["grouping"] if chosen else None,
                           "switch": bool(chosen and not chosen["current"]), "reasons": reasons},
        "not_measured": not_measured,
        "lines": table_lines(rows, basis),
    }


def _basis_words(basis):
    return "busiest hour" if basis == "busiest_hour" else "measured load"


def _seconds(value):
    return "?" if value is None else "%.1f" % value


def _cell(value, form):
    if value is None:
        return "-"
    return form.format(value) if "{" in form else form % value


def table_lines(rows, basis="busiest_hour"):
    """The table, one line per grouping (``-`` where nothing was measured)."""
    head = ("grouping", "tok/s load", "tok/s busiest", "TTFT p95 s", "TPOT p95 s", "errors", "KV smallest/need",
            "full-ctx all", "sweep tok/s", "switch s", "verdict")
    body = []
    for row in rows:
        need = row["long_context_need_tokens"]
        body.append((row["grouping"] + (" (current)" if row["current"] else ""),
                     _cell(row["tokens_per_s_measured_load"], "%.1f"), _cell(row["tokens_per_s_busiest_hour"], "%.1f"),
                     _cell(row["ttft_p95_seconds"], "%.3f"), _cell(row["tpot_p95_seconds"], "%.4f"),
                     _cell(row["errors"], "%d") if not row["requests_not_sent"] else "%d+%d not sent" % (
                         row["errors"] or 0, row["requests_not_sent"]),
                     "%s/%s" % (_cell(row["kv_tokens_smallest_group"], "{:,}"), _cell(need, "{:,}")),
                     _cell(row.get("full_context_requests_total"), "%.2f"), _cell(row.get("sweep_tokens_per_s"), "%.1f"),
                     _cell(row["switch_seconds_without_model"], "%.1f"),
                     "qualifies" if row["excluded"] is None else row["excluded"].split(":")[0]))
    widths = [max(len(str(line[i])) for line in [head] + body) for i in range(len(head))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [head] + body]
    lines.append("ranked by output tokens/s at the %s; TTFT/TPOT p95 at the busiest hour where it was replayed; "
                 "full-ctx all and sweep tok/s (the KV plan's, shown only)" % _basis_words(basis))
    return lines
