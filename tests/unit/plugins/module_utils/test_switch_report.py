# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_switch_report.py (pure logic, made-up probe logs)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_report as sr

T0 = 1795950000.0


def rec(t, status=200, took=0.1, upstream=None, error=None):
    """One probe client record, ``t`` in seconds after T0."""
    return {"t": T0 + t, "end": T0 + t + took, "status": status, "latency": took,
            "upstream": upstream, "error": error}


def series(*spans):
    """Records every second: spans of (status, how many)."""
    records, t = [], 0.0
    for status, count in spans:
        for dummy in range(count):
            records.append(rec(t, status))
            t += 1.0
    return records


def jsonl(records):
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


# --- load_records() ---------------------------------------------------------------------------


def test_load_records_skips_torn_last_line():
    records = series((200, 3))
    text = jsonl(records) + json.dumps(rec(3.0), sort_keys=True)[:25]
    assert sr.load_records(text) == records


def test_load_records_sorts_by_start_and_skips_blank_lines():
    records = [rec(2.0), rec(0.0, 503), rec(1.0, 0)]
    text = "\n".join(json.dumps(r) for r in records) + "\n\n   \n"
    assert [r["t"] for r in sr.load_records(text)] == [T0, T0 + 1.0, T0 + 2.0]


@pytest.mark.parametrize("text", ["", "\n", '{"t": 17959'])
def test_load_records_nothing(text):
    assert sr.load_records(text) == []


# --- longest_gap() ----------------------------------------------------------------------------


@pytest.mark.parametrize("records", [[], series((200, 5))])
def test_longest_gap_without_failures_is_zero(records):
    assert sr.longest_gap(records) == (0.0, None, None)


@pytest.mark.parametrize("spans, gap, begin, finish", [
    # From the end of the last 200 before the outage to the end of the first 200 after it.
    ([(200, 3), (503, 10), (200, 3)], 11.0, 2.1, 13.1),
    ([(200, 1), (0, 1), (200, 1)], 2.0, 0.1, 2.1),
    # Failures at the very start: from the first request's start.
    ([(503, 4), (200, 2)], 4.1, 0.0, 4.1),
    # Failures at the very end: to the last request's end.
    ([(200, 2), (502, 5)], 5.0, 1.1, 6.1),
    # Nothing but failures.
    ([(0, 6)], 5.1, 0.0, 5.1),
    # Two outages: the longer one.
    ([(200, 1), (503, 2), (200, 1), (0, 7), (200, 1), (502, 3), (200, 1)], 8.0, 3.1, 11.1),
])
def test_longest_gap(spans, gap, begin, finish):
    seconds, gap_from, gap_to = sr.longest_gap(series(*spans))
    assert seconds == pytest.approx(gap)
    assert gap_from == pytest.approx(T0 + begin) and gap_to == pytest.approx(T0 + finish)


def test_longest_gap_with_two_workers():
    """Two workers through the outage: each one's failures fall between the same two answers."""
    second = [rec(t + 0.5, s) for t, s in [(1, 200), (2, 0), (4, 0), (6, 200)]]
    records = sorted(series((200, 2), (503, 5), (200, 2)) + second, key=lambda r: r["t"])
    assert sr.longest_gap(records) == (pytest.approx(5.0), pytest.approx(T0 + 1.6), pytest.approx(T0 + 6.6))


# --- summarize() ------------------------------------------------------------------------------


TIMELINE = {"start": T0 - 5.0, "old_stopped": T0 + 2.5, "first_serving": T0 + 12.0, "end": T0 + 20.0}


def switch_records():
    """200s, then the old topology stops: 503s, two 0s, then a 502 and a 503 after first_serving."""
    records = series((200, 3), (503, 5), (0, 2), (503, 2), (502, 1), (503, 1), (200, 6))
    assert [r["status"] for r in records if r["t"] >= T0 + 12.0][:2] == [502, 503]
    return records


def test_summarize_counts():
    report = sr.summarize(switch_records(), TIMELINE)
    assert report["requests"] == 20
    assert report["by_status"] == {"200": 9, "503": 8, "0": 2, "502": 1}
    assert (report["count_200"], report["count_502"], report["count_503"], report["count_no_answer"]) == (9, 1, 8, 2)
    assert report["downtime"] == pytest.approx(12.0)
    assert report["downtime_from"] == pytest.approx(T0 + 2.1) and report["downtime_to"] == pytest.approx(T0 + 14.1)


def test_summarize_failures_after_first_serving():
    report = sr.summarize(switch_records(), TIMELINE)
    assert report["first_serving"] == T0 + 12.0
    assert report["failures_after_serving"] == 2
    assert report["count_502_after_serving"] == 1
    assert [r["status"] for r in report["failures_after_serving_sample"]] == [502, 503]


def test_summarize_sample_is_at_most_five():
    records = series((200, 1), (503, 8))
    report = sr.summarize(records, {"first_serving": T0})
    assert report["failures_after_serving"] == 8 and len(report["failures_after_serving_sample"]) == 5


