# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""vLLM's ``num_speculative_tokens`` as a dimension of the concurrency sweep (``tune_num_speculative_tokens``).

The sweep measures the engine as it runs and never restarts it, so each value is a build change of the engine
(``--speculative-config`` with that ``num_speculative_tokens``) applied before its own run of the sweep: one run per
value. Each run measures the value the engine runs now, is held to the tool-calling gate first (the role), and keeps
the runs of the other values saved by earlier runs on the same engine (:func:`key`), so the report compares every
value measured so far at each concurrency and names the best at the site's concurrency.

Pure functions over plain data, standard library only: the engine units' ``vllm_engine_info`` results, the
inventory's ``vllm_speculative_config``, the ``concurrency_sweep`` levels and the JSON an earlier run saved.
"""

from __future__ import annotations

import json

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_cli import engine_settings

# Per value and concurrency, what the comparison prints (vllm bench serve's figures; TPOT in milliseconds).
FIGURES = ("tokens_per_s", "ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95")


def _int(value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if str(value).strip() == str(number) or isinstance(value, int) else None


def values_asked(values):
    """``tune_num_speculative_tokens`` as integers, or None when it is not a list of distinct integers >= 1."""
    if values is None or values == "":
        return []
    if not isinstance(values, (list, tuple)):
        return None
    numbers = [_int(value) for value in values]
    if any(number is None or isinstance(value, bool) or number < 1 for number, value in zip(numbers, values)):
        return None
    return numbers if len(set(numbers)) == len(numbers) else None


def speculative_config(running, inventory):
    """``(config, source)``: the running engine's ``--speculative-config`` (``source`` its unit), else the
    inventory's ``vllm_speculative_config`` (``source`` "")."""
    if running:
        config, dummy = engine_settings(running.get("args_now") or [])
        if config:
            return config, running.get("item") or ""
        return {}, running.get("item") or ""
    return (dict(inventory) if isinstance(inventory, dict) else {}), ""


def apply_command(config, value, host, deploy):
    """The deploy that restarts ``host``'s engine with ``num_speculative_tokens`` ``value`` (the rest of its config kept)."""
    changed = dict(config, num_speculative_tokens=value)
    return "ansible-playbook -i <inventory> %s -e '%s' --limit %s,proxy" % (
        deploy, json.dumps({"vllm_speculative_config": changed}, sort_keys=True), host)


def plan(asked, running, inventory_config, host, deploy):
    """The dimension's plan: ``{tokens, config, source, now, errors, next}``. ``tokens`` [] is the dimension off (no
    refusal, nothing else read). Refused: a value list that is not distinct integers >= 1; an engine without a
    speculative config (no ``method``, no draft ``model``); one whose config does not set ``num_speculative_tokens``
    or sets one the list does not hold (a run measures the value the engine runs). ``next``: the deploy of each other
    value, for its own run."""
    values = values_asked(asked)
    off = {"tokens": [], "config": {}, "source": "", "now": None, "errors": [], "next": []}
    if values is None:
        return dict(off, errors=["tune_num_speculative_tokens must be a list of distinct integers >= 1 (vLLM's "
                                 "num_speculative_tokens, draft tokens proposed per step), got %s." % (asked,)])
    if not values:
        return off
    config, source = speculative_config(running, inventory_config)
    where = "the engine %s on %s runs" % (source, host) if source else "the inventory of %s sets" % host
    now = _int(config.get("num_speculative_tokens"))
    errors = []
    if not (config.get("method") or config.get("model")):
        errors.append(
            "tune_num_speculative_tokens %s sweeps vLLM's num_speculative_tokens, which only an engine with a "
            "speculative config has: %s no --speculative-config with a method or a draft model. Set "
            "vllm_speculative_config in the inventory (for example {method: mtp, num_speculative_tokens: %d} for a "
            "model with MTP heads, or {model: <draft model directory>, num_speculative_tokens: %d}), deploy it "
            "(%s --limit %s,proxy), then sweep; or leave tune_num_speculative_tokens empty."
            % (values, where, values[0], values[0], deploy, host))
    elif now not in values:
        errors.append(
            "%s num_speculative_tokens %s, not one of tune_num_speculative_tokens %s: each run of the sweep measures "
            "the value the engine runs. Deploy one of them first (%s), or add %s to the list."
            % (where[0].upper() + where[1:], config.get("num_speculative_tokens", "unset (vLLM's default)"),
               values, apply_command(config, values[0], host, deploy), config.get("num_speculative_tokens", "it")))
    others = [value for value in values if value != now]
    return {"tokens": values, "config": config, "source": source, "now": now, "errors": errors,
            "next": [apply_command(config, value, host, deploy) for value in others] if not errors else []}


def key(config, engine, batched):
    """What the runs of different values must share to be compared: the model the engine serves, its speculative
    config but ``num_speculative_tokens``, and its batch budget."""
    rest = {name: value for name, value in (config or {}).items() if name != "num_speculative_tokens"}
    return json.dumps({"model": (engine or {}).get("model"), "speculative_config": rest,
                       "max_num_batched_tokens": batched}, sort_keys=True)


