# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A tool-calling suite split over several engines of the same build (a switch gating a build never gated here on
two replicas): which cases each engine runs, and the one run over all of them that the verdict judges. Pure logic.

Each engine runs its share one case at a time, as a whole suite runs (``tool_gate_concurrency``), so every case is
still alone on its engine; the engines run at once, so the gate takes about ``1 / len(hosts)`` of the time. The
union is judged as one run: its score is ``tool_call_test``'s formula over every case (percent passed), its digest
the whole selection's, so it compares with, and is stored as, a whole run of the suite.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._tool_call import score

# The keys of tool_call_test's result a share keeps for the union (its failed cases' raw answers among them).
SHARE_KEYS = ("results", "failed_cases", "elapsed", "url", "model", "suite_name", "repeat", "run_scores",
              "flipped_cases")


def shares(selected, hosts):
    """``{host: [case id]}``: the selected cases (in suite order) dealt round-robin over ``hosts``, so each share holds
    every category about equally."""
    hosts = list(hosts)
    return {host: list(selected[index::len(hosts)]) for index, host in enumerate(hosts)}


def patterns(ids):
    """The case ids as tool_call_test's ``cases`` patterns (shell globs) that match exactly those ids."""
    return ["".join("[%s]" % char if char in "*?[" else char for char in case_id) for case_id in ids]


def share_value(host, hosts, ids, total, run, started_at, done_at):
    """What a host that ran its share notes (``tool_gate_result`` until :func:`union` judged every share): no verdict
    (``passed`` None), the share's run and times (epoch seconds, the controller's clock)."""
    kept = {key: run.get(key) for key in SHARE_KEYS if key in run}
    passed = sum(1 for result in run.get("results") or [] if result.get("passed"))
    return {"gated": True, "passed": None, "share": {"host": host, "hosts": list(hosts), "cases": list(ids),
                                                     "of": total, "started_at": started_at, "done_at": done_at},
            "run": kept,
            "message": "Tool-calling gate on %s: its share of the suite split over %s ran, %d of %d cases passed; the "
                       "verdict is over all %d cases." % (host, ", ".join(hosts), passed, len(ids), total)}


def union(hosts, values, selected, suite_digest):
    """The one run the verdict judges, from each host's :func:`share_value` (``values``, by host; a host whose share did
    not run has none, or one without ``share``), and the problems that stop it being judged.

    Returns ``(run, missing)``: ``run`` as tool_call_test returns one (its ``results`` in suite order, ``score``,
    ``total``, ``passed_count``, ``failed_count``, ``failed_cases``, ``by_category``, ``latency_mean``, ``suite_digest``
    the whole selection's), or None when a share is missing; ``missing`` names each host whose share did not run and
    why (its failure's ``msg``, when it has one).
    """
    missing, results, failed, flipped, first = [], {}, [], [], {}
    for host in hosts:
        value = values.get(host) or {}
        if not isinstance(value.get("share"), dict):
            missing.append("%s's share did not run%s" % (host, ": %s" % value["msg"] if value.get("msg") else ""))
            continue
        run = value.get("run") or {}
        first = first or run
        for result in run.get("results") or []:
            results[result["id"]] = result
        failed.extend(run.get("failed_cases") or [])
        flipped.extend(run.get("flipped_cases") or [])
    lost = [case_id for case_id in selected if case_id not in results]
    if missing or lost:
        if lost and not missing:
            missing.append("no result for %d of the %d cases (%s)" % (len(lost), len(selected), ", ".join(lost[:5])))
        return None, missing
    ordered = [results[case_id] for case_id in selected]
    summary = score(ordered)
    order = {case_id: index for index, case_id in enumerate(selected)}
    run = {"score": summary["score"], "total": summary["total"], "passed_count": summary["passed_count"],
           "failed_count": summary["total"] - summary["passed_count"],
           "failed_cases": sorted(failed, key=lambda case: order.get(case["id"], 0)),
           "by_category": summary["by_category"], "latency_mean": summary["latency_mean"],
           "latency_max": summary["latency_max"], "results": ordered, "selected": list(selected),
           "suite_digest": suite_digest, "flipped_cases": sorted(flipped, key=lambda case_id: order.get(case_id, 0))}
    run.update((key, first.get(key)) for key in ("url", "model", "suite_name", "repeat") if key in first)
    return run, []


def union_words(hosts, values):
    """The sentence the verdict gets: how the suite was split and that the verdict is over all of it."""
    parts = ["%s %d" % (host, len(((values.get(host) or {}).get("share") or {}).get("cases") or [])) for host in hosts]
    return (" The suite was split over the new engines (cases each: %s), each case alone on its engine; this verdict "
            "is over all of them." % ", ".join(parts))