@pytest.mark.parametrize("timeline, first_serving", [
    ({"in_rotation": T0 + 12.0}, T0 + 12.0),
    ({"first_serving": T0 + 11.0, "in_rotation": T0 + 12.0}, T0 + 11.0),
    ({}, None),
])
def test_summarize_first_serving_falls_back_to_in_rotation(timeline, first_serving):
    report = sr.summarize(switch_records(), timeline)
    assert report["first_serving"] == first_serving
    if first_serving is None:
        assert report["failures_after_serving"] == 0 and report["startup"] is None


def test_summarize_startup_and_timeline():
    timeline = dict(TIMELINE, in_rotation=str(T0 + 12.5), rollback_started=None)
    report = sr.summarize(switch_records(), timeline)
    assert report["startup"] == 9.5
    # Seconds since start, in time order; events that did not happen are left out.
    assert list(report["timeline"].items()) == [
        ("start", 0.0), ("old_stopped", 7.5), ("first_serving", 17.0), ("in_rotation", 17.5), ("end", 25.0)]


def test_summarize_timeline_without_start_counts_from_first_request():
    report = sr.summarize(switch_records(), {"old_stopped": T0 + 2.5})
    assert report["timeline"] == {"old_stopped": 2.5}
    assert report["startup"] is None


def test_summarize_ignores_an_earlier_switch_in_the_same_log():
    """The probe client appends to its log: a second switch must not count the first one's requests."""
    earlier = [dict(r, t=r["t"] - 3600, end=r["end"] - 3600) for r in series((200, 2), (503, 30), (200, 2))]
    report = sr.summarize(earlier + switch_records(), TIMELINE)
    assert report == sr.summarize(switch_records(), TIMELINE)


def test_summarize_nothing_recorded():
    report = sr.summarize([], {})
    assert report["requests"] == 0 and report["by_status"] == {} and report["downtime"] == 0.0
    assert report["downtime_from"] is None and report["timeline"] == {}
    assert "probe client through the proxy: 0 requests, by status {}" in report["table"]


def test_summarize_passes_given_values_through():
    report = sr.summarize(switch_records(), TIMELINE, engines={"spark-a": "serving"}, tool_score=86.0,
                          outcome="rolled_back", reason="tool-calling score 70 below 80")
    assert (report["outcome"], report["reason"], report["engines"], report["tool_score"]) == (
        "rolled_back", "tool-calling score 70 below 80", {"spark-a": "serving"}, 86.0)


@pytest.mark.parametrize("outcome, limit, expected", [
    ("ok", 0, "ok_with_failures"),          # 2 failed after first_serving, bar 0
    ("ok", 1, "ok_with_failures"),
    ("ok", 2, "ok"),                        # at the bar
    ("ok", None, "ok"),                     # no bar: as given (switch.yml)
    ("rolled_back", 0, "rolled_back"),      # only a switch that went through is downgraded
    ("failed", 0, "failed"),
    ("unchanged", 0, "unchanged"),
])
def test_summarize_failures_after_serving_against_the_bar(outcome, limit, expected):
    report = sr.summarize(switch_records(), TIMELINE, outcome=outcome, max_failures_after_serving=limit)
    assert report["failures_after_serving"] == 2
    assert report["outcome"] == expected
    if expected == "ok_with_failures":
        assert report["reason"] == ('2 of 20 requests through the proxy were not answered 200 after the model served '
                                    '(by status {"502": 1, "503": 1}); the bar is %d' % limit)
        assert report["table"][0] == "switch outcome: ok_with_failures (%s)" % report["reason"]
    else:
        assert report["reason"] is None


def test_summarize_keeps_a_given_reason_with_failures():
    report = sr.summarize(switch_records(), TIMELINE, reason="see the probe log", max_failures_after_serving=0)
    assert (report["outcome"], report["reason"]) == ("ok_with_failures", "see the probe log")


def test_summarize_no_failures_is_ok_with_a_bar_of_0():
    report = sr.summarize(series((200, 5)), {"start": T0, "first_serving": T0}, max_failures_after_serving=0)
    assert (report["outcome"], report["reason"], report["failures_after_serving"]) == ("ok", None, 0)


def test_table_has_the_numbers():
    report = sr.summarize(switch_records(), TIMELINE, engines={"spark-a": "serving", "spark-b": "loading"},
                          tool_score=86, outcome="rolled_back", reason="spark-b did not come up")
    table = report["table"]
    assert table[0] == "switch outcome: rolled_back (spark-b did not come up)"
    assert table[1] == "timeline (s since start):"
    assert "  %-18s %8.1f" % ("first_serving", 17.0) in table
    assert "seconds without a model (longest gap between answers): 12.0" in table
    assert "new topology start-up (old stopped -> first engine serving): 9.5 s" in table
    assert 'probe client through the proxy: 20 requests, by status {"0": 2, "200": 9, "502": 1, "503": 8}' in table
    assert "502 seen: 1; failures after the first engine served: 2 (502: 1)" in table
    assert table[-3:] == ["engine spark-a    serving", "engine spark-b    loading", "tool-calling score: 86"]


def test_table_ok_without_optional_lines():
    table = sr.summarize(series((200, 3)), {"start": T0})["table"]
    assert table[0] == "switch outcome: ok"
    assert not any(line.startswith(("new topology", "engine ", "tool-calling")) for line in table)


# --- switch_report(): the topology switch's whole report --------------------------------------


