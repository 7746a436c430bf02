# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The plan per grouping (``_kv_cache_plan.plan_groupings``, issue 37): one test per row kind - fits, does not start,
short of the need, measured or not by a saved concurrency sweep - and the table the site check prints."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _kv_cache_plan as kv

MAX_MODEL_LEN = 32768


def side(tokens_by_size):
    """A group's side as ``_side`` returns it: its KV tokens, and the full-context requests they hold."""
    def group_side(size):
        tokens = tokens_by_size[size]
        return {"kv_tokens": tokens, "full_context_requests": kv.floor_hundredths(tokens, MAX_MODEL_LEN)}
    return group_side


def sweep(size, seqs=8, mixed=None, levels=None, host="spark-a", model="lab-chat", source=None):
    """A saved sweep (``<tune_output_dir>/<host>.json``) of an engine group of ``size`` hosts."""
    saved = {"host": host, "engine": {"model": model, "max_model_len": MAX_MODEL_LEN},
             "tensor_parallel_size": size, "levels": levels if levels is not None else [
                 {"profile": "short", "concurrency": 4, "tokens_per_s": 150.0, "requests_failed": 0},
                 {"profile": "short", "concurrency": 8, "tokens_per_s": 210.0, "requests_failed": 0},
                 {"profile": "long", "concurrency": 8, "tokens_per_s": 180.0, "requests_failed": 0}],
             "recommendation": {"max_num_seqs": seqs, "mixed_tokens_per_s": mixed or {}}}
    if source:
        saved["source"] = source
    return saved


# Four hosts, a model that splits over 1, 2 and 4 (16 heads, 2 KV heads). A host alone holds less than one
# full-context request; a pair about 3.5; four hosts about 8.
FOUR = {1: 20000, 2: 120000, 4: 270000}


def plan(need_tokens=MAX_MODEL_LEN, measured=None, tokens=None):
    return {tuple(o["sizes"]): o for o in kv.plan_groupings(4, side(tokens or FOUR), MAX_MODEL_LEN, need_tokens,
                                                            16, 2, measured)}


def test_a_grouping_with_a_group_under_one_full_context_request_does_not_start():
    options = plan()
    assert list(options) == [(1, 1, 1, 1), (2, 1, 1), (2, 2), (4,)]
    for sizes in [(1, 1, 1, 1), (2, 1, 1)]:
        assert options[sizes]["starts"] is False and options[sizes]["verdict"] == "does not start"
    assert options[(2, 1, 1)]["kv_tokens"] == [120000, 20000, 20000]
    assert options[(2, 1, 1)]["full_context_requests"] == [3.66, 0.61, 0.61]


def test_a_grouping_whose_every_group_holds_the_need_fits_with_its_requests_per_group_and_in_all():
    pair = plan()[(2, 2)]
    assert (pair["starts"], pair["holds_need"], pair["verdict"]) == (True, True, "fits")
    assert pair["kv_tokens"] == [120000, 120000] and pair["total_kv_tokens"] == 240000
    assert pair["full_context_requests"] == [3.66, 3.66] and pair["total_full_context_requests"] == 7.32


def test_a_grouping_short_of_the_long_context_need_starts_but_is_short():
    # The need, 4 full-context requests in one group (a request runs inside one group): a pair is short, four hosts
    # as one group hold it.
    options = plan(need_tokens=4 * MAX_MODEL_LEN)
    assert (options[(2, 2)]["starts"], options[(2, 2)]["verdict"]) == (True, "short of the need")
    assert options[(4,)]["verdict"] == "fits"
    assert options[(1, 1, 1, 1)]["verdict"] == "does not start"


def test_without_a_sweep_every_group_is_not_measured():
    pair = plan()[(2, 2)]
    assert pair["tokens_per_s"] == [None, None] and pair["total_tokens_per_s"] is None
    assert pair["max_num_seqs"] == [None, None] and pair["not_measured_sizes"] == [2]


def test_a_sweep_of_a_group_size_measures_every_group_of_that_size():
    measured, ignored = kv.measured_by_size([sweep(2, mixed={"8": 190.5})])
    assert ignored == []
    options = plan(measured=measured)
    assert options[(2, 2)]["tokens_per_s"] == [190.5, 190.5] and options[(2, 2)]["total_tokens_per_s"] == 381.0
    assert options[(2, 2)]["max_num_seqs"] == [8, 8] and options[(2, 2)]["not_measured_sizes"] == []
    # Some groups measured, not all: per group where measured, no total.
    mixed = plan(measured=measured, tokens={1: 40000, 2: 120000, 4: 270000})[(2, 1, 1)]
    assert mixed["tokens_per_s"] == [190.5, None, None] and mixed["total_tokens_per_s"] is None
    assert mixed["not_measured_sizes"] == [1]
    assert plan(measured=measured)[(4,)]["tokens_per_s"] == [None]


