# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.switch_report`` on probe client logs in a tmp dir."""

from __future__ import annotations

import json
import time
from unittest import mock

import pytest
import yaml

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.action.switch_report import ActionModule, measured_offset
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_report import noted_hosts
from ansible_collections.factory_floor.llm.plugins.modules import switch_report as module

T0 = 1795950000.0


def rec(t, status):
    return {"t": T0 + t, "end": T0 + t + 0.1, "status": status, "latency": 0.1, "upstream": None, "error": None}


# 200 until 2 s, 503 (and two without answer) until 11 s, a 502 at 12 s after first_serving, 200 from 13 s.
STATUSES = [200, 200, 200] + [503] * 6 + [0, 0] + [503, 502] + [200] * 5
RECORDS = [rec(float(i), status) for i, status in enumerate(STATUSES)]
TIMELINE = {"start": T0 - 1.0, "old_stopped": T0 + 2.5, "first_serving": T0 + 12.0, "end": T0 + 20.0}


@pytest.fixture
def probe_log(tmp_path):
    path = tmp_path / "switch-probe.jsonl"
    # The client was stopped mid-write: the last line is torn.
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in RECORDS) + '{"end": 17959')
    return path


@pytest.mark.parametrize("check_mode", [False, True])
def test_report(run_module, probe_log, check_mode):
    code, result = run_module(module, {"probe_log": str(probe_log), "timeline": TIMELINE, "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False and "failed" not in result
    assert result["requests"] == 18
    assert result["by_status"] == {"200": 8, "503": 7, "0": 2, "502": 1}
    assert (result["count_200"], result["count_502"], result["count_503"], result["count_no_answer"]) == (8, 1, 7, 2)
    assert result["downtime"] == pytest.approx(11.0)
    assert result["downtime_from"] == pytest.approx(T0 + 2.1) and result["downtime_to"] == pytest.approx(T0 + 13.1)
    assert result["first_serving"] == T0 + 12.0
    assert result["failures_after_serving"] == 1 and result["count_502_after_serving"] == 1
    assert result["failures_after_serving_sample"] == [RECORDS[12]]
    assert result["startup"] == 9.5
    assert result["timeline"] == {"start": 0.0, "old_stopped": 3.5, "first_serving": 13.0, "end": 21.0}
    assert result["outcome"] == "ok" and result["reason"] is None
    assert "seconds without a model (longest gap between answers): 11.0" in result["table"]


@pytest.mark.parametrize("args", [
    {},
    {"procedure": "switch", "plan": {"topology": "split"}},
    {"procedure": "switch", "plan": {"topology": "split", "on_target": True, "heal": True}},
    {"procedure": "upgrade", "plan": {"target": "/models/New", "start": T0}},
    {"read_clock": True},
    {"procedure": "switch", "plan": {"topology": "split"}, "clock_offset": -3.5, "clock_offset_bound": 0.2},
])
def test_every_returned_key_is_documented(run_module, probe_log, args):
    code, result = run_module(module, dict(args, probe_log=str(probe_log)))
    assert code == 0, result
    documented = yaml.safe_load(module.RETURN)
    # Keys every module result may carry (warnings can be left over from other tests' modules).
    returned = set(result) - {"changed", "invocation", "warnings", "deprecations"}
    assert returned <= set(documented)
    always = {k for k, v in documented.items() if v["returned"] == "always"}
    assert always <= returned


def test_given_values_are_returned(run_module, probe_log):
    code, result = run_module(module, {"probe_log": str(probe_log), "timeline": TIMELINE, "outcome": "rolled_back",
                                       "reason": "spark-b did not come up", "engines": {"spark-a": "serving"}, "tool_score": "86"})
    assert code == 0, result
    assert result["outcome"] == "rolled_back" and result["reason"] == "spark-b did not come up"
    assert result["engines"] == {"spark-a": "serving"} and result["tool_score"] == 86.0
    assert result["table"][0] == "switch outcome: rolled_back (spark-b did not come up)"
    assert "tool-calling score: 86.0" in result["table"]


def test_failures_over_the_bar_make_ok_with_failures(run_module, probe_log):
    code, result = run_module(module, {"probe_log": str(probe_log), "timeline": TIMELINE, "max_failures_after_serving": 0})
    assert code == 0, result
    assert result["outcome"] == "ok_with_failures" and result["failures_after_serving"] == 1
    assert result["reason"] == ('1 of 18 requests through the proxy were not answered 200 after the model served '
                                '(by status {"502": 1}); the bar is 0')
    code, result = run_module(module, {"probe_log": str(probe_log), "timeline": TIMELINE, "max_failures_after_serving": 1})
    assert code == 0 and result["outcome"] == "ok" and result["reason"] is None


def test_missing_log_is_zero_requests(run_module, tmp_path):
    code, result = run_module(module, {"probe_log": str(tmp_path / "never-written.jsonl"), "timeline": TIMELINE})
    assert code == 0, result
    assert result["changed"] is False
    assert result["requests"] == 0 and result["by_status"] == {} and result["downtime"] == 0.0
    assert result["failures_after_serving"] == 0 and result["startup"] == 9.5


def test_unreadable_log_fails_naming_the_path(run_module, tmp_path):
    code, result = run_module(module, {"probe_log": str(tmp_path)})  # a directory
    assert code == 1
    assert result["failed"] is True
    assert result["msg"].startswith("Could not read the probe client's log %s: " % tmp_path)


def test_bad_outcome_is_rejected(run_module, probe_log):
    code, result = run_module(module, {"probe_log": str(probe_log), "outcome": "maybe"})
    assert code == 1 and "outcome" in result["msg"]


def test_switch_procedure(run_module, probe_log):
    hosts = [{"name": "spark-a", "health": "serving",
              "events": {"start": T0 - 1.0, "old_stopped": T0 + 2.5, "serving": T0 + 12.0}}]
    code, result = run_module(module, {"probe_log": str(probe_log), "procedure": "switch", "hosts": hosts,
                                       "plan": {"topology": "replicas", "gated": False}})
    assert code == 0, result
    # The 502 at 12 s came after the first engine served: not "ok" (issue 33, item 2), and the run fails.
    assert result["outcome"] == "ok_with_failures" and result["startup"] == 9.5
    assert result["failures_after_serving"] == 1 and result["count_502_after_serving"] == 1
    assert result["message"].startswith("The switch to replicas went through (its new engines serve; it is kept, not rolled "
                                        "back), but the probe client saw 1 of 18 requests through the proxy fail")
    assert result["engines"] == {"spark-a": "serving"}
    assert result["lines"][-1] == "tool-calling gate off for replicas (tool_gate_topologies): the new engines took traffic untested"


def test_upgrade_procedure_fails_the_bar(run_module, probe_log):
    hosts = [{"name": "spark-a", "upgraded": True}, {"name": "spark-b", "upgraded": True}]
    plan = {"target": "/models/New", "todo": ["spark-a", "spark-b"], "start": T0 - 1.0, "switch_model": "/models/New"}
    code, result = run_module(module, {"probe_log": str(probe_log), "procedure": "upgrade", "hosts": hosts, "plan": plan})
    assert code == 0, result
    assert result["outcome"] == "ok_with_failures" and result["message"].startswith("Every replica serves /models/New now")


def test_procedure_with_a_bad_plan_fails_naming_it(run_module, probe_log):
    code, result = run_module(module, {"probe_log": str(probe_log), "procedure": "upgrade", "plan": {}})
    assert code == 1 and result["msg"].startswith("Could not build the upgrade report from hosts and plan: KeyError")


def test_procedure_excludes_the_given_report_values(run_module, probe_log):
    code, result = run_module(module, {"probe_log": str(probe_log), "procedure": "switch", "timeline": TIMELINE})
    assert code == 1 and "mutually exclusive" in result["msg"]


# --- clocks: the proxy host's clock against the controller's (issue 33 follow-up) ------------------


class SkewedClock:
    """The ``time`` module as the module sees it on a proxy host whose clock is ``skew`` seconds ahead."""

    def __init__(self, skew):
        self.skew = skew

    def time(self):
        return time.time() + self.skew


def through_the_action(run_module, monkeypatch, tmp_path, skew):
    """The report as the playbook gets it: the action plugin, then the module on a host ``skew`` s ahead,
    whose probe client wrote RECORDS on its own clock. The hosts' events are the controller's clock."""
    log = tmp_path / ("probe%+d.jsonl" % skew)
    log.write_text("".join(json.dumps(dict(r, t=r["t"] + skew, end=r["end"] + skew), sort_keys=True) + "\n"
                           for r in RECORDS))
    # Served half a second before the 502 at 12 s: the measured offset is off by milliseconds.
    hosts = [{"name": "spark-a", "health": "serving",
              "events": {"start": T0 - 1.0, "old_stopped": T0 + 2.5, "serving": T0 + 11.5}}]
    task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.switch_report",
                          args={"probe_log": str(log), "procedure": "switch", "hosts": hosts,
                                "plan": {"topology": "replicas", "gated": False, "start": T0 - 1.0}})
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    runs = []

    def execute(module_args=None, task_vars=None, **kwargs):
        runs.append(dict(module_args))
        monkeypatch.setattr(module, "time", SkewedClock(skew))
        try:
            return run_module(module, module_args).result
        finally:
            monkeypatch.setattr(module, "time", time)

    action._execute_module = execute
    action._remove_tmp_path = lambda path: None
    return action.run(task_vars={}), runs


@pytest.mark.parametrize("skew", [600.0, -600.0])
def test_a_proxy_clock_600_s_off_changes_no_outcome(run_module, monkeypatch, tmp_path, skew):
    same, _runs = through_the_action(run_module, monkeypatch, tmp_path, 0.0)
    report, runs = through_the_action(run_module, monkeypatch, tmp_path, skew)
    assert same["outcome"] == "ok_with_failures" and same["failures_after_serving"] == 1
    for key in ("outcome", "failures_after_serving", "count_502_after_serving", "requests", "by_status", "downtime",
                "startup", "message"):
        assert report[key] == same[key], key
    (failed,) = report["failures_after_serving_sample"]
    assert abs(failed["t"] - (T0 + 12.0)) <= report["clock"]["bound"] + 0.002 and failed["status"] == 502
    # Measured first (read_clock), then the report with it.
    assert runs[0]["read_clock"] is True and "clock_offset" not in runs[0]
    clock = report["clock"]
    assert runs[1]["clock_offset"] == clock["proxy_offset"] and runs[1]["clock_offset_bound"] == clock["bound"]
    assert 0 <= clock["bound"] < 5 and abs(clock["proxy_offset"] - skew) <= clock["bound"] + 0.002
    line = [li for li in report["table"] if li.startswith("clocks: ")]
    assert line == ["clocks: the proxy host's clock is 600.0 s %s the controller's (measured to within %.2f s); the probe "
                    "client's times are counted on the controller's clock, as the timeline's events"
                    % ("ahead of" if skew > 0 else "behind", clock["bound"])]
    assert not [li for li in same["table"] if li.startswith("clocks: ")]


def test_the_records_unmoved_would_change_the_outcome(run_module, probe_log):
    """The control: the same log 600 s ahead, taken as the controller's clock (clock_offset 0 given)."""
    hosts = [{"name": "spark-a", "health": "serving", "events": {"start": T0 - 1.0, "serving": T0 + 12.0}}]
    ahead = [dict(r, t=r["t"] + 600, end=r["end"] + 600) for r in RECORDS]
    probe_log.write_text("".join(json.dumps(r) + "\n" for r in ahead))
    args = {"probe_log": str(probe_log), "procedure": "switch", "hosts": hosts, "plan": {"topology": "replicas"}}
    assert run_module(module, dict(args, clock_offset=0)).result["failures_after_serving"] == 10
    moved = run_module(module, dict(args, clock_offset=600, clock_offset_bound=0.1)).result
    assert moved["failures_after_serving"] == 1 and moved["clock"] == {"proxy_offset": 600.0, "bound": 0.1}


def test_read_clock_returns_the_hosts_clock_only(run_module, probe_log):
    before = time.time()
    code, result = run_module(module, {"probe_log": str(probe_log), "read_clock": True})
    assert code == 0 and set(result) - {"invocation", "warnings", "deprecations"} == {"changed", "host_time"}
    assert before <= result["host_time"] <= time.time()


def test_measured_offset_bounds_the_true_offset():
    # The host read its clock (1000.0 + 600) at some controller time between 1000.0 and 1000.4.
    offset, bound = measured_offset(1000.0, 1600.3, 1000.4)
    assert (offset, bound) == (600.1, 0.2)
    for true_read_at in (1000.0, 1000.2, 1000.4):
        assert abs((1600.3 - true_read_at) - offset) <= bound + 1e-9


# --- engine_hosts: what each engine host noted, read from hostvars by the action plugin (issue 36) ---------------

def test_noted_hosts_are_each_engine_hosts_note_in_inventory_order():
    hostvars = {"spark-b": {"maintenance_window_host": {"health": "serving", "events": {"serving": T0}}},
                "spark-a": {"other": 1}}
    assert noted_hosts(["spark-a", "spark-b", "spark-c"], hostvars) == [
        {"name": "spark-a"}, {"name": "spark-b", "health": "serving", "events": {"serving": T0}}, {"name": "spark-c"}]


def test_the_action_reads_engine_hosts_notes_and_refuses_both_options(run_module, tmp_path, monkeypatch):
    # The report's "end" is the module's clock; two runs a tenth of a second apart would differ there.
    monkeypatch.setattr(module.time, "time", lambda: T0 + 30.0)
    log = tmp_path / "probe.jsonl"
    log.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in RECORDS))
    noted = {"health": "serving", "events": {"start": T0 - 1.0, "old_stopped": T0 + 2.5, "serving": T0 + 11.5}}
    args = {"probe_log": str(log), "procedure": "switch", "engine_hosts": ["spark-a"], "clock_offset": 0.0,
            "plan": {"topology": "replicas", "gated": False, "start": T0 - 1.0}}

    def run(task_args):
        task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.switch_report",
                              args=task_args)
        connection = mock.MagicMock(has_native_async=False)
        connection._shell.tmpdir = None
        action = ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
        runs = []

        def execute(module_args=None, task_vars=None, **kwargs):
            runs.append(dict(module_args))
            return run_module(module, module_args).result

        action._execute_module = execute
        action._remove_tmp_path = lambda path: None
        return action.run(task_vars={"hostvars": {"spark-a": {"maintenance_window_host": noted}}}), runs

    result, runs = run(args)
    assert runs[-1]["hosts"] == [dict(noted, name="spark-a")] and "engine_hosts" not in runs[-1]
    given, _runs = run(dict({k: v for k, v in args.items() if k != "engine_hosts"}, hosts=[dict(noted, name="spark-a")]))
    assert result["lines"] == given["lines"] and result["outcome"] == given["outcome"]
    with pytest.raises(AnsibleActionFail, match="engine_hosts or hosts, not both"):
        run(dict(args, hosts=[{"name": "spark-a"}]))


def test_noted_hosts_read_the_maintenance_note_actions_fact_first():
    # ansible_facts is where the action's notes are (a set_fact or play variable of the name cannot hide them there).
    hostvars = {"spark-a": {"ansible_facts": {"maintenance_window_host": {"failed": True, "reason": "spark-a: x"}},
                            "maintenance_window_host": {"events": {"stale": 1.0}}},
                "spark-b": {"ansible_facts": {"os_family": "Debian"}, "maintenance_window_host": {"health": "serving"}}}
    assert noted_hosts(["spark-a", "spark-b"], hostvars) == [
        {"name": "spark-a", "failed": True, "reason": "spark-a: x"}, {"name": "spark-b", "health": "serving"}]
