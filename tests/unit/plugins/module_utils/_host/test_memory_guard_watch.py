# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's watch (``_memory_guard_watch``): the loop against a fake ``/proc``,
a fake cgroup tree and a fake ``systemctl`` script.

The workloads are those of the judge's tables (test_memory_guard_judge.py, whose
``config`` and ``actions`` these tests share): a "database" and a "site build" next to
vLLM, floor 2 GiB.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import memory_guard_watch as watch
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host.test_memory_guard_judge import (
    MIB,
    actions,
    config,
)


# ------------------------------------------------------------- a fake host: /proc, cgroups, systemctl

FAKE_SYSTEMCTL = r'''#!{python}
import json, sys
with open({units!r}) as handle:
    units = json.load(handle)
args = sys.argv[1:]
with open({calls!r}, "a") as handle:
    handle.write(json.dumps(args) + "\n")
unit = args[-1]
if args[0] == "show":
    props = args[args.index("-p") + 1].split(",")
    found = units.get(unit, {{"ActiveState": "inactive"}})
    for prop in props:
        sys.stdout.write("%s=%s\n" % (prop, found.get(prop, "")))
elif args[0] == "stop":
    units.setdefault(unit, {{}})["ActiveState"] = "deactivating"
    with open({units!r}, "w") as handle:
        json.dump(units, handle)
else:
    sys.exit(1)
'''


class FakeHost:
    """A directory tree with ``proc/``, ``cgroup/``, ``meminfo`` and a ``systemctl`` script."""

    def __init__(self, root):
        self.root = root
        self.proc = root / "proc"
        self.cgroup = root / "cgroup"
        self.meminfo = root / "meminfo"
        self.units_file = root / "units.json"
        self.calls_file = root / "calls.jsonl"
        self.systemctl = root / "systemctl"
        self.units = {}
        self.kills = []
        self.lines = []
        self.proc.mkdir()
        self.cgroup.mkdir()
        self.systemctl.write_text(FAKE_SYSTEMCTL.format(python=sys.executable, units=str(self.units_file),
                                                        calls=str(self.calls_file)))
        self.systemctl.chmod(0o755)
        self.set_available(10)
        self.save()

    def set_available(self, gib):
        self.meminfo.write_text("MemTotal: 25165824 kB\nMemFree: 1048576 kB\nMemAvailable: %d kB\n"
                                % int(gib * 1024 * 1024))

    def save(self):
        self.units_file.write_text(json.dumps(self.units))

    def unit(self, name, cgroup, state="active", main_pid=0, invocation="inv-" + "1"):
        self.units[name] = {"ActiveState": state, "ControlGroup": cgroup, "MainPID": str(main_pid),
                            "InvocationID": invocation}
        self.save()

    def process(self, pid, rss_anon_mib, ppid=1, cgroup_line="", rss_file_mib=8):
        d = self.proc / str(pid)
        d.mkdir()
        (d / "status").write_text("Name:\tpython3\nVmRSS:\t%d kB\nRssAnon:\t%d kB\nRssFile:\t%d kB\nRssShmem:\t0 kB\n"
                                  % ((rss_anon_mib + rss_file_mib) * 1024, rss_anon_mib * 1024, rss_file_mib * 1024))
        (d / "stat").write_text("%d (python3 x) S %d 1 1 0 -1\n" % (pid, ppid))
        (d / "cgroup").write_text(cgroup_line or "0::/\n")

    def cgroup_dir(self, path, pids=(), files=None):
        d = self.cgroup / path.strip("/")
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.procs").write_text("".join("%d\n" % p for p in pids))
        for name, text in (files or {}).items():
            (d / name).write_text(text)
        return d

    def calls(self):
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def host(self):
        return watch.Host(systemctl=str(self.systemctl), proc_root=str(self.proc), cgroup_root=str(self.cgroup),
                          meminfo=str(self.meminfo), kill=lambda pid, sig: self.kills.append((pid, sig)))

    def guard(self, clocks=None, **overrides):
        """A guard on this host; ``clocks``: {"clock": monotonic, "wall": UNIX time}, else 5 s a look."""
        cfg = config(status_file=str(self.root / "run" / "memory-guard.json"), systemctl=str(self.systemctl),
                     proc_root=str(self.proc), cgroup_root=str(self.cgroup), meminfo=str(self.meminfo), **overrides)
        if clocks is None:
            clock = iter(range(1000, 100000, 5))
            clocks = {"clock": lambda: float(next(clock))}
        return watch.Guard(cfg, self.host(), lambda prio, line: self.lines.append((prio, line)), **clocks)


