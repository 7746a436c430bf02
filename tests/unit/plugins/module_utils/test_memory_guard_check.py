# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's preflight refusals and share decision (``_memory_guard_check``), over the role's own defaults and
vars as Ansible resolves them under an inventory: one row per refusal, the words the operator reads, and what the
share gives the engines and the start check."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

FIGURES = {"weights_gib": 23.67, "weights_source": "11 checkpoint file(s) in /m", "min_kv_gib": 6.0,
           "min_kv_source": "config.json in /m"}


def variables(check, **inventory):
    """What the action plugin reads for ``check``: each name resolved by Ansible's templar, as the task sees it."""
    found = role_variables("memory_guard")
    found.update(inventory_hostname="spark-a", __memory_guard_model=FIGURES)
    found.update(inventory)
    templar = with_filters(Templar(loader=DataLoader(), variables=found))
    return {name: templar.template(trust_as_template("{{ %s }}" % name)) for name in mg.VARIABLES[check]
            if name in found}


DB = {"name": "db", "unit": "postgresql.service", "peak_gib": 8}


def test_the_defaults_pass():
    assert mg.preflight(variables("preflight")) == []
    builds = dict(DB, name="builds", unit=None, slice="builds.slice")
    assert mg.preflight(variables("preflight", memory_guard_workloads=[DB, builds])) == []


@pytest.mark.parametrize("inventory", [
    dict(memory_guard_weights_gib=-1), dict(memory_guard_min_kv_gib=-0.5), dict(memory_guard_activation_gib=-1),
    dict(memory_guard_os_reserve_gib=-1), dict(memory_guard_headroom_gib=-2), dict(memory_guard_device_total_gib=0),
    # Nothing read from the model's files and nothing set: unknown.
    dict(__memory_guard_model={"skipped": True}),
])
def test_model_figures_and_reserves_are_refused_naming_each_variable(inventory):
    (error,) = mg.preflight(variables("preflight", **inventory))
    assert error["check"] == "figures"
    assert error["message"].startswith(
        "memory_guard_weights_gib (GiB the weights take once loaded; vLLM logs \"Model loading took ... GiB\") and "
        "memory_guard_min_kv_gib (the smallest KV cache the service needs, GiB) must be >= 0 for spark-a (null reads "
        "them from the model's files), and memory_guard_activation_gib, memory_guard_os_reserve_gib, "
        "memory_guard_headroom_gib >= 0 and memory_guard_device_total_gib > 0 or null. Now: weights ")


def test_the_figures_message_says_where_each_came_from():
    (error,) = mg.preflight(variables("preflight", memory_guard_headroom_gib=-2))
    assert error["message"].endswith("Now: weights 23.67 (11 checkpoint file(s) in /m), min KV 6.0 (config.json in "
                                     "/m), activations 2.0, OS reserve 4.0, headroom -2, device total 121.7.")
    (error,) = mg.preflight(variables("preflight", __memory_guard_model={"skipped": True}))
    assert "Now: weights  (unknown), min KV  (unknown)" in error["message"]


@pytest.mark.parametrize("inventory", [
    dict(memory_guard_slice="workloads"), dict(memory_guard_slice="system.slice"),
    dict(memory_guard_memory_high_ratio=0), dict(memory_guard_memory_high_ratio=1.5),
    dict(memory_guard_start_floor_gib=-1), dict(memory_guard_start_wait=-1), dict(memory_guard_start_need_gib=0),
])
def test_slice_and_start_check_settings_are_refused(inventory):
    (error,) = mg.preflight(variables("preflight", **inventory))
    assert error["check"] == "slice"
    assert error["message"].startswith("memory_guard_slice must be a slice of its own (a name ending in .slice, not "
                                       "one of systemd's: now ")
    assert error["message"].endswith("memory_guard_start_need_gib null or > 0 GiB (now %s)."
                                     % ("0" if "memory_guard_start_need_gib" in inventory else ""))


