# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for the watchdog's judgement (plugins/module_utils/_host/watchdog_judge.py and _host/watchdog_config.py).

The Judge gets hand-made samples on a fake clock; the budget and the configuration are
checked on their own. No I/O: the daemon's cases (a fake host, the replays of published
failure shapes through the whole watchdog, a split pair, main()) are in test_watchdog.py.
"""

from __future__ import annotations

import dataclasses
import os
import types

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd as _systemd
from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog_config as _watchdog_config
from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog_judge as _watchdog_judge
from ansible_collections.factory_floor.llm.tests.unit.plugins.watchdog_samples import (
    OK, READ_TIMEOUT, TIMEOUT, UNIT, WALL0, W, config, counters, look, unit,
)

# The judgement's names under one prefix, as the daemon (``_watchdog``) has them.
wd = types.SimpleNamespace(**{**vars(_watchdog_config), **vars(_watchdog_judge)})


# --- configuration ------------------------------------------------------------------------------------


def test_defaults_give_a_detection_bound_of_140_seconds(tmp_path):
    cfg = config(tmp_path)
    assert (cfg.interval, cfg.stall_window, cfg.probe_timeout) == (5.0, 120.0, 15.0)
    # interval + window + probe: 5 + 120 + 15.
    assert cfg.detection_bound == 140.0
    assert config(tmp_path, probe=False).detection_bound == 125.0
    # A window that is not a multiple of the interval is judged at the next look.
    assert config(tmp_path, interval=4, stall_window=30).detection_bound == 4 + 32 + 15


@pytest.mark.parametrize("overrides, words", [
    ({"stall_windw": 30}, "unknown key(s) stall_windw"),
    ({"interval": 0}, "interval must be > 0"),
    ({"interval": "5"}, "interval must be a number"),
    ({"stall_window": 3, "interval": 5}, "stall_window (3s) must be at least interval"),
    ({"max_restarts": 0}, "max_restarts must be an integer >= 1"),
    ({"role": "leader"}, "role must be one of"),
    ({"role": "head", "status_listen": {"address": "10.0.0.1", "port": 8091}}, "needs peer_url"),
    ({"role": "worker", "peer_url": "http://10.0.0.1:8091/state"}, "needs status_listen"),
    ({"kill_commands": ["systemctl kill x"]}, "kill_commands must be a list of argv lists"),
    ({"container": {"engine": "/usr/bin/docker"}}, "container must be null or {engine, name}"),
    ({"container": "vllm-replica"}, "container must be null or {engine, name}"),
    ({"url": "spark-a:8000"}, "url:"),
    # No default path in the daemon: the role renders vllm_watchdog_lock_file.
    ({"lock_file": None}, "lock_file is required"),
])
def test_bad_configuration_names_the_key(tmp_path, overrides, words):
    with pytest.raises(wd.ConfigError) as err:
        config(tmp_path, **overrides)
    assert words in str(err.value)


def test_unit_info_of_systemctl_show():
    text = ("LoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\nExecMainStatus=0\nMainPID=0\n"
            "InvocationID=\nUnitFileState=enabled\nNRestarts=3\nExecMainStartTimestampMonotonic=12500000\n")
    info = wd.unit_info(_systemd.show(UNIT, lambda argv: (0, text, ""), properties=wd.UNIT_PROPERTIES))
    assert (info.active_state, info.main_pid, info.invocation_id, info.n_restarts, info.started_mono) == (
        "inactive", None, None, 3, 12.5)
    # vLLM's API server exits with status 0 when its engine core dies: down, although "success".
    assert info.down and info.wanted and not info.running


# --- what counts as work ------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["generation_tokens_total", "prompt_tokens_total", "iteration_tokens_total_count"])
def test_a_work_counter_going_up_is_work(field):
    before = counters()
    assert dataclasses.replace(before, **{field: getattr(before, field) + 1}).worked_since(before)


@pytest.mark.parametrize("field, value", [
    ("num_requests_waiting", 7),        # requests keep arriving at a frozen scheduler
    ("num_requests_running", 9),
    ("kv_cache_usage_perc", 0.9),
    ("request_success_total", 11),      # an abort finishes a request without work
    ("num_preemptions_total", 1),
])
def test_gauges_and_other_counters_are_not_work(field, value):
    before = counters()
    assert not dataclasses.replace(before, **{field: value}).worked_since(before)


def test_vllm_0_32_metrics_of_a_frozen_scheduler_show_no_work():
    """Exposition texts written by prometheus_client with vLLM 0.32.0's names, labels and buckets
    (vllm/v1/metrics/loggers.py): a request arrived (waiting 2 -> 3), nothing else moved."""
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "metrics")

    def read(name):
        with open(os.path.join(fixtures, name), encoding="utf-8") as handle:
            return wd.Counters.from_text(handle.read())

    t0, t1 = read("vllm_0_32_frozen_t0.txt"), read("vllm_0_32_frozen_t1.txt")
    assert (t0.iteration_tokens_total_count, t0.generation_tokens_total, t0.prompt_tokens_total) == (200, 4620, 2400)
    assert (t0.num_requests_waiting, t1.num_requests_waiting, t1.num_requests_running) == (2, 3, 4)
    assert t1.busy and not t1.worked_since(t0) and not t1.went_back(t0)
    assert dataclasses.replace(t1, iteration_tokens_total_count=201).worked_since(t0)


# --- hung, busy, idle ---------------------------------------------------------------------------------


@pytest.mark.parametrize("probe", [True, False])
def test_hung_detected_when_no_work_is_done_with_requests_running(tmp_path, probe):
    judge = wd.Judge(config(tmp_path, probe=probe))
    frozen = counters(gen=500, running=3)
    verdicts = [judge.assess(look(t, cnt=frozen)) for t in range(0, W, 5)]
    assert {v.action for v in verdicts} == {wd.NONE}
    assert verdicts[-1].state == wd.BUSY
    at_window = judge.assess(look(W, cnt=frozen))
    if probe:
        assert (at_window.state, at_window.action) == (wd.SUSPECT, wd.PROBE)
        assert "3 running, 0 waiting" in at_window.reason
        verdict = judge.probed(look(W, cnt=frozen), TIMEOUT, now=W + 15, after=frozen)
        assert verdict.evidence["probe"]["latency"] == 15.0
    else:
        verdict = at_window
    assert (verdict.state, verdict.action, verdict.hard) == (wd.HUNG, wd.RESTART, True)
    assert verdict.evidence["counters"]["generation_tokens_total"] == 500
    assert verdict.evidence["no_progress_for"] >= W


@pytest.mark.parametrize("hang_at", [0.1, 1.0, 2.5, 4.9])
def test_hang_under_load_is_declared_within_the_detection_bound(tmp_path, hang_at):
    cfg = config(tmp_path)
    judge = wd.Judge(cfg)
    t, gen, decided = 0.0, 0, None
    while decided is None and t < 400:
        if t < hang_at:
            gen += 7
        cnt = counters(gen=gen, steps=gen, running=4)
        verdict = judge.assess(look(t, cnt=cnt))
        if verdict.action == wd.PROBE:
            verdict = judge.probed(look(t, cnt=cnt), TIMEOUT, now=t + cfg.probe_timeout, after=cnt)
            decided = t + cfg.probe_timeout
        t += cfg.interval
    assert verdict.state == wd.HUNG
    assert decided - hang_at <= cfg.detection_bound == 140


@pytest.mark.parametrize("field", ["generation_tokens_total", "prompt_tokens_total", "iteration_tokens_total_count"])
def test_slow_but_working_is_never_restarted_nor_probed(tmp_path, field):
    # One unit of work every 100 s: slow, but work within every window.
    judge = wd.Judge(config(tmp_path))
    current = counters(gen=10, running=1, waiting=0, kv=0.2)
    for t in range(0, 1200, 5):
        if t % 100 == 0:
            current = dataclasses.replace(current, **{field: getattr(current, field) + 1})
        verdict = judge.assess(look(t, cnt=current))
        assert verdict.action == wd.NONE, (t, verdict)
        assert verdict.state == wd.BUSY


@pytest.mark.parametrize("field, step", [
    ("num_requests_waiting", 1),        # the queue grows
    ("num_requests_running", 1),
    ("kv_cache_usage_perc", 0.001),
])
def test_moving_gauges_do_not_stop_the_stall_window(tmp_path, field, step):
    judge = wd.Judge(config(tmp_path))
    current = counters(running=1, waiting=0, kv=0.2)
    for t in range(0, W, 5):
        if t % 10 == 0:
            current = dataclasses.replace(current, **{field: getattr(current, field) + step})
        assert judge.assess(look(t, cnt=current)).action == wd.NONE
    assert judge.assess(look(W, cnt=current)).action == wd.PROBE


def test_a_probe_that_finishes_starts_the_window_again(tmp_path):
    # Alive but frozen counters (a gauge stuck at "1 running" on an idle engine): one probe per
    # window, each one finishing (the scheduler worked for it), never a restart.
    judge = wd.Judge(config(tmp_path))
    frozen = counters(running=1)
    probes = []
    for t in range(0, 5 * W + 5, 5):
        verdict = judge.assess(look(t, cnt=frozen))
        if verdict.action == wd.PROBE:
            probes.append(t)
            verdict = judge.probed(look(t, cnt=frozen), OK, now=t, after=counters(running=1, gen=101, steps=41))
            assert (verdict.state, verdict.action) == (wd.BUSY, wd.NONE)
            assert "finished in 0.20s" in verdict.reason
            frozen = counters(running=1, gen=101, steps=41)
        assert verdict.action == wd.NONE
    # The probe's own token is in the new baseline: it does not count again at the next look.
    assert probes == [W, 2 * W, 3 * W, 4 * W, 5 * W]


def test_idle_engine_is_probed_and_a_silent_hang_found(tmp_path):
    judge = wd.Judge(config(tmp_path))
    idle = counters(running=0)
    assert judge.assess(look(0, cnt=idle)).state == wd.SERVING
    assert judge.assess(look(W - 5, cnt=idle)).action == wd.NONE
    suspect = judge.assess(look(W, cnt=idle))
    assert (suspect.state, suspect.action) == (wd.SUSPECT, wd.PROBE)
    assert "0 running, 0 waiting" in suspect.reason
    assert judge.probed(look(W, cnt=idle), TIMEOUT, after=idle).action == wd.RESTART


@pytest.mark.parametrize("after, state", [
    # The idle probe coincided with a burst of long prompts (seen in the lab): the 1-token
    # generation queued behind their prefill and missed its bound, but the prefill was work.
    (counters(running=8, waiting=1, prompt=50 + 8 * 900, steps=41), wd.BUSY),
    # Only the queue moved: the probe itself, or clients, waiting on a frozen scheduler.
    (counters(running=0, waiting=1), wd.HUNG),
    (counters(running=8, waiting=1, kv=0.7), wd.HUNG),
])
def test_what_happened_during_a_failed_probe_decides(tmp_path, after, state):
    judge = wd.Judge(config(tmp_path))
    idle = counters(running=0, waiting=0, prompt=50)
    for t in range(0, W, 5):
        judge.assess(look(t, cnt=idle))
    assert judge.assess(look(W, cnt=idle)).action == wd.PROBE
    verdict = judge.probed(look(W, cnt=idle), TIMEOUT, now=W + 15, after=after)
    assert verdict.state == state
    assert verdict.evidence["counters_after_probe"]["num_requests_running"] == after.num_requests_running
    if state == wd.BUSY:
        # ... and the stall window starts again from there.
        assert judge.assess(look(W + 20, cnt=after)).action == wd.NONE


def test_stopped_engine_core_does_no_work_during_the_probe_and_is_hung(tmp_path):
    judge = wd.Judge(config(tmp_path))
    frozen = counters(running=3)
    for t in range(0, W, 5):
        judge.assess(look(t, cnt=frozen))
    assert judge.assess(look(W, cnt=frozen)).action == wd.PROBE
    verdict = judge.probed(look(W, cnt=frozen), TIMEOUT, now=W + 15, after=counters(running=3, waiting=1))
    assert (verdict.state, verdict.action) == (wd.HUNG, wd.RESTART)


def test_cpu_progress_keeps_one_long_cpu_step_busy(tmp_path):
    # The CPU backend: one prefill step of 8 long prompts moved no vLLM value for
    # more than the window, but its processes kept using CPU.
    judge = wd.Judge(config(tmp_path, cpu_progress=True))
    for t in range(0, 3 * W, 5):
        cnt = dataclasses.replace(counters(running=0), cpu_seconds=100.0 + t * 1.8)
        verdict = judge.assess(look(t, cnt=cnt))
        assert (verdict.action, t) == (wd.NONE, t)


def test_cpu_progress_still_finds_a_stopped_engine_core(tmp_path):
    judge = wd.Judge(config(tmp_path, cpu_progress=True))
    stopped = dataclasses.replace(counters(running=3), cpu_seconds=250.0)
    for t in range(0, W, 5):
        judge.assess(look(t, cnt=stopped))
    assert judge.assess(look(W, cnt=stopped)).action == wd.PROBE
    assert judge.probed(look(W, cnt=stopped), TIMEOUT, now=W + 15, after=stopped).action == wd.RESTART


def test_cpu_progress_keeps_the_first_long_step_after_an_idle_probe_busy(tmp_path):
    # Lab, proxy scenario: an idle engine is probed when its window ends; 15 s later a
    # burst of long prompts arrives, and its first step moves no vLLM value for longer
    # than the window (no request counted running yet) while the workers compute.
    judge = wd.Judge(config(tmp_path, cpu_progress=True))
    idle = dataclasses.replace(counters(running=0), cpu_seconds=9.5)
    for t in range(0, W, 5):
        judge.assess(look(t, cnt=idle))
    assert judge.assess(look(W, cnt=idle)).action == wd.PROBE
    assert judge.probed(look(W, cnt=idle), OK, now=W + 0.1, after=idle).action == wd.NONE
    for t in range(W + 5, 3 * W, 5):
        cnt = dataclasses.replace(counters(running=0), cpu_seconds=9.5 + (t - W - 15) * 0.9 if t > W + 15 else 9.5)
        assert (judge.assess(look(t, cnt=cnt)).action, t) == (wd.NONE, t)


def test_cpu_progress_must_be_a_bool(tmp_path):
    with pytest.raises(wd.ConfigError, match="cpu_progress"):
        config(tmp_path, cpu_progress="yes")


def test_idle_without_probe_is_left_alone(tmp_path):
    judge = wd.Judge(config(tmp_path, probe=False))
    assert {judge.assess(look(t, cnt=counters(running=0))).action for t in range(0, 5 * W, 5)} == {wd.NONE}


def test_refused_probe_is_a_configuration_problem_not_a_hang(tmp_path):
    judge = wd.Judge(config(tmp_path))
    for t in range(0, W + 5, 5):
        judge.assess(look(t, cnt=counters()))
    verdict = judge.probed(look(W, cnt=counters()), wd.Probe("dead", error="HTTP 404", http_status=404), now=W)
    assert (verdict.state, verdict.action) == (wd.SUSPECT, wd.NONE)


@pytest.mark.parametrize("result", [
    wd.Probe("dead", error="GET /health answered HTTP 503", http_status=503),
    wd.Probe("loading", error="connection refused"),
])
def test_engine_dying_during_the_probe_is_dead_not_hung(tmp_path, result):
    judge = wd.Judge(config(tmp_path))
    for t in range(0, W + 5, 5):
        judge.assess(look(t, cnt=counters()))
    verdict = judge.probed(look(W, cnt=counters()), result)
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.NONE)


def test_metrics_unreadable_falls_back_to_the_probe(tmp_path):
    judge = wd.Judge(config(tmp_path))
    assert judge.assess(look(0)).action == wd.NONE
    verdict = judge.assess(look(W))
    assert verdict.action == wd.PROBE and "/metrics unreadable" in verdict.reason


def test_wrong_model_is_never_restarted(tmp_path):
    judge = wd.Judge(config(tmp_path))
    verdicts = [judge.assess(look(t, health="wrong_model")) for t in range(0, 3600, 60)]
    assert {(v.state, v.action) for v in verdicts} == {(wd.WRONG_MODEL, wd.NONE)}


CONFIG_ERROR = {"health": "config_error", "error": "GET http://127.0.0.1:8000/health not sent: the api_key ends with a newline"}


@pytest.mark.parametrize("served_first", [True, False])
def test_a_probe_that_could_not_be_sent_is_never_dead(tmp_path, served_first):
    """A key the client refuses says nothing about the engine: no restart, ever, whatever it served before."""
    judge = wd.Judge(config(tmp_path, dead_confirm=15, startup_grace=60))
    start = 0
    if served_first:
        judge.assess(look(0, cnt=counters()))
        start = 5
    verdicts = [judge.assess(look(t, **CONFIG_ERROR)) for t in range(start, 3600, 5)]
    assert {(v.state, v.action) for v in verdicts} == {(wd.CONFIG_ERROR, wd.NONE)}
    assert "ends with a newline" in verdicts[-1].reason and "not restarted" in verdicts[-1].reason


def test_a_generation_that_could_not_be_sent_is_not_a_hang(tmp_path):
    judge = wd.Judge(config(tmp_path))
    for t in range(0, W + 5, 5):
        judge.assess(look(t, cnt=counters()))
    result = wd.Probe("config_error", error="POST http://127.0.0.1:8000/v1/completions not sent: the api_key ...")
    verdict = judge.probed(look(W, cnt=counters()), result, now=W)
    assert (verdict.state, verdict.action) == (wd.CONFIG_ERROR, wd.NONE)


def test_a_key_that_is_no_bearer_token_is_refused_without_quoting_it(tmp_path):
    with pytest.raises(wd.ConfigError) as err:
        config(tmp_path, api_key="sk-7f3e9a2c41d86b05\n")
    assert str(err.value).startswith("api_key ends with a newline") and "7f3e" not in str(err.value)
    assert config(tmp_path, api_key="sk-7f3e9a2c41d86b05").api_key == "sk-7f3e9a2c41d86b05"


# --- a failing /health ---------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [
    {"health": "dead", "http_status": 503, "error": "GET /health answered HTTP 503"},
    {"health": "loading", "error": "connection refused"},
    {"health": "unreachable", "error": "no route to host"},
])
def test_an_engine_known_gone_is_dead_after_dead_confirm_without_a_probe(tmp_path, failure):
    judge = wd.Judge(config(tmp_path, dead_confirm=15))
    judge.assess(look(0, cnt=counters()))
    assert judge.assess(look(5, **failure)).action == wd.NONE
    assert judge.assess(look(15, **failure)).action == wd.NONE
    verdict = judge.assess(look(20, **failure))
    assert (verdict.state, verdict.action, verdict.hard) == (wd.DEAD, wd.RESTART, True)
    assert verdict.evidence["not_serving_for"] == 15


@pytest.mark.parametrize("failure", [
    READ_TIMEOUT,
    {"health": "dead", "http_status": 500, "error": "GET /health answered HTTP 500"},
])
@pytest.mark.parametrize("result, state, action", [
    (OK, wd.SLOW, wd.NONE),
    (TIMEOUT, wd.DEAD, wd.RESTART),
])
def test_health_failing_otherwise_is_a_suspicion_the_probe_decides(tmp_path, failure, result, state, action):
    judge = wd.Judge(config(tmp_path, dead_confirm=15))
    frozen = counters(running=2)
    judge.assess(look(0, cnt=frozen))
    assert judge.assess(look(5, cnt=frozen, **failure)).action == wd.NONE
    suspect = judge.assess(look(20, cnt=frozen, **failure))
    assert (suspect.state, suspect.action) == (wd.SUSPECT, wd.PROBE)
    verdict = judge.probed(look(20, cnt=frozen, **failure), result, now=20 + result.latency, after=frozen)
    assert (verdict.state, verdict.action) == (state, action)
    if state == wd.SLOW:
        # Alive: another full dead_confirm before the next probe.
        assert judge.assess(look(30, cnt=frozen, **failure)).action == wd.NONE


def test_health_failing_while_the_probe_fails_but_work_is_done_is_busy(tmp_path):
    judge = wd.Judge(config(tmp_path, dead_confirm=15))
    judge.assess(look(0, cnt=counters(gen=10)))
    judge.assess(look(5, cnt=None, **READ_TIMEOUT))   # /metrics timed out too
    assert judge.assess(look(20, cnt=None, **READ_TIMEOUT)).action == wd.PROBE
    verdict = judge.probed(look(20, cnt=None, **READ_TIMEOUT), TIMEOUT, now=35, after=counters(gen=90))
    assert (verdict.state, verdict.action) == (wd.BUSY, wd.NONE)


# --- start-up grace, dead, down -----------------------------------------------------------------------


def test_start_up_grace_ends_when_the_engine_serves(tmp_path):
    judge = wd.Judge(config(tmp_path, startup_grace=1800))
    for t in range(0, 200, 5):
        verdict = judge.assess(look(t, health="loading"))
        assert (verdict.state, verdict.action) == (wd.STARTING, wd.NONE)
    first = judge.assess(look(200, cnt=counters(running=0)))
    assert first.state == wd.SERVING and first.evidence["startup_took"] == 200
    # The grace is over: losing the port now is judged as dead at once, not after 1800 s.
    assert judge.assess(look(205, health="loading")).state == wd.DEAD
    verdict = judge.assess(look(220, health="loading"))
    assert (verdict.state, verdict.action, verdict.hard) == (wd.DEAD, wd.RESTART, True)


def test_hang_right_after_start_up_is_not_shielded_by_the_grace(tmp_path):
    judge = wd.Judge(config(tmp_path, startup_grace=1800))
    judge.assess(look(0, health="loading"))
    frozen = counters(running=2)
    for t in range(100, 100 + W, 5):
        assert judge.assess(look(t, cnt=frozen)).action == wd.NONE
    assert judge.assess(look(100 + W, cnt=frozen)).action == wd.PROBE


def test_engine_that_never_serves_is_restarted_after_the_grace(tmp_path):
    judge = wd.Judge(config(tmp_path, startup_grace=600))
    assert judge.assess(look(595, health="loading", u=unit(started_mono=1.0))).action == wd.NONE
    verdict = judge.assess(look(601, health="loading", u=unit(started_mono=1.0)))
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART)
    assert "start-up grace (600s" in verdict.reason


def test_grace_counts_from_the_units_start_not_from_the_first_look(tmp_path):
    judge = wd.Judge(config(tmp_path, startup_grace=600))
    # The watchdog itself (re)started at t=590; the engine has been loading since t=1.
    verdict = judge.assess(look(605, health="loading", u=unit(started_mono=1.0)))
    assert verdict.action == wd.RESTART


def test_dead_engine_is_left_to_systemd_while_it_restarts_it(tmp_path):
    """SIGKILL of EngineCore: 503, the API server exits 0, Restart=always starts a new run."""
    judge = wd.Judge(config(tmp_path))
    judge.assess(look(0, cnt=counters()))
    assert judge.assess(look(5, health="dead", http_status=503)).action == wd.NONE
    assert judge.assess(look(9, u=unit(active_state="activating", sub_state="auto-restart"), health=None)).state == wd.STARTING
    new_run = unit(invocation_id="inv-2", started_mono=14.0)
    verdicts = [judge.assess(look(t, health="loading", u=new_run)) for t in range(15, 300, 5)]
    assert {(v.state, v.action) for v in verdicts} == {(wd.STARTING, wd.NONE)}


@pytest.mark.parametrize("active, result, status", [
    ("inactive", "success", 0),      # exit 0 without Restart=always
    ("failed", "exit-code", 1),
    ("failed", "signal", None),
])
def test_unit_down_while_enabled_is_started(tmp_path, active, result, status):
    judge = wd.Judge(config(tmp_path, down_confirm=10))
    down = unit(active_state=active, sub_state="dead" if active == "inactive" else "failed", result=result,
                exec_main_status=status, main_pid=None)
    assert judge.assess(look(0, u=down, health=None)).action == wd.NONE
    verdict = judge.assess(look(10, u=down, health=None))
    assert (verdict.state, verdict.action, verdict.hard) == (wd.DOWN, wd.RESTART, False)
    assert "while enabled" in verdict.reason


@pytest.mark.parametrize("u, state", [
    (unit(unit_file_state="disabled", active_state="inactive", sub_state="dead"), wd.NOT_WANTED),
    (unit(load_state="not-found", unit_file_state=None), wd.NOT_WANTED),
    (unit(active_state="activating", sub_state="auto-restart"), wd.STARTING),
    (unit(active_state="deactivating", sub_state="stop-sigterm"), wd.STARTING),
])
def test_units_that_are_not_ours_or_in_systemds_hands_are_left_alone(tmp_path, u, state):
    judge = wd.Judge(config(tmp_path))
    verdicts = [judge.assess(look(t, u=u, health=None)) for t in range(0, 600, 5)]
    assert {(v.state, v.action) for v in verdicts} == {(state, wd.NONE)}


def test_systemds_own_start_limit_is_not_overridden(tmp_path):
    judge = wd.Judge(config(tmp_path))
    verdict = judge.assess(look(0, u=unit(active_state="failed", sub_state="failed", result="start-limit-hit"), health=None))
    assert (verdict.state, verdict.action) == (wd.DOWN, wd.GIVE_UP)


# --- counters after a restart -------------------------------------------------------------------------


def test_counter_reset_after_restart_is_a_new_baseline_not_a_stall(tmp_path):
    judge = wd.Judge(config(tmp_path))
    for t, gen in ((0, 1000), (5, 1010), (10, 1020)):
        judge.assess(look(t, cnt=counters(gen=gen, start=1000.0)))
    # A new engine process in the same unit run (e.g. a container restarted its entrypoint).
    verdict = judge.assess(look(15, cnt=counters(gen=3, prompt=1, success=0, start=2000.0)))
    assert verdict.action == wd.NONE and verdict.evidence["counters_reset"] is True
    # The window counts from the reset, and a moving counter after it is progress as usual.
    for t, gen in ((20, 3), (25, 3), (30, 3), (35, 4), (40, 4)):
        assert judge.assess(look(t, cnt=counters(gen=gen, prompt=1, success=0, start=2000.0))).action == wd.NONE


def test_new_run_of_the_unit_starts_a_new_baseline_and_grace(tmp_path):
    judge = wd.Judge(config(tmp_path))
    for t in range(0, 30, 5):
        judge.assess(look(t, cnt=counters(gen=9999)))
    again = unit(invocation_id="inv-2", started_mono=28.0)
    assert judge.assess(look(30, health="loading", u=again)).state == wd.STARTING
    assert judge.assess(look(60, cnt=counters(gen=0), u=again)).evidence["startup_took"] == 32
    assert [judge.assess(look(t, cnt=counters(gen=0), u=again)).action for t in range(65, 90, 5)] == [wd.NONE] * 5


# --- the budget ---------------------------------------------------------------------------------------


def _ages(now):
    """Each record's age at ``now``, on the same clock as its ``t``."""
    return lambda record: now - record["t"]


