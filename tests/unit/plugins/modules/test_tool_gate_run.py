# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.tool_gate_run`` through its action plugin, one test per outcome of each step: the test run
is stood in for (``run_test``), the scores kept in a temporary store. A whole run of the steps through
ansible-playbook, with tool_call_test's own action, is tests/unit/roles/test_tool_gate_run.py; the sentences are
tests/unit/plugins/module_utils/test_tool_gate_notes.py's and test_tool_gate_verdict.py's."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action import tool_gate_run
from ansible_collections.factory_floor.llm.plugins.action.tool_gate_run import ActionModule

BUILD = {"id": "0123456789abcdef0123456789", "parts": {}}
RUN = {"score": 80.0, "passed_count": 4, "total": 5, "suite_digest": "d" * 64, "failed_cases": [{"id": "c5"}], "repeat": 1,
       "run_scores": [80.0], "flipped_cases": [], "results": [], "elapsed": 3}


def variables(store, **changes):
    found = dict(inventory_hostname="spark-a", tool_gate_topology="replicas", tool_gate_topologies=["replicas"],
                 _tool_gate_topology_gated=trust_as_template(
                     "{{ tool_gate_topology | length == 0 or tool_gate_topology in tool_gate_topologies }}"),
                 _tool_gate_id_chars=16, tool_gate_build=BUILD, tool_gate_model_path="/models/m",
                 tool_gate_url="http://127.0.0.1:8000", tool_gate_min_score=30, tool_gate_tolerance=5,
                 tool_gate_incumbent_build_id="", tool_gate_concurrency=1, tool_gate_store_dir=str(store),
                 tool_gate_measure_incumbent=True, tool_gate_gated=True, tool_gate_compare_own_build=False,
                 _tool_gate_failed_dir=trust_as_template("{{ tool_gate_store_dir }}/failed"))
    found.update(changes)
    return found


def run(args, task_vars, check_mode=False, test_run=None):
    """The plugin's result, with ``test_run`` (RUN by default) as what tool_call_test returned; the runs asked."""
    task = mock.MagicMock(args=args, check_mode=check_mode, async_val=0, action="factory_floor.llm.tool_gate_run")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    templar = Templar(loader=DataLoader(), variables=task_vars)
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), templar, None)
    asked = []

    def fake_test(suites, validate_only, _task_vars):
        asked.append(validate_only)
        outcome = dict(test_run or RUN)
        if outcome.get("failed"):
            raise tool_gate_run.StepFailed(outcome)
        action.known["__tool_gate_run"] = outcome
        return outcome

    action.run_test = fake_test
    return action.run(task_vars=task_vars), asked


def stored(store):
    return sorted(os.path.relpath(os.path.join(where, name), store)
                  for where, _dirs, names in os.walk(store) for name in names)


def test_a_plan_with_nothing_stored_measures(tmp_path):
    result, asked = run({"step": "plan"}, variables(tmp_path))
    assert asked == [True]
    assert result["measure"] is True and result["found"] is None and result["message"] == ""
    assert result["suite_digest"] == "d" * 64 and result["changed"] is False