def merge(planned, stored, this_key, levels):
    """``{key, runs, dropped}``: the runs saved before (``stored``, an earlier run's ``speculative``) when their key is
    this run's, with this run's ``levels`` as the value the engine runs now (value -> levels, values as strings, JSON's
    keys); ``dropped``, the values of stored runs of another engine (not compared)."""
    stored = stored if isinstance(stored, dict) else {}
    kept = dict(stored.get("runs") or {}) if stored.get("key") == this_key else {}
    dropped = [] if stored.get("key") == this_key else sorted(stored.get("runs") or {}, key=lambda name: (
        _int(name) is None, _int(name) or 0, str(name)))
    if levels:
        kept[str(planned["now"])] = levels
    return {"key": this_key, "runs": kept, "dropped": dropped}


def _ms(value):
    return "-" if value is None else "%.1f" % (value * 1000.0)


def _s(value):
    return "-" if value is None else "%.3f" % value


def _fine(row):
    return row is not None and not row.get("requests_failed") and row.get("tokens_per_s") is not None


def _mix(rows, shares):
    """Tokens/s of the profiles' mix at one level (time-sharing, as the max_num_seqs recommendation estimates it)."""
    work = {p: float(shares.get(p, 0)) * (rows[p].get("completion_tokens_mean") or 0) for p in rows}
    seconds = sum(work[p] / rows[p]["tokens_per_s"] for p in rows if work[p])
    return sum(work.values()) / seconds if seconds else None


def site_concurrency(cap, recommended, runs):
    """``(level, why)``: the concurrency the values are compared at - the engine's ``max_num_seqs`` when it was swept,
    else the recommended one, else the highest level every measured value ran."""
    common = None
    for levels in runs.values():
        mine = {row.get("concurrency") for row in levels}
        common = mine if common is None else common & mine
    common = common or set()
    if _int(cap) in common:
        return _int(cap), "the engine's max_num_seqs"
    if recommended in common:
        return recommended, "the recommended max_num_seqs"
    if common:
        return max(common), "the highest level every value ran"
    return None, "no level every value ran"


def compare(merged, values, cap, recommended, shares, tolerance=0.03):
    """The report's part: ``{lines, best, level, figures}``. ``figures``: value -> profile -> concurrency -> the
    ``FIGURES``; ``best``: the value with the most tokens/s for the mix (``shares``, profile -> share) at the site's
    concurrency among the values measured with no failed request (within ``tolerance``, a fraction, the fewer draft
    tokens win), None when none qualifies."""
    runs = {value: merged["runs"][str(value)] for value in values if str(value) in merged["runs"]}
    figures = {}
    for value, levels in runs.items():
        for row in levels:
            figures.setdefault(value, {}).setdefault(row["profile"], {})[row["concurrency"]] = {
                name: row.get(name) for name in FIGURES}
    header = ("PROFILE", "CONC", "DRAFT", "TOK/S", "TTFT_P50", "TTFT_P95", "TPOT_P50_MS", "TPOT_P95_MS")
    lines = ["num_speculative_tokens (vLLM's --speculative-config), one run of the sweep per value:",
             "%-7s %5s %6s %9s %9s %9s %11s %11s" % header]
    profiles = []
    for levels in runs.values():
        for row in levels:
            if row["profile"] not in profiles:
                profiles.append(row["profile"])
    for profile in profiles:
        levels = sorted({c for value in runs for c in figures[value].get(profile, {})})
        for level in levels:
            for value in runs:
                row = figures[value].get(profile, {}).get(level)
                if row is not None:
                    lines.append("%-7s %5d %6d %9s %9s %9s %11s %11s" % (
                        profile, level, value, "-" if row["tokens_per_s"] is None else "%.1f" % row["tokens_per_s"],
                        _s(row["ttft_p50"]), _s(row["ttft_p95"]), _ms(row["tpot_p50"]), _ms(row["tpot_p95"])))
    missing = [value for value in values if value not in runs]
    if merged.get("dropped"):
        lines.append("not compared: the runs saved for %s were of another engine (model, speculative method or draft, "
                     "or batch budget); measure them again" % ", ".join(merged["dropped"]))
    level, why = site_concurrency(cap, recommended, runs)
    rates = {}
    if level is not None:
        for value, levels in runs.items():
            rows = {row["profile"]: row for row in levels if row["concurrency"] == level}
            active = {p: rows.get(p) for p in profiles if float((shares or {}).get(p, 1)) > 0}
            if active and all(_fine(row) for row in active.values()):
                rate = _mix(active, {p: (shares or {}).get(p, 1) for p in active})
                if rate is not None:
                    rates[value] = rate
    best = None
    if rates:
        top = max(rates.values())
        best = min(value for value, rate in rates.items() if rate >= top * (1.0 - tolerance))
    if best is None:
        lines.append("recommended num_speculative_tokens: none (%s%s)" % (
            "no value ran at %d concurrent requests without failures" % level if level is not None else why,
            "; not measured yet: %s" % missing if missing else ""))
    else:
        others = ", ".join("%d (%.1f) by %.0f%%" % (value, rates[value], (rates[best] / rates[value] - 1.0) * 100.0)
                           for value in sorted(rates) if value != best)
        lines.append("recommended num_speculative_tokens: %d at %d concurrent requests (%s): %.1f tokens/s for the "
                     "mix%s%s" % (best, level, why, rates[best], ", ahead of " + others if others else "",
                                  "; of the values measured so far, not yet %s" % missing if missing else ""))
    return {"lines": lines, "best": best, "level": level,
            "rates": {value: round(rate, 2) for value, rate in rates.items()}, "figures": figures, "missing": missing}
