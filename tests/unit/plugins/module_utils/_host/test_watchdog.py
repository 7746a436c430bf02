# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/watchdog.py, the vLLM watchdog's daemon.

The Watchdog runs against a ``World`` (the engine host as the watchdog sees it: a
systemd unit answered by a fake ``systemctl show``, health, counters, probe, and a log
of the commands run); two Watchdogs wired to each other play a split pair; main() runs
once against a loopback fake vLLM and a fake systemctl script. The "replay" tests play
the published failure shapes through the watchdog with its default settings. The
judgement's own tests (the Judge on hand-made samples, the budget, the configuration)
are in test_watchdog_judge.py, those of reading an engine's CPU time in test_proc.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import stat
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog as wd
from ansible_collections.factory_floor.llm.tests.unit.plugins.watchdog_samples import (
    OK, READ_TIMEOUT, TIMEOUT, UNIT, WALL0, W, config, counters, look, unit,
)


def test_cpu_of_spinning_workers_is_no_progress_while_the_engine_core_is_stopped(tmp_path):
    # Lab, SIGSTOP of the engine core under load: its worker kept polling shared
    # memory for the next step, so the engine's CPU time went on rising.
    judge = wd.Judge(config(tmp_path, cpu_progress=True))
    judge.assess(look(0, cnt=dataclasses.replace(counters(running=3), cpu_seconds=250.0)))
    for t in range(5, W, 5):
        cnt = dataclasses.replace(counters(running=3), cpu_seconds=250.0 + t, cpu_stopped=("VLLM::EngineCor pid 11",))
        assert judge.assess(look(t, cnt=cnt)).action == wd.NONE
    last = dataclasses.replace(counters(running=3), cpu_seconds=250.0 + W, cpu_stopped=("VLLM::EngineCor pid 11",))
    verdict = judge.assess(look(W, cnt=last))
    assert verdict.action == wd.PROBE
    assert verdict.evidence["counters"]["cpu_stopped"] == ["VLLM::EngineCor pid 11"]
    after = dataclasses.replace(last, cpu_seconds=last.cpu_seconds + 10)
    assert judge.probed(look(W, cnt=last), TIMEOUT, now=W + 15, after=after).action == wd.RESTART


# --- the replays: published failure shapes through the watchdog's defaults -----------------------------


def _arrivals(gaps, start):
    """Arrival times from a cycle of gaps (seconds) after ``start``."""
    times, t = [], start
    for gap in itertools.islice(itertools.cycle(gaps), 200):
        t += gap
        times.append(t)
    return times


@pytest.mark.parametrize("gaps", [(10,), (40,), (10, 25, 40, 15, 30, 20, 35)])
@pytest.mark.parametrize("busy_when_frozen", [True, False])
def test_replay_a_requests_arriving_at_a_frozen_scheduler_is_hung_and_restarted(tmp_path, gaps, busy_when_frozen):
    """(a) The scheduler freezes; clients keep sending a request every 10-40 s, so the waiting
    count rises, and the watchdog's own probe joins the queue too. Declared hung and restarted within
    the detection bound, counted from the freeze (or from the first request, if it was idle)."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    frozen_at = 60.0
    running = 3 if busy_when_frozen else 0
    arrivals = _arrivals(gaps, frozen_at)
    state = {"gen": 0, "waiting": 0}

    def engine_at(now):
        if now < frozen_at:
            state["gen"] = int(now) * 7 if busy_when_frozen else 0
        waiting = state["waiting"] + sum(1 for a in arrivals if a <= now)
        return counters(gen=state["gen"], steps=state["gen"], prompt=50, running=running, waiting=waiting)

    def probe():
        state["waiting"] += 1          # the probe's own request waits in the frozen queue
        clock.now += TIMEOUT.latency
        return TIMEOUT

    dog.generate_probe = probe
    dog.scrape = lambda: engine_at(clock.now)
    verdicts = []
    while clock.now < 600:
        verdicts.append(dog.tick())
        if verdicts[-1].action == wd.RESTART:
            break
        clock.now += 5
    assert verdicts[-1].state == wd.HUNG
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart")]
    first_seen = frozen_at if busy_when_frozen else arrivals[0]
    assert clock.now - first_seen <= dog.config.detection_bound
    assert {v.state for v in verdicts[:-1]} <= {wd.SERVING, wd.BUSY}


@pytest.mark.parametrize("stall", [30, 70, 110])
def test_replay_b_a_long_stall_then_progress_is_not_restarted(tmp_path, stall):
    """(b) Tokens stop for 70 s (a first-shape compile, a long prefill), then come again."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    probes = []
    dog.generate_probe = lambda: probes.append(clock.now) or TIMEOUT
    stall_from = 60

    def engine_at(now):
        worked = now if now < stall_from else (stall_from if now < stall_from + stall else now - stall)
        return counters(gen=int(worked) * 3, steps=int(worked), running=2, waiting=1)

    for _look in range(100):
        world.counters = engine_at(clock.now)
        verdict = dog.tick()
        assert verdict.action == wd.NONE and verdict.state == wd.BUSY, (clock.now, verdict)
        clock.now += 5
    assert world.commands == [] and probes == []


