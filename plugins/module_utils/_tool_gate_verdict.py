# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tool-calling gate's verdict on a candidate build. Pure logic.

Input: the candidate's run (the result of ``factory_floor.llm.tool_call_test``), the
stored record of the build it is compared with (``found``: the latest passing record of
``incumbent_build_id`` with the same suite digest, or None), and the pass marks.

A candidate passes unless one of these holds (each is one line of ``problems``):

- its score is below ``min_score`` (``tool_gate_min_score``);
- its score is 0 or less while ``min_score`` is 0 or less: no case passed, which never
  passes, whatever ``min_score`` says;
- there is an incumbent score (``incumbent_build_id`` is set and a record of it was found)
  and the score is below it minus ``tolerance`` (``tool_gate_tolerance``).

The incumbent may be the candidate's own build (a topology switch, a re-gate): it is then
called "this build", and the cases whose verdict changed since its stored run are named
(the noise the tolerance has to cover). A run that passed is the build's score on this
host (``record_file``); a run that failed is kept in a file of its own under
``failed_dir``, named with the run's UTC time, so it never replaces the last passing score.

Scores are percent of the suite's cases (0-100); ``min_score`` and ``tolerance`` points.
"""

from __future__ import annotations

import datetime
import os

# Characters of a sha256 shown and used in record file names (the role's _tool_gate_id_chars).
ID_CHARS = 16

# Keys of the verdict, in the order the role's fact tool_gate_result has always had them.
KEYS = ("gated", "topology", "passed", "score", "passed_count", "total", "failed_cases", "by_category", "build_id",
        "model_path", "suite_digest", "record_file", "min_score", "tolerance", "incumbent_build_id", "incumbent_score",
        "run_scores", "flipped_cases", "flipped_since_stored", "message")


def _number(name, value):
    """``value`` as a float, or a ValueError that names the variable."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError("%s must be a number (points, 0-100), got %r" % (name, value)) from None


def case_ids(cases):
    """The ids of a run's or a record's failed cases (each a dict with ``id``), in their order."""
    return [case["id"] for case in cases or []]


def incumbent_name(build_id, incumbent_build_id, id_chars=ID_CHARS):
    """How the messages call the build the candidate is compared with."""
    if incumbent_build_id == build_id:
        return "this build"
    return "the incumbent build " + incumbent_build_id[:id_chars]


def incumbent_score(found, incumbent_build_id):
    """The incumbent's stored score, or None: none is compared without an incumbent, or without its record."""
    if not incumbent_build_id or found is None:
        return None
    return found.get("score")


def flipped_since_stored(run, found, build_id, incumbent_build_id):
    """Failed-case ids that differ between this run and the same build's stored run (sorted); [] for another build."""
    if incumbent_build_id != build_id or found is None:
        return []
    return sorted(set(case_ids(found.get("failed_cases"))) ^ set(case_ids(run.get("failed_cases"))))


def problems(score, min_score, tolerance, incumbent=None, name="the incumbent"):
    """Why a candidate that scored ``score`` does not pass; [] when it passes.

    ``incumbent``: the incumbent's stored score (None: not compared); ``name``: how the
    messages call the incumbent (:func:`incumbent_name`).
    """
    score, min_score, tolerance = float(score), float(min_score), float(tolerance)
    found = []
    if score < min_score:
        found.append("below min_score %s" % min_score)
    if score <= 0 and min_score <= 0:
        found.append("no case passed (a score of 0 never passes, whatever min_score says)")
    if incumbent is not None and score < float(incumbent) - tolerance:
        found.append("below %s's stored score %s minus tolerance %s (= %s)"
                     % (name, incumbent, tolerance, round(float(incumbent) - tolerance, 1)))
    return found


def marks(min_score, tolerance, incumbent, name, compared):
    """The pass marks a passing candidate met, in words."""
    text = "min_score %s" % float(min_score)
    if incumbent is not None:
        return text + ", incumbent %s - %s" % (incumbent, float(tolerance))
    if compared:
        return text + ", no stored score for %s with this suite" % name
    return text + ", no incumbent to compare with"


def failed_record_file(record_file, failed_dir, now):
    """Where a failed run is kept: ``record_file``'s name under ``failed_dir``, with ``now`` (UTC) added."""
    stem = os.path.splitext(os.path.basename(record_file))[0]
    return "%s/%s.%s.json" % (failed_dir, stem, now.strftime("%Y%m%dT%H%M%SZ"))


def verdict(run, found, host, url, build_id, model_path, topology, min_score, tolerance, incumbent_build_id,
            record_file, failed_dir, now, id_chars=ID_CHARS):
    """The gate's verdict on the candidate's ``run``: the role's fact ``tool_gate_result`` (keys :data:`KEYS`).

    ``found``: the stored record of ``incumbent_build_id`` (None when none); ``now``: the
    run's time, a timezone-aware datetime (its UTC time names a failed run's file).
    """
    min_score = _number("tool_gate_min_score", min_score)
    tolerance = _number("tool_gate_tolerance", tolerance)
    incumbent_build_id = incumbent_build_id or ""
    name = incumbent_name(build_id, incumbent_build_id, id_chars)
    incumbent = incumbent_score(found, incumbent_build_id)
    found_problems = problems(_number("the run's score", run["score"]), min_score, tolerance, incumbent, name)
    since = flipped_since_stored(run, found, build_id, incumbent_build_id)
    failed = case_ids(run.get("failed_cases"))

    message = "Tool-calling gate on %s (%s): candidate build %s (%s) scored %s (%s/%s cases)" % (
        host, url, build_id[:id_chars], model_path or "model", run["score"], run["passed_count"], run["total"])
    if found_problems:
        message += ", " + ", ".join(found_problems)
    else:
        message += ": passed (%s)" % marks(min_score, tolerance, incumbent, name, bool(incumbent_build_id))
    message += "."
    if run.get("failed_count", 0) > 0:
        message += " Failed cases: %s." % ", ".join(failed)
    if run.get("flipped_cases"):
        message += " Flipped between the %s runs (%s): %s." % (
            run.get("repeat"), ", ".join(str(s) for s in run.get("run_scores") or []), ", ".join(run["flipped_cases"]))
    if since:
        message += " Verdicts that differ from this build's stored run: %s." % ", ".join(since)

    if not found_problems:
        where = record_file
    else:
        where = failed_record_file(record_file, failed_dir, now.astimezone(datetime.timezone.utc))
    return {
        "gated": True,
        "topology": topology,
        "passed": not found_problems,
        "score": run["score"],
        "passed_count": run["passed_count"],
        "total": run["total"],
        "failed_cases": failed,
        "by_category": run.get("by_category"),
        "build_id": build_id,
        "model_path": model_path,
        "suite_digest": run.get("suite_digest"),
        "record_file": where,
        "min_score": min_score,
        "tolerance": tolerance,
        "incumbent_build_id": incumbent_build_id,
        "incumbent_score": incumbent,
        "run_scores": run.get("run_scores"),
        "flipped_cases": run.get("flipped_cases"),
        "flipped_since_stored": since,
        "message": message,
    }