@pytest.mark.parametrize("inventory", [
    dict(memory_guard_watch_interval=0), dict(memory_guard_watch_floor_gib=-1), dict(memory_guard_watch_resume_gib=-1),
    dict(memory_guard_watch_settle=-1),
])
def test_watch_settings_are_refused(inventory):
    (error,) = mg.preflight(variables("preflight", **inventory))
    assert error["check"] == "watch"
    assert error["message"].startswith("The watch needs memory_guard_watch_interval > 0 s (now ")


@pytest.mark.parametrize("workload", [
    {"peak_gib": 8}, dict(DB, name=""), {"name": "db"}, dict(DB, peak_gib=0), dict(DB, slice="builds.slice"),
    dict(DB, unit="postgresql"), dict(DB, unit="vllm-replica.service"), dict(DB, unit=None, slice="builds"),
    dict(DB, unit=None, slice="factory-floor-workloads.slice"), dict(DB, unit=None, slice="user.slice"),
    dict(DB, memory_high_gib=9), dict(DB, memory_high_gib=-1), dict(DB, action="kill"),
])
def test_each_workload_that_cannot_be_placed_is_refused(workload):
    (error,) = mg.preflight(variables("preflight", memory_guard_workloads=[workload]))
    assert error["check"] == "workload"
    assert error["message"] == (
        "memory_guard_workloads on spark-a: workload %s must have a name and peak_gib > 0 (GiB, its peak - a build's "
        "peak while building), at most one of unit (a .service) and slice (a .slice other than memory_guard_slice "
        "factory-floor-workloads.slice itself and systemd's own; name it factory-floor-workloads-<name>.slice to place "
        "it inside), never a vLLM engine unit (vllm-replica.service, vllm-split.service: the model is never a "
        "co-resident workload), memory_high_gib, when given, in (0, peak_gib], and action, when given, stop or pause. "
        "Seen: %s." % (workload.get("name", "(no name)"), workload))


def test_a_workload_name_declared_twice_is_refused():
    (error,) = mg.preflight(variables("preflight", memory_guard_workloads=[DB, dict(DB, unit="mysql.service")]))
    assert error == {"check": "workload_names", "variables": ["memory_guard_workloads"],
                     "message": "memory_guard_workloads on spark-a declares a name twice: ['db', 'db']."}


def test_several_refusals_are_numbered():
    errors = mg.preflight(variables("preflight", memory_guard_watch_interval=0, memory_guard_slice="x"))
    assert [error["check"] for error in errors] == ["slice", "watch"]
    assert mg.format_errors(errors).startswith("(1) memory_guard_slice must be") and " (2) The watch" in \
        mg.format_errors(errors)


def test_the_module_arguments_keep_the_running_share_of_the_engine_this_run_configures():
    args = mg.module_args(variables("compute", topology="split"), "Model loading took 23 GiB")
    assert args["running_unit"] == "vllm-split.service" and float(args["hysteresis_gib"]) == 4.0
    assert args["engine_log"] == "Model loading took 23 GiB" and args["device_total_gib"] == 121.7
    assert args["weights_gib"] == 23.67 and args["min_kv_gib"] == 6.0
    assert mg.module_args(variables("compute", switch_to="replicas", topology="split"))["running_unit"] == \
        "vllm-replica.service"
    pinned = mg.module_args(variables("share", memory_guard_device_total_gib=None), gpu_memory_utilization=0.7)
    assert pinned["gpu_memory_utilization"] == 0.7 and "device_total_gib" not in pinned
    assert "running_unit" not in pinned and "engine_log" not in pinned


PLAN = {"gpu_memory_utilization": 0.8, "max_gpu_memory_utilization": 0.8, "start_need_gib": 103.0, "problems": [],
        "decision": None, "hosts": [{"device_total_gib": 121.7}],
        "reasoning": ["spark-a: 121.7 GiB", "measured at the last start: weights 23.5 GiB"]}