@pytest.mark.parametrize("saved, rate, seqs, basis", [
    # The mix the sweep estimated at its recommendation.
    (sweep(1, mixed={"8": 195.25}), 195.2, 8, "recommended max_num_seqs 8, mix of profiles"),
    # No mix (one profile, or not estimated): the lowest profile at the recommended level.
    (sweep(1), 180.0, 8, "recommended max_num_seqs 8"),
    # No level met the latency target: the best level without a failed request, said so.
    (sweep(1, seqs=None, levels=[{"profile": "short", "concurrency": 4, "tokens_per_s": 150.0, "requests_failed": 0},
                                 {"profile": "short", "concurrency": 8, "tokens_per_s": 240.0, "requests_failed": 2}]),
     150.0, 4, "best level (short x 4; no level met the latency target)"),
])
def test_a_sweeps_figure_is_its_recommended_levels(saved, rate, seqs, basis):
    figures = kv.sweep_figures(saved)
    assert (figures["tokens_per_s"], figures["max_num_seqs"], figures["basis"]) == (rate, seqs, basis)
    assert figures["tensor_parallel_size"] == 1


def test_sweeps_without_a_group_size_or_of_another_model_are_not_used_and_several_of_a_size_give_the_lowest():
    old = sweep(1, source="/b/spark-c.json")
    del old["tensor_parallel_size"]
    measured, ignored = kv.measured_by_size(
        [sweep(1, mixed={"8": 200.0}, source="/b/spark-a.json"), sweep(1, mixed={"8": 190.0}, host="spark-b"),
         old, sweep(2, model="other", source="/b/spark-d.json"),
         sweep(1, levels=[], seqs=None, source="/b/spark-e.json")], served_model_name="lab-chat")
    assert list(measured) == [1] and measured[1]["tokens_per_s"] == 190.0 and measured[1]["source"] == "spark-b"
    assert [i["source"] for i in ignored] == ["/b/spark-c.json", "/b/spark-d.json", "/b/spark-e.json"]
    assert ignored[1]["reason"] == "measured other, not lab-chat"
    assert "saved before sweeps recorded it" in ignored[0]["reason"]


def test_the_table_has_one_row_per_grouping():
    measured, _ignored = kv.measured_by_size([sweep(2, mixed={"8": 190.5})])
    groupings = kv.plan_groupings(4, side(FOUR), MAX_MODEL_LEN, MAX_MODEL_LEN, 16, 2, measured)
    lines = kv.groupings_table(groupings, MAX_MODEL_LEN, MAX_MODEL_LEN)
    assert len(lines) == 1 + 4 + 1
    assert lines[0].split("  ")[0] == "grouping"
    rows = {line.split()[0]: line for line in lines[1:5]}
    assert list(rows) == ["1+1+1+1", "2+1+1", "2+2", "4"]
    assert "(replicas)" in rows["1+1+1+1"] and "(split)" in rows["4"]
    assert "20,000 x4" in rows["1+1+1+1"] and "  not measured  " in rows["1+1+1+1"]
    assert rows["1+1+1+1"].endswith("does not start")
    assert "120,000 + 20,000 x2" in rows["2+1+1"] and "190.5 + not measured x2" in rows["2+1+1"]
    assert "190.5 x2" in rows["2+2"] and " 381.0 " in rows["2+2"] and rows["2+2"].endswith("fits")
    assert " 7.32 " in rows["2+2"]
    assert lines[-1].startswith("full-context = KV tokens / max_model_len 32,768; need 32,768 tokens per group")


def test_the_reasoning_says_measured_or_not_per_grouping():
    measured, _ignored = kv.measured_by_size([sweep(2, mixed={"8": 190.5})])
    lines = kv.groupings_lines(kv.plan_groupings(4, side(FOUR), MAX_MODEL_LEN, MAX_MODEL_LEN, 16, 2, measured),
                               MAX_MODEL_LEN)
    assert "; 381.0 tokens/s in all (measured); every group holds the need" in lines[2]
    assert "; tokens/s not measured for groups of 1; does not start" in lines[0]
    assert "tokens/s not measured for groups of 4" in lines[3]