def test_budget_allows_the_first_restart_at_once_then_backs_off_then_is_exhausted():
    budget = wd.Budget(max_restarts=3, window=3600, backoff=60, backoff_max=600)
    assert budget.check([], _ages(1000)).allowed
    history = [{"t": 1000}]
    check = budget.check(history, _ages(1030))
    assert (check.allowed, check.exhausted, round(check.wait)) == (False, False, 30)
    assert budget.check(history, _ages(1060)).allowed
    history.append({"t": 1100})
    assert round(budget.check(history, _ages(1150)).wait) == 70  # 120 s after the second
    assert budget.check(history, _ages(1220)).allowed
    history.append({"t": 1300})
    check = budget.check(history, _ages(1400))
    assert (check.allowed, check.exhausted) == (False, True) and "max_restarts 3" in check.why
    # Restarts older than the window no longer count.
    assert budget.check(history, _ages(1000 + 3600)).used == 2


# --- the split pair: what rank 1 does with a request ----------------------------------------------


@pytest.mark.parametrize("seen, asked, decision", [
    (None, None, "none"),
    ("r1", {"id": "r1", "age": 1.0}, "none"),
    ("r1", {"id": "r2", "age": 9999.0}, "follow"),   # made while rank 1's watchdog was down
    (None, {"id": "r1", "age": 9999.0}, "adopt"),    # first contact, an old request
    (None, {"id": "r1", "age": 5.0}, "follow"),      # first contact, rank 0 is waiting for it
    # Made before rank 0's watchdog last started (no age): old. Its UNIX time is never read.
    (None, {"id": "r1", "time": WALL0, "age": None}, "adopt"),
    (None, {"id": "r1", "time": WALL0}, "adopt"),
])
def test_follow_decision(seen, asked, decision):
    assert wd.follow_decision(seen, asked, 60) == decision