@pytest.fixture
def fake(tmp_path):
    return FakeHost(tmp_path)


def test_measure_cgroup_v2_reads_memory_current_minus_page_cache(fake):
    fake.unit("mg-database.service", "/system.slice/mg-database.service")
    fake.cgroup_dir("system.slice/mg-database.service", pids=[41], files={
        "memory.current": "%d\n" % (260 * MIB), "memory.stat": "anon %d\nfile %d\n" % (200 * MIB, 60 * MIB)})
    got = watch.measure(fake.host(), "mg-database.service")
    assert fake.calls() == [["show", "-p", "ActiveState,ControlGroup,MainPID,InvocationID", "--", "mg-database.service"]]
    assert got["used"] == 200 * MIB and got["pids"] == [41]
    assert got["source"].endswith("/cgroup/system.slice/mg-database.service/memory.current - file")


def test_measure_cgroup_v1_sums_the_rss_of_the_units_processes(fake):
    # The lab: a hybrid host, systemd's own tree under systemd/, no memory.current.
    cg = "/factory.slice/factory-floor.slice/factory-floor-workloads.slice/mg-site-build.service"
    fake.unit("mg-site-build.service", cg)
    fake.cgroup_dir("systemd" + cg, pids=[51, 52])
    fake.process(51, 400)
    fake.process(52, 20, ppid=51)
    got = watch.measure(fake.host(), "mg-site-build.service")
    assert got["used"] == 420 * MIB   # RssAnon only: the interpreter's mapped files are page cache
    assert got["pids"] == [51, 52]
    assert got["source"] == "RSS of 2 processes in %s/systemd%s" % (fake.cgroup, cg)


def test_measure_finds_the_cgroup_under_a_containers_own_prefix_and_walks_a_slice(fake):
    # systemd in a container may report its container's cgroup in front of what is mounted.
    fake.unit("factory-floor-workloads-builds.slice",
              "/machine.slice/libpod-abc/factory.slice/factory-floor.slice/factory-floor-workloads.slice/"
              "factory-floor-workloads-builds.slice")
    base = "systemd/factory.slice/factory-floor.slice/factory-floor-workloads.slice/factory-floor-workloads-builds.slice"
    fake.cgroup_dir(base)
    fake.cgroup_dir(base + "/run-u1.service", pids=[61])
    fake.cgroup_dir(base + "/run-u2.service", pids=[62])
    fake.process(61, 100)
    fake.process(62, 150)
    got = watch.measure(fake.host(), "factory-floor-workloads-builds.slice")
    assert got["used"] == 250 * MIB and got["pids"] == [61, 62]


def test_measure_falls_back_to_proc_cgroup_then_to_the_main_pid(fake):
    fake.unit("a.service", "/system.slice/a.service")
    fake.process(71, 30, cgroup_line="1:name=systemd:/docker/x/system.slice/a.service\n0::/\n")
    fake.process(72, 5, cgroup_line="1:name=systemd:/system.slice/other.service\n")
    got = watch.measure(fake.host(), "a.service")
    assert got["pids"] == [71] and got["used"] == 30 * MIB
    assert got["source"] == "RSS of 1 process in /proc/*/cgroup under /system.slice/a.service"

    fake.unit("b.service", "", main_pid=81)
    fake.process(81, 10)
    fake.process(82, 7, ppid=81)
    fake.process(83, 7, ppid=82)
    got = watch.measure(fake.host(), "b.service")
    assert got["pids"] == [81, 82, 83] and got["used"] == 24 * MIB
    assert got["source"] == "RSS of 3 processes in MainPID 81 and its descendants"


