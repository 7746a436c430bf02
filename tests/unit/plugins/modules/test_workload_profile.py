# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.workload_profile against HTTP servers on 127.0.0.1.

Each engine serves recorded fixtures in turn (the t0 text first, then the t1 text), so the
profile sees the fixture pair's increases over a window of a fraction of a second.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import workload_profile

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "metrics")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return handle.read()


def args(metrics_server, closed_port=None, **extra):
    engines = [{"name": "spark-a", "url": metrics_server.base + "/a"},
               {"name": "spark-b", "url": metrics_server.base + "/b"}]
    if closed_port:
        engines.append({"name": "spark-c", "url": "http://127.0.0.1:%d" % closed_port})
    return dict({"engines": engines, "window": 0.2, "interval": 0.2, "timeout": 2}, **extra)


def serve_pairs(metrics_server):
    metrics_server.routes = {"/a/metrics": [(200, fixture("vllm_a_t0")), (200, fixture("vllm_a_t1"))],
                             "/b/metrics": [(200, fixture("vllm_b_t0")), (200, fixture("vllm_b_t1"))]}


@pytest.mark.parametrize("check_mode", [False, True])
def test_reads_every_engine_and_writes_the_profile_unless_checking(run_module, metrics_server, closed_port, tmp_path,
                                                                   check_mode):
    serve_pairs(metrics_server)
    dest = tmp_path / "profile.json"
    code, result = run_module(workload_profile, args(metrics_server, closed_port, dest=str(dest),
                                                     _ansible_check_mode=check_mode))
    assert code == 0, result
    profile = result["profile"]
    assert result["changed"] is True and result["dest"] == str(dest)
    assert profile["schema"] == "factory_floor.llm.workload_profile/1"
    assert profile["complete"] is False and profile["engines_counted"] == 2
    assert "cannot connect" in profile["engines"][2]["errors"][0]
    # a: 9 finished and b: 8 between the fixtures' reads; the window is the real time between the reads.
    assert profile["total"]["requests_finished"] == 17
    assert profile["total"]["prefix_cache_hit_fraction"] == pytest.approx(2 / 3, abs=1e-6)
    warnings = [w["event"]["msg"] if isinstance(w, dict) else w for w in result["warnings"]]
    assert any("spark-c: fewer than two readable samples" in w for w in warnings)
    if check_mode:
        assert not dest.exists()
    else:
        assert json.loads(dest.read_text()) == profile


def test_same_file_is_not_rewritten(run_module, metrics_server, tmp_path):
    serve_pairs(metrics_server)
    dest = tmp_path / "profile.json"
    code, first = run_module(workload_profile, args(metrics_server, dest=str(dest)))
    assert code == 0 and first["changed"] is True
    # A new measurement differs (the window is measured): changed again, and the file holds the new one.
    serve_pairs(metrics_server)
    code, second = run_module(workload_profile, args(metrics_server, dest=str(dest)))
    assert code == 0 and json.loads(dest.read_text()) == second["profile"]


def test_no_engine_read_twice_fails_and_writes_nothing(run_module, closed_port, tmp_path):
    dest = tmp_path / "profile.json"
    code, result = run_module(workload_profile, {
        "engines": [{"name": "spark-a", "url": "http://127.0.0.1:%d" % closed_port}],
        "window": 0.1, "interval": 0.1, "timeout": 1, "dest": str(dest)})
    assert code == 1
    assert "no engine could be read twice" in result["msg"] and "Connection refused" in result["msg"]
    assert not dest.exists()


@pytest.mark.parametrize("extra, message", [
    ({"window": 0.1, "interval": 1}, "interval (1s) is longer than window (0.1s)"),
    ({"long_context_tokens": [0]}, "long_context_tokens must be positive"),
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"dest": "/nonexistent-dir/p.json"}, "the directory of dest /nonexistent-dir/p.json does not exist"),
])
def test_wrong_arguments_fail_before_reading(run_module, metrics_server, extra, message):
    code, result = run_module(workload_profile, args(metrics_server, **extra))
    assert code == 1 and message in result["msg"]
