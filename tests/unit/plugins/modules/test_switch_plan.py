# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.switch_plan``."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.modules import switch_plan as module

ARGS = {
    "topology": "replicas",
    "engines": ["spark-a", "spark-b"],
    "head": "spark-a",
    "units": {"spark-a": ["active", "inactive"], "spark-b": ["active", "inactive"]},
    "drains": [{"spark-b": "switch-to-replicas"}],
    "gated": True,
    "startup": {"replicas": "93.5"},
}


@pytest.mark.parametrize("check_mode", [False, True])
def test_interrupted_switch_is_finished(run_module, check_mode):
    code, result = run_module(module, dict(ARGS, _ansible_check_mode=check_mode))
    assert code == 0, result
    assert result["changed"] is False
    assert (result["on_target"], result["heal"], result["heal_hosts"], result["gated"]) == (True, True, ["spark-b"], True)
    # No verdict yet: gated, nobody is undrained.
    assert result["gate_hosts"] == ["spark-b"] and result["undrain"] == []
    code, result = run_module(module, dict(ARGS, notes={"spark-b": {"gate": {"passed": True}}}))
    assert result["undrain"] == ["spark-b"]
    assert result["announcement"].startswith("Already on replicas, but spark-b is still drained")


def test_after_a_failed_gate(run_module):
    code, result = run_module(module, dict(ARGS, failed=["spark-b"]))
    assert code == 0, result
    assert (result["rollback"], result["heal_left"], result["expected_in_rotation"]) == (False, ["spark-b"], ["spark-a"])


BEHIND = {host: {"record": {"topology": "split", "model": "/m/S"}, "runs": "replicas"} for host in ("spark-a", "spark-b")}


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_switch_killed_after_admission_owes_its_gate(run_module, check_mode):
    # On replicas, nothing drained, both records still name split: the killed switch's gate is owed, run while they serve.
    code, result = run_module(module, dict(ARGS, drains=[{}], records=BEHIND, min_score=20,
                                           _ansible_check_mode=check_mode))
    assert code == 0, result
    assert (result["on_target"], result["heal"], result["records_behind"], result["owed_gate"]) == (True, False, True, True)
    assert (result["gated"], result["gate_mode"], result["gate_hosts"]) == (True, "after_admission", ["spark-a", "spark-b"])
    assert "Running the gate it owes (owed gate)" in result["announcement"]
    assert any(line.startswith("Owed gate: ") for line in result["dry_run"])
    code, result = run_module(module, dict(ARGS, drains=[{}], records=BEHIND, min_score=20,
                                           notes={"spark-b": {"failed": True, "gate": {"passed": False}}}))
    assert (result["rollback"], result["proxy_drain"]) == (True, {"hosts": ["spark-a", "spark-b"], "state": "present"})


UPGRADE = {"procedure": "upgrade", "engines": ["spark-a", "spark-b"], "target": "/models/New",
           "replicas": {"spark-a": {"running": "/models/New", "model": "/models/New", "image": ""},
                        "spark-b": {"running": "/models/Old", "model": "/models/New", "image": ""}},
           "notes": {"spark-b": {"failed": True}}}


PLAN = {"topology": "replicas", "on_target": False, "rollback": False, "lost_hosts": ["spark-b"]}
RECORD = {"procedure": "record", "engines": ["spark-a", "spark-b"], "plan": PLAN,
          "records": {"spark-a": {"record": {"topology": "split", "model": "/m/S"}, "runs": "replicas"}},
          "models": {"replicas": "/m/R", "split": "/m/S"}}


@pytest.mark.parametrize("args, procedure", [(ARGS, "switch"), (UPGRADE, "upgrade"), (RECORD, "record")])
def test_every_returned_key_is_documented(run_module, args, procedure):
    code, result = run_module(module, args)
    assert code == 0, result
    documented = yaml.safe_load(module.RETURN)
    expected = {k for k, v in documented.items()
                if v["returned"] == "always" or "O(procedure=%s)" % procedure in v["returned"]}
    assert set(result) - {"changed", "invocation", "warnings", "deprecations"} == expected


def test_record_decides_every_host_at_once(run_module):
    code, result = run_module(module, RECORD)
    assert code == 0, result
    assert result["write"] == {"spark-a": {"topology": "replicas", "model": "/m/R", "note": ""}}
    assert result["unrecorded"] == {"spark-b": "lost from the run (unreachable or failed)"}


def test_record_needs_the_switch_plan(run_module):
    code, result = run_module(module, dict(RECORD, plan={"topology": "replicas"}))
    assert code == 1 and "it lacks on_target, rollback" in result["msg"]


