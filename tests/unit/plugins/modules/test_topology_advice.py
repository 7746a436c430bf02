# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.topology_advice`` through its action plugin: the build it reads from the engine hosts'
variables, the store it writes on the controller, a failed switch reported from its saved report, and its
documentation against its argument spec. The decisions are test_advisor_store.py's and test_topology_advisor.py's."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.action.topology_advice import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action

HOSTS = {"spark-a": {"tool_gate_build": {"id": "b1"}, "vllm_max_model_len": 4096},
         "spark-b": {"tool_gate_build": {"id": "b1"}, "vllm_max_model_len": 4096}}
VARIABLES = {"groups": {"gb10": ["spark-a", "spark-b"], "proxy": ["gateway"]}, "site_engine_group": "gb10",
             "hostvars": HOSTS}


def replay(tokens_per_s):
    return {"total": {"tokens_per_s": tokens_per_s, "requests_per_min": 30.0, "errors": 0, "errors_by_status": {},
                      "ttft_seconds": {"p95": 0.2}, "tpot_seconds": {"p95": 0.03}},
            "in_flight_bound": {"requests_not_sent": 0}}


def run(args, variables=None, check_mode=False):
    return run_action(ActionModule, "topology_advice", args, dict(VARIABLES, **(variables or {})),
                      check_mode=check_mode)


def test_a_window_over_two_groupings_is_stored_and_ranked(tmp_path):
    store = str(tmp_path / "store")
    profile = {"total": {"window_seconds": 60.0, "arrival_rate_requests_per_s": 0.5,
                         "prompt_length_tokens": {"max_at_most": 1000}, "output_length_tokens": {"max_at_most": 100}}}
    assert run({"state": "profile", "store_dir": store, "profile": profile})["changed"] is True
    plan = run({"state": "plan", "store_dir": store, "current": "split"})["plan"]
    assert (plan["build"], plan["other"], plan["measure_start"], plan["measure_other"]) == ("b1", "replicas", True, True)
    assert plan["switch_report_file"] == "%s/switch-%s-replicas.json" % (store, plan["run"])
    recorded = run({"state": "record", "store_dir": store, "grouping": "split", "run": "r1",
                    "measured_load": replay(100.0)})
    assert recorded["changed"] is True and recorded["build"] == "b1" and recorded["lines"][0].startswith("split at")
    run({"state": "pending", "store_dir": store, "grouping": "replicas", "run": "r1",
         "switch_report_file": str(tmp_path / "switch.json")})
    run({"state": "record", "store_dir": store, "grouping": "replicas", "run": "r1", "measured_load": replay(150.0),
         "switch_report": {"outcome": "ok", "downtime": 33.0}})
    assert run({"state": "plan", "store_dir": store, "current": "split"})["plan"]["stored"] == ["replicas", "split"]
    ranked = run({"state": "rank", "store_dir": store, "current": "split"})
    assert "failed" not in ranked, ranked
    assert ranked["advice"]["recommendation"]["grouping"] == "replicas"
    assert ranked["advice"]["site"]["long_context_need_tokens"] == 1100
    assert "recommendation: replicas" in ranked["lines"]
    saved = json.loads((tmp_path / "store" / "advice.json").read_text())
    assert saved["rows"][0]["switch_seconds_without_model"] == 33.0


def test_a_switch_that_ended_the_run_is_reported_from_its_report(tmp_path):
    store = str(tmp_path)
    report = tmp_path / "switch-r1-replicas.json"
    report.write_text(json.dumps({"outcome": "rolled_back", "reason": "spark-b: gate 40 < 80"}))
    run({"state": "record", "store_dir": store, "grouping": "split", "measured_load": replay(100.0)})
    run({"state": "pending", "store_dir": store, "grouping": "replicas", "run": "r1", "switch_report_file": str(report)})
    advice = run({"state": "rank", "store_dir": store, "current": "split"})["advice"]
    assert advice["rows"][0]["excluded"] == "switch failed: outcome rolled_back (run r1): spark-b: gate 40 < 80"
    assert advice["recommendation"]["grouping"] == "split"


@pytest.mark.parametrize("check_mode", [True, False])
def test_check_mode_writes_nothing(tmp_path, check_mode):
    result = run({"state": "record", "store_dir": str(tmp_path), "grouping": "split", "measured_load": replay(1.0)},
                 check_mode=check_mode)
    assert result["changed"] is True and (tmp_path / "results.json").exists() is not check_mode


@pytest.mark.parametrize("variables, words", [
    ({"hostvars": {"spark-a": {"tool_gate_build": {"id": "b1"}}}}, "no tool gate build id for spark-b"),
    ({}, "which is none of the groupings"),
])
def test_refusals_say_what_to_do(tmp_path, variables, words):
    current = "split" if variables else "4+1"
    result = run({"state": "plan", "store_dir": str(tmp_path), "current": current}, variables)
    assert result["failed"] is True and result["msg"].startswith("topology_advice plan: ") and words in result["msg"]