def test_a_plan_for_a_topology_left_out_says_why_it_does_not_measure(tmp_path):
    result, _asked = run({"step": "plan"}, variables(tmp_path, tool_gate_topology="split"))
    assert result["measure"] is False
    assert "not measured: its topology is not in tool_gate_topologies (replicas)." in result["message"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_incumbent_is_measured_and_stored_unless_checking(tmp_path, check_mode):
    result, asked = run({"step": "incumbent", "plan": {"measure": True, "found": None}}, variables(tmp_path),
                        check_mode=check_mode)
    assert asked == [False] and result["changed"] is True
    assert result["value"]["score"] == 80.0 and result["value"]["measured_now"] is True
    assert len(stored(tmp_path)) == (0 if check_mode else 1)
    if not check_mode:
        plan, _asked = run({"step": "plan"}, variables(tmp_path))
        assert plan["measure"] is False and plan["found"]["score"] == 80.0


def test_an_incumbent_with_a_stored_score_is_not_run_again(tmp_path):
    result, asked = run({"step": "incumbent", "plan": {"measure": False, "found": {"score": 60.0}}}, variables(tmp_path))
    assert asked == [] and result["changed"] is False
    assert result["value"]["score"] == 60.0 and result["value"]["measured_now"] is False


def test_a_candidate_that_passes_is_stored_as_its_builds_score(tmp_path):
    result, _asked = run({"step": "candidate"}, variables(tmp_path))
    assert result["value"]["passed"] is True and result["message"] == result["value"]["message"]
    assert stored(tmp_path) == [os.path.relpath(result["value"]["record_file"], tmp_path)]
    with open(result["value"]["record_file"], encoding="utf-8") as handle:
        assert json.load(handle)["passed"] is True


def test_a_candidate_below_its_own_builds_stored_score_fails_and_is_kept_apart(tmp_path):
    run({"step": "incumbent", "plan": {"measure": True, "found": None}}, variables(tmp_path),
        test_run=dict(RUN, score=100.0, passed_count=5, failed_cases=[]))
    result, _asked = run({"step": "candidate"}, variables(tmp_path, tool_gate_compare_own_build=True))
    assert result["value"]["passed"] is False and result["value"]["incumbent_score"] == 100.0
    assert result["value"]["incumbent_build_id"] == BUILD["id"]
    assert result["value"]["record_file"].startswith(str(tmp_path / "failed") + "/")


def test_a_candidate_the_gate_leaves_out_runs_nothing(tmp_path):
    # Such a host never ran the role's build_id step: no tool_gate_build to read.
    task_vars = variables(tmp_path, tool_gate_gated=False, tool_gate_topology="split")
    del task_vars["tool_gate_build"]
    result, asked = run({"step": "candidate"}, task_vars)
    assert asked == [] and result["changed"] is False and result["message"] == ""
    assert result["value"]["gated"] is False and result["value"]["passed"] is True


def test_the_spread_stores_nothing(tmp_path):
    result, asked = run({"step": "spread"}, variables(tmp_path))
    assert asked == [False] and result["value"]["run_scores"] == [80.0] and stored(tmp_path) == []


def test_a_failed_test_run_fails_the_step_with_its_result(tmp_path):
    result, _asked = run({"step": "candidate"}, variables(tmp_path),
                         test_run={"failed": True, "msg": "Tool-calling test against http://x stopped: HTTP 404"})
    assert result["failed"] is True and result["msg"] == "Tool-calling test against http://x stopped: HTTP 404"
    assert stored(tmp_path) == []


def test_a_variable_the_step_needs_is_named_when_missing(tmp_path):
    task_vars = variables(tmp_path)
    del task_vars["tool_gate_build"]
    with pytest.raises(AnsibleActionFail, match="tool_gate_run reads tool_gate_build"):
        run({"step": "plan"}, task_vars)


def test_the_test_is_asked_with_the_roles_settings_and_endpoint(tmp_path):
    task_vars = variables(tmp_path, tool_gate_categories=[], tool_gate_cases=["c1"], tool_gate_bfcl_limit=20,
                          tool_gate_bfcl_tool_choice="auto", tool_gate_timeout=120, tool_gate_temperature=0,
                          tool_gate_max_tokens=512, tool_gate_streaming=True, tool_gate_repeat=1,
                          tool_gate_progress_interval=30, tool_gate_bfcl_path="", tool_gate_bfcl_categories=[],
                          _tool_gate_endpoint={"url": "http://127.0.0.1:8000", "api_key": "k", "model": ""})
    task = mock.MagicMock(args={}, check_mode=True, async_val=0)
    action = ActionModule(task, mock.MagicMock(), mock.MagicMock(), DataLoader(),
                          Templar(loader=DataLoader(), variables=task_vars), None)
    args = action.test_args([{"cases": []}], True)
    assert args["url"] == "http://127.0.0.1:8000" and args["api_key"] == "k" and "model" not in args
    assert args["cases"] == ["c1"] and args["validate_only"] is True and args["suite"] == [{"cases": []}]
    assert "bfcl_path" not in args and "bfcl_categories" not in args


def known_run(tmp_path, build_found=None, **changes):
    """The incumbent step with tool_gate_candidate_model_path: the candidate's build id stood in for (BUILD's, or
    ``build_found`` as tool_gate_build returned it); the module arguments it was asked with."""
    asked_build = []

    def fake_module(self, module_name, module_args, task_vars):
        asked_build.append((module_name, module_args))
        return build_found or {"build": BUILD}

    task_vars = variables(tmp_path, tool_gate_candidate_model_path="/models/new", tool_gate_candidate_image="",
                          vllm_image_check={"image": {"id": "sha256:new"}}, _tool_gate_small_files=["*.json"],
                          _tool_gate_weight_files=["*.safetensors"], tool_gate_tool_call_parser="hermes",
                          tool_gate_chat_template="", tool_gate_container_engine="docker", tool_gate_build_id="",
                          groups={"gb10": ["spark-a", "spark-b"]}, site_engine_group="gb10", **changes)
    with mock.patch.object(ActionModule, "_execute_module", fake_module):
        result, _asked = run({"step": "incumbent", "plan": {"measure": False, "found": {"score": 60.0},
                                                            "suite_digest": "d" * 64}}, task_vars)
    return result, asked_build


def test_the_incumbent_step_finds_the_candidates_build_that_passed_on_this_site(tmp_path):
    run({"step": "candidate"}, variables(tmp_path))  # BUILD passes on spark-a and is stored
    result, asked_build = known_run(tmp_path)
    assert result["known"]["known"] is True and result["known"]["score"] == 80.0 and result["known"]["host"] == "spark-a"
    assert result["known"]["why"].startswith("the build 0123456789abcdef passed the gate here on ")
    name, args = asked_build[0]
    assert name == "factory_floor.llm.tool_gate_build" and args["model_path"] == "/models/new"
    assert args["container_image"] == "sha256:new" and args["container_engine"] == "/usr/bin/docker"


def test_a_score_stored_on_another_sites_host_does_not_make_the_build_known(tmp_path):
    run({"step": "candidate"}, variables(tmp_path, inventory_hostname="elsewhere"))
    result, _asked = known_run(tmp_path)
    assert result["known"]["known"] is False and "never gated here" in result["known"]["why"]


def test_admitting_known_builds_off_looks_nothing_up(tmp_path):
    result, asked_build = known_run(tmp_path, tool_gate_admit_known_builds=False)
    assert asked_build == [] and result["known"]["known"] is False and result["known"]["admit"] is False
    assert "tool_gate_admit_known_builds is false" in result["known"]["why"]


def test_without_a_candidate_model_nothing_is_looked_up(tmp_path):
    result, _asked = run({"step": "incumbent", "plan": {"measure": False, "found": {"score": 60.0}}}, variables(tmp_path))
    assert result["known"] == {}


def test_a_candidate_build_that_cannot_be_identified_is_named(tmp_path):
    with pytest.raises(AnsibleActionFail, match="Could not identify the candidate build /models/new: no such directory"):
        known_run(tmp_path, build_found={"failed": True, "msg": "no such directory"})


def test_a_candidates_verdict_says_when_its_gate_started(tmp_path):
    with mock.patch.object(tool_gate_run.time, "time", return_value=1000.0):
        result, _asked = run({"step": "candidate"}, variables(tmp_path))
    assert result["value"]["started_at"] == 1000.0


# Issue 37: a suite split over the new engines (tool_gate_share_hosts): each runs its share, the union step judges all.
SELECTED = ["c1", "c2", "c3", "c4"]


def share_action(task_vars, passed=("c1", "c2", "c3", "c4")):
    """An action whose test run stands in for tool_call_test: validate-only gives the whole selection, a run the
    cases its patterns match; the patterns each run was asked with."""
    task = mock.MagicMock(args={"step": "candidate"}, check_mode=False, async_val=0,
                          action="factory_floor.llm.tool_gate_run")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(),
                          Templar(loader=DataLoader(), variables=task_vars), None)
    asked = []

    def fake_test(suites, validate_only, _task_vars, cases=None):
        asked.append((validate_only, cases))
        if validate_only:
            return {"selected": SELECTED, "suite_digest": "d" * 64, "total": 4}
        ids = [case_id for case_id in SELECTED if case_id in (cases or [])]
        outcome = {"results": [{"id": c, "category": "simple", "passed": c in passed, "latency": 1.0} for c in ids],
                   "failed_cases": [{"id": c} for c in ids if c not in passed], "suite_digest": "e" * 64,
                   "url": "http://127.0.0.1:8000", "model": "m", "suite_name": "default", "repeat": 1}
        action.known["__tool_gate_run"] = outcome
        return outcome

    action.run_test = fake_test
    return action, asked