def test_a_lost_host_and_the_gate_bar_reach_the_plan(run_module):
    args = dict(ARGS, drains=[], units={"spark-a": ["inactive", "active"], "spark-b": ["inactive", "active"]},
                play_hosts=["spark-a", "gateway"], min_score=0,
                notes={"spark-a": {"gate": {"passed": True}}, "spark-b": {"gate": {"passed": True}}})
    code, result = run_module(module, args)
    assert code == 0, result
    assert (result["lost_hosts"], result["undrain"], result["rollback"]) == (["spark-b"], ["spark-a"], False)
    assert result["refusal"].startswith("The tool-calling gate has no bar for replicas")


def test_a_switch_names_the_model_its_new_topology_serves(run_module):
    """Issue 35: the split may serve another directory (vllm_split_model) under the same served name."""
    args = dict(ARGS, topology="split", drains=[], models={"replicas": "/m/Smol", "split": "/m/tiny"},
                served_model_name="lab-chat", _ansible_check_mode=True)
    code, result = run_module(module, args)
    assert code == 0, result
    [starts] = [line for line in result["dry_run"] if line.startswith("Starts:")]
    assert " with /m/tiny as lab-chat, rendered" in starts
    assert starts.endswith("Another model: the split serves /m/tiny (vllm_split_model), not /m/Smol which the replicas "
                           "serve now, under the same name lab-chat: clients that ask for lab-chat get its answers.")


def test_upgrade(run_module):
    code, result = run_module(module, UPGRADE)
    assert code == 0, result
    assert (result["todo"], result["stop"], result["roll_back"]) == (["spark-b"], True, [])
    assert result["announcement"].startswith("Upgrading spark-b to /models/New, one replica at a time.")


def test_upgrade_words_the_target_from_model_and_image(run_module):
    args = dict(UPGRADE, target="", model="/models/New", image="vllm/vllm-openai:v2")
    code, result = run_module(module, args)
    assert code == 0, result
    assert result["target"] == "/models/New on image vllm/vllm-openai:v2"
    assert result["announcement"].startswith("Upgrading spark-b to /models/New on image vllm/vllm-openai:v2,")


def test_a_switch_needs_its_topology_and_head(run_module):
    code, result = run_module(module, {"engines": ["spark-a"]})
    assert code == 1 and "topology, head" in result["msg"]


@pytest.mark.parametrize("args, words", [
    ({"head": "spark-c"}, "head spark-c is not one of the engine hosts spark-a, spark-b"),
    ({"startup": {"replicas": "soon"}}, "startup must map names to seconds"),
    ({"topology": "both"}, "topology"),
])
def test_bad_input_fails_naming_it(run_module, args, words):
    code, result = run_module(module, dict(ARGS, **args))
    assert code == 1 and words in result["msg"]


def test_a_failed_host_does_not_fail_the_task(run_module):
    # Ansible reads a result's "failed" key as the task's failure: the plan of a switch whose
    # new engine failed (a rollback) must still come back as a plan.
    code, result = run_module(module, dict(ARGS, drains=[], failed=["spark-b"],
                                           units={"spark-a": ["inactive", "active"], "spark-b": ["inactive", "active"]}))
    assert code == 0, result
    assert "failed" not in result
    assert (result["rollback"], result["failed_hosts"], result["serving_topology"]) == (True, ["spark-b"], "split")


# ---------------------------------------------------------------- no procedure restart: rolling_restart_plan decides

def test_a_restart_is_not_a_procedure_any_more(run_module):
    # A replica's turn in the rolling restart is factory_floor.llm.rolling_restart_plan's (tests/unit/plugins/modules/
    # test_rolling_restart_plan.py, module_utils/test_restart_plan.py).
    code, result = run_module(module, {"procedure": "restart", "engines": ["spark-a", "spark-b"]})
    assert code == 1 and "procedure" in result["msg"] and "restart" in result["msg"], result


# --- read_hosts: the action plugin reads what the hosts hold (issue 36) -----------------------------------------

# The variables a switch's tasks see (the plugin reads those the task does not give).
TASK_VARS = {"ansible_play_hosts": ["spark-a", "spark-b", "proxy-1"], "playbook_dir": "/pb",
             "vllm_served_model_name": "", "_vllm_topologies": {"replicas": {"model": ""}, "split": {"model": ""}}}


def through_the_action(run_module, task_args, hostvars, task_vars=None):
    """The module's result as the task gets it, through plugins/action/switch_plan.py; and the arguments it got.
    ``task_vars``: the variables the task sees (``TASK_VARS`` by default)."""
    from unittest import mock

    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from ansible_collections.factory_floor.llm.plugins.action.switch_plan import ActionModule

    task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.switch_plan",
                          args=task_args)
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    templar = Templar(loader=DataLoader(), variables=TASK_VARS if task_vars is None else task_vars)
    action = ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), templar, mock.MagicMock())
    runs = []

    def execute(module_name=None, module_args=None, task_vars=None, **kwargs):
        runs.append(dict(module_args))
        return run_module(module, module_args).result

    action._execute_module = execute
    return action.run(task_vars={"hostvars": hostvars}), runs