def gate(score, passed, host):
    return {"score": score, "passed": passed, "message": "Tool-calling gate on %s: scored %s" % (host, score)}


def switch_hosts():
    return [
        {"name": "spark-a", "health": "serving", "gate": gate(80.0, True, "spark-a"),
         "events": {"start": T0, "drained": T0 + 5, "old_stopped": T0 + 8, "serving": T0 + 60, "gate_done": T0 + 90,
                    "in_rotation": T0 + 91}},
        {"name": "spark-b", "health": "serving", "gate": gate(75.5, True, "spark-b"),
         "events": {"start": T0, "old_stopped": T0 + 9, "serving": T0 + 70, "gate_done": T0 + 95, "in_rotation": T0 + 91}},
    ]


SWITCH_PLAN = {"topology": "replicas", "gated": True, "incumbent": {"topology": "split", "host": "spark-a"},
               "incumbent_score": {"build_id": "abc", "score": 70.0}, "api_engines": ["spark-a", "spark-b"],
               "inventory": {"advice": "change the line", "agrees": False}}


def test_switch_timeline_takes_each_event_from_the_right_host():
    timeline = sr.switch_timeline(switch_hosts(), T0 + 100)
    assert list(timeline) == ["start", "drained", "old_stopped", "first_serving", "first_healthy", "gate_done",
                              "in_rotation", "all_serving", "end"]
    assert timeline == {"start": T0, "drained": T0 + 5, "old_stopped": T0 + 8, "first_serving": T0 + 91,
                        "first_healthy": T0 + 60, "gate_done": T0 + 95, "in_rotation": T0 + 91, "all_serving": T0 + 70,
                        "end": T0 + 100}


def test_switch_timeline_without_the_gate_first_serving_is_healthy():
    hosts = [{"name": "a", "events": {"start": T0, "serving": T0 + 30}}, {"name": "b", "events": {"serving": T0 + 20}}]
    assert sr.switch_timeline(hosts, T0 + 50) == {
        "start": T0, "first_serving": T0 + 20, "all_serving": T0 + 30, "end": T0 + 50}


def test_switch_report_ok_gated():
    report = sr.switch_report(series((200, 5)), switch_hosts(), SWITCH_PLAN, T0 + 100)
    assert report["outcome"] == "ok" and report["message"] == ""
    assert report["engines"] == {"spark-a": "serving, tool score 80.0 (passed)", "spark-b": "serving, tool score 75.5 (passed)"}
    assert report["tool_score"] == 75.5
    assert report["tool_gate"]["incumbent"] == {"build_id": "abc", "score": 70.0}
    assert report["tool_gate"]["summary"] == [
        "Tool-calling gate on spark-a: scored 80.0", "Tool-calling gate on spark-b: scored 75.5",
        "tool-calling gate: the new engines were healthy 31.0 s before they joined the proxy "
        "(the gate ran meanwhile; first_serving counts from then)"]
    assert report["lines"] == report["table"] + report["tool_gate"]["summary"] + ["change the line"]


def test_switch_report_ungated_and_gate_that_did_not_run():
    hosts = [dict(h, gate={}) for h in switch_hosts()]
    report = sr.switch_report([], hosts, dict(SWITCH_PLAN, gated=False), T0 + 100)
    assert report["tool_gate"]["summary"] == [
        "tool-calling gate off for replicas (tool_gate_topologies): the new engines took traffic untested"]
    assert report["tool_gate"]["incumbent"] == {} and report["tool_score"] is None
    hosts = [dict(h, gate={}, events={"start": T0}) for h in switch_hosts()]
    report = sr.switch_report([], hosts, SWITCH_PLAN, T0 + 100)
    assert report["tool_gate"]["summary"] == ["tool-calling gate: did not run (the new topology did not come up)"]


@pytest.mark.parametrize("rollback_failed, first", [
    (False, "The switch to replicas failed and was rolled back; the old topology serves again. "),
    (True, "The switch to replicas failed and so did the rollback: NO MODEL MAY BE SERVING. "),
])
def test_switch_report_rolled_back(rollback_failed, first):
    hosts = switch_hosts()
    hosts[1].update(reason="spark-b: start failed", gate={}, health="crash_loop", rollback_failed=rollback_failed)
    report = sr.switch_report([], hosts, dict(SWITCH_PLAN, rollback=True), T0 + 100)
    assert report["outcome"] == ("failed" if rollback_failed else "rolled_back")
    assert report["reason"] == "spark-b: start failed"
    assert report["engines"]["spark-b"] == "crash_loop"
    assert report["message"] == first + "\nWhy: spark-b: start failed change the line"


def test_switch_report_unchanged():
    report = sr.switch_report([], [], dict(SWITCH_PLAN, on_target=True, inventory={}), T0)
    assert report["outcome"] == "unchanged" and report["message"] == ""
    assert report["lines"] == ["already on replicas: nothing changed"]


ROTATION_ERROR = ("After 30 s the proxy on gateway has no engine in rotation, expected spark-a, spark-b. "
                  "Engine states seen: {'spark-a': 'loading', 'spark-b': 'loading'}.")