def test_each_engine_of_a_split_suite_runs_its_share_and_stores_nothing(tmp_path):
    task_vars = variables(tmp_path, tool_gate_share_hosts=["spark-a", "spark-b"], inventory_hostname="spark-b")
    action, asked = share_action(task_vars)
    result = action.run(task_vars=task_vars)
    assert asked == [(True, None), (False, ["c2", "c4"])]
    assert result["value"]["passed"] is None and result["value"]["share"]["cases"] == ["c2", "c4"]
    assert result["value"]["selected"] == SELECTED and result["value"]["suite_digest"] == "d" * 64
    assert result["changed"] is False and stored(tmp_path) == []


def test_a_host_not_among_the_share_hosts_runs_the_whole_suite(tmp_path):
    result, asked = run({"step": "candidate"}, variables(tmp_path, tool_gate_share_hosts=["spark-b", "spark-c"]))
    assert asked == [False] and result["value"]["passed"] is True and "share" not in result["value"]


def shares_registered(tmp_path, passed):
    """Both hosts' candidate step, as each registered it (__tool_gate_verdict)."""
    registered = {}
    for host in ("spark-a", "spark-b"):
        task_vars = variables(tmp_path, tool_gate_share_hosts=["spark-a", "spark-b"], inventory_hostname=host)
        action, _asked = share_action(task_vars, passed)
        registered[host] = action.run(task_vars=task_vars)
    return registered