def test_measure_an_inactive_unit_holds_nothing(fake):
    fake.unit("a.service", "", state="inactive")
    got = watch.measure(fake.host(), "a.service")
    assert got["used"] == 0 and got["source"] == "not running (inactive)"


def test_tick_stops_the_build_above_its_peak_and_logs_the_evidence(fake):
    cg_db = "/factory.slice/factory-floor.slice/factory-floor-workloads.slice/mg-database.service"
    cg_build = "/factory.slice/factory-floor.slice/factory-floor-workloads.slice/mg-site-build.service"
    fake.unit("mg-database.service", cg_db, main_pid=41)
    fake.unit("mg-site-build.service", cg_build, main_pid=51)
    fake.unit("vllm-replica.service", "/system.slice/vllm-replica.service", main_pid=31)
    fake.cgroup_dir("systemd" + cg_db, pids=[41])
    fake.cgroup_dir("systemd" + cg_build, pids=[51])
    fake.cgroup_dir("systemd/system.slice/vllm-replica.service", pids=[31])
    fake.process(41, 200)
    fake.process(51, 240)
    fake.process(31, 3000)
    guard = fake.guard()
    assert guard.tick() == []
    # The build grows past its declared peak (0.30 GiB).
    (fake.proc / "51" / "status").write_text("RssAnon:\t%d kB\nRssShmem:\t0 kB\n" % (600 * 1024))
    events = guard.tick()
    assert actions(events) == [("stop", "site build", "peak")]
    assert ["stop", "--no-block", "--", "mg-site-build.service"] in fake.calls()
    assert not any(call[0] == "stop" and call[-1] != "mg-site-build.service" for call in fake.calls())
    warnings = [line for prio, line in fake.lines if prio == watch.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("memory guard: stopping site build (mg-site-build.service, priority 0): uses 0.59 GiB, "
                                  "declared peak 0.30 GiB [RSS of 1 process in ")
    assert "how" not in warnings[0] and "(systemctl stop mg-site-build.service)" in warnings[0]
    infos = [line for prio, line in fake.lines if prio == watch.INFO]
    assert any("site build (mg-site-build.service) is measured from RSS of 1 process in" in line for line in infos)
    status = json.loads((fake.root / "run" / "memory-guard.json").read_text())
    assert status["mem_available_gib"] == 10.0 and status["floor_gib"] == 2.0
    build = [w for w in status["workloads"] if w["name"] == "site build"][0]
    assert build["used_gib"] == pytest.approx(0.586, abs=0.001) and build["guard"]["action"] == "stopped"
    assert status["events"][-1]["action"] == "stop"
    # The stop takes effect; the next looks do nothing more.
    assert guard.tick() == [] and guard.tick() == []


def test_tick_pauses_only_the_workloads_processes_never_an_engines(fake):
    # A declared slice whose cgroup tree (wrongly) lists an engine's process too.
    cg = "/factory.slice/factory-floor.slice/factory-floor-workloads.slice/factory-floor-workloads-builds.slice"
    fake.unit("factory-floor-workloads-builds.slice", cg)
    fake.unit("vllm-replica.service", "/system.slice/vllm-replica.service", main_pid=31)
    fake.cgroup_dir("systemd" + cg + "/run-u1.service", pids=[61, 31])
    fake.cgroup_dir("systemd/system.slice/vllm-replica.service", pids=[31])
    fake.process(61, 700)
    fake.process(31, 10)
    guard = fake.guard(workloads=[{"name": "builds", "slice": "factory-floor-workloads-builds.slice",
                                   "peak_gib": 0.3, "action": "pause"}])
    assert actions(guard.tick()) == [("pause", "builds", "peak")]
    assert fake.kills == [(61, signal.SIGSTOP)]
    # The guard stops: what it paused is resumed.
    guard.resume_all("the guard stops")
    assert fake.kills[-1] == (61, signal.SIGCONT)
    assert "resuming (SIGCONT) builds" in fake.lines[-1][1]
    assert json.loads((fake.root / "run" / "memory-guard.json").read_text())["workloads"][0]["guard"] is None


def test_a_slice_that_holds_an_engine_is_never_stopped(fake):
    fake.unit("system-builds.slice", "/system.slice/system-builds.slice")
    fake.unit("vllm-replica.service", "/system.slice/system-builds.slice/vllm-replica.service", main_pid=31)
    fake.cgroup_dir("systemd/system.slice/system-builds.slice/vllm-replica.service", pids=[31])
    fake.process(31, 3000)
    guard = fake.guard(workloads=[{"name": "builds", "slice": "system-builds.slice", "peak_gib": 0.3}])
    events = guard.tick()
    assert actions(events) == [("stop", "builds", "peak")]
    assert events[0]["priority"] == watch.ERR
    assert "FAILED: /system.slice/system-builds.slice" not in events[0]["message"]
    assert "system-builds.slice holds vllm-replica.service: the guard never acts on the engines" in events[0]["message"]
    assert not any(call[0] == "stop" for call in fake.calls()) and fake.kills == []


def test_a_failed_stop_is_tried_again_at_the_next_look(fake):
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", main_pid=51)
    fake.cgroup_dir("systemd/system.slice/mg-site-build.service", pids=[51])
    fake.process(51, 600)
    guard = fake.guard(workloads=[{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3}])
    guard.host.systemctl = "/nonexistent/systemctl"
    # Without systemctl the unit cannot even be read: nothing is judged.
    assert guard.tick() == []
    guard.host.systemctl = str(fake.systemctl)
    real_stop = guard.host.stop
    guard.host.stop = lambda unit: "systemctl stop %s exited 1: Access denied" % unit
    events = guard.tick()
    assert events[0]["priority"] == watch.ERR and "FAILED: systemctl stop mg-site-build.service exited 1" in \
        events[0]["message"]
    assert "site build" not in guard.state["acted"]
    guard.host.stop = real_stop
    assert actions(guard.tick()) == [("stop", "site build", "peak")]


def test_the_guard_waits_on_the_monotonic_clock():
    """Its settle time is a wait: the wall clock (NTP, an operator) may step; CLOCK_MONOTONIC does not."""
    assert inspect.signature(watch.Guard).parameters["clock"].default is time.monotonic


@pytest.mark.parametrize("step", [-600.0, -86400.0])
def test_a_wall_clock_step_back_does_not_hold_the_floor_back(fake, step):
    """Below the floor, the guard paused the build; 20 s later (settle 15 s) it is still below, and the
    wall clock stepped back meanwhile: the build is stopped now, not once the wall clock catches up."""
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", main_pid=51)
    fake.cgroup_dir("systemd/system.slice/mg-site-build.service", pids=[51])
    fake.process(51, 100)
    fake.set_available(1)
    now = {"mono": 500.0, "wall": 1_796_000_000.0}
    guard = fake.guard(clocks={"clock": lambda: now["mono"], "wall": lambda: now["wall"]},
                       workloads=[{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3,
                                   "action": "pause"}])
    assert actions(guard.tick()) == [("pause", "site build", "floor")]
    now["mono"] += 20
    now["wall"] += 20 + step
    events = guard.tick()
    assert actions(events) == [("stop", "site build", "floor")]
    assert "still below the floor 20 s after it was paused" in events[0]["message"]
    # What people read carries the wall clock.
    status = json.loads((fake.root / "run" / "memory-guard.json").read_text())
    assert status["time"] == now["wall"] and status["events"][-1]["time"] == now["wall"]


def test_run_logs_what_it_watches_and_restores_a_pause_of_the_previous_run(fake):
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", main_pid=51)
    fake.cgroup_dir("systemd/system.slice/mg-site-build.service", pids=[51])
    fake.process(51, 100)
    status = fake.root / "run" / "memory-guard.json"
    status.parent.mkdir()
    status.write_text(json.dumps({"workloads": [{"name": "site build", "guard": {
        "action": "paused", "reason": "floor", "time": 1.0, "invocation": "inv-1"}}]}))
    guard = fake.guard(workloads=[{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3,
                                   "action": "pause"}])
    stop, notified = threading.Event(), []

    def notify(message):
        notified.append(message)
        if message == "WATCHDOG=1":
            stop.set()   # SIGTERM during the first look: the look ends, then the loop

    guard.notify = notify
    guard.run(stop)
    assert notified == ["READY=1", "WATCHDOG=1", "STOPPING=1"]
    assert fake.lines[0][1].startswith("memory guard: watching site build (mg-site-build.service, peak 0.30 GiB, "
                                       "priority 0, pause) every 5 s; MemAvailable floor 2.00 GiB (resume at 3.00 GiB)")
    assert "never acting on vllm-replica.service, vllm-split.service, factory-floor-memory-guard.service" in \
        fake.lines[0][1]
    assert "was paused by the previous run" in fake.lines[1][1]
    # MemAvailable 10 GiB >= 3 GiB: the floor pause is resumed at the first look.
    assert fake.kills[-1] == (51, signal.SIGCONT)


def test_main_checks_a_configuration(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"_comment": "Ansible managed", "workloads": [
        {"name": "database", "unit": "mg-database.service", "peak_gib": 0.3, "priority": 10, "slice": None,
         "action": "stop"}]}))
    assert watch.main(["--config", str(good), "--check-config"]) == 0
    assert "1 workloads, floor 2.00 GiB, every 5 s" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workloads": [{"name": "m", "unit": "vllm-split.service", "peak_gib": 1}]}))
    assert watch.main(["--config", str(bad), "--check-config"]) == 2
    assert "never acts on" in capsys.readouterr().err
    assert watch.main(["--config", str(tmp_path / "missing.json"), "--check-config"]) == 2