@pytest.mark.parametrize("on_target, head", [
    (True, "Already on replicas, but the proxy does not route to every engine that should serve it: "),
    (False, "The switch to replicas went through (its engines passed their health check and the tool-calling gate), "
            "but the proxy does not route to every one of them: "),
])
def test_switch_report_engines_not_in_rotation_fail_the_run(on_target, head):
    # An engine that is up but not routed to is not "nothing changed" or "ok": the run fails, and nothing rolls back.
    # Run from a checkout: its playbooks by their files.
    plan = dict(SWITCH_PLAN, on_target=on_target, rotation_error=ROTATION_ERROR, playbook_dir="/src/ff/playbooks")
    report = sr.switch_report(series((200, 5)), switch_hosts(), plan, T0 + 100)
    assert (report["outcome"], report["reason"]) == ("not_in_rotation", ROTATION_ERROR)
    assert report["message"] == (
        head + ROTATION_ERROR + "\nNothing is rolled back. See the engines' state (playbooks/status.yml) and the proxy's "
        "membership checker (journalctl -u factory-floor-upstream.service on the proxy host); an engine still loading "
        "joins by itself once it serves. Then run playbooks/switch-to-replicas.yml again: on the target, it stops "
        "nothing and checks the rotation again.")
    assert sr.switch_report(series((200, 5)), switch_hosts(), dict(plan, rotation_error=""), T0 + 100)["message"] == ""


# Issue 33, item 2: a switch whose probe client saw failures after the first engine served printed outcome ok.
def test_switch_report_failures_after_serving_are_not_ok():
    plan = dict(SWITCH_PLAN, start=T0)
    # The new engines joined at T0 + 91; the proxy's nginx then died for 4 s.
    records = series((503, 91), (200, 3), (0, 4), (200, 3))
    report = sr.switch_report(records, switch_hosts(), plan, T0 + 110)
    assert report["outcome"] == "ok_with_failures"
    assert report["failures_after_serving"] == 4
    assert report["message"].startswith(
        "The switch to replicas went through (its new engines serve; it is kept, not rolled back), but the probe client saw "
        "4 of 101 requests through the proxy fail after the first new engine served (0 answered 502; by status "
        '{"0": 4, "200": 6, "503": 91}). The first ones, at s since start (HTTP status, 0 = no answer): 94.0 (0), 95.0 (0), '
        "96.0 (0), 97.0 (0).")
    assert report["message"].endswith("Outcome ok_with_failures: once an engine serves, no request may fail.")
    assert report["table"][0].startswith("switch outcome: ok_with_failures (4 of 101 requests")


def test_switch_report_the_issue_run_fails_on_rotation_and_names_the_failures():
    plan = dict(SWITCH_PLAN, start=T0, rotation_error=ROTATION_ERROR)
    report = sr.switch_report(series((503, 91), (200, 3), (0, 4)), switch_hosts(), plan, T0 + 110)
    assert report["outcome"] == "not_in_rotation"
    assert "the proxy does not route to every one of them" in report["message"]
    assert "saw 4 of 98 requests through the proxy fail after the first new engine served" in report["message"]


LOST_PLAN = dict(SWITCH_PLAN, start=T0, run="20261129T110000Z-3f9a1c", lost_hosts=["spark-b"], undrain=["spark-a"],
                 lost_locks={"spark-b": {"released": False, "path": "/run/factory-floor/maintenance.lock",
                                         "error": "host unreachable (ssh: connect timed out)"}})


# Issue 33, item 5: an engine host lost during a gated switch. Run from an installed collection (issue 35): its
# playbooks by their collection names.
def test_switch_report_lost_host_fails_naming_it_and_its_lock():
    hosts = switch_hosts()
    hosts[1]["gate"] = {}
    plan = dict(LOST_PLAN, playbook_dir="/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks")
    report = sr.switch_report(series((200, 5)), hosts, plan, T0 + 100)
    assert (report["outcome"], report["lost_hosts"]) == ("host_lost", ["spark-b"])
    assert report["engines"]["spark-b"] == "LOST from the run (unreachable or dropped); last seen serving"
    assert report["message"] == (
        "spark-b dropped out of the run (unreachable over SSH, or a task failed there and Ansible dropped it): what it "
        "runs now is unknown. spark-b stays drained from the proxy (holder switch-to-replicas): its engine reaches no "
        "client without a tool-calling verdict. spark-a passed the gate and serves replicas. spark-b still holds this "
        "run's maintenance lock (/run/factory-floor/maintenance.lock, run 20261129T110000Z-3f9a1c): host unreachable "
        "(ssh: connect timed out); remove it once spark-b answers again (factory_floor.llm.maintenance_lock state absent "
        "with that run, or rm), or the next switch and factory_floor.llm.deploy refuse until it expires. The ways on: "
        "once spark-b answers again, check it with factory_floor.llm.status, then run factory_floor.llm.switch_to_replicas "
        "again: on the target it gates each engine this run left drained and puts back those that pass; off it, it "
        "switches again.")


def test_switch_report_lost_host_whose_lock_was_released_and_a_rollback():
    plan = dict(LOST_PLAN, rollback=True, other="split", undrain=[], lost_locks={"spark-b": {"released": True}})
    report = sr.switch_report([], switch_hosts(), plan, T0 + 100)
    assert report["outcome"] == "rolled_back" and report["lost_hosts"] == ["spark-b"]
    assert "The other engine hosts went back to split." in report["message"]
    assert "This run's maintenance lock on spark-b was released" in report["message"]
    assert "still holds" not in report["message"]


