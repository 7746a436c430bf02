# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the tool_gate role notes and says besides the verdict (factory_floor.llm.tool_gate_note): the incumbent, a
candidate nobody tests, the spread of repeated runs. Pure logic, standard library only; the verdict itself is
``_tool_gate_verdict.py``'s."""

from __future__ import annotations


def _listed(names):
    return ", ".join(str(name) for name in names or []) or "none"


def measured(run):
    """What the incumbent's run measured, as a stored score is read (check mode measures nothing: it would)."""
    if "score" in run:
        return {"score": run["score"], "measured_now": True}
    return {"score": None, "measured_now": False, "would_measure": True, "would_send": run.get("would_send", 0)}


def incumbent(build_id, model_path, topology, found):
    """The fact ``tool_gate_incumbent``: the build serving now and its score (``found``: a stored record, what
    :func:`measured` says, or None)."""
    found = found or {}
    return {"build_id": build_id, "model_path": model_path, "topology": topology, "score": found.get("score"),
            "measured_now": found.get("measured_now", False), "would_measure": found.get("would_measure", False),
            "would_send": found.get("would_send", 0)}


def not_measured(build_id, model_path, topology, topologies, gated, id_chars=16):
    """Why the incumbent without a stored score is not measured: its topology is not gated, or measuring is off."""
    why = ("its topology is not in tool_gate_topologies (%s)" % _listed(topologies) if not gated
           else "tool_gate_measure_incumbent is false")
    return ("No tool-calling score stored for the incumbent build %s (%s%s) with this suite; not measured: %s. The "
            "candidate is held to tool_gate_min_score only." % (
                build_id[:id_chars], model_path or "model", ", " + topology if topology else "", why))


def not_gated(topology, topologies, host):
    """The fact ``tool_gate_result`` of a candidate whose topology the gate leaves out."""
    return {"gated": False, "passed": True, "topology": topology,
            "message": "Tool-calling gate off for %s on %s (tool_gate_topologies: %s): not tested." % (
                topology, host, _listed(topologies))}


def spread(host, build_id, model_path, concurrency, run):
    """How much a build's score moves over repeated runs: the sentence, and the fact ``tool_gate_spread``."""
    case = round(100.0 / run["total"], 1)
    low, high = min(run["run_scores"]), max(run["run_scores"])
    message = (
        "%s build %s (%s), %s cases, %s runs at concurrency %s: scores %s (majority %s); flipped: %s. One case is %s "
        "points: a tool_gate_min_score at most %s and a tool_gate_tolerance of at least %s leave this build one case "
        "of margin below every score seen here." % (
            host, build_id[:16], model_path, run["total"], run["repeat"], concurrency,
            ", ".join(str(score) for score in run["run_scores"]), run["score"], _listed(run["flipped_cases"]), case,
            round(low - case, 1), round(high - low + case, 1)))
    fact = {"build_id": build_id, "model_path": model_path, "total": run["total"], "concurrency": concurrency}
    fact.update((key, run[key]) for key in ("run_scores", "score", "flipped_cases", "results", "elapsed"))
    return message, fact