HOSTVARS = {
    "spark-a": {"__vllm_switch_units": {"stdout_lines": ["active", "inactive"]}, "tool_gate_gated": True,
                "__vllm_switch_record_seen": {"record": {"topology": "split", "model": "/m/S"}, "runs": "replicas"}},
    "spark-b": {"__vllm_switch_units": {"stdout_lines": ["active", "inactive"]},
                "maintenance_window_host": {"gate": {"passed": True}}},
    "proxy-1": {"nginx_proxy_drained": {"spark-b": "switch-to-replicas"}, "nginx_proxy_rotation": {"in_rotation": []}},
}


def test_a_switch_read_read_hosts_decides_as_one_given_its_inputs(run_module):
    read = {"topology": "replicas", "engines": ["spark-a", "spark-b"], "head": "spark-a", "startup": {"replicas": "93.5"},
            "read_hosts": True, "proxies": ["proxy-1"], "incumbent_host": ""}
    result, runs = through_the_action(run_module, read, HOSTVARS)
    given = run_module(module, dict(ARGS, notes={"spark-b": {"gate": {"passed": True}}},
                                    records={"spark-a": {}, "spark-b": {}})).result
    assert not set(runs[0]) & {"read_hosts", "proxies", "incumbent_host"}
    assert runs[0]["units"] == ARGS["units"] and runs[0]["drains"] == ARGS["drains"] and runs[0]["gated"] is True
    for key in ("announcement", "undrain", "gate_hosts", "heal_hosts", "on_target"):
        assert result[key] == given[key], key
    # What the task gives is not read.
    _result, runs = through_the_action(run_module, dict(read, gated=False), HOSTVARS)
    assert runs[0]["gated"] is False


def test_the_records_read_read_hosts(run_module):
    args = dict({k: v for k, v in RECORD.items() if k != "records"}, read_hosts=True)
    result, runs = through_the_action(run_module, args, HOSTVARS)
    assert runs[0]["records"] == {"spark-a": HOSTVARS["spark-a"]["__vllm_switch_record_seen"], "spark-b": {}}
    assert result == run_module(module, dict(RECORD, records=runs[0]["records"])).result


def test_the_plugins_options_are_refused_where_they_do_not_apply(run_module):
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="reads proxies only with read_hosts: true"):
        through_the_action(run_module, dict(ARGS, proxies=["proxy-1"]), HOSTVARS)
    with pytest.raises(AnsibleActionFail, match="for the procedures switch, move, upgrade and record, not teleport"):
        through_the_action(run_module, dict(UPGRADE, procedure="teleport", read_hosts=True), HOSTVARS)
    # Without read_hosts, the module gets the task's arguments as they are.
    result, runs = through_the_action(run_module, dict(ARGS), HOSTVARS)
    assert runs == [ARGS] and result["heal_hosts"] == ["spark-b"]


def test_a_model_upgrade_reads_the_scores_notes_and_bar_from_hostvars(run_module):
    hostvars = {"spark-a": {"tool_gate_incumbent": {"score": 91.0}},
                "spark-b": {"tool_gate_bar": {"min_score": 0}, "maintenance_window_host": {"failed": True}}}
    args = {key: value for key, value in UPGRADE.items() if key != "notes"}
    _result, runs = through_the_action(run_module, dict(args, read_hosts=True), hostvars)
    assert runs == [dict(args, incumbents={"spark-a": {"score": 91.0}, "spark-b": {}}, min_score=0,
                         notes={"spark-a": {}, "spark-b": {"failed": True}})]


def test_a_switch_and_its_records_read_the_variables_they_run_with(run_module):
    """roles/topology_switch gives only read_hosts: the plugin reads switch_to, the groups, the split's head, the
    start-ups, the play's hosts and the models as the task sees them; an option the task gives is not read."""
    task_vars = dict(TASK_VARS, switch_to="replicas", site_engine_group="gb10", site_proxy_group="proxy",
                     groups={"gb10": ["spark-a", "spark-b"], "proxy": ["proxy-1"]},
                     maintenance_window_startup={"replicas": "93.5"}, vllm_served_model_name="llm",
                     _vllm_topologies={"replicas": {"model": "/m/R"}, "split": {"model": "/m/S"}})
    _result, runs = through_the_action(run_module, {"read_hosts": True}, HOSTVARS, task_vars)
    read = {key: runs[0][key] for key in ("topology", "engines", "head", "startup", "play_hosts", "playbook_dir",
                                          "models", "served_model_name")}
    assert read == {"topology": "replicas", "engines": ["spark-a", "spark-b"], "head": "spark-a",
                    "startup": {"replicas": "93.5"}, "play_hosts": ["spark-a", "spark-b", "proxy-1"],
                    "playbook_dir": "/pb", "models": {"replicas": "/m/R", "split": "/m/S"}, "served_model_name": "llm"}
    assert runs[0]["drains"] == [{"spark-b": "switch-to-replicas"}] and "incumbent_host" not in runs[0]
    # The split's head when the inventory names one, the previous decision's incumbent host, what the task gives.
    task_vars.update(vllm_split_head="spark-b", vllm_switch_plan={"incumbent": {"host": "spark-a"}})
    _result, runs = through_the_action(run_module, {"read_hosts": True, "startup": {}}, HOSTVARS, task_vars)
    assert runs[0]["head"] == "spark-b" and runs[0]["startup"] == {}
    # The records at the end of a switch: the engine hosts and the decision.
    task_vars["vllm_switch_plan"] = dict(RECORD["plan"])
    _result, runs = through_the_action(run_module, {"procedure": "record", "read_hosts": True}, HOSTVARS, task_vars)
    assert runs[0]["engines"] == ["spark-a", "spark-b"] and runs[0]["plan"] == RECORD["plan"]
    assert runs[0]["models"] == {"replicas": "/m/R", "split": "/m/S"}


