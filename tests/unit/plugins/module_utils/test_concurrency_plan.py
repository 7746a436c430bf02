# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The max_num_seqs recommendation and the sweep's table, with tables built on the operations
report's figures (plugins/module_utils/_concurrency_plan.py)."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._concurrency_plan import format_table, recommend
from ansible_collections.factory_floor.llm.plugins.module_utils._host.load import LoadError

# ----------------------------------------------------------- recommendation


def level(profile, concurrency, tokens_per_s, e2e_p95=5.0, ttft_p95=0.5, ok=100, failed=0, tokens_mean=None):
    if tokens_mean is None:
        tokens_mean = 128.0 if profile == "short" else 256.0
    return {"profile": profile, "concurrency": concurrency, "tokens_per_s": tokens_per_s, "e2e_p95": e2e_p95,
            "ttft_p95": ttft_p95, "requests_ok": ok, "requests_failed": failed, "completion_tokens_mean": tokens_mean,
            "errors": ["HTTP 500: x"] if failed else []}


# MISSION.md, one copy, tokens/s by concurrent requests.
SEED_SHORT = {1: 36, 4: 82, 8: 109, 16: 150}
SEED_LONG = {4: 81, 8: 113, 16: 87}


def table(profile, rates, e2e=None):
    return [level(profile, c, t, e2e_p95=(e2e or {}).get(c, 5.0)) for c, t in rates.items()]


@pytest.mark.parametrize("levels, target, expected", [
    # "Above eight long-prompt requests, adding more made the copy slower": 8 wins.
    pytest.param(table("long", SEED_LONG), None, 8, id="seed-long-above-8-slower"),
    pytest.param(table("long", {**SEED_LONG, 12: 104}), None, 8, id="seed-long-with-12"),
    # Short prompts kept gaining up to 16 in the seed's table.
    pytest.param(table("short", SEED_SHORT), None, 16, id="seed-short"),
    # The afternoon: cap 12 gave 91-93 tokens/s, cap 8 81-83 -> 12 beats 8.
    pytest.param(table("short", {8: 82, 12: 92}), None, 12, id="seed-afternoon-12-beats-8"),
    # With a latency target, 16 is too slow for short traffic and 12 is the best that fits.
    pytest.param(table("short", {**SEED_SHORT, 12: 130}, {1: 3.6, 4: 6.3, 8: 9.5, 12: 11.9, 16: 17.2}),
                 15.0, 12, id="short-target-15s"),
    pytest.param(table("short", {**SEED_SHORT, 12: 130}, {1: 3.6, 4: 6.3, 8: 9.5, 12: 11.9, 16: 17.2}),
                 3.0, None, id="nothing-meets-the-target"),
])
def test_recommend_one_profile(levels, target, expected):
    result = recommend(levels, target_seconds=target)
    assert result["max_num_seqs"] == expected
    assert result["reasoning"][-1].startswith("max_num_seqs %d" % expected if expected else "no level meets")


def test_recommend_says_when_the_pick_is_the_highest_level_swept():
    # Lab sweep 2026-11-29 (spark-a, levels 1-12, no target): 12, the highest swept, was
    # the pick; more may be better. A level below the highest carries no such note.
    result = recommend(table("short", {8: 82, 12: 92}))
    assert result["max_num_seqs"] == 12
    assert any(line.startswith("12 is the highest level swept") for line in result["reasoning"])
    result = recommend(table("long", SEED_LONG))
    assert result["max_num_seqs"] == 8
    assert not any("highest level swept" in line for line in result["reasoning"])


def test_recommend_warns_of_few_samples_without_a_target_too():
    # The lab's long levels: one wave each, p50 = p95.
    result = recommend([level("long", 4, 3.6, ok=4), level("long", 8, 4.0, ok=8)])
    assert "long at 4: p95 from only 4 requests; run longer levels for a firmer figure" in result["reasoning"]
    assert "(no latency target)" in result["reasoning"][-1]


def mixed_seed(long_e2e=None):
    # The seed's tables with 12 measured too (short 130, long 110: not in the report).
    return (table("short", {**SEED_SHORT, 12: 130})
            + table("long", {**SEED_LONG, 12: 110}, long_e2e))


def test_recommend_for_a_mix_of_both_profiles():
    # Equal shares, 128 and 256 tokens per answer: the mix at 8 is 111.6 tokens/s, at 12
    # 116.0, at 16 101.2 (long prompts slow down): 12, what the report's team settled on.
    result = recommend(mixed_seed())
    assert result["per_profile"] == {"short": 16, "long": 8}
    assert result["max_num_seqs"] == 12
    assert sorted(result["mixed_tokens_per_s"]) == [4, 8, 12, 16]      # 1: long not measured there
    assert result["mixed_tokens_per_s"][8] == pytest.approx(111.63, abs=0.01)
    assert result["mixed_tokens_per_s"][12] == pytest.approx(115.95, abs=0.01)
    assert "mix (short 50%, long 50%)" in result["reasoning"][-1]


