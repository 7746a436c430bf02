# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the tool_gate role notes and says besides the verdict (``_tool_gate_notes``), in the words its tasks used."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_notes as tn

BUILD = "0123456789abcdef0123456789"
RUN = {"total": 18, "repeat": 3, "run_scores": [38.9, 33.3, 38.9], "score": 38.9, "flipped_cases": ["weather"],
       "results": [], "elapsed": 12.5}


def test_a_measured_incumbent_and_one_check_mode_would_measure():
    assert tn.measured({"score": 38.9}) == {"score": 38.9, "measured_now": True}
    assert tn.measured({"would_send": 36}) == {"score": None, "measured_now": False, "would_measure": True,
                                               "would_send": 36}
    assert tn.measured({})["would_send"] == 0


@pytest.mark.parametrize("found, score, measured_now, would_measure, would_send", [
    (None, None, False, False, 0),
    ({"score": 40.0, "measured_epoch": 1.0}, 40.0, False, False, 0),
    ({"score": 38.9, "measured_now": True}, 38.9, True, False, 0),
    ({"score": None, "measured_now": False, "would_measure": True, "would_send": 36}, None, False, True, 36),
])
def test_the_incumbent_fact(found, score, measured_now, would_measure, would_send):
    assert tn.incumbent(BUILD, "/models/m", "replicas", found) == {
        "build_id": BUILD, "model_path": "/models/m", "topology": "replicas", "score": score,
        "measured_now": measured_now, "would_measure": would_measure, "would_send": would_send}


@pytest.mark.parametrize("model_path, topology, topologies, gated, words", [
    ("/models/m", "split", ["replicas"], False,
     "(/models/m, split) with this suite; not measured: its topology is not in tool_gate_topologies (replicas)."),
    ("", "", [], False, "(model) with this suite; not measured: its topology is not in tool_gate_topologies (none)."),
    ("m", "replicas", ["replicas"], True,
     "(m, replicas) with this suite; not measured: tool_gate_measure_incumbent is false."),
])
def test_why_the_incumbent_is_not_measured(model_path, topology, topologies, gated, words):
    message = tn.not_measured(BUILD, model_path, topology, topologies, gated)
    assert message == ("No tool-calling score stored for the incumbent build 0123456789abcdef " + words
                       + " The candidate is held to tool_gate_min_score only.")


def test_a_candidate_the_gate_leaves_out_passes_untested_and_says_so():
    assert tn.not_gated("split", ["replicas"], "spark-a") == {
        "gated": False, "passed": True, "topology": "split",
        "message": "Tool-calling gate off for split on spark-a (tool_gate_topologies: replicas): not tested."}
    assert "(tool_gate_topologies: none)" in tn.not_gated("split", [], "spark-a")["message"]


def test_the_spread_sentence_and_figures():
    message, fact = tn.spread("spark-a", BUILD, "/models/m", 2, RUN)
    assert message == (
        "spark-a build 0123456789abcdef (/models/m), 18 cases, 3 runs at concurrency 2: scores 38.9, 33.3, 38.9 "
        "(majority 38.9); flipped: weather. One case is 5.6 points: a tool_gate_min_score at most 27.7 and a "
        "tool_gate_tolerance of at least 11.2 leave this build one case of margin below every score seen here.")
    assert fact == {"build_id": BUILD, "model_path": "/models/m", "total": 18, "concurrency": 2,
                    "run_scores": [38.9, 33.3, 38.9], "score": 38.9, "flipped_cases": ["weather"], "results": [],
                    "elapsed": 12.5}
    assert "flipped: none." in tn.spread("spark-a", BUILD, "m", 1, dict(RUN, flipped_cases=[]))[0]
