# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Recommend vLLM's ``max_num_seqs`` from a concurrency sweep, and print the sweep as a table.

Pure logic, standard library only, never ``ansible``: used by the
``factory_floor.llm.concurrency_sweep`` module on the levels ``_load.sweep`` measured
(``summarize`` dicts with ``profile`` and ``concurrency``).

Public API::

    recommend(levels, target_seconds=None, metric="e2e", shares=None, tolerance=0.03) -> dict
    format_table(levels, recommended=None) -> [str]
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._host.load import LoadError

DEFAULT_TOLERANCE = 0.03
# The p95 a latency target applies to: end-to-end, time to first token, or time per output
# token (vllm bench serve's --goodput takes the same three: e2el, ttft, tpot).
METRICS = ("e2e", "ttft", "tpot")
# A p95 from fewer requests than this is reported with a warning in the reasoning.
MIN_SAMPLES_FOR_P95 = 20


# -------------------------------------------------------------- recommendation


def _pick(candidates, tolerance):
    """(concurrency, throughput) pairs -> the lowest concurrency within ``tolerance`` of the best."""
    best = max(t for dummy, t in candidates)
    return min(c for c, t in candidates if t >= best * (1.0 - tolerance))


def _mixed_rate(rows, shares):
    """Estimated tokens/s of a mix from per-profile runs at one level (time-sharing).

    Each profile's share of requests times its mean completion tokens is the work; the
    engine spends work / tokens_per_s on it: rate = sum(work) / sum(work / tokens_per_s).
    """
    work = {p: shares[p] * rows[p]["completion_tokens_mean"] for p in shares}
    seconds = sum(work[p] / rows[p]["tokens_per_s"] for p in shares if work[p])
    return sum(work.values()) / seconds if seconds else None


def recommend(levels, target_seconds=None, metric="e2e", shares=None, tolerance=DEFAULT_TOLERANCE):
    """Recommend ``max_num_seqs``: the best throughput whose p95 stays within the target.

    ``levels``: ``summarize`` dicts with ``profile`` and ``concurrency``. A level is
    eligible when none of its requests failed, its tokens/s was measured and its
    ``<metric>_p95`` (seconds; ``metric`` is ``e2e``, ``ttft`` or ``tpot``) is at most
    ``target_seconds`` (None: no latency target). Per profile the pick is the eligible
    level with the most tokens/s; levels within ``tolerance`` (fraction) of that count as
    equal and the lowest of them wins. With several profiles, ``max_num_seqs`` is chosen the
    same way among the levels eligible in every profile, on the tokens/s estimated for a
    mix with request ``shares`` (profile -> share, default equal; see ``_mixed_rate``).

    Returns ``max_num_seqs`` (None when no level qualifies), ``per_profile``
    (profile -> concurrency or None), ``mixed_tokens_per_s`` (level -> estimate),
    ``target_seconds``, ``metric``, ``shares`` and ``reasoning`` (sentences).
    """
    if metric not in METRICS:
        raise LoadError("metric must be one of %s, got %r" % (", ".join(METRICS), metric))
    if tolerance < 0 or tolerance >= 1:
        raise LoadError("tolerance is a fraction 0-1 (0.03 = 3%%), got %r" % tolerance)
    key = metric + "_p95"
    profiles = []
    for row in levels:
        if row["profile"] not in profiles:
            profiles.append(row["profile"])
    if shares:
        unknown = sorted(set(shares) - set(profiles))
        if unknown:
            raise LoadError("shares name profiles that were not measured: %s (measured: %s)"
                            % (", ".join(unknown), ", ".join(profiles)))
        shares = {p: float(shares.get(p, 0)) for p in profiles}
    else:
        shares = {p: 1.0 for p in profiles}
    total = sum(shares.values())
    if total <= 0 or min(shares.values()) < 0:
        raise LoadError("shares must be >= 0 and not all 0, got %r" % shares)
    shares = {p: s / total for p, s in shares.items()}
    target_text = ("%s p95 <= %g s" % (metric, target_seconds)) if target_seconds is not None else "no latency target"
    within_text = ("within " + target_text) if target_seconds is not None else "(no latency target)"
    reasoning = []
    eligible = {}
    for row in sorted(levels, key=lambda r: (profiles.index(r["profile"]), r["concurrency"])):
        why = None
        if row["requests_failed"]:
            why = "%d of %d requests failed (%s)" % (row["requests_failed"], row["requests_failed"] + row["requests_ok"],
                                                     "; ".join(row.get("errors") or []) or "no detail")
        elif row["tokens_per_s"] is None:
            why = "tokens/s was not measured (no successful request, or no usage in the answers)"
        elif target_seconds is not None and (row.get(key) is None or row[key] > target_seconds):
            why = "%s %s s is over the target %g s" % (key, row.get(key), target_seconds)
        if why:
            reasoning.append("%s at %d: not eligible, %s" % (row["profile"], row["concurrency"], why))
            continue
        eligible.setdefault(row["profile"], {})[row["concurrency"]] = row
        if row["requests_ok"] < MIN_SAMPLES_FOR_P95:
            reasoning.append("%s at %d: p95 from only %d requests; run longer levels for a firmer figure"
                             % (row["profile"], row["concurrency"], row["requests_ok"]))

    per_profile = {}
    for profile in profiles:
        rows = eligible.get(profile, {})
        if not rows:
            per_profile[profile] = None
            reasoning.append("%s: no level meets %s" % (profile, target_text))
            continue
        pick = _pick([(c, r["tokens_per_s"]) for c, r in rows.items()], tolerance)
        best = max(rows, key=lambda c: (rows[c]["tokens_per_s"], -c))
        per_profile[profile] = pick
        note = "" if pick == best else (" (%d gives %.1f, within %g%%: the lower level wins)"
                                        % (best, rows[best]["tokens_per_s"], tolerance * 100))
        reasoning.append("%s: %d concurrent requests, %.1f tokens/s, the most %s%s"
                         % (profile, pick, rows[pick]["tokens_per_s"], within_text, note))

    mixed = {}
    active = [p for p in profiles if shares[p] > 0]
    common = None
    for profile in active:
        mine = set(eligible.get(profile, {}))
        common = mine if common is None else common & mine
    for level in sorted(common or ()):
        rate = _mixed_rate({p: eligible[p][level] for p in active}, {p: shares[p] for p in active})
        if rate is not None:
            mixed[level] = round(rate, 2)
    choice = None
    if len(active) == 1:
        choice = per_profile[active[0]]
    elif mixed:
        choice = _pick(list(mixed.items()), tolerance)
    mix_text = ", ".join("%s %d%%" % (p, round(shares[p] * 100)) for p in profiles)
    swept = sorted({row["concurrency"] for row in levels})
    if choice is not None and choice == swept[-1]:
        reasoning.append("%d is the highest level swept: throughput may still rise above it; sweep higher levels "
                         "(with vllm_max_num_seqs raised to the highest) before taking it as the best" % choice)
    if choice is None:
        reasoning.append("no level meets %s in every profile (%s): keep the current max_num_seqs, or relax the "
                         "target" % (target_text, mix_text))
    elif len(active) == 1:
        reasoning.append("max_num_seqs %d: the best %s throughput %s" % (choice, active[0], within_text))
    else:
        among = ("among levels that meet %s in every profile" % target_text) if target_seconds is not None \
            else "among the levels swept (no latency target)"
        reasoning.append("max_num_seqs %d: %.1f tokens/s estimated for the mix (%s) from the per-profile runs, the "
                         "most %s (%s)"
                         % (choice, mixed[choice], mix_text, among,
                            ", ".join("%d: %.1f" % (c, mixed[c]) for c in sorted(mixed))))

    return {
        "max_num_seqs": choice,
        "per_profile": per_profile,
        "mixed_tokens_per_s": mixed,
        "target_seconds": target_seconds,
        "metric": metric,
        "shares": shares,
        "tolerance": tolerance,
        "reasoning": reasoning,
    }