def test_switch_report_says_what_the_hosts_run_and_fails_on_records_that_disagree():
    site = {"agrees": False, "running": "replicas",
            "disagreements": ["spark-a records split but runs replicas"]}
    inventory = {"advice": "inventory: the hosts run replicas: change the line", "agrees": False}
    report = sr.switch_report(series((200, 5)), switch_hosts(), dict(SWITCH_PLAN, site=site, inventory=inventory), T0 + 100)
    assert report["outcome"] == "not_recorded"
    assert report["lines"][-2:] == ["topology records: spark-a records split but runs replicas",
                                    "inventory: the hosts run replicas: change the line"]
    assert report["message"].startswith("The engine hosts' topology records and what they run disagree: spark-a records "
                                        "split but runs replicas. factory_floor.llm.deploy refuses")
    assert report["message"].endswith("run factory_floor.llm.switch_to_replicas again once every engine host answers "
                                      "(it records on each host what it runs), or see factory_floor.llm.status.")
    failed_write = dict(SWITCH_PLAN, site=site, inventory=inventory, record_errors={"spark-a": "No space left on device"})
    assert ("split but runs replicas. The record could not be written on spark-a: No space left on device. "
            "factory_floor.llm.deploy"
            in sr.switch_report(series((200, 5)), switch_hosts(), failed_write, T0 + 100)["message"])
    agreeing = dict(SWITCH_PLAN, site=dict(site, agrees=True, disagreements=[]), inventory=inventory)
    assert sr.switch_report(series((200, 5)), switch_hosts(), agreeing, T0 + 100)["message"] == ""


HEAL_PLAN = dict(SWITCH_PLAN, on_target=True, heal=True, heal_hosts=["spark-a", "spark-b"],
                 heal_holders=["switch-to-replicas"], incumbent={"topology": "", "host": ""},
                 inventory={"advice": "agrees", "agrees": True}, inventory_sources=["inventory/site"],
                 playbook_dir="/src/ff/playbooks")


def test_switch_report_healed():
    report = sr.switch_report([], switch_hosts(), dict(HEAL_PLAN, heal_ready=["spark-a", "spark-b"]), T0)
    assert (report["outcome"], report["reason"], report["message"]) == ("healed", "", "")
    assert report["table"] == [
        "already on replicas; spark-a, spark-b had been left drained by an interrupted switch-to-replicas run "
        "(nothing was stopped or started)", "back in the proxy's rotation: spark-a, spark-b"]
    assert report["lines"][-1] == "agrees" and "requests" not in report


@pytest.mark.parametrize("drained_other, error, rotation", [
    ({}, "", "In rotation now: spark-a.\n"),
    ({"spark-a": "ops"}, "timed out", "No engine is in the proxy's rotation: clients get 503 with Retry-After. "
                                      "(The proxy: timed out)\n"),
])
def test_switch_report_heal_failed(drained_other, error, rotation):
    hosts = switch_hosts()
    hosts[1].update(reason="spark-b: scored 20", gate=gate(20.0, False, "spark-b"))
    plan = dict(HEAL_PLAN, heal_ready=["spark-a"], heal_left=["spark-b"], drained_other=drained_other, rotation_error=error)
    report = sr.switch_report([], hosts, plan, T0)
    assert report["outcome"] == "heal_failed" and report["left_drained"] == ["spark-b"]
    assert report["table"][-1] == "STILL DRAINED: spark-b (spark-b: scored 20)"
    assert report["message"] == (
        "Already on replicas, but spark-b could not be put back in the proxy's rotation and stays drained: "
        "spark-b: scored 20. " + rotation + "Nothing was stopped or started. The ways on: go back to split, a switch of "
        "its own with its start-up and its own gate (ansible-playbook -i inventory/site playbooks/switch-to-split.yml); "
        "or fix the cause and run playbooks/switch-to-replicas.yml again, which tests them again; or serve this build "
        "although it failed the gate: run playbooks/switch-to-replicas.yml again with -e tool_gate_enforce=false (it is "
        "measured and stored as failed, then put back in rotation).")


def test_truncate_is_jinjas():
    assert sr._truncate("word " * 10, 300) == "word " * 10
    assert sr._truncate("timed out " * 40, 20) == "timed out timed..."


# --- upgrade_report(): the rolling upgrade's whole report -------------------------------------


def upgrade_hosts(**b):
    return [{"name": "spark-a", "upgraded": True, "gate": gate(80, True, "spark-a"),
             "events": {"drained": T0 + 3, "serving": T0 + 50, "gate_done": T0 + 70, "in_rotation": T0 + 71}},
            dict({"name": "spark-b", "upgraded": True, "gate": gate(77, True, "spark-b"),
                  "events": {"drained": T0 + 80, "serving": T0 + 130}}, **b)]


UPGRADE_PLAN = {"target": "/models/New on image vllm:2", "todo": ["spark-a", "spark-b"], "start": T0,
                "old": {"model": "/models/Old", "image": "vllm:1"}, "switch_model": "/models/New", "switch_image": "vllm:2"}


