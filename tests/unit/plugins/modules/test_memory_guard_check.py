# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.memory_guard_check`` through its action plugin: the role's variables read as the task sees them
(Ansible's own templar over the role's defaults and vars), ``gpu_memory_utilization`` run on the host with the
role's figures (once, and again at a pinned share), its documentation against its argument spec, and the role's
calls. The decisions themselves are tests/unit/plugins/module_utils/test_memory_guard_check.py's."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.memory_guard_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, documented_options, run_action_answering
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, role_variables

PLAN = {"changed": False, "gpu_memory_utilization": 0.8, "max_gpu_memory_utilization": 0.8, "start_need_gib": 103.0,
        "problems": [], "decision": None, "hosts": [{"device_total_gib": 121.7}], "reasoning": ["spark-a: 121.7 GiB"]}


def run(args, check_mode=False, results=(), drop=(), **inventory):
    """The action plugin's run over the role's variables; the module runs answer ``results`` in turn."""
    variables = role_variables("memory_guard")
    variables.update(inventory_hostname="spark-a", __memory_guard_model={"weights_gib": 23.67, "min_kv_gib": 6.0})
    variables.update(inventory)
    for name in drop:
        del variables[name]
    templar = with_filters(Templar(loader=DataLoader(), variables=variables))
    return run_action_answering(ActionModule, "memory_guard_check", args, variables, results, check_mode=check_mode,
                                templar=templar)


def test_the_preflight_reads_the_role_variables_and_runs_nothing_on_the_host():
    result, calls = run({"check": "preflight"})
    assert calls == [] and result["errors"] == [] and not result.get("failed")
    result, calls = run({"check": "preflight"}, memory_guard_watch_interval=0)
    assert calls == [] and result["failed"] and result["msg"].startswith("The watch needs memory_guard_watch_interval")


def test_compute_returns_the_computation_of_the_host():
    result, calls = run({"check": "compute", "engine_log": "Model loading took 23.5 GiB"}, results=[PLAN])
    ((module, args),) = calls
    assert module == "factory_floor.llm.gpu_memory_utilization"
    assert args["engine_log"] == "Model loading took 23.5 GiB" and args["running_unit"] == "vllm-replica.service"
    assert result["gpu_memory_utilization"] == 0.8 and "share" not in result


JOURNAL = {"changed": False, "rc": 0, "stdout": "Model loading took 23.5 GiB"}


def test_share_reads_the_engines_journal_on_the_host_first_also_in_check_mode():
    result, calls = run({"check": "share"}, check_mode=True, results=[JOURNAL, PLAN])
    (journal, journal_args), (module, args) = calls
    assert journal == "ansible.legacy.command" and journal_args["_uses_shell"] and journal_args["executable"] == "/bin/bash"
    assert "journalctl" in journal_args["_raw_params"] and "vllm-replica.service" in journal_args["_raw_params"]
    assert module == "factory_floor.llm.gpu_memory_utilization" and args["engine_log"] == JOURNAL["stdout"]
    assert result["share"]["applied"] == 0.8
    # No engine has run here: the journal read fails, the share is computed without it.
    result, calls = run({"check": "compute"}, results=[{"failed": True, "rc": 1, "stdout": ""}, PLAN])
    assert calls[1][1].get("engine_log", "") == "" and not result.get("failed")


def test_share_decides_and_computes_a_pin_again_at_the_pin():
    result, calls = run({"check": "share", "engine_log": ""}, results=[PLAN])
    assert len(calls) == 1 and result["share"]["applied"] == 0.8 and result["share"]["refusal"] == ""
    refused = {"failed": True, "msg": "0.9 leaves too little."}
    result, calls = run({"check": "share", "engine_log": ""}, results=[PLAN, refused], vllm_gpu_memory_utilization=0.9)
    assert calls[1][1]["gpu_memory_utilization"] == 0.9 and "running_unit" not in calls[1][1]
    assert result["share"]["refusal"].startswith("spark-a pins vllm_gpu_memory_utilization 0.9 in the inventory: 0.9 "
                                                 "leaves too little. Lower the pin")
    assert not result.get("failed")  # the role's assert fails, after it has shown the computation


def test_a_plan_refused_is_not_computed_again_at_the_pin_and_a_failed_computation_is_the_result():
    plan = dict(PLAN, problems=[{"what": "device total 121.70 GiB is 5.2 times MemTotal"}])
    result, calls = run({"check": "share", "engine_log": ""}, results=[plan], vllm_gpu_memory_utilization=0.9)
    assert len(calls) == 1 and "does not describe this host" in result["share"]["refusal"]
    result, calls = run({"check": "share", "engine_log": ""}, results=[{"failed": True, "msg": "the model does not fit"}])
    assert result["failed"] and result["msg"] == "the model does not fit" and "share" not in result