@pytest.mark.parametrize("failure", [READ_TIMEOUT, {"health": "dead", "http_status": 500, "error": "HTTP 500"}])
@pytest.mark.parametrize("metrics_every", [1, 2])
def test_replay_c_health_timing_out_for_45_s_while_tokens_advance_is_not_restarted(tmp_path, failure, metrics_every):
    """(c) Under load /health times out (5 s) for 45 s; /metrics (every look, or every other look)
    shows tokens advancing. Never dead, never probed."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    probes = []
    dog.generate_probe = lambda: probes.append(clock.now) or TIMEOUT
    seen = []
    for look_no in range(60):
        failing = 30 <= clock.now < 75
        world.health = wd.Probe(failure["health"], error=failure["error"], http_status=failure.get("http_status"),
                                latency=5.0) if failing else wd.Probe("serving")
        readable = not failing or look_no % metrics_every == 0
        world.counters = counters(gen=100 + 9 * look_no, steps=40 + look_no, running=4) if readable else None
        verdict = dog.tick()
        seen.append(verdict.state)
        assert verdict.action == wd.NONE, (clock.now, verdict)
        clock.now += 5
    assert world.commands == [] and probes == []
    assert wd.SLOW in seen and wd.DEAD not in seen
    assert seen[-1] == wd.BUSY


@pytest.mark.parametrize("probe_latency", [0.05, 14.0])
def test_replay_d_idle_engine_flat_counters_probe_passes_is_not_restarted(tmp_path, probe_latency):
    """(d) An idle engine: every counter flat for an hour; each probe finishes."""
    clock, lines = Clock(), []
    world = World(clock)
    world.generate = wd.Probe("serving", latency=probe_latency)
    dog = world.watchdog(config(tmp_path), lines)
    probed = []
    generate = dog.generate_probe
    dog.generate_probe = lambda: probed.append(clock.now) or generate()
    verdicts = run_until(dog, clock, 3600)
    assert world.commands == []
    assert {v.action for v in verdicts} == {wd.NONE}
    # One probe per window (plus the probe's own time), no more.
    assert 3600 // (W + 20) <= len(probed) <= 3600 // W


@pytest.mark.parametrize("idle_for", [100, 115, 300])
@pytest.mark.parametrize("compile_for", [70, 110])
def test_an_idle_spell_does_not_eat_the_window_of_the_first_step(tmp_path, idle_for, compile_for):
    """Idle (probes pass), then the first request of a new shape: a compile moves nothing for
    ``compile_for`` s. The window counts from the request, so no probe runs into the compile."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    busy_probes = []

    def probe():
        if world.counters.busy:
            busy_probes.append(clock.now)      # it would queue behind the compile and time out
            clock.now += TIMEOUT.latency
            return TIMEOUT
        return OK

    dog.generate_probe = probe
    for _look in range(120):
        now = clock.now
        if now < idle_for:
            world.counters = counters(running=0, gen=0, steps=0)
        elif now < idle_for + compile_for:
            world.counters = counters(running=1, gen=0, steps=0)
        else:
            done = int(now - idle_for - compile_for)
            world.counters = counters(running=1, gen=done, steps=done)
        verdict = dog.tick()
        assert verdict.action == wd.NONE, (now, verdict)
        clock.now += 5
    assert world.commands == [] and busy_probes == []


# --- the watchdog loop against a world ----------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def wall(self):
        return WALL0 + self.now

    def sleep(self, seconds):
        self.now += seconds


def render(u):
    return "\n".join([
        "LoadState=%s" % (u.load_state or ""), "ActiveState=%s" % u.active_state, "SubState=%s" % u.sub_state,
        "Result=%s" % (u.result or ""), "ExecMainStatus=%s" % ("" if u.exec_main_status is None else u.exec_main_status),
        "MainPID=%s" % (u.main_pid or 0), "InvocationID=%s" % (u.invocation_id or ""),
        "UnitFileState=%s" % (u.unit_file_state or ""), "NRestarts=%s" % (u.n_restarts or 0),
        "ExecMainStartTimestampMonotonic=%d" % ((u.started_mono or 0) * 1e6)]) + "\n"


class World:
    """One engine host: its unit, what the engine answers, and every command run.

    ``skew``: seconds this host's wall clock is ahead of the others' (its monotonic clock
    is its own too, but only differences of it are ever used)."""

    def __init__(self, clock, name="spark-a", log=None):
        self.clock, self.name = clock, name
        self.skew = 0.0
        self.unit = unit(started_mono=0.0)
        self.health = wd.Probe("serving")
        self.counters = counters(running=0)
        self.generate = OK
        self.commands = log if log is not None else []
        self.runs = 1
        self.restart_at = None   # like systemd's Restart=always, RestartSec=5 after a kill
        self.restart_no = False  # a Restart=no drop-in read by daemon-reload
        self.dropin = None

    def _start(self):
        self.runs += 1
        self.restart_at = None
        self.unit = dataclasses.replace(self.unit, active_state="active", sub_state="running", result="success",
                                        invocation_id="inv-%d" % self.runs, started_mono=self.clock.now)
        self.health, self.counters = wd.Probe("loading"), None

    def run(self, argv, timeout=None):
        if self.restart_at is not None and self.clock.now >= self.restart_at:
            self.commands.append((self.name, "auto-restart"))
            self._start()
        if argv[1:2] == ["show"]:
            return 0, render(self.unit)
        self.commands.append((self.name, argv[1] if argv[0] == "systemctl" else argv[0]))
        if argv[1:2] in (["restart"], ["start"]):
            self._start()
        elif argv[1:2] == ["kill"]:
            self.health, self.counters = wd.Probe("loading"), None
            if self.restart_no:
                self.unit = dataclasses.replace(self.unit, active_state="failed", sub_state="failed", result="signal")
            else:
                self.unit = dataclasses.replace(self.unit, active_state="activating", sub_state="auto-restart",
                                                result="signal")
                self.restart_at = self.clock.now + 5
        elif argv[1:2] == ["daemon-reload"]:
            self.restart_no = self.dropin is not None and os.path.exists(self.dropin) and "Restart=no" in open(
                self.dropin, encoding="utf-8").read()
        elif argv[1:2] == ["stop"]:
            self.unit = dataclasses.replace(self.unit, active_state="inactive", sub_state="dead")
            self.health, self.counters = wd.Probe("loading"), None
            self.restart_at = None
        return 0, ""

    def scrape(self):
        if self.counters is None:
            raise wd.metrics.ScrapeError("GET /metrics: cannot connect")
        return self.counters

    def watchdog(self, cfg, lines, **kwargs):
        kwargs.setdefault("sleep", self.clock.sleep)
        self.dropin = os.path.join(cfg.dropin_dir, "%s.d" % cfg.unit, wd.DROPIN_NAME)
        return wd.Watchdog(cfg, health_probe=lambda: self.health, generate_probe=self.probe, scrape=self.scrape,
                           run=self.run, log=lines.append, clock=self.clock, wall=lambda: self.clock.wall() + self.skew,
                           **kwargs)

    def probe(self):
        self.clock.now += self.generate.latency
        return self.generate


def events(lines, priority=None):
    found = []
    for line in lines:
        prio, _sep, body = line[1:].partition(">")
        if priority is None or int(prio) == priority:
            found.append(json.loads(body)["event"])
    return found


def run_until(watchdog, clock, until, step=5.0, stop=None):
    verdicts = []
    while clock.now < until:
        verdicts.append(watchdog.tick())
        if stop is not None and stop(verdicts[-1]):
            break
        clock.now += step
    return verdicts