def test_upgrade_report_ok():
    report = sr.upgrade_report(series((200, 5)), upgrade_hosts(), UPGRADE_PLAN, T0 + 200)
    assert report["outcome"] == "ok" and report["message"] == "" and report["tool_score"] == 77.0
    assert list(report["timeline"])[:4] == ["start", "first_serving", "spark-a drained", "spark-a serving"]
    assert report["engines"] == {"spark-a": "upgraded, tool score 80", "spark-b": "upgraded, tool score 77"}
    assert report["lines"][-1] == (
        "Now set vllm_model: /models/New and vllm_container_image: vllm:2 in the inventory (and the tool-call parser and "
        "chat template if they changed): factory_floor.llm.deploy and the topology switches render what the inventory "
        "says (and factory_floor.llm.deploy refuses while a replica runs another image).")


def test_upgrade_report_ok_with_failures_names_the_first_ones():
    records = series((200, 3), (502, 1), (503, 1), (200, 3))
    report = sr.upgrade_report(records, upgrade_hosts(), dict(UPGRADE_PLAN, start=T0 - 1), T0 + 200)
    assert report["outcome"] == "ok_with_failures"
    assert report["message"] == (
        "Every replica serves /models/New on image vllm:2 now (it is kept, not rolled back), but the probe client saw 2 of "
        "8 requests through the proxy fail (1 answered 502; by status {\"200\": 6, \"502\": 1, \"503\": 1}); the bar is 0 "
        "while one replica serves and the other restarts. The first ones, at s since start (HTTP status, 0 = no answer): "
        "4.0 (502), 5.0 (503). Compare them with the timeline above (which replica was out of rotation then) and the "
        "proxy's error log. Outcome ok_with_failures.")


@pytest.mark.parametrize("b, todo, outcome, engine_b, message", [
    ({"failed": True, "upgraded": False, "reason": "spark-b: gate failed"}, ["spark-a", "spark-b"], "rolled_back",
     "failed, old model restored, tool score 77",
     "The upgrade to /models/New on image vllm:2 was stopped; every replica this run changed serves the old build "
     "(/models/Old on vllm:1) again. \nWhy: spark-b: gate failed"),
    ({"failed": True, "upgraded": False, "reason": "spark-b: gate failed"}, ["spark-b"], "rolled_back",
     "failed, old model restored, tool score 77",
     "The upgrade to /models/New on image vllm:2 was stopped; every replica this run changed serves the old build "
     "(/models/Old on vllm:1) again (spark-a served /models/New on image vllm:2 before this run and keeps it). "
     "\nWhy: spark-b: gate failed"),
    ({"failed": True, "restore_failed": True, "upgraded": False}, ["spark-a", "spark-b"], "failed",
     "OLD MODEL NOT RESTORED, see the reason, tool score 77",
     "The upgrade to /models/New on image vllm:2 failed and so did putting the old build back: CHECK THE REPLICAS. "
     "A replica already upgraded keeps /models/New on image vllm:2, so that one serves. \nWhy: see above"),
])
def test_upgrade_report_not_through(b, todo, outcome, engine_b, message):
    report = sr.upgrade_report([], upgrade_hosts(**b), dict(UPGRADE_PLAN, todo=todo), T0 + 200)
    assert report["outcome"] == outcome and report["engines"]["spark-b"] == engine_b
    assert report["message"] == message
    assert not report["lines"][-1].startswith("Now set")


def test_upgrade_report_engines_states():
    hosts = upgrade_hosts(upgraded=False, gate={})
    assert sr.upgrade_engines(hosts, {"todo": ["spark-b"]}) == {
        "spark-a": "already on the new model, tool score 80", "spark-b": "not upgraded (the upgrade stopped before it)"}
    hosts = upgrade_hosts(failed=True, upgraded=False)
    assert sr.upgrade_engines(hosts, UPGRADE_PLAN)["spark-a"] == "upgraded, then rolled back, tool score 80"


def test_upgrade_report_unchanged():
    report = sr.upgrade_report([], upgrade_hosts(), dict(UPGRADE_PLAN, todo=[]), T0 + 1)
    assert report["outcome"] == "unchanged" and report["message"] == ""
    assert report["lines"][-1] == "every replica already serves /models/New on image vllm:2: nothing changed"


# --- the probe client's clock -------------------------------------------------------------------


def test_on_controller_clock_moves_copies_and_leaves_the_log_as_it_was():
    records = series((200, 2), (503, 1))
    moved = sr.on_controller_clock(records, 600.0)
    assert [r["t"] for r in moved] == [T0 - 600.0, T0 - 599.0, T0 - 598.0]
    assert [r["end"] for r in moved] == [pytest.approx(T0 - 599.9), pytest.approx(T0 - 598.9), pytest.approx(T0 - 597.9)]
    assert records[0]["t"] == T0 and sr.on_controller_clock(records, 0) == records