def union(tmp_path, registered, host="spark-a", **changes):
    task_vars = variables(tmp_path, inventory_hostname=host, __tool_gate_verdict=registered.get(host, {}),
                          hostvars={name: {"__tool_gate_verdict": one} for name, one in registered.items()}, **changes)
    result, _asked = run({"step": "union"}, task_vars)
    return result


def test_the_union_of_the_shares_is_judged_and_stored_as_a_whole_run(tmp_path):
    registered = shares_registered(tmp_path, passed=("c1", "c2", "c3"))
    result = union(tmp_path, registered)
    value = result["value"]
    assert value["score"] == 75.0 and value["total"] == 4 and value["failed_cases"] == ["c4"]
    assert value["passed"] is True and value["suite_digest"] == "d" * 64
    assert value["shares"]["spark-b"]["cases"] == ["c2", "c4"] and value["started_at"] is not None
    assert value["message"].endswith(" The suite was split over the new engines (cases each: spark-a 2, spark-b 2), each "
                                     "case alone on its engine; this verdict is over all of them.")
    assert stored(tmp_path) == [os.path.relpath(value["record_file"], tmp_path)] and result["changed"] is True


def test_a_union_below_the_bar_fails_on_every_share_host(tmp_path):
    registered = shares_registered(tmp_path, passed=("c1",))
    for host in ("spark-a", "spark-b"):
        value = union(tmp_path, registered, host)["value"]
        assert value["passed"] is False and value["score"] == 25.0 and "below min_score 30.0" in value["message"]


def test_a_share_that_did_not_run_is_no_verdict(tmp_path):
    registered = shares_registered(tmp_path, passed=SELECTED)
    registered["spark-b"] = {"failed": True, "msg": "Tool-calling test against http://x stopped: HTTP 404"}
    value = union(tmp_path, registered)["value"]
    assert value["passed"] is False
    assert value["message"] == ("Tool-calling gate on spark-a: no verdict over the split suite: spark-b's share did not "
                                "run: Tool-calling test against http://x stopped: HTTP 404.")


def test_without_a_share_the_union_step_passes_the_verdict_on(tmp_path):
    verdict, _asked = run({"step": "candidate"}, variables(tmp_path))
    result = union(tmp_path, {"spark-a": verdict})
    assert result["value"] == verdict["value"] and result["message"] == verdict["message"] and not result["changed"]