def test_watchdog_kills_a_hung_engine_then_restarts_it_and_logs_the_evidence(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    run_until(dog, clock, 20)
    world.counters = counters(gen=777, running=3)   # SIGSTOP under load: everything freezes
    world.generate = TIMEOUT
    verdicts = run_until(dog, clock, 400, stop=lambda v: v.action == wd.RESTART)
    assert verdicts[-1].state == wd.HUNG
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart")]  # killed first: the port closes
    restart = [json.loads(line[3:]) for line in lines if '"event": "restart"' in line][0]
    assert line_priority(lines, "restart") == wd.WARNING
    assert restart["evidence"]["counters"]["generation_tokens_total"] == 777
    assert restart["evidence"]["probe"]["latency"] == 15.0
    assert restart["budget"]["used"] == 1
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["restarts"][0]["verdict"] == wd.HUNG
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["restarts_total"] == 1 and status["detection_bound"] == 140
    # The restarted engine loads: a new grace, no action meanwhile.
    assert {v.action for v in run_until(dog, clock, clock.now + 600)} == {wd.NONE}


@pytest.mark.parametrize("container, root", [(None, 100), ({"engine": "/usr/bin/docker", "name": "vllm-replica"}, 4242)])
def test_cpu_progress_counts_the_tree_of_the_containers_main_process(tmp_path, container, root):
    # docker: the unit's MainPID (100) is the `docker run` client; vLLM's API server is the
    # container's PID 1 (4242 on the host), under containerd-shim.
    clock, lines = Clock(), []
    world = World(clock)
    inspects, roots = [], []

    def run(argv, timeout=None):
        if argv[1:3] == ["container", "inspect"]:
            inspects.append(argv)
            return 0, "4242\n"
        return world.run(argv, timeout)

    cfg = config(tmp_path, cpu_progress=True, container=container)
    dog = wd.Watchdog(cfg, health_probe=lambda: world.health, generate_probe=world.probe, scrape=world.scrape, run=run,
                      log=lines.append, clock=clock, wall=clock.wall, cpu_seconds=lambda pid: roots.append(pid) or (1.0, []))
    run_until(dog, clock, 30)
    assert roots and set(roots) == {root}
    if container is None:
        assert inspects == []
        return
    # Read once per run of the unit, not at every look.
    assert inspects == [["/usr/bin/docker", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]]
    world.unit = dataclasses.replace(world.unit, invocation_id="inv-9", main_pid=101)
    run_until(dog, clock, 60)
    assert len(inspects) == 2


def test_cpu_progress_looks_again_while_the_container_does_not_run_yet(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    answers, roots = ["0\n", "0\n", "5150\n"], []

    def run(argv, timeout=None):
        if argv[1:3] == ["container", "inspect"]:
            return 0, answers.pop(0) if answers else "5150\n"
        return world.run(argv, timeout)

    cfg = config(tmp_path, cpu_progress=True, container={"engine": "/usr/bin/podman", "name": "vllm-replica"})
    dog = wd.Watchdog(cfg, health_probe=lambda: world.health, generate_probe=world.probe, scrape=world.scrape, run=run,
                      log=lines.append, clock=clock, wall=clock.wall, cpu_seconds=lambda pid: roots.append(pid) or (1.0, []))
    run_until(dog, clock, 40)
    # No CPU reading while the container's PID is unknown; the tree of 5150 once it runs.
    assert set(roots) == {5150} and answers == []


def line_priority(lines, event):
    for line in lines:
        if '"event": "%s"' % event in line:
            return int(line[1:line.index(">")])
    return None


def test_watchdog_starts_a_unit_that_exited_with_status_0(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    world.unit = unit(active_state="inactive", sub_state="dead", result="success", exec_main_status=0, main_pid=None)
    dog = world.watchdog(config(tmp_path), lines)
    run_until(dog, clock, 30, stop=lambda v: v.action == wd.RESTART)
    assert world.commands == [("spark-a", "restart")]   # nothing runs: nothing to kill


def test_budget_exhausted_leaves_the_unit_failed_and_says_why(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    cfg = config(tmp_path, max_restarts=2, backoff=0)
    dog = world.watchdog(cfg, lines)
    for _round in range(3):
        world.health, world.counters, world.generate = wd.Probe("serving"), counters(gen=5, running=1), TIMEOUT
        verdicts = run_until(dog, clock, clock.now + 300, stop=lambda v: v.action in (wd.RESTART, wd.GIVE_UP))
    assert verdicts[-1].state == wd.GAVE_UP
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart"), ("spark-a", "kill"), ("spark-a", "restart"),
                              ("spark-a", "daemon-reload"), ("spark-a", "kill")]
    dropin = tmp_path / "run-systemd" / (UNIT + ".d") / wd.DROPIN_NAME
    assert "Restart=no" in dropin.read_text()
    assert "gave_up" in events(lines, wd.ERR)
    gave_up = json.loads((tmp_path / "state.json").read_text())["gave_up"]
    assert "restart budget exhausted: 2 restart(s)" in gave_up["why"]
    assert world.unit.active_state == "failed"
    # It stays down: no more commands, whatever the engine looks like.
    before = list(world.commands)
    held = run_until(dog, clock, clock.now + 3600)
    assert world.commands == before and {v.state for v in held} == {wd.GAVE_UP}
    assert json.loads((tmp_path / "status.json").read_text())["gave_up"]["why"] == gave_up["why"]
    # A restarted watchdog still knows it gave up (the state file).
    again = world.watchdog(cfg, lines)
    assert again.tick().state == wd.GAVE_UP and world.commands == before
    # The operator starts the unit: the watchdog resumes, with a clean history and no drop-in.
    world.run(["systemctl", "restart", UNIT])
    world.health, world.counters = wd.Probe("serving"), counters(running=0)
    assert again.tick().state == wd.SERVING
    assert not dropin.exists() and "resumed" in events(lines, wd.NOTICE)
    assert json.loads((tmp_path / "state.json").read_text())["restarts"] == []


def test_backoff_holds_a_second_restart_back(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path, backoff=600, backoff_max=900, startup_grace=60), lines)
    world.health = wd.Probe("loading")
    run_until(dog, clock, 100, stop=lambda v: v.action == wd.RESTART)
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart")]
    held = run_until(dog, clock, clock.now + 300)
    assert any("restart held back: backoff" in v.reason for v in held)
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart")]


# --- clocks: every wait and age of the watchdog is measured on its own monotonic clock -----------------


def _hung(world):
    world.health, world.counters, world.generate = wd.Probe("serving"), counters(gen=5, running=1), TIMEOUT


def _restarts(world):
    return [c for c in world.commands if c[1] == "restart"]


@pytest.mark.parametrize("step", [-7200.0, -86400.0])
def test_a_wall_clock_step_back_does_not_hold_the_next_restart_back(tmp_path, step):
    """NTP, an operator or a resumed VM steps the wall clock back after a restart: the backoff
    (60 s) still counts from the restart, not from a moment the wall clock will only reach later."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path, backoff=60, max_restarts=3), lines)
    _hung(world)
    run_until(dog, clock, 400, stop=lambda v: v.action == wd.RESTART)
    first = clock.now
    world.skew = step
    run_until(dog, clock, clock.now + 30)    # the restarted engine loads
    _hung(world)                             # and hangs again once it serves
    verdicts = run_until(dog, clock, first + 400, stop=lambda v: v.action == wd.RESTART)
    assert verdicts[-1].action == wd.RESTART and len(_restarts(world)) == 2
    assert clock.now - first <= 60 + 30 + dog.config.detection_bound


def test_a_wall_clock_step_forward_does_not_forget_restarts(tmp_path):
    """Two restarts within the hour, then the wall clock jumps two hours ahead: the budget
    (2 in 3600 s) is still spent, so the third hang is given up on, not restarted."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path, max_restarts=2, backoff=0), lines)
    for _round in range(2):
        _hung(world)
        run_until(dog, clock, clock.now + 300, stop=lambda v: v.action == wd.RESTART)
    world.skew = 7200.0
    _hung(world)
    verdicts = run_until(dog, clock, clock.now + 300, stop=lambda v: v.action in (wd.RESTART, wd.GIVE_UP))
    assert verdicts[-1].state == wd.GAVE_UP and len(_restarts(world)) == 2
    assert "restart budget exhausted: 2 restart(s)" in json.loads((tmp_path / "state.json").read_text())["gave_up"]["why"]


def test_restarts_of_an_earlier_boot_count_by_their_unix_time(tmp_path):
    """A monotonic reading means nothing after a reboot: an earlier boot's restart is aged by its UNIX time."""
    (tmp_path / "state.json").write_text(json.dumps({"restarts": [
        {"time": WALL0 - 100, "mono": 5.0, "boot": "boot-before", "verdict": "hung"},
        {"time": WALL0 - 4000, "mono": 9.0, "boot": "boot-before", "verdict": "hung"},
        # Same boot: its monotonic reading decides (30 s ago), whatever its UNIX time says.
        {"time": WALL0 - 99999, "mono": -30.0, "boot": "boot-now", "verdict": "dead"},
    ]}))
    clock = Clock()
    dog = World(clock).watchdog(config(tmp_path), [], boot="boot-now")
    budget = json.loads(dog.status_json())["budget"]
    assert budget["used"] == 2


def _split_started_together(tmp_path, **kwargs):
    pair = split_pair(tmp_path, **kwargs)
    clock, commands, head_world, worker_world = pair[:4]
    for world in (head_world, worker_world):
        world.unit = dataclasses.replace(world.unit, started_mono=1.0)
    # Rank 0 waits for rank 1's rendezvous: its port stays closed while both load.
    head_world.health, head_world.counters = wd.Probe("loading"), None
    return pair


@pytest.mark.parametrize("skew", [-600.0, -125.0, 600.0, -86400.0])
def test_skewed_clocks_never_restart_a_pair_that_started_together(tmp_path, skew):
    """Rank 1's wall clock is off by ``skew`` seconds: a pair that started together loads in peace."""
    clock, commands, _head_world, worker_world, head, worker, _lines = _split_started_together(tmp_path)
    worker_world.skew = skew
    for _look in range(120):
        worker.tick()
        assert head.tick().action == wd.NONE
        clock.now += 5
    assert commands == []


@pytest.mark.parametrize("skew", [-1000.0, 1000.0])
def test_an_older_rank_1_is_found_whatever_the_clocks_say(tmp_path, skew):
    """Rank 0 was restarted alone at t=1000; rank 1 has run since t=1: it will not join."""
    clock, commands, head_world, worker_world, head, worker, _lines = _split_started_together(tmp_path)
    worker_world.skew = skew
    clock.now = 1000.0
    head_world.unit = dataclasses.replace(head_world.unit, invocation_id="inv-9", started_mono=1000.0)
    clock.now = 1005.0
    worker.tick()
    verdict = head.tick()
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART) and "older session" in verdict.reason
    assert ("spark-b", "restart") in commands


@pytest.mark.parametrize("skew", [600.0, -600.0])
def test_rank_1_follows_a_fresh_pair_request_whatever_its_clock_says(tmp_path, skew):
    """Rank 1's watchdog sees rank 0's request for the first time: the request's age, measured by rank 0's
    watchdog, says it is fresh, so rank 1 is restarted (an "old" verdict would leave the old rank 1)."""
    clock, commands, head_world, worker_world, head, worker, _lines = split_pair(tmp_path)
    worker_world.skew = skew
    worker.tick()
    head.tick()
    head_world.counters, head_world.generate = counters(gen=42, running=2), TIMEOUT
    for _look in range(40):
        worker.tick()
        if head.tick().action == wd.RESTART:
            break
        clock.now += 5
    assert ("spark-b", "restart") in commands
    assert commands.index(("spark-b", "restart")) < commands.index(("spark-a", "restart"))


# --- the maintenance lock -----------------------------------------------------------------------------


def test_lock_is_honoured_and_the_judgement_starts_afresh_after_it(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    lock = tmp_path / "maintenance"
    lock.write_text(json.dumps({"holder": "switch-to-replicas", "since": WALL0}) + "\n")
    world.counters, world.generate = counters(gen=1, running=4), TIMEOUT
    verdicts = run_until(dog, clock, 600)
    assert {v.state for v in verdicts} == {wd.MAINTENANCE}
    assert world.commands == []
    assert events(lines).count("standing_down") == 1
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["verdict"] == wd.MAINTENANCE and status["lock"]["holder"] == "switch-to-replicas"
    lock.unlink()
    # Still hung after the switch: judged from scratch, so a full window before the probe.
    after = run_until(dog, clock, clock.now + 200, stop=lambda v: v.action == wd.RESTART)
    assert "lock_released" in events(lines)
    assert after[-1].state == wd.HUNG and W <= 5 * (len(after) - 1) <= W + 20


def test_lock_taken_between_judgement_and_action_wins(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    run_until(dog, clock, 10)
    world.counters = counters(gen=1, running=4)
    world.generate = wd.Probe("dead", error="timeout", latency=15.0)

    def probe_then_lock():
        (tmp_path / "maintenance").write_text("{}")
        return world.probe()

    dog.generate_probe = probe_then_lock
    verdicts = run_until(dog, clock, 200, stop=lambda v: v.state == wd.MAINTENANCE)
    assert verdicts[-1].state == wd.MAINTENANCE and world.commands == []


def _lock(path, content, mtime):
    path.write_text(content)
    os.utime(path, (mtime, mtime))


def test_an_expired_lock_does_not_switch_protection_off(tmp_path):
    """A switch that died an hour past its lock's expiry (this host's clock wrote and judges it)."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    _lock(tmp_path / "maintenance", json.dumps({"holder": "switch-model", "since": WALL0 - 18000, "run": "r1",
                                                "by": "ops@controller", "expires": WALL0 - 3600}) + "\n", WALL0 - 18000)
    world.counters, world.generate = counters(gen=1, running=4), TIMEOUT
    verdicts = run_until(dog, clock, 600, stop=lambda v: v.action == wd.RESTART)
    assert verdicts[-1].state == wd.HUNG
    assert world.commands == [("spark-a", "kill"), ("spark-a", "restart")]
    assert wd.MAINTENANCE not in {v.state for v in verdicts}
    assert line_priority(lines, "lock_expired") == wd.WARNING and "standing_down" not in events(lines)
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["lock"] is None
    assert status["lock_expired"]["holder"] == "switch-model" and status["lock_expired"]["expired"] is True


def test_a_lock_holds_until_its_expiry_then_the_watchdog_acts_again(tmp_path):
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    _lock(tmp_path / "maintenance", json.dumps({"holder": "switch-to-split", "since": WALL0, "run": "r2",
                                                "expires": WALL0 + 300}) + "\n", WALL0)
    world.counters, world.generate = counters(gen=1, running=4), TIMEOUT
    held = run_until(dog, clock, 300)
    assert {v.state for v in held} == {wd.MAINTENANCE} and world.commands == []
    after = run_until(dog, clock, 600, stop=lambda v: v.action == wd.RESTART)
    assert after[-1].state == wd.HUNG and world.commands == [("spark-a", "kill"), ("spark-a", "restart")]


@pytest.mark.parametrize("age, honoured", [(600, True), (7300, False)])
def test_a_lock_without_expiry_holds_for_lock_stale_after_from_its_last_write(tmp_path, age, honoured):
    """touch /run/factory-floor-maintenance: honoured for lock_stale_after (7200 s) from its last write."""
    clock, lines = Clock(), []
    world = World(clock)
    dog = world.watchdog(config(tmp_path), lines)
    _lock(tmp_path / "maintenance", "", WALL0 - age)
    world.counters, world.generate = counters(gen=1, running=4), TIMEOUT
    verdicts = run_until(dog, clock, 300, stop=lambda v: v.action == wd.RESTART)
    if honoured:
        assert {v.state for v in verdicts} == {wd.MAINTENANCE} and world.commands == []
    else:
        assert verdicts[-1].state == wd.HUNG and "lock_expired" in events(lines)


# --- the split pair -----------------------------------------------------------------------------------


def split_pair(tmp_path, ack=True):
    """Rank 0 (head) and rank 1 (worker) watchdogs, each reading the other's published state."""
    clock, commands = Clock(), []
    head_world = World(clock, "spark-a", commands)
    worker_world = World(clock, "spark-b", commands)
    worker_world.unit = dataclasses.replace(worker_world.unit, name="vllm-split.service")
    head_world.unit = dataclasses.replace(head_world.unit, name="vllm-split.service")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    common = {"unit": "vllm-split.service", "pair_ack_timeout": 30,
              "kill_commands": [["systemctl", "kill", "--signal=SIGKILL", "vllm-split.service"]]}
    head_cfg = config(tmp_path / "a", role="head", peer_url="http://spark-b:8091/state",
                      status_listen={"address": "10.0.0.1", "port": 8091}, **common)
    worker_cfg = config(tmp_path / "b", role="worker", peer_url="http://spark-a:8091/state",
                        status_listen={"address": "10.0.0.2", "port": 8091}, **common)
    lines = []
    boxes = {}

    def head_sleep(seconds):
        clock.sleep(seconds)
        if ack:
            boxes["worker"].tick()   # rank 1's watchdog keeps looking while rank 0 waits

    head = head_world.watchdog(head_cfg, lines, sleep=head_sleep,
                               fetch_peer=lambda: json.loads(boxes["worker"].status_json()))
    worker = worker_world.watchdog(worker_cfg, lines, fetch_peer=lambda: json.loads(boxes["head"].status_json()))
    boxes.update(head=head, worker=worker)
    return clock, commands, head_world, worker_world, head, worker, lines


def test_split_hang_restarts_the_pair_in_order(tmp_path):
    clock, commands, head_world, worker_world, head, worker, lines = split_pair(tmp_path)
    worker.tick()
    head.tick()
    head_world.counters, head_world.generate = counters(gen=42, running=2), TIMEOUT
    for _look in range(40):
        worker.tick()
        if head.tick().action == wd.RESTART:
            break
        clock.now += 5
    assert commands == [("spark-a", "kill"),      # rank 0 first: the API goes away
                        ("spark-a", "stop"),      # and stays down (no Restart= meanwhile)
                        ("spark-b", "kill"),      # rank 1 from the old session
                        ("spark-b", "restart"),   # rank 1 waits for rank 0's rendezvous
                        ("spark-a", "restart")]   # then rank 0
    record = json.loads((tmp_path / "a" / "state.json").read_text())["restarts"][0]
    assert record["pair"]["acked"] is True and record["verdict"] == wd.HUNG
    assert "pair_restart_followed" in events(lines, wd.WARNING)
    # The request is followed once only.
    for _look in range(5):
        worker.tick()
    assert commands.count(("spark-b", "restart")) == 1


def test_split_head_starts_anyway_when_rank_1_does_not_answer(tmp_path):
    clock, commands, head_world, _worker_world, head, _worker, lines = split_pair(tmp_path, ack=False)
    head.tick()
    head_world.counters, head_world.generate = counters(gen=42, running=2), TIMEOUT
    run_until(head, clock, 300, stop=lambda v: v.action == wd.RESTART)
    # Held down for the whole wait (60 s, far past RestartSec): no rank 0 meets the old rank 1.
    assert commands == [("spark-a", "kill"), ("spark-a", "stop"), ("spark-a", "restart")]
    assert "pair_ack_timeout" in events(lines)


def test_a_dead_worker_is_a_dead_model(tmp_path):
    judge = wd.Judge(config(tmp_path, role="head", peer_url="http://b/state", status_listen={"address": "a", "port": 1}))
    failed = unit(name="vllm-split.service", active_state="failed", sub_state="failed", result="start-limit-hit")
    peer = {"unit_state": failed.as_dict(), "running_for": None}
    assert judge.assess(look(0, cnt=counters(), peer=peer)).action == wd.NONE
    verdict = judge.assess(look(10, cnt=counters(), peer=peer))
    assert (verdict.state, verdict.action, verdict.hard) == (wd.DEAD, wd.RESTART, True)
    assert "a dead worker is a dead model" in verdict.reason
    # An unreachable rank-1 watchdog is evidence only.
    judge.reset()
    assert judge.assess(look(20, cnt=counters(), peer_error="connection refused")).action == wd.NONE


def test_rank_1_older_than_rank_0_will_not_join_so_the_pair_restarts(tmp_path):
    judge = wd.Judge(config(tmp_path, role="head", peer_url="http://b/state", status_listen={"address": "a", "port": 1}))
    head_unit = unit(name="vllm-split.service", started_mono=1000.0, invocation_id="inv-9")
    worker_unit = unit(name="vllm-split.service")
    # Rank 0 was restarted alone at t=1000; rank 1 has run since t=0 (its watchdog measured 1004 s).
    old_worker = {"unit_state": worker_unit.as_dict(), "running_for": 1004.0}
    verdict = judge.assess(look(1005, health="loading", u=head_unit, peer=old_worker))
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART) and "older session" in verdict.reason
    # Started together (within pair_skew): rank 0 just waits for rank 1.
    judge.reset()
    fresh_worker = {"unit_state": worker_unit.as_dict(), "running_for": 15.0}
    assert judge.assess(look(1005, health="loading", u=head_unit, peer=fresh_worker)).action == wd.NONE


def test_an_expired_lock_on_the_peer_does_not_stop_the_head(tmp_path):
    """Rank 1's host judges its own lock's expiry; an expired one stops neither rank."""
    clock, commands, head_world, _worker_world, head, worker, lines = split_pair(tmp_path)
    _lock(tmp_path / "b" / "maintenance", json.dumps({"holder": "switch-to-split", "expires": WALL0 - 60}), WALL0 - 9000)
    worker.tick()
    head.tick()
    head_world.counters, head_world.generate = counters(gen=1, running=2), TIMEOUT
    for _look in range(40):
        worker.tick()
        if head.tick().action == wd.RESTART:
            break
        clock.now += 5
    assert ("spark-a", "restart") in commands and ("spark-b", "restart") in commands
    assert "lock_expired" in events(lines)


def test_lock_on_the_peer_stops_the_head(tmp_path):
    clock, commands, head_world, _worker_world, head, worker, _lines = split_pair(tmp_path)
    (tmp_path / "b" / "maintenance").write_text("{}")
    head_world.counters, head_world.generate = counters(gen=1, running=2), TIMEOUT
    for _look in range(40):
        worker.tick()
        assert head.tick().state == wd.MAINTENANCE
        clock.now += 5
    assert commands == []


@pytest.mark.parametrize("holder", ["a", "b"])
def test_a_released_lock_is_not_echoed_between_the_ranks(tmp_path, holder):
    """Each rank honours the other's own lock, never the copy it relays: once the lock's host releases
    it, both judge again (before, each took the other's copy of it, for ever)."""
    clock, commands, head_world, _worker_world, head, worker, _lines = split_pair(tmp_path)
    (tmp_path / holder / "maintenance").write_text("{}")
    for _look in range(3):
        states = (worker.tick().state, head.tick().state)
        clock.now += 5
    assert states == (wd.MAINTENANCE, wd.MAINTENANCE)
    (tmp_path / holder / "maintenance").unlink()
    for _look in range(2):
        states = (worker.tick().state, head.tick().state)
        clock.now += 5
    assert states == (wd.FOLLOWING, wd.SERVING)


# --- a split group of N ranks ---------------------------------------------------------------------------


def split_group(tmp_path, n=3, acking=None):
    """Rank 0 (head) and ranks 1..n-1 (workers) on spark-a, spark-b, spark-c, ...: the head reads every
    worker by its URL, each worker reads the head. ``acking``: the ranks whose watchdogs keep looking while
    rank 0 waits for the acknowledgements (default: all)."""
    clock, commands = Clock(), []
    names = ["spark-%s" % chr(ord("a") + rank) for rank in range(n)]
    worlds = [World(clock, name, commands) for name in names]
    for world in worlds:
        world.unit = dataclasses.replace(world.unit, name="vllm-split.service")
    common = {"unit": "vllm-split.service", "pair_ack_timeout": 30,
              "kill_commands": [["systemctl", "kill", "--signal=SIGKILL", "vllm-split.service"]]}
    urls = ["http://%s:8091/state" % name for name in names]
    cfgs = []
    for rank, name in enumerate(names):
        (tmp_path / name).mkdir()
        cfgs.append(config(tmp_path / name, role="head" if rank == 0 else "worker",
                           peer_urls=urls[1:] if rank == 0 else urls[:1],
                           status_listen={"address": "10.0.0.%d" % (rank + 1), "port": 8091}, **common))
    acking = set(range(1, n)) if acking is None else set(acking)
    lines, dogs = [], {}

    def head_sleep(seconds):
        clock.sleep(seconds)
        for rank in sorted(acking):
            dogs[urls[rank]].tick()   # the workers' watchdogs keep looking while rank 0 waits

    def read(url):
        if url not in dogs:
            raise requests.ConnectionError("connection refused: %s" % url)
        return json.loads(dogs[url].status_json())

    for rank, (world, cfg) in enumerate(zip(worlds, cfgs)):
        extra = {"sleep": head_sleep} if rank == 0 else {}
        dogs[urls[rank]] = world.watchdog(cfg, lines, fetch_rank=read, **extra)
    return clock, commands, worlds, [dogs[url] for url in urls], lines


def _tick_group(dogs):
    for dog in dogs[1:]:
        dog.tick()
    return dogs[0].tick()


def test_a_head_reads_every_rank_in_rank_order(tmp_path):
    cfg = config(tmp_path, role="head", peer_urls=["http://b/state", "http://c/state", "http://d/state"],
                 status_listen={"address": "a", "port": 1})
    assert cfg.peer_urls == ["http://b/state", "http://c/state", "http://d/state"]
    # A pair's configuration: one peer_url is a list of one.
    assert config(tmp_path, role="head", peer_url="http://b/state",
                  status_listen={"address": "a", "port": 1}).peer_urls == ["http://b/state"]
    assert config(tmp_path).peer_urls == []


def test_a_dead_rank_2_restarts_the_group_in_order(tmp_path):
    clock, commands, worlds, dogs, lines = split_group(tmp_path)
    _tick_group(dogs)
    worlds[2].unit = dataclasses.replace(worlds[2].unit, active_state="failed", sub_state="failed",
                                         result="start-limit-hit")
    verdicts = []
    for _look in range(10):
        verdicts.append(_tick_group(dogs))
        if verdicts[-1].action == wd.RESTART:
            break
        clock.now += 5
    verdict = verdicts[-1]
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART)
    assert verdict.reason.startswith("rank 2 (vllm-split.service on the peer) is failed")
    assert verdict.evidence["rank2_down_for"] == 10.0 and verdict.evidence["rank1"].startswith("ActiveState=active")
    assert verdict.evidence["rank2"].startswith("ActiveState=failed")
    # Rank 0 first and held down, every worker restarted (rank 2 was not running: no kill), then rank 0.
    assert commands[:2] == [("spark-a", "kill"), ("spark-a", "stop")]
    assert commands[-1] == ("spark-a", "restart")
    assert set(commands[2:-1]) == {("spark-b", "kill"), ("spark-b", "restart"), ("spark-c", "restart")}
    record = json.loads((tmp_path / "spark-a" / "state.json").read_text())["restarts"][0]
    assert (record["pair"]["acked"], record["pair"]["acked_ranks"], record["pair"]["missing"]) == (True, [1, 2], [])
    assert events(lines).count("pair_restart_followed") == 2


def test_a_group_restart_waits_for_every_rank_and_names_the_one_that_did_not_answer(tmp_path):
    clock, commands, worlds, dogs, lines = split_group(tmp_path, acking={1})
    _tick_group(dogs)
    worlds[0].counters, worlds[0].generate = counters(gen=42, running=2), TIMEOUT
    for _look in range(40):
        dogs[1].tick()          # rank 2's watchdog stopped looking: it never acknowledges
        if dogs[0].tick().action == wd.RESTART:
            break
        clock.now += 5
    assert ("spark-b", "restart") in commands and ("spark-c", "restart") not in commands
    assert commands.index(("spark-b", "restart")) < commands.index(("spark-a", "restart"))
    record = json.loads((tmp_path / "spark-a" / "state.json").read_text())["restarts"][0]["pair"]
    assert (record["acked"], record["acked_ranks"], record["missing"]) == (False, [1], [2])
    assert record["waited"] >= 30
    (timeout,) = [json.loads(line[3:]) for line in lines if '"pair_ack_timeout"' in line]
    assert timeout["missing"] == [2] and "rank 2 is restarted when its watchdog sees the request" in timeout["note"]
    # Rank 2 follows the request when its watchdog looks again.
    dogs[2].tick()
    assert ("spark-c", "restart") in commands


def test_an_unreachable_rank_is_evidence_and_named_when_it_does_not_acknowledge(tmp_path):
    clock, commands, worlds, dogs, lines = split_group(tmp_path, acking={1})
    read = dogs[0].fetch_rank

    def flaky(url):
        if url == "http://spark-c:8091/state":
            raise requests.ConnectionError("no route to host")
        return read(url)

    dogs[0].fetch_rank = flaky
    verdict = _tick_group(dogs)
    assert verdict.action == wd.NONE and verdict.evidence["rank2"].startswith("watchdog unreachable: ConnectionError")
    worlds[0].counters, worlds[0].generate = counters(gen=42, running=2), TIMEOUT
    run_until(dogs[0], clock, 300, stop=lambda v: v.action == wd.RESTART)
    record = json.loads((tmp_path / "spark-a" / "state.json").read_text())["restarts"][0]["pair"]
    assert record["missing"] == [2] and "no route to host" in record["peer_errors"]["2"]


def test_a_lock_on_rank_2_stands_rank_0_down(tmp_path):
    clock, commands, worlds, dogs, _lines = split_group(tmp_path)
    (tmp_path / "spark-c" / "maintenance").write_text("{}")
    worlds[0].counters, worlds[0].generate = counters(gen=1, running=2), TIMEOUT
    worlds[1].unit = dataclasses.replace(worlds[1].unit, active_state="failed", sub_state="failed")
    for _look in range(40):
        verdict = _tick_group(dogs)
        assert verdict.state == wd.MAINTENANCE and verdict.evidence["lock"]["rank"] == 2
        clock.now += 5
    assert commands == []
    # Released: judged afresh, and the hang is found.
    (tmp_path / "spark-c" / "maintenance").unlink()
    worlds[1].unit = dataclasses.replace(worlds[1].unit, active_state="active", sub_state="running")
    for _look in range(40):
        if _tick_group(dogs).action == wd.RESTART:
            break
        clock.now += 5
    assert ("spark-a", "restart") in commands


@pytest.mark.parametrize("stale_rank", [1, 2, 3])
def test_each_worker_older_than_rank_0_is_found(tmp_path, stale_rank):
    """Rank 0 was restarted alone at t=1000; one worker has run since t=1: it will not join, the group restarts."""
    clock, commands, worlds, dogs, _lines = split_group(tmp_path, n=4)
    for world in worlds:
        world.unit = dataclasses.replace(world.unit, started_mono=1.0)
    worlds[0].health, worlds[0].counters = wd.Probe("loading"), None
    clock.now = 1000.0
    for rank, world in enumerate(worlds):
        if rank != stale_rank:
            world.unit = dataclasses.replace(world.unit, invocation_id="inv-9", started_mono=1000.0)
    clock.now = 1005.0
    verdict = _tick_group(dogs)
    assert (verdict.state, verdict.action) == (wd.DEAD, wd.RESTART)
    assert verdict.reason.startswith("rank %d has run 99" % stale_rank)
    assert verdict.reason.endswith("older session and will not join; restarting the group")
    assert verdict.evidence["rank%d_running_for" % stale_rank] == 1004.0 and verdict.evidence["rank0_running_for"] == 5.0
    assert {("spark-b", "restart"), ("spark-c", "restart"), ("spark-d", "restart")} <= set(commands)


def test_a_group_that_started_together_loads_in_peace(tmp_path):
    clock, commands, worlds, dogs, _lines = split_group(tmp_path, n=4)
    for world in worlds:
        world.unit = dataclasses.replace(world.unit, started_mono=1.0)
    worlds[0].health, worlds[0].counters = wd.Probe("loading"), None
    worlds[3].skew = -86400.0
    for _look in range(60):
        assert _tick_group(dogs).action == wd.NONE
        clock.now += 5
    assert commands == []


# --- the daemon: metrics text, status server, main() --------------------------------------------------

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="lab-chat"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="lab-chat"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="lab-chat"} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="lab-chat"} 1234.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="lab-chat"} 567.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="lab-chat"} 7.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="lab-chat"} 3.0
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7672256e+09
"""


def test_counters_from_vllm_metrics_text():
    c = wd.Counters.from_text(METRICS)
    assert (c.num_requests_running, c.generation_tokens_total, c.prompt_tokens_total, c.request_success_total,
            c.kv_cache_usage_perc) == (2.0, 1234.0, 567.0, 10.0, 0.25)
    assert c.busy and c.num_preemptions_total is None


class FakeEngine:
    """Loopback server answering /health, /v1/models, /version, /metrics and /v1/completions like vLLM."""

    def __init__(self):
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body, ctype="application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                if self.path == "/health":
                    return self._send(200, "")
                if self.path == "/version":
                    return self._send(200, '{"version": "0.32.0"}')
                if self.path == "/v1/models":
                    return self._send(200, '{"object": "list", "data": [{"id": "lab-chat"}]}')
                if self.path == "/metrics":
                    return self._send(200, METRICS, "text/plain")
                return self._send(404, "{}")

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                engine.completions += 1
                return self._send(200, '{"choices": [{"text": " x"}]}')

        self.completions = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine():
    fake = FakeEngine()
    yield fake
    fake.stop()


def fake_systemctl(tmp_path, text):
    """A systemctl that answers `show` with ``text`` and records every other call."""
    script = tmp_path / "systemctl"
    script.write_text("#!/bin/sh\nif [ \"$1\" = show ]; then cat <<'EOF'\n%sEOF\nelse echo \"$@\" >> %s; fi\n"
                      % (text, tmp_path / "calls"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_main_once_against_a_fake_engine(tmp_path, engine, capsys):
    systemctl = fake_systemctl(tmp_path, render(unit(started_mono=1.0)))
    cfg = {"unit": UNIT, "state_file": str(tmp_path / "state.json"), "status_file": str(tmp_path / "status.json"),
           "url": engine.url + "/v1", "model": "lab-chat", "systemctl": systemctl,
           "lock_file": str(tmp_path / "maintenance")}
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps(cfg))
    assert wd.main(["--config", str(path), "--check-config"]) == 0
    assert "hang detection bound 140s" in capsys.readouterr().out
    assert wd.main(["--config", str(path), "--once"]) == 0
    out = capsys.readouterr().out.splitlines()
    verdict = json.loads(out[-1])
    assert verdict["state"] == wd.BUSY
    assert verdict["evidence"]["counters"]["generation_tokens_total"] == 1234
    assert events(out[:-1]) == ["started", "verdict"]
    assert json.loads((tmp_path / "status.json").read_text())["verdict"] == wd.BUSY
    assert not os.path.exists(tmp_path / "calls")   # no action taken


def test_main_rejects_a_bad_configuration(tmp_path, capsys):
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps({"unit": UNIT}))
    assert wd.main(["--config", str(path), "--check-config"]) == 2
    assert "state_file is required" in capsys.readouterr().err


def test_status_server_publishes_the_state(tmp_path):
    clock = Clock()
    world = World(clock)
    dog = world.watchdog(config(tmp_path), [])
    dog.tick()
    server = wd.make_status_server(dog, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        state = requests.get(url + "/state", timeout=5).json()
        assert state["verdict"] == wd.SERVING and state["unit_state"]["invocation_id"] == "inv-1"
        assert requests.get(url + "/other", timeout=5).status_code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_the_probe_goes_straight_to_the_completion(tmp_path, monkeypatch):
    """When /health is what fails, a probe that asked /health first could never tell slow from dead."""
    calls = []

    def probe(url, **kwargs):
        calls.append(kwargs)
        return wd.health.ProbeResult(status="serving", latency=0.1)

    monkeypatch.setattr(wd.health, "probe", probe)
    dog = wd.Watchdog(config(tmp_path, probe_timeout=15), run=lambda argv, timeout=None: (0, ""), log=[].append)
    assert dog.generate_probe().status == "serving"
    assert calls == [{"api_key": None, "model": "lab-chat", "kind": "generate", "timeout": 5.0, "generate_timeout": 15.0,
                      "health_first": False}]


def test_the_unit_is_read_through_systemd_show(tmp_path):
    """One systemctl show reader (``_systemd.show``), with time for a PID 1 starved of CPU."""
    calls = []
    answers = [(0, render(unit(main_pid=812))), (1, "Failed to connect to bus: " + "x" * 400)]

    def run(argv, timeout=None):
        calls.append((argv, timeout))
        return answers.pop(0)

    dog = wd.Watchdog(config(tmp_path, systemctl="/usr/bin/systemctl"), run=run, log=[].append)
    info, error = dog._read_unit()  # pylint: disable=protected-access
    assert error is None and info.running and info.main_pid == 812
    assert calls == [(["/usr/bin/systemctl", "show", "-p", ",".join(wd.UNIT_PROPERTIES), "--", UNIT], 30.0)]
    info, error = dog._read_unit()  # pylint: disable=protected-access
    assert info is None and error.startswith("/usr/bin/systemctl show -p LoadState,")
    assert error.endswith("failed (rc 1): Failed to connect to bus: " + "x" * 274)


def test_a_key_the_client_refuses_never_restarts_a_serving_engine_nor_leaks(tmp_path, engine):
    """A config written before the key was checked (or by hand): the real probes, the real scrape, ten minutes.

    The engine serves all along; the watchdog cannot ask it. It must say so at priority err, never
    restart it, and put the key in no log line, status file or published state.
    """
    secret = "sk-7f3e9a2c41d86b05"
    cfg = dataclasses.replace(config(tmp_path, url=engine.url, dead_confirm=15, startup_grace=60),
                              api_key=secret + "\n")
    clock, lines = Clock(), []
    world = World(clock)
    dog = wd.Watchdog(cfg, run=world.run, log=lines.append, clock=clock, wall=clock.wall, sleep=clock.sleep)
    verdicts = run_until(dog, clock, 600)
    assert world.commands == []
    assert {v.state for v in verdicts} == {wd.CONFIG_ERROR}
    assert "verdict" in events(lines, priority=wd.ERR)
    published = [dog.status_json().decode(), (tmp_path / "status.json").read_text()]
    for text in lines + published:
        assert secret not in text and "7f3e" not in text
    assert json.loads(published[1])["verdict"] == wd.CONFIG_ERROR
    assert "ends with a newline" in json.loads(published[1])["reason"]


def test_the_watchdog_refuses_a_key_it_could_not_send(tmp_path, capsys):
    path = tmp_path / "watchdog.json"
    path.write_text(json.dumps({"unit": UNIT, "state_file": str(tmp_path / "state.json"),
                                "lock_file": str(tmp_path / "maintenance"), "api_key": "sk-7f3e9a2c41d86b05\n"}))
    assert wd.main(["--config", str(path), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "api_key ends with a newline" in err and "7f3e" not in err