def test_outside_reads_the_registered_loop_and_runs_nothing_on_the_host():
    where = {"results": [{"item": {"unit": "a.service"}, "stdout": "Slice=system.slice\nActiveState=active"}]}
    result, calls = run({"check": "outside", "where": where})
    assert calls == [] and result["units"] == ["a.service"] and result["message"].startswith("Running outside")


WORKLOADS = [{"name": "db", "unit": "postgresql.service", "peak_gib": 8},
             {"name": "builds", "slice": "factory-floor-workloads-builds.slice", "peak_gib": 4}]


def test_outside_reads_where_each_workload_service_runs_on_the_host():
    shown = {"changed": False, "rc": 0, "stdout": "Slice=system.slice\nActiveState=active"}
    result, calls = run({"check": "outside"}, check_mode=True, results=[shown], memory_guard_workloads=WORKLOADS)
    assert calls == [("ansible.legacy.command", {"argv": ["systemctl", "show", "--property=Slice",
                                                          "--property=ActiveState", "postgresql.service"]})]
    assert result["units"] == ["postgresql.service"]
    with pytest.raises(AnsibleActionFail, match="memory_guard_check outside could not read the host: no systemctl"):
        run({"check": "outside"}, results=[{"failed": True, "msg": "no systemctl"}], memory_guard_workloads=WORKLOADS)


@pytest.mark.parametrize("check, patterns, paths", [
    ("stale", ["60-factory-floor-memory-guard.conf"], ["/etc/systemd/system/mysql.service.d/60-factory-floor-memory-guard.conf"]),
    ("installed", ["60-factory-floor-memory-guard.conf", "60-factory-floor-start-check.conf"],
     ["/etc/systemd/system/postgresql.service.d/60-factory-floor-memory-guard.conf",
      "/etc/systemd/system/mysql.service.d/60-factory-floor-memory-guard.conf",
      "/etc/systemd/system/factory-floor-workloads.slice"]),
])
def test_the_role_drop_ins_are_found_on_the_host(check, patterns, paths):
    found = {"changed": False, "files": [
        {"path": "/etc/systemd/system/postgresql.service.d/60-factory-floor-memory-guard.conf"},
        {"path": "/etc/systemd/system/mysql.service.d/60-factory-floor-memory-guard.conf"}]}
    result, calls = run({"check": check}, results=[found], memory_guard_workloads=WORKLOADS)
    assert calls == [("ansible.legacy.find", {"paths": ["/etc/systemd/system"], "patterns": patterns, "recurse": True,
                                              "depth": 2})]
    assert result["paths"] == paths and result["changed"] is False


def test_status_reads_the_watch_for_real_also_in_check_mode_and_never_fails():
    shown = {"changed": False, "rc": 0, "stdout": "Id=factory-floor-memory-guard.service\nActiveState=active"}
    result, calls = run({"check": "status", "plan": {"failed": True, "msg": "no model"}}, check_mode=True,
                        results=[shown, {"failed": True, "msg": "file not found"}])
    assert calls == [("ansible.legacy.command", {"argv": ["systemctl", "show", "-p",
                                                          "Id,LoadState,ActiveState,SubState,Result,UnitFileState",
                                                          "--", "factory-floor-memory-guard.service"]}),
                     ("ansible.legacy.slurp", {"src": "/run/factory-floor/memory-guard.json"})]
    assert not result.get("failed") and result["changed"] is False
    assert result["unit"] == shown["stdout"] and result["watch"] == ""
    assert result["share"] == {"failed": True, "msg": "no model"} and result["enabled"] in (True, False)


def test_an_undefined_variable_is_named():
    with pytest.raises(AnsibleActionFail, match="memory_guard_check preflight reads memory_guard_slice, which is not"):
        run({"check": "preflight"}, drop=["memory_guard_slice"])


def test_the_documentation_is_the_argument_spec_and_the_module_file_documentation_only():
    assert_documents_the_spec("memory_guard_check", ARGUMENT_SPEC)
    options, text = documented_options("memory_guard_check")
    assert options["check"]["choices"] == list(mg.CHECKS)
    assert "def main" not in text and "import" not in text.replace("from __future__ import annotations", "")


def test_the_role_runs_each_check_where_it_decided_before():
    where = set()
    for name in sorted(os.listdir(os.path.join(ROOT, "roles", "memory_guard", "tasks"))):
        with open(os.path.join(ROOT, "roles", "memory_guard", "tasks", name), encoding="utf-8") as handle:
            tasks = yaml.safe_load(handle) or []
        for task in tasks + [inner for task in tasks for inner in task.get("block") or []]:
            if "factory_floor.llm.memory_guard_check" in task:
                where.add((name, task["factory_floor.llm.memory_guard_check"]["check"]))
    assert where == {("preflight.yml", "preflight"), ("plan.yml", "share"), ("status.yml", "compute"),
                     ("move.yml", "outside"), ("files.yml", "files"), ("disable.yml", "installed"),
                     ("status.yml", "status")}