@pytest.mark.parametrize("shares, expected", [
    ({"short": 1, "long": 0}, 16),
    ({"long": 1}, 8),
    ({"short": 1, "long": 1}, 12),
    ({"short": 1, "long": 4}, 8),
])
def test_recommend_follows_the_traffic_mix(shares, expected):
    assert recommend(mixed_seed(), shares=shares)["max_num_seqs"] == expected


def test_latency_target_in_any_profile_rules_a_level_out():
    result = recommend(mixed_seed(long_e2e={12: 40.0, 16: 55.0}), target_seconds=30)
    assert result["max_num_seqs"] == 8
    assert "long at 12: not eligible, e2e_p95 40.0 s is over the target 30 s" in result["reasoning"]


def test_ttft_metric():
    levels = [level("short", 8, 100, e2e_p95=50, ttft_p95=0.8), level("short", 12, 120, e2e_p95=50, ttft_p95=2.5)]
    assert recommend(levels, target_seconds=1.0, metric="ttft")["max_num_seqs"] == 8
    assert recommend(levels, target_seconds=1.0, metric="e2e")["max_num_seqs"] is None


def test_failed_requests_make_a_level_ineligible():
    levels = [level("short", 8, 100), level("short", 12, 130, failed=2)]
    result = recommend(levels)
    assert result["max_num_seqs"] == 8
    assert "short at 12: not eligible, 2 of 102 requests failed (HTTP 500: x)" in result["reasoning"]


@pytest.mark.parametrize("tolerance, expected", [(0.03, 8), (0.0, 12)])
def test_within_tolerance_the_lower_level_wins(tolerance, expected):
    levels = [level("short", 8, 100.0), level("short", 12, 102.0), level("short", 16, 90.0)]
    assert recommend(levels, tolerance=tolerance)["max_num_seqs"] == expected


def test_few_samples_are_flagged():
    result = recommend([level("long", 8, 100.0, ok=6)], target_seconds=60)
    assert "long at 8: p95 from only 6 requests" in result["reasoning"][0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(metric="p99"), "metric must be one of"),
    (dict(shares={"medium": 1}), "not measured: medium"),
    (dict(shares={"short": 0}), "not all 0"),
    (dict(tolerance=1.5), "tolerance"),
])
def test_recommend_errors(kwargs, match):
    with pytest.raises(LoadError, match=match):
        recommend([level("short", 8, 100.0)], **kwargs)


def test_table_marks_the_recommendation():
    rows = [dict(level("short", 8, 109.04), requests_per_min=51.0, ttft_p50=0.3, ttft_p99=0.9, e2e_p50=4.1,
                 e2e_p99=5.5, tpot_p50=0.0312, tpot_p99=0.0401, itl_p99=0.2104, prompt_tokens_mean=31.0),
            dict(level("short", 12, 130.0), requests_per_min=None, ttft_p50=None, e2e_p50=None, prompt_tokens_mean=None)]
    lines = format_table(rows, recommended=12)
    assert lines[0].split() == ["PROFILE", "CONC", "REQ_OK", "FAIL", "TOK/S", "REQ/MIN", "TTFT_P50", "TTFT_P95",
                                "TTFT_P99", "TPOT_P50_MS", "TPOT_P99_MS", "ITL_P99_MS", "E2E_P50", "E2E_P95", "E2E_P99",
                                "PROMPT_TOK"]
    assert lines[1].split() == ["short", "8", "100", "0", "109.0", "51.0", "0.300", "0.500", "0.900", "31.2", "40.1",
                                "210.4", "4.10", "5.00", "5.50", "31"]
    assert lines[2].split()[:2] == ["short", "*12"]
    assert lines[2].split()[5] == "-" and lines[2].split()[8:12] == ["-", "-", "-", "-"]   # a level of an older sweep


def test_tpot_target():
    levels = [level("short", 8, 100, e2e_p95=50), level("short", 12, 120, e2e_p95=50)]
    levels[0]["tpot_p95"], levels[1]["tpot_p95"] = 0.04, 0.09
    result = recommend(levels, target_seconds=0.05, metric="tpot")
    assert result["max_num_seqs"] == 8
    assert "short at 12: not eligible, tpot_p95 0.09 s is over the target 0.05 s" in result["reasoning"]