# --- a split group of N ranks: rank 0's view of each worker ------------------------------------------


def _head(tmp_path, ranks=3):
    return wd.Judge(config(tmp_path, role="head", peer_urls=["http://r%d/state" % r for r in range(1, ranks)],
                           status_listen={"address": "r0", "port": 1}))


def _rank_state(running_for=30.0, **unit_overrides):
    return {"unit_state": unit(name="vllm-split.service", **unit_overrides).as_dict(), "running_for": running_for}


def test_each_worker_has_its_own_down_confirm(tmp_path):
    judge = _head(tmp_path)
    down = _rank_state(None, active_state="failed", sub_state="failed", result="exit-code")
    up = _rank_state()

    def sample(t, peers):
        return wd.Sample(time=t, unit=unit(), health=OK, counters=counters(), peers=peers)

    assert judge.assess(sample(0, [(down, None), (up, None)])).action == wd.NONE
    # Rank 1 came back at t=5 (its timer cleared), rank 2 went down then: neither has been down for 10 s.
    assert judge.assess(sample(5, [(up, None), (down, None)])).action == wd.NONE
    assert judge.assess(sample(10, [(down, None), (down, None)])).action == wd.NONE
    verdict = judge.assess(sample(15, [(down, None), (down, None)]))
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART)
    assert verdict.reason.startswith("rank 2 (vllm-split.service on the peer) is failed for 10s")
    assert verdict.evidence["rank2_down_for"] == 10.0 and "rank1_down_for" not in verdict.evidence