def test_a_store_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    result = run({"state": "rank", "store_dir": str(tmp_path), "current": "split"})
    assert result["failed"] is True and "is not a topology results store" in result["msg"]


def test_a_state_without_its_options_is_refused():
    with pytest.raises(AnsibleActionFail, match="state=record needs grouping, measured_load"):
        run({"state": "record", "store_dir": "/nowhere"})


def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("topology_advice", ARGUMENT_SPEC)


@pytest.mark.parametrize("apply, return_to, switch_back", [(False, "split", True), (True, "replicas", False)])
def test_a_window_returns_to_its_start_unless_told_to_apply(tmp_path, apply, return_to, switch_back):
    store = str(tmp_path)
    run({"state": "record", "store_dir": store, "grouping": "split", "measured_load": replay(100.0)})
    run({"state": "record", "store_dir": store, "grouping": "replicas", "measured_load": replay(150.0)})
    result = run({"state": "rank", "store_dir": store, "current": "replicas", "start": "split", "apply": apply})
    assert (result["return_to"], result["switch_back"]) == (return_to, switch_back)


def test_the_store_defaults_to_one_per_site_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run({"state": "profile", "profile": {"total": {}}}, {"inventory_dir": "/src/inventory/lab"})
    assert result["store_dir"] == str(tmp_path / ".factory_floor" / "workload" / "lab")
    assert (tmp_path / ".factory_floor" / "workload" / "lab" / "profile.json").exists()
    assert run({"state": "read"}, {"workload_store_dir": str(tmp_path / "x")})["store_dir"] == str(tmp_path / "x")


def test_read_gives_the_replay_its_profile_and_the_engines_model(tmp_path):
    hosts = {"spark-a": {"vllm_served_model_name": "", "vllm_model": "/models/m", "vllm_max_model_len": 4096},
             "spark-b": {}}
    missing = run({"state": "read", "store_dir": str(tmp_path)}, {"hostvars": hosts})
    assert missing["failed"] is True and "run workload_profile.yml first" in missing["msg"]
    (tmp_path / "profile.json").write_text('{"total": {}}')
    found = run({"state": "read", "store_dir": str(tmp_path)}, {"hostvars": hosts})
    assert (found["profile"], found["model"], found["max_model_len"]) == ({"total": {}}, "/models/m", 4096)


@pytest.mark.parametrize("variables, url", [
    ({}, "http://127.0.0.1:8080/v1"),
    ({"site_proxy_port": 8443, "nginx_proxy_tls_certificate": "/etc/ssl/llm.pem", "inventory_hostname": "gateway"},
     "https://gateway:8443/v1"),
    ({"nginx_proxy_tls_certificate": "/c.pem", "nginx_proxy_tls_server_name": "llm.example.org"},
     "https://llm.example.org:8080/v1"),
    ({"workload_replay_url": "http://10.0.0.5:8080"}, "http://10.0.0.5:8080"),
])
def test_the_replay_goes_to_the_proxy_as_the_probe_client_reaches_it(tmp_path, variables, url):
    (tmp_path / "profile.json").write_text("{}")
    assert run({"state": "read", "store_dir": str(tmp_path)}, variables)["url"] == url


@pytest.mark.parametrize("split_kv, replicas_kv, smallest, excluded", [
    ([8192], [600, 700], {"split": 8192, "replicas": 600}, {"replicas"}),  # a replica holds less than the need
    ([8192], [4000, None], {"split": 8192, "replicas": None}, set()),  # an engine that does not say: no figure
    (None, None, {"split": None, "replicas": None}, set()),
])
def test_each_groups_kv_cache_is_stored_and_compared_with_the_long_context_need(tmp_path, split_kv, replicas_kv,
                                                                                smallest, excluded):
    store = str(tmp_path)
    profile = {"total": {"window_seconds": 60.0, "arrival_rate_requests_per_s": 0.5,
                         "prompt_length_tokens": {"max_at_most": 1000}, "output_length_tokens": {"max_at_most": 100}}}
    run({"state": "profile", "store_dir": store, "profile": profile})
    run({"state": "record", "store_dir": store, "grouping": "split", "measured_load": replay(100.0),
         "kv_tokens": split_kv})
    run({"state": "record", "store_dir": store, "grouping": "replicas", "measured_load": replay(150.0),
         "kv_tokens": replicas_kv})
    rows = {row["grouping"]: row for row in run({"state": "rank", "store_dir": store, "current": "split"})["advice"]["rows"]}
    assert {name: row["kv_tokens_smallest_group"] for name, row in rows.items()} == smallest
    assert {name for name, row in rows.items() if not row["holds_need"]} == excluded