@pytest.mark.parametrize("skew", [600.0, -600.0])
def test_a_proxy_clock_600_s_off_changes_no_switch_outcome(skew):
    """Failures after the first engine served decide the outcome: the same whatever the proxy host's clock says."""
    records = series((200, 3), (503, 8), (502, 1), (200, 5))  # the 502 at 11 s, after first_serving (10.5 s)
    hosts = [{"name": "spark-a", "health": "serving", "events": {"start": T0 - 1.0, "serving": T0 + 10.5}}]
    plan = {"topology": "replicas", "gated": False, "start": T0 - 1.0}
    reference = sr.switch_report(records, hosts, plan, T0 + 30)
    on_the_proxy = [dict(r, t=r["t"] + skew, end=r["end"] + skew) for r in records]
    report = sr.switch_report(sr.on_controller_clock(on_the_proxy, skew), hosts, plan, T0 + 30,
                              sr.clock_summary(skew, 0.2))
    assert reference["outcome"] == report["outcome"] == "ok_with_failures"
    assert reference["failures_after_serving"] == report["failures_after_serving"] == 1
    assert report["message"] == reference["message"]
    assert report["clock"] == {"proxy_offset": skew, "bound": 0.2}


@pytest.mark.parametrize("offset, bound, line", [
    (0.4, 0.1, None),
    (-1.0, 0.1, None),
    (1.25, 0.1, "clocks: the proxy host's clock is 1.2 s ahead of the controller's (measured to within 0.10 s); the probe "
                "client's times are counted on the controller's clock, as the timeline's events"),
    (-75.0, None, "clocks: the proxy host's clock is 75.0 s behind the controller's; the probe client's times are "
                  "counted on the controller's clock, as the timeline's events"),
])
def test_the_table_names_a_clock_more_than_a_second_off(offset, bound, line):
    assert sr.clock_line(sr.clock_summary(offset, bound)) == line
    report = sr.summarize(series((200, 2)), {"start": T0}, clock=sr.clock_summary(offset, bound))
    assert (line in report["table"]) if line else not [li for li in report["table"] if li.startswith("clocks")]


# Issue 37: a known build joined the proxy as soon as it served and was gated after, while it served.
AFTER_PLAN = dict(SWITCH_PLAN, gate_mode="after_admission", start=T0,
                  gate_mode_why="the build abc passed the gate here on 2026-12-01T10:02:11Z (spark-a) with score 94.4")


def after_hosts(passed_b=True):
    return [
        {"name": "spark-a", "health": "serving", "gate": dict(gate(80.0, True, "spark-a"), started_at=T0 + 61),
         "events": {"start": T0, "drained": T0 + 5, "old_stopped": T0 + 8, "serving": T0 + 60, "gate_done": T0 + 180}},
        {"name": "spark-b", "health": "serving", "gate": dict(gate(75.5, passed_b, "spark-b"), started_at=T0 + 71),
         "events": {"start": T0, "old_stopped": T0 + 9, "serving": T0 + 70, "gate_done": T0 + 185}},
    ]


def test_after_admission_the_timeline_shows_the_gate_after_in_rotation():
    timeline = sr.switch_timeline(after_hosts(), T0 + 200, T0, after_admission=True)
    assert timeline == {"start": T0, "drained": T0 + 5, "old_stopped": T0 + 8, "first_serving": T0 + 60,
                        "gate_started": T0 + 61, "gate_done": T0 + 185, "in_rotation": T0 + 60, "all_serving": T0 + 70,
                        "end": T0 + 200}
    report = sr.switch_report(series((200, 5)), after_hosts(), AFTER_PLAN, T0 + 200)
    assert report["tool_gate"]["gate_mode"] == "after_admission" and report["tool_gate"]["shares"] == {}
    order = list(report["timeline"])
    assert order.index("in_rotation") < order.index("gate_started") < order.index("gate_done")
    # The model was away from the drain to the first engine serving: the start-up, not the gate.
    assert report["startup"] == 52.0 and report["outcome"] == "ok"
    assert report["tool_gate"]["summary"][-1] == (
        "tool-calling gate after admission: the build abc passed the gate here on 2026-12-01T10:02:11Z (spark-a) with "
        "score 94.4, so the new engines joined the proxy as soon as they served and the gate ran while they served "
        "(124.0 s)")


def test_before_admission_the_timeline_shows_when_the_gate_started_too():
    hosts = switch_hosts()
    hosts[0]["gate"]["started_at"] = T0 + 61
    timeline = sr.switch_timeline(hosts, T0 + 100)
    assert timeline["first_healthy"] < timeline["gate_started"] < timeline["gate_done"]
    assert timeline["first_serving"] == timeline["in_rotation"] == T0 + 91


def test_after_admission_a_failed_gate_rolls_back_naming_the_engine_and_its_verdict():
    hosts = after_hosts(passed_b=False)
    hosts[1].update(failed=True, reason="spark-b: Tool-calling gate on spark-b: scored 75.5, below min_score 80.0.")
    report = sr.switch_report([], hosts, dict(AFTER_PLAN, rollback=True), T0 + 200)
    assert report["outcome"] == "rolled_back"
    assert report["reason"] == "spark-b: Tool-calling gate on spark-b: scored 75.5, below min_score 80.0."
    assert report["engines"]["spark-b"] == "serving, tool score 75.5 (FAILED the gate)"