def test_a_computed_share_is_given_to_the_engines_and_counted_by_the_start_check():
    out = mg.share(variables("share"), PLAN)
    assert out["refusal"] == "" and out["applied"] == 0.8 and out["pinned"] is None
    assert out["need_gib"] == 103.0
    assert out["need_source"] == ("what vLLM asks at gpu_memory_utilization 0.8 (computed) + 5.6 GiB outside its "
                                  "share (memory_guard_cuda_context_gib)")
    assert out["message"] == (
        "spark-a: largest safe gpu_memory_utilization 0.8;  vllm_gpu_memory_utilization for the engines: 0.8 "
        "(computed); the start check counts 103.00 GiB (" + out["need_source"] + ") and keeps 2.00 GiB. No engine "
        "start in the journal yet to compare the declared figures with.")


def test_a_share_above_what_the_engines_take_is_capped_and_counted_at_the_cap():
    plan = dict(PLAN, gpu_memory_utilization=0.995, max_gpu_memory_utilization=0.995, decision={"line": "kept the running share"},
                declared_vs_measured=[{"what": "weights"}])
    out = mg.share(variables("share"), plan)
    assert out["applied"] == 0.99 and out["need_gib"] == 126.09  # 121.7 x 0.99 + 5.6, rounded up
    assert "0.995; kept the running share; vllm_gpu_memory_utilization" in out["message"]
    assert out["message"].endswith("Declared beside what vLLM measured at its last start here: measured at the last "
                                   "start: weights 23.5 GiB")


def test_a_pin_is_the_operators_and_counted_at_the_pin():
    v = variables("share", vllm_gpu_memory_utilization=0.7)
    assert mg.pinned(v) == 0.7
    out = mg.share(v, PLAN, {"gpu_memory_utilization": 0.7, "start_need_gib": 90.79})
    assert out["applied"] is None and out["pinned"] == 0.7 and out["need_gib"] == 90.79 and out["refusal"] == ""
    assert "for the engines: 0.7 (pinned in the inventory);" in out["message"]
    assert "gpu_memory_utilization 0.7 (pinned in the inventory) + 5.6 GiB" in out["need_source"]
    # The share this role set earlier in the run is not a pin.
    assert mg.pinned(variables("share", vllm_gpu_memory_utilization=0.8, __memory_guard_applied=0.8)) is None


def test_a_pin_above_what_the_host_allows_is_refused():
    out = mg.share(variables("share", vllm_gpu_memory_utilization=0.9), PLAN,
                   {"failed": True, "msg": "0.9 leaves 1.2 GiB, below the floor."})
    assert out["refusal"] == (
        "spark-a pins vllm_gpu_memory_utilization 0.9 in the inventory: 0.9 leaves 1.2 GiB, below the floor. Lower "
        "the pin or remove it (the memory guard then sets the share), or correct memory_guard_workloads and the "
        "reserves (memory_guard_os_reserve_gib, memory_guard_cuda_context_gib, memory_guard_start_floor_gib, "
        "memory_guard_headroom_gib).")


def test_a_plan_that_does_not_describe_the_host_is_refused():
    plan = dict(PLAN, problems=[{"what": "device total 121.70 GiB is 5.2 times MemTotal"}])
    out = mg.share(variables("share"), plan)
    assert out["refusal"].startswith("spark-a: the memory plan does not describe this host: device total 121.70 GiB is "
                                     "5.2 times MemTotal. Set memory_guard_device_total_gib to what CUDA reports")
    assert out["refusal"].endswith("the memory guard does not apply: memory_guard_enabled: false.")


def test_without_a_share_the_start_check_counts_the_model():
    out = mg.share(variables("share", memory_guard_set_gpu_memory_utilization=False), PLAN)
    # 23.67 + 2 + 1.7 + 0.5 + 6 + 5.6: the same on every Python (3.11's float sum ends in ...006, 3.12's does not).
    assert out["applied"] is None and out["need_gib"] == 39.47
    assert out["need_source"] == ("no gpu_memory_utilization: weights 23.67 + activations 2.0 + CUDA graphs 1.7 + "
                                  "non-torch 0.5 + minimum KV cache 6.0 + outside the share 5.6 GiB")
    assert "not set (memory_guard_set_gpu_memory_utilization is false)" in out["message"]
    out = mg.share(variables("share", memory_guard_start_need_gib=50), PLAN)
    assert out["need_gib"] == 50.0 and out["need_source"] == "memory_guard_start_need_gib"


