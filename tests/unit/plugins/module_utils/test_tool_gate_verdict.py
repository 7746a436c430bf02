# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool-calling gate's verdict (_tool_gate_verdict.py, the filter tool_gate_verdict): one row per rule.

Each row names the rule it proves, gives the candidate's run and what is stored, and the
verdict an operator reads: passed or not, why (``problems``), and the whole message. The
tool_gate role's verdict (tool_gate_note, as tool_gate_run calls it) gives the same verdict for every row
(tests/unit/roles/test_tool_gate_decide.py).
"""

from __future__ import annotations

import datetime

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.tool_gate_verdict import tool_gate_verdict
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_verdict as tv

BUILD = "0b23d3d78fd02573" + "a" * 48
OTHER = "3652fbcaf92263b2" + "b" * 48
DIGEST = "08bbe6f47aaaa824" + "c" * 48
NOW = datetime.datetime(2026, 3, 1, 10, 15, 0, tzinfo=datetime.timezone.utc)
RECORD = "/store/0b23d3d78fd02573.08bbe6f47aaaa824.spark-t.json"
FAILED = "/store/failed/0b23d3d78fd02573.08bbe6f47aaaa824.spark-t.20260301T101500Z.json"
HEAD = "Tool-calling gate on spark-t (http://127.0.0.1:8000): candidate build 0b23d3d78fd02573 (/models/New) scored "
CASES = ("a", "b", "c", "d")


def run(score, failed=(), repeat=1, run_scores=None, flipped=()):
    """A four-case run of tool_call_test that failed ``failed`` (case ids)."""
    return {"score": score, "passed_count": len(CASES) - len(failed), "total": len(CASES),
            "failed_cases": [{"id": case, "answer": "..."} for case in failed], "failed_count": len(failed),
            "by_category": {"single": {"total": 4, "passed": 4 - len(failed), "score": score}}, "suite_digest": DIGEST,
            "repeat": repeat, "run_scores": run_scores or [score], "flipped_cases": list(flipped)}


def stored(score, failed=()):
    """A stored record (records.yml's __tool_gate_found)."""
    return {"score": score, "failed_cases": [{"id": case} for case in failed], "build_id": "...", "passed": True}


BASE = {"host": "spark-t", "url": "http://127.0.0.1:8000", "build_id": BUILD, "model_path": "/models/New",
        "topology": "replicas", "min_score": 50, "tolerance": 5, "incumbent_build_id": ""}

NO_CASE = "no case passed (a score of 0 never passes, whatever min_score says)"
BELOW_OTHER = "below the incumbent build 3652fbcaf92263b2's stored score 100.0 minus tolerance 5.0 (= 95.0)"

# (rule, inputs over BASE (run; found when given: absent is the role's undefined), problems, message after HEAD)
ROWS = [
    ("min_score met, no incumbent to compare with",
     dict(run=run(100.0)), [],
     "100.0 (4/4 cases): passed (min_score 50.0, no incumbent to compare with)."),
    ("below min_score fails; failed cases named",
     dict(run=run(25.0, "bcd")), ["below min_score 50.0"],
     "25.0 (1/4 cases), below min_score 50.0. Failed cases: b, c, d."),
    ("a score equal to min_score passes",
     dict(run=run(50.0, "cd")), [],
     "50.0 (2/4 cases): passed (min_score 50.0, no incumbent to compare with). Failed cases: c, d."),
    ("min_score 0 and no case passed fails",
     dict(run=run(0.0, CASES), min_score=0), [NO_CASE],
     "0.0 (0/4 cases), %s. Failed cases: a, b, c, d." % NO_CASE),
    ("a negative min_score does not let a score of 0 pass",
     dict(run=run(0.0, CASES), min_score=-10), [NO_CASE],
     "0.0 (0/4 cases), %s. Failed cases: a, b, c, d." % NO_CASE),
    ("no case passed with min_score above 0 is only below min_score",
     dict(run=run(0.0, CASES)), ["below min_score 50.0"],
     "0.0 (0/4 cases), below min_score 50.0. Failed cases: a, b, c, d."),
    ("min_score 0 passes any score above 0",
     dict(run=run(25.0, "bcd"), min_score=0), [],
     "25.0 (1/4 cases): passed (min_score 0.0, no incumbent to compare with). Failed cases: b, c, d."),
    ("within the incumbent's score minus tolerance passes; another build's flips are not named",
     dict(run=run(75.0, "c"), incumbent_build_id=OTHER, found=stored(75.0, "d")), [],
     "75.0 (3/4 cases): passed (min_score 50.0, incumbent 75.0 - 5.0). Failed cases: c."),
    ("a score equal to the incumbent's minus tolerance passes",
     dict(run=run(75.0, "d"), incumbent_build_id=OTHER, found=stored(80.0)), [],
     "75.0 (3/4 cases): passed (min_score 50.0, incumbent 80.0 - 5.0). Failed cases: d."),
    ("below another build's stored score minus tolerance fails",
     dict(run=run(75.0, "d"), incumbent_build_id=OTHER, found=stored(100.0)), [BELOW_OTHER],
     "75.0 (3/4 cases), %s. Failed cases: d." % BELOW_OTHER),
    ("the incumbent's bar is rounded to 0.1 in words",
     dict(run=run(50.0, "cd"), incumbent_build_id=OTHER, found=stored(61.1)),
     ["below the incumbent build 3652fbcaf92263b2's stored score 61.1 minus tolerance 5.0 (= 56.1)"],
     "50.0 (2/4 cases), below the incumbent build 3652fbcaf92263b2's stored score 61.1 minus tolerance 5.0 (= 56.1). "
     "Failed cases: c, d."),
    ("tolerance 0: any point below the incumbent fails",
     dict(run=run(75.0, "d"), incumbent_build_id=OTHER, found=stored(75.5), tolerance=0),
     ["below the incumbent build 3652fbcaf92263b2's stored score 75.5 minus tolerance 0.0 (= 75.5)"],
     "75.0 (3/4 cases), below the incumbent build 3652fbcaf92263b2's stored score 75.5 minus tolerance 0.0 (= 75.5). "
     "Failed cases: d."),
    ("below this build's own stored score (a topology switch) fails, and the flipped verdicts are named",
     dict(run=run(75.0, "d"), incumbent_build_id=BUILD, found=stored(100.0)),
     ["below this build's stored score 100.0 minus tolerance 5.0 (= 95.0)"],
     "75.0 (3/4 cases), below this build's stored score 100.0 minus tolerance 5.0 (= 95.0). Failed cases: d. "
     "Verdicts that differ from this build's stored run: d."),
    ("this build: the cases whose verdict changed since its stored run, sorted",
     dict(run=run(50.0, "da"), incumbent_build_id=BUILD, found=stored(50.0, "db")), [],
     "50.0 (2/4 cases): passed (min_score 50.0, incumbent 50.0 - 5.0). Failed cases: d, a. "
     "Verdicts that differ from this build's stored run: a, b."),
    ("an incumbent build without a stored score: min_score only",
     dict(run=run(75.0, "d"), incumbent_build_id=OTHER, found=None), [],
     "75.0 (3/4 cases): passed (min_score 50.0, no stored score for the incumbent build 3652fbcaf92263b2 with this "
     "suite). Failed cases: d."),
    ("this build without a stored score: min_score only",
     dict(run=run(75.0, "d"), incumbent_build_id=BUILD, found=None), [],
     "75.0 (3/4 cases): passed (min_score 50.0, no stored score for this build with this suite). Failed cases: d."),
    ("below min_score and below the incumbent: both named",
     dict(run=run(25.0, "bcd"), incumbent_build_id=OTHER, found=stored(100.0)), ["below min_score 50.0", BELOW_OTHER],
     "25.0 (1/4 cases), below min_score 50.0, %s. Failed cases: b, c, d." % BELOW_OTHER),
    ("no case passed and below the incumbent: both named",
     dict(run=run(0.0, CASES), min_score=0, incumbent_build_id=OTHER, found=stored(100.0)), [NO_CASE, BELOW_OTHER],
     "0.0 (0/4 cases), %s, %s. Failed cases: a, b, c, d." % (NO_CASE, BELOW_OTHER)),
    ("a record read earlier is not compared without an incumbent build",
     dict(run=run(75.0, "d"), found=stored(100.0)), [],
     "75.0 (3/4 cases): passed (min_score 50.0, no incumbent to compare with). Failed cases: d."),
    ("the cases that flipped between repeated runs are named",
     dict(run=run(75.0, "d", repeat=3, run_scores=[75.0, 50.0, 75.0], flipped="c")), [],
     "75.0 (3/4 cases): passed (min_score 50.0, no incumbent to compare with). Failed cases: d. "
     "Flipped between the 3 runs (75.0, 50.0, 75.0): c."),
    ("no model path: the build is called model",
     dict(run=run(100.0), model_path=""), [],
     "100.0 (4/4 cases): passed (min_score 50.0, no incumbent to compare with)."),
    ("pass marks given as text are numbers",
     dict(run=run(75.0, "d"), min_score="75", tolerance="2.5", incumbent_build_id=OTHER, found=stored(80.0)),
     ["below the incumbent build 3652fbcaf92263b2's stored score 80.0 minus tolerance 2.5 (= 77.5)"],
     "75.0 (3/4 cases), below the incumbent build 3652fbcaf92263b2's stored score 80.0 minus tolerance 2.5 (= 77.5). "
     "Failed cases: d."),
]


def inputs(overrides):
    """The verdict's arguments for a row."""
    given = dict(BASE, record_file=RECORD, failed_dir="/store/failed", found=None)
    given.update(overrides)
    return given


@pytest.mark.parametrize("rule, overrides, problems, message", ROWS, ids=[row[0] for row in ROWS])
def test_verdict(rule, overrides, problems, message):
    del rule
    result = tv.verdict(now=NOW, **inputs(overrides))
    given = inputs(overrides)
    name = tv.incumbent_name(BUILD, given["incumbent_build_id"])
    assert tv.problems(given["run"]["score"], given["min_score"], given["tolerance"],
                       tv.incumbent_score(given["found"], given["incumbent_build_id"]), name) == problems
    assert result["message"] == HEAD.replace("/models/New", given["model_path"] or "model") + message
    assert result["passed"] is (not problems)
    assert result["record_file"] == (FAILED if problems else RECORD)
    assert result["failed_cases"] == [case["id"] for case in given["run"]["failed_cases"]]
    compared = given["incumbent_build_id"] and given["found"]
    assert result["incumbent_score"] == (given["found"]["score"] if compared else None)
    assert result["min_score"] == float(given["min_score"]) and result["tolerance"] == float(given["tolerance"])
    assert tuple(result) == tv.KEYS


def test_a_failed_run_is_named_by_its_utc_time():
    later = datetime.datetime(2026, 3, 1, 11, 15, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    result = tv.verdict(now=later, **inputs(dict(run=run(25.0, "bcd"))))
    assert result["record_file"] == FAILED


def test_the_filter_takes_the_roles_inputs():
    given = inputs(dict(run=run(25.0, "bcd")))
    result = tool_gate_verdict(dict(given, now=NOW.timestamp(), id_chars=16))
    assert result == tv.verdict(now=NOW, **given)
    assert tool_gate_verdict(dict(given, found=None))["record_file"].startswith("/store/failed/0b23d3d78fd02573.")


@pytest.mark.parametrize("change, words", [
    (dict(min_score="high"), "tool_gate_min_score must be a number (points, 0-100), got 'high'"),
    (dict(tolerance=None), "tool_gate_tolerance must be a number (points, 0-100), got None"),
    (dict(mins_score=50), "unknown options mins_score"),
])
def test_the_filter_names_what_to_change(change, words):
    with pytest.raises(AnsibleFilterError, match=words.replace("(", r"\(").replace(")", r"\)")):
        tool_gate_verdict(dict(inputs(dict(run=run(75.0))), **change))


def test_the_filter_names_a_missing_input():
    given = inputs(dict(run=run(75.0)))
    del given["record_file"]
    with pytest.raises(AnsibleFilterError, match="missing record_file"):
        tool_gate_verdict(given)