# ---------------------------------------------------------------------- table


def _fmt(value, spec):
    return "-" if value is None else spec % value


def _ms(value):
    return None if value is None else value * 1000.0


def format_table(levels, recommended=None):
    """Human-readable lines, one per level; ``*`` marks the recommended concurrency.

    Latencies in seconds, but TPOT and ITL in milliseconds (``_MS``), as ``vllm bench serve``
    prints them.
    """
    layout = "%-7s %5s %6s %5s %9s %8s %9s %9s %9s %11s %11s %10s %8s %8s %8s %10s"
    lines = [layout % ("PROFILE", "CONC", "REQ_OK", "FAIL", "TOK/S", "REQ/MIN", "TTFT_P50", "TTFT_P95", "TTFT_P99",
                       "TPOT_P50_MS", "TPOT_P99_MS", "ITL_P99_MS", "E2E_P50", "E2E_P95", "E2E_P99", "PROMPT_TOK")]
    for row in levels:
        lines.append(layout % (
            row["profile"], ("*%d" if row["concurrency"] == recommended else "%d") % row["concurrency"],
            row["requests_ok"], row["requests_failed"], _fmt(row["tokens_per_s"], "%.1f"),
            _fmt(row["requests_per_min"], "%.1f"), _fmt(row["ttft_p50"], "%.3f"), _fmt(row["ttft_p95"], "%.3f"),
            _fmt(row.get("ttft_p99"), "%.3f"), _fmt(_ms(row.get("tpot_p50")), "%.1f"),
            _fmt(_ms(row.get("tpot_p99")), "%.1f"), _fmt(_ms(row.get("itl_p99")), "%.1f"),
            _fmt(row["e2e_p50"], "%.2f"), _fmt(row["e2e_p95"], "%.2f"), _fmt(row.get("e2e_p99"), "%.2f"),
            _fmt(row["prompt_tokens_mean"], "%.0f")))
    return lines
