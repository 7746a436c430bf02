# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.vllm_metrics against HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import vllm_metrics

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "metrics")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("check_mode", [False, True])
def test_two_replicas_one_down(run_module, metrics_server, closed_port, check_mode):
    metrics_server.routes = {"/a/metrics": [(200, fixture("vllm_a_t1"))], "/b/metrics": [(200, fixture("vllm_b_t1"))]}
    code, result = run_module(vllm_metrics, {
        "engines": [{"name": "spark-a", "url": metrics_server.base + "/a"},
                    {"name": "spark-b", "url": metrics_server.base + "/b"},
                    {"name": "spark-c", "url": "http://127.0.0.1:%d" % closed_port}],
        "timeout": 2,
        "_ansible_check_mode": check_mode,
    })
    assert code == 0
    assert result["changed"] is False
    assert result["complete"] is False and result["unreachable_engines"] == ["spark-c"]
    assert result["engines"][2]["reachable"] is False and "cannot connect" in result["engines"][2]["error"]
    assert result["total"]["num_requests_running"] == 21
    assert result["total"]["kv_cache_usage_perc_weighted_mean"] == pytest.approx(0.391304, abs=1e-6)
    assert result["total"]["ttft_seconds"]["p50"] == pytest.approx(0.375)
    assert result["table"][-1].startswith("TOTAL")
    assert "notes" not in result and "rates" not in result["total"]


def test_window_gives_rates_and_reports_restart(run_module, metrics_server):
    metrics_server.routes = {
        "/a/metrics": [(200, fixture("vllm_a_t0")), (200, fixture("vllm_a_t1"))],
        "/b/metrics": [(200, fixture("vllm_b_t0")), (200, fixture("vllm_b_restarted"))],
    }
    code, result = run_module(vllm_metrics, {
        "engines": [{"name": "spark-a", "url": metrics_server.base + "/a"},
                    {"name": "spark-b", "url": metrics_server.base + "/b"}],
        "window": 0.1,
    })
    assert code == 0 and result["changed"] is False
    assert result["window"] == 0.1
    assert result["restarts"] == ["spark-b"]
    b_rates = result["engines"][1]["rates"]
    assert result["engines"][1]["restarted"] is True
    assert b_rates["generation_tokens_per_s"] == pytest.approx(1980 / b_rates["elapsed_seconds"], rel=2e-2)
    assert all(value > 0 for value in result["total"]["rates"].values())


def test_split_with_two_engines_fails(run_module, metrics_server):
    code, result = run_module(vllm_metrics, {
        "engines": [{"name": "spark-a", "url": metrics_server.base},
                    {"name": "spark-b", "url": metrics_server.base}],
        "topology": "split",
    })
    assert code == 1 and result["failed"] is True
    assert "exactly one engine, the rank-0 head" in result["msg"]
    assert metrics_server.seen == []


def test_split_head(run_module, metrics_server):
    metrics_server.routes = {"/metrics": [(200, fixture("vllm_split_head_t1"))]}
    code, result = run_module(vllm_metrics, {"engines": [{"name": "spark-a", "url": metrics_server.base}],
                                             "topology": "split"})
    assert code == 0
    assert result["topology"] == "split"
    assert result["total"]["kv_cache_capacity_tokens"] == 3040000


def test_api_key_is_sent_and_not_logged(run_module, metrics_server):
    metrics_server.routes = {"/metrics": [(200, fixture("vllm_a_t1"))]}
    code, result = run_module(vllm_metrics, {"engines": [{"name": "spark-a", "url": metrics_server.base}],
                                             "api_key": "s3cret-key"})
    assert code == 0
    assert metrics_server.seen == [("/metrics", "Bearer s3cret-key")]
    assert "s3cret-key" not in json.dumps(result)


def test_different_models_warn(run_module, metrics_server):
    other = fixture("vllm_b_t1").replace('model_name="local-model"', 'model_name="other-model"')
    metrics_server.routes = {"/a/metrics": [(200, fixture("vllm_a_t1"))], "/b/metrics": [(200, other)]}
    code, result = run_module(vllm_metrics, {"engines": [{"name": "spark-a", "url": metrics_server.base + "/a"},
                                                         {"name": "spark-b", "url": metrics_server.base + "/b"}]})
    assert code == 0
    # ansible-core 2.19 returns warnings as structured events; match the text anywhere
    assert "engines serve different models (local-model, other-model)" in json.dumps(result["warnings"])


@pytest.mark.parametrize("args, message", [
    ({"engines": []}, "engines is empty"),
    ({"engines": [{"name": "a", "url": "spark-a:8000"}]}, "not an http(s) base URL"),
    ({"engines": [{"name": "a", "url": "http://a:8000"}], "window": -5}, "window must be 0"),
    ({"engines": [{"name": "a", "url": "http://a:8000"}], "timeout": 0}, "timeout must be a positive"),
])
def test_bad_arguments_fail_before_reading(run_module, args, message):
    code, result = run_module(vllm_metrics, args)
    assert code == 1
    assert message in result["msg"]


@pytest.mark.parametrize("attribute, library", [
    ("PROMETHEUS_CLIENT_IMPORT_ERROR", "prometheus-client"),
    ("REQUESTS_IMPORT_ERROR", "requests"),
])
def test_missing_library(run_module, monkeypatch, attribute, library):
    monkeypatch.setattr(vllm_metrics, attribute, "Traceback: ImportError: No module named %s" % library)
    code, result = run_module(vllm_metrics, {"engines": [{"name": "a", "url": "http://a:8000"}]})
    assert code == 1
    assert "Failed to import the required Python library (%s)" % library in result["msg"]


def test_missing_prometheus_client_says_which_package(run_module, monkeypatch):
    monkeypatch.setattr(vllm_metrics, "PROMETHEUS_CLIENT_IMPORT_ERROR", "ImportError: No module named prometheus_client")
    code, result = run_module(vllm_metrics, {"engines": [{"name": "a", "url": "http://a:8000"}]})
    assert code == 1
    assert "apt-get install python3-prometheus-client" in result["msg"]
    assert "to parse the engines' /metrics" in result["msg"]