def test_an_unreachable_or_disabled_worker_is_evidence_only(tmp_path):
    judge = _head(tmp_path, ranks=4)
    other_topology = _rank_state(unit_file_state="disabled", active_state="inactive", sub_state="dead")
    peers = [(None, "ConnectionError: no route to host"), (other_topology, None), (_rank_state(), None)]
    for t in (0, 30, 60):
        verdict = judge.assess(wd.Sample(time=t, unit=unit(), health=OK, counters=counters(), peers=peers))
        assert verdict.action == wd.NONE
    assert verdict.evidence["rank1"] == "watchdog unreachable: ConnectionError: no route to host"
    assert verdict.evidence["rank2"].startswith("ActiveState=inactive") and verdict.evidence["rank3"].startswith("Active")


def test_a_pair_sample_is_rank_1_alone():
    peer = _rank_state()
    assert wd.Sample(time=0, peer=peer).ranks() == [(1, peer, None)]
    assert wd.Sample(time=0, peer_error="refused").ranks() == [(1, None, "refused")]
    assert wd.Sample(time=0).ranks() == []
    assert wd.Sample(time=0, peers=[(peer, None), (None, "x")]).ranks() == [(1, peer, None), (2, None, "x")]


@pytest.mark.parametrize("raw, words", [
    ({"role": "head", "peer_urls": [], "status_listen": {"address": "a", "port": 1}}, "role head needs peer_urls"),
    ({"role": "worker", "peer_urls": ["http://a/state", "http://c/state"], "status_listen": {"address": "b", "port": 1}},
     "exactly one URL"),
    ({"role": "head", "peer_urls": ["http://b/state", "http://b/state"], "status_listen": {"address": "a", "port": 1}},
     "names a rank twice"),
    ({"role": "head", "peer_urls": "http://b/state", "status_listen": {"address": "a", "port": 1}},
     "peer_urls must be a list"),
    ({"role": "head", "peer_url": "http://b/state", "peer_urls": ["http://c/state"],
      "status_listen": {"address": "a", "port": 1}}, "not both"),
])
def test_bad_peer_urls_name_the_key(tmp_path, raw, words):
    with pytest.raises(wd.ConfigError) as err:
        config(tmp_path, **raw)
    assert words in str(err.value)