def test_main_once_dry_run_acts_on_nothing(fake, capsys):
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", main_pid=51)
    fake.cgroup_dir("systemd/system.slice/mg-site-build.service", pids=[51])
    fake.process(51, 600)
    cfg = fake.root / "memory-guard.json"
    cfg.write_text(json.dumps({
        "workloads": [{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3}],
        "status_file": str(fake.root / "status.json"), "systemctl": str(fake.systemctl),
        "proc_root": str(fake.proc), "cgroup_root": str(fake.cgroup), "meminfo": str(fake.meminfo)}))
    assert watch.main(["--config", str(cfg), "--once", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "<4>memory guard: stopping site build" in out and out.rstrip().endswith("(dry run)")
    assert not any(call[0] == "stop" for call in fake.calls())
    assert os.path.exists(str(fake.root / "status.json"))


def test_main_stops_on_sigterm_between_looks(fake):
    """SIGTERM ends the wait for the next look at once (``_daemon.stop_event``), and the guard exits 0."""
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", main_pid=51)
    fake.cgroup_dir("system.slice/mg-site-build.service", pids=[51], files={
        "memory.current": "%d\n" % (100 * MIB), "memory.stat": "anon %d\nfile 0\n" % (100 * MIB)})
    status = fake.root / "status.json"
    cfg = fake.root / "memory-guard.json"
    cfg.write_text(json.dumps({
        "interval": 600, "workloads": [{"name": "site build", "unit": "mg-site-build.service", "peak_gib": 0.3}],
        "status_file": str(status), "systemctl": str(fake.systemctl),
        "proc_root": str(fake.proc), "cgroup_root": str(fake.cgroup), "meminfo": str(fake.meminfo)}))
    lib = host_layout.install(fake.root / "lib")
    guard = subprocess.Popen(host_layout.argv("memory_guard_watch", "--config", cfg), env=host_layout.env(lib), cwd="/",
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not status.exists() and time.monotonic() < deadline and guard.poll() is None:
            time.sleep(0.05)
        assert status.exists(), guard.communicate(timeout=5)
        guard.send_signal(signal.SIGTERM)
        out, err = guard.communicate(timeout=10)
    finally:
        if guard.poll() is None:
            guard.kill()
    assert guard.returncode == 0, err
    assert "memory guard: watching site build" in out