def test_the_computation_gets_the_workloads_keys_it_takes():
    workload = dict(DB, priority=2, memory_high_gib=7, action="pause")
    args = mg.module_args(variables("compute", memory_guard_workloads=[workload]))
    assert args["workloads"] == [{"name": "db", "unit": "postgresql.service", "peak_gib": 8, "priority": 2}]


def _shown(unit, state, slice_name):
    return {"item": {"name": unit, "unit": unit}, "stdout": "Slice=%s\nActiveState=%s" % (slice_name, state)}


def test_the_services_running_outside_the_slice_are_named_until_their_restart():
    where = {"results": [_shown("a.service", "active", "system.slice"),
                         _shown("b.service", "inactive", "system.slice"),
                         _shown("c.service", "activating", "factory-floor-workloads.slice"),
                         _shown("d.service", "reloading", "factory-floor-workloads-x.slice")]}
    out = mg.outside(variables("outside"), where)
    assert out == {"units": ["a.service", "d.service"],
                   "message": "Running outside factory-floor-workloads.slice until their next restart: a.service, "
                              "d.service. Their own MemoryHigh=/MemoryMax= apply already. Set "
                              "memory_guard_restart_workloads to restart them now."}
    assert mg.outside(variables("outside", memory_guard_restart_workloads=True), where)["message"] == ""
    assert mg.outside(variables("outside"), {"results": []}) == {"units": [], "message": ""}


def test_the_drop_ins_of_workloads_no_longer_declared_are_stale():
    drop = "60-factory-floor-memory-guard.conf"
    found = {"files": [{"path": "/etc/systemd/system/postgresql.service.d/" + drop},
                       {"path": "/etc/systemd/system/mysql.service.d/" + drop},
                       {"path": "/etc/systemd/system/builds.slice.d/" + drop}]}
    workloads = [DB, {"name": "builds", "slice": "builds.slice", "peak_gib": 4}]
    assert mg.stale(variables("stale", memory_guard_workloads=workloads), found) == [
        "/etc/systemd/system/mysql.service.d/" + drop]
    assert len(mg.stale(variables("stale"), found)) == 3
    assert mg.stale(variables("stale"), {"files": []}) == []


UNITS = "/etc/systemd/system"
BUILDS = {"name": "builds", "slice": "factory-floor-workloads-builds.slice", "peak_gib": 4}
FOUND = {"files": [{"path": UNITS + "/postgresql.service.d/60-factory-floor-memory-guard.conf"},
                   {"path": UNITS + "/mysql.service.d/60-factory-floor-memory-guard.conf"}]}


def test_the_workloads_files_are_the_slice_a_drop_in_each_and_the_stale_ones_removed():
    plan = mg.files(variables("files", memory_guard_workloads=[DB, BUILDS]), "workloads", FOUND)
    assert plan["dirs"] == [UNITS + "/postgresql.service.d", UNITS + "/factory-floor-workloads-builds.slice.d"]
    assert [(f["src"], f["dest"], f["label"]) for f in plan["write"]] == [
        ("workloads.slice.j2", UNITS + "/factory-floor-workloads.slice", "factory-floor-workloads.slice"),
        ("workload-service.conf.j2", UNITS + "/postgresql.service.d/60-factory-floor-memory-guard.conf",
         "db (postgresql.service)"),
        ("workload-slice.conf.j2", UNITS + "/factory-floor-workloads-builds.slice.d/60-factory-floor-memory-guard.conf",
         "builds (factory-floor-workloads-builds.slice)")]
    # Each file is checked as its kind, and its template reads the workload as item.
    assert "ff-guard-stub" not in plan["write"][0]["validate"] and "systemd-analyze verify" in plan["write"][0]["validate"]
    assert "ff-guard-stub.service" in plan["write"][1]["validate"] and "ff-guard-stub.slice" in plan["write"][2]["validate"]
    assert plan["write"][1]["peak_gib"] == 8 and plan["write"][2]["slice"] == BUILDS["slice"]
    assert plan["remove"] == [UNITS + "/mysql.service.d/60-factory-floor-memory-guard.conf"]