def test_an_undefined_optional_variable_leaves_the_modules_default_and_a_required_one_is_an_error(run_module):
    from ansible.errors import AnsibleUndefinedVariable

    given = {"read_hosts": True, "topology": "replicas", "engines": ["spark-a", "spark-b"], "proxies": ["proxy-1"]}
    _result, runs = through_the_action(run_module, given, HOSTVARS, {})
    assert not set(runs[0]) & {"startup", "play_hosts", "playbook_dir", "served_model_name", "models"}
    assert runs[0]["head"] == "spark-a"
    with pytest.raises(AnsibleUndefinedVariable):
        through_the_action(run_module, {"read_hosts": True}, HOSTVARS, {})


# --- procedure move (move_groups.yml, issue 37) ------------------------------------------------------------------

ABC = ["spark-a", "spark-b", "spark-c"]
MOVE = {"procedure": "move", "engines": ABC, "head": "spark-a",
        "units": {host: ["active", "inactive"] for host in ABC}, "move_to": [["spark-a", "spark-b"], ["spark-c"]]}


def test_every_key_a_move_returns_is_documented(run_module):
    code, result = run_module(module, MOVE)
    assert code == 0, result
    documented = yaml.safe_load(module.RETURN)
    returned = set(result) - {"changed", "invocation", "warnings", "deprecations"}
    assert returned <= set(documented), returned - set(documented)


def test_a_move_plans_the_pair_and_leaves_the_replica_serving(run_module):
    code, result = run_module(module, MOVE)
    assert code == 0, result
    assert result["touched"] == ["spark-a", "spark-b"] and result["serving"] == [["spark-c"]]
    assert result["views"]["spark-b"]["split_hosts"] == ["spark-a", "spark-b"] and result["refusal"] == ""
    code, result = run_module(module, dict(MOVE, move_to=[["spark-a", "spark-b"]]))
    assert code == 0 and "spark-c is in the engine group" in result["refusal"]


def test_a_moves_records_hold_the_grouping(run_module):
    _code, done = run_module(module, MOVE)
    records = {host: {"record": {"topology": "replicas"}, "runs": runs}
               for host, runs in (("spark-a", "split"), ("spark-b", "split"), ("spark-c", "replicas"))}
    code, result = run_module(module, {"procedure": "record", "engines": ABC, "head": "spark-a", "plan": done.result
                                       if hasattr(done, "result") else done, "records": records})
    assert code == 0, result
    assert result["grouping"] == [["spark-a", "spark-b"], ["spark-c"]]
    assert result["write"]["spark-b"]["rank"] == 1 and result["write"]["spark-b"]["group"] == ["spark-a", "spark-b"]


def test_a_move_reads_its_procedure_target_and_grouping_from_the_tasks_variables(run_module):
    task_vars = dict(TASK_VARS, switch_procedure="move", site_engine_group="gb10", site_proxy_group="proxy",
                     groups={"gb10": ABC, "proxy": ["proxy-1"]}, move_to=[["spark-a"], ["spark-b", "spark-c"]],
                     site_engine_groups=[])
    hostvars = dict(HOSTVARS, **{"spark-c": {"__vllm_switch_units": {"stdout_lines": ["active", "inactive"]}}})
    result, runs = through_the_action(run_module, {"read_hosts": True}, hostvars, task_vars)
    assert runs[0]["procedure"] == "move" and runs[0]["move_to"] == [["spark-a"], ["spark-b", "spark-c"]]
    assert runs[0]["engines"] == ABC and runs[0]["head"] == "spark-a" and "members" not in runs[0]
    assert result["touched"] == ["spark-b", "spark-c"] and result["api_engines"] == ["spark-b"]