def split_hosts():
    shares = {"spark-a": {"cases": ["c1", "c3"], "of": 4, "started_at": T0 + 61, "done_at": T0 + 100},
              "spark-b": {"cases": ["c2", "c4"], "of": 4, "started_at": T0 + 71, "done_at": T0 + 105}}
    hosts = switch_hosts()
    for host in hosts:
        host["gate"] = dict(host["gate"], shares=shares, started_at=shares[host["name"]]["started_at"])
        host["events"]["gate_done"] = T0 + 106
    return hosts


def test_a_split_suite_shows_each_engines_share_in_the_timeline_and_the_summary():
    timeline = sr.switch_timeline(split_hosts(), T0 + 120)
    assert timeline["spark-a gate_share_done"] == T0 + 100 and timeline["spark-b gate_share_done"] == T0 + 105
    assert timeline["gate_started"] == T0 + 61
    report = sr.switch_report(series((200, 5)), split_hosts(), dict(SWITCH_PLAN, gate_mode="before_admission"), T0 + 120)
    assert report["outcome"] == "ok"
    assert ("tool-calling gate: the suite was split over the new engines, each case alone on its engine - spark-a 2 cases "
            "in 39.0 s, spark-b 2 cases in 34.0 s; one verdict over all 4 cases") in report["tool_gate"]["summary"]
    assert report["tool_gate"]["summary"][-1].startswith("tool-calling gate: the new engines were healthy")
    assert report["tool_gate"]["gate_mode"] == "before_admission"
    assert report["tool_gate"]["shares"] == {"spark-a": ["c1", "c3"], "spark-b": ["c2", "c4"]}


def test_after_admission_a_gate_that_did_not_run_says_so():
    hosts = [dict(h, gate={}, events={"start": T0}) for h in switch_hosts()]
    report = sr.switch_report([], hosts, dict(AFTER_PLAN, rollback=True), T0 + 100)
    assert report["tool_gate"]["summary"] == ["tool-calling gate: did not run (the new topology did not come up)"]


# Issue 37, the owed gate: a re-run on the target whose records were behind the units gated the engines an interrupted
# switch had admitted, while they served; nothing stopped or started before the verdict.
OWED_PLAN = dict(AFTER_PLAN, on_target=True, heal=False, owed_gate=True, incumbent={"topology": "", "host": ""},
                 incumbent_score={}, inventory={"advice": "inventory: the hosts run replicas", "agrees": True},
                 gate_mode_why="the engine hosts run replicas but their topology records still name split: the switch "
                               "that admitted these engines was interrupted before its gate's verdict (an owed gate)")


def owed_hosts(passed_b=True):
    return [{"name": host["name"], "health": "serving", "gate": host["gate"],
             "events": {"start": T0, "serving": host["events"]["serving"], "gate_done": host["events"]["gate_done"]}}
            for host in after_hosts(passed_b)]


def test_an_owed_gate_that_passed_is_a_switch_that_went_through_and_its_timeline_says_owed_gate():
    report = sr.switch_report(series((200, 5)), owed_hosts(), OWED_PLAN, T0 + 200)
    assert report["outcome"] == "ok" and report["message"] == ""
    assert report["tool_gate"]["owed_gate"] is True and report["tool_gate"]["gate_mode"] == "after_admission"
    assert report["timeline"]["owed gate"] == 61.0 and "gate_started" not in report["timeline"]
    order = list(report["timeline"])
    assert order.index("first_serving") < order.index("owed gate") < order.index("gate_done")
    assert report["startup"] is None and report["tool_score"] == 75.5
    assert report["tool_gate"]["summary"][-1] == (
        "owed gate: the engine hosts run replicas but their topology records still name split: the switch that admitted "
        "these engines was interrupted before its gate's verdict (an owed gate); this run gated them while they served "
        "(124.0 s), stopping and starting nothing first")
    assert "  owed gate              61.0" in report["lines"]
    assert report["lines"][-1] == "inventory: the hosts run replicas"


def test_an_owed_gate_that_failed_rolls_back_and_says_it_was_the_owed_gate():
    hosts = owed_hosts(passed_b=False)
    hosts[1].update(failed=True, reason="spark-b: Tool-calling gate on spark-b: scored 75.5, below min_score 80.0.")
    report = sr.switch_report([], hosts, dict(OWED_PLAN, rollback=True, inventory={}), T0 + 200)
    assert report["outcome"] == "rolled_back"
    assert report["message"] == (
        "The switch to replicas (its owed gate: an interrupted switch admitted these engines before the gate's verdict) "
        "failed and was rolled back; the old topology serves again. \nWhy: spark-b: Tool-calling gate on spark-b: scored "
        "75.5, below min_score 80.0.")


def test_an_owed_gate_that_did_not_run_says_so():
    hosts = [dict(h, gate={}, events={"start": T0}) for h in owed_hosts()]
    report = sr.switch_report([], hosts, dict(OWED_PLAN, rollback=True), T0 + 100)
    assert report["tool_gate"]["summary"] == [OWED_PLAN["gate_mode_why"].join(["owed gate: ", ""])
                                              + "; it did not run (the engines did not serve)"]
    assert "owed gate" not in report["timeline"]


def test_on_the_target_without_an_owed_gate_nothing_changed():
    report = sr.switch_report([], [], dict(OWED_PLAN, owed_gate=False, gated=False, inventory={}), T0)
    assert report["outcome"] == "unchanged" and report["lines"] == ["already on replicas: nothing changed"]