def test_a_slice_with_nothing_inside_is_removed():
    plan = mg.files(variables("files", memory_guard_workloads=[]), "workloads", {"files": []})
    assert plan == {"dirs": [], "write": [], "remove": [UNITS + "/factory-floor-workloads.slice"]}


@pytest.mark.parametrize("start_check", [True, False])
def test_the_engines_start_check_is_written_to_both_engines_or_removed(start_check):
    plan = mg.files(variables("files", memory_guard_start_check=start_check), "start_check")
    units = ("vllm-replica.service", "vllm-split.service")
    paths = [UNITS + "/%s.d/60-factory-floor-start-check.conf" % unit for unit in units]
    if start_check:
        assert [f["dest"] for f in plan["write"]] == paths and plan["remove"] == []
        assert [f["unit"] for f in plan["write"]] == ["vllm-replica.service", "vllm-split.service"]
        assert plan["dirs"] == [UNITS + "/vllm-replica.service.d", UNITS + "/vllm-split.service.d"]
    else:
        assert plan == {"dirs": [], "write": [], "remove": paths}


def test_installed_is_every_drop_in_found_and_the_slice():
    assert mg.installed(variables("installed"), FOUND) == [f["path"] for f in FOUND["files"]] + [
        UNITS + "/factory-floor-workloads.slice"]


# ------------------------------------------------------------------ status

STATUS_VARIABLES = {"memory_guard_enabled": True, "_memory_guard_watch_unit": "factory-floor-memory-guard.service",
                    "_memory_guard_watch_status": "/run/factory-floor/memory-guard.json"}


def test_status_reads_the_watch_unit_and_its_status_file():
    assert mg.status_args(STATUS_VARIABLES) == {
        "unit": {"argv": ["systemctl", "show", "-p", "Id,LoadState,ActiveState,SubState,Result,UnitFileState", "--",
                          "factory-floor-memory-guard.service"]},
        "watch": {"src": "/run/factory-floor/memory-guard.json"}}


@pytest.mark.parametrize("enabled, unit, watch, plan, expected", [
    # Everything read: the unit as text, the status file decoded, the share as computed.
    (True, {"stdout": "Id=factory-floor-memory-guard.service\nActiveState=active"},
     {"content": "eyJiZWxvd19mbG9vciI6IGZhbHNlfQ==", "encoding": "base64"}, {"gpu_memory_utilization": 0.8},
     {"enabled": True, "unit": "Id=factory-floor-memory-guard.service\nActiveState=active",
      "watch": '{"below_floor": false}', "share": {"gpu_memory_utilization": 0.8}}),
    # No watch installed: systemctl says not-found, no status file (slurp fails); a share that could not be computed.
    ("true", {"stdout": "LoadState=not-found"}, {"failed": True, "msg": "file not found"},
     {"failed": True, "msg": "no model"},
     {"enabled": True, "unit": "LoadState=not-found", "watch": "", "share": {"failed": True, "msg": "no model"}}),
    # The guard off: nothing computed; a systemctl that failed is noted as empty.
    ("false", {"failed": True, "rc": 1}, {}, None, {"enabled": False, "unit": "", "watch": "", "share": {}}),
])
def test_status_notes_each_read_and_never_fails(enabled, unit, watch, plan, expected):
    assert mg.status(dict(STATUS_VARIABLES, memory_guard_enabled=enabled), unit, watch, plan) == expected
