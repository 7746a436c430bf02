# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/upstream.py, the proxy membership checker.

Syncer.once() runs with injected ``probe`` and ``run`` callables and a tmp dir for
the servers file, state file and drain dir; main() runs once against loopback
fake vLLM servers (no nginx: its test and reload commands are ``true``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import daemon
from ansible_collections.factory_floor.llm.plugins.module_utils._host import upstream as up
from ansible_collections.factory_floor.llm.plugins.module_utils._host import textfile
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as vh
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM, free_port
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout


A = {"name": "spark-a", "address": "10.0.0.1", "port": 8000}
B = {"name": "spark-b", "address": "10.0.0.2", "port": 8000}
C = {"name": "spark-c", "address": "10.0.0.3", "port": 8001}


def names(members):
    return [m["name"] for m in members]


# --- choose_members() / render_servers() ------------------------------------------------------


@pytest.mark.parametrize("serving, drained, members, mode", [
    ({"spark-a", "spark-b", "spark-c"}, set(), ["spark-a", "spark-b", "spark-c"], up.MODE_LIVE),
    ({"spark-b"}, set(), ["spark-b"], up.MODE_LIVE),
    # A drained engine leaves the upstream although it serves.
    ({"spark-a", "spark-b"}, {"spark-a"}, ["spark-b"], up.MODE_LIVE),
    # None serves: every non-drained candidate is listed, the first to listen gets requests.
    (set(), set(), ["spark-a", "spark-b", "spark-c"], up.MODE_FALLBACK),
    (set(), {"spark-c"}, ["spark-a", "spark-b"], up.MODE_FALLBACK),
    # The only serving engine is drained: fall back to the other, non-drained ones.
    ({"spark-a"}, {"spark-a"}, ["spark-b", "spark-c"], up.MODE_FALLBACK),
    # Every candidate drained (maintenance): none listed, whatever serves.
    ({"spark-a"}, {"spark-a", "spark-b", "spark-c"}, [], up.MODE_DRAINED),
    (set(), {"spark-a", "spark-b", "spark-c", "not-a-candidate"}, [], up.MODE_DRAINED),
    # Names that are not candidates change nothing.
    ({"spark-z"}, {"spark-y"}, ["spark-a", "spark-b", "spark-c"], up.MODE_FALLBACK),
])
def test_choose_members(serving, drained, members, mode):
    chosen, chosen_mode = up.choose_members([A, B, C], serving, drained)
    assert (names(chosen), chosen_mode) == (members, mode)


def test_choose_members_keeps_candidate_dicts():
    chosen, _mode = up.choose_members([A, B], {"spark-b"}, set())
    assert chosen == [B]


def test_render_servers_live():
    assert up.render_servers([B, A], up.MODE_LIVE) == (
        "# Managed by factory-floor-upstream; mode=live. Do not edit.\n"
        "server 10.0.0.1:8000 max_fails=0;  # spark-a\n"
        "server 10.0.0.2:8000 max_fails=0;  # spark-b\n")


@pytest.mark.parametrize("order", [[A, B, C], [C, B, A], [B, C, A]])
def test_render_servers_order_is_stable(order):
    assert up.render_servers(order, up.MODE_FALLBACK) == up.render_servers([A, B, C], up.MODE_FALLBACK)


@pytest.mark.parametrize("mode", [up.MODE_LIVE, up.MODE_FALLBACK])
def test_render_servers_never_lets_nginx_mark_a_server_failed(mode):
    lines = up.render_servers([A, B, C], mode).splitlines()
    servers = [line for line in lines if line.startswith("server ")]
    assert len(servers) == 3
    assert all(" max_fails=0;" in line for line in servers)
    assert "mode=%s" % mode in lines[0]


def test_render_servers_placeholder_when_nothing_listed():
    lines = up.render_servers([], up.MODE_DRAINED).splitlines()
    assert lines == ["# Managed by factory-floor-upstream; mode=drained. Do not edit.", up.PLACEHOLDER]
    # nginx needs one server per upstream; this one is never tried.
    assert up.PLACEHOLDER.startswith("server 127.0.0.1:9 down;")


# --- read_drained() / write_atomic() ----------------------------------------------------------


def test_read_drained(tmp_path):
    (tmp_path / "spark-a").touch()
    (tmp_path / "spark-c").touch()
    assert up.read_drained(str(tmp_path)) == {"spark-a", "spark-c"}


@pytest.mark.parametrize("missing", ["nowhere", "a-file"])
def test_read_drained_missing_dir_is_none_drained(tmp_path, missing):
    (tmp_path / "a-file").write_text("")
    assert up.read_drained(str(tmp_path / missing)) == set()


def test_write_atomic(tmp_path):
    path = tmp_path / "servers.conf"
    up.write_atomic(str(path), "one\n")
    assert path.read_text() == "one\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    up.write_atomic(str(path), "two\n", mode=0o600)
    assert path.read_text() == "two\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["servers.conf"]  # no temporary file left


def test_write_atomic_failure_keeps_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "servers.conf"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        up.write_atomic(str(path), b"not text")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["servers.conf"]


def test_write_atomic_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    up.write_atomic("state.json", "{}\n")
    assert (tmp_path / "state.json").read_text() == "{}\n"


# --- Syncer.once() ----------------------------------------------------------------------------


class Done:
    """What subprocess.run returns, as far as the Syncer reads it."""

    def __init__(self, returncode=0, stdout="", stderr=""):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


TEST = ["nginx-test"]
RELOAD = ["nginx-reload"]


def journal(lines):
    """The checker's journal lines as (priority, the JSON object after it)."""
    found = []
    for line in lines:
        prio, sep, body = line.partition(">")
        assert line.startswith("<") and sep, line
        found.append((int(prio[1:]), json.loads(body)))
    return found


def logged(lines, event):
    """(priority, record) of each line of ``event``."""
    return [(prio, record) for prio, record in journal(lines) if record["event"] == event]


class World:
    """Engine statuses, drain files and nginx's answers for a Syncer; records what it ran."""

    def __init__(self, tmp_path, candidates=(A, B), **extra):
        self.statuses = {c["name"]: vh.LOADING for c in candidates}
        self.answers = {}  # command name -> Done, or an exception to raise
        self.calls = []  # (command, servers file text when it ran)
        self.logs = []
        self.now = 1795950000.0
        self.dir = tmp_path
        self.drain_dir = tmp_path / "drain"
        self.drain_dir.mkdir()
        self.servers_file = tmp_path / "upstream.conf"
        self.state_file = tmp_path / "run" / "upstream.json"
        self.config = {
            "candidates": list(candidates),
            "servers_file": str(self.servers_file),
            "state_file": str(self.state_file),
            "drain_dir": str(self.drain_dir),
            "test_command": TEST,
            "reload_command": RELOAD,
            # no nginx here: its workers cannot be read, a reload is not waited for
            "pid_file": str(tmp_path / "nginx.pid"),
        }
        self.config.update(extra)
        # Whether nginx's master runs, as the Syncer reads it.
        self.nginx_running = True
        self.syncer = up.Syncer(self.config, probe=self.probe, run=self.run, log=self.logs.append, clock=self.clock,
                                nginx_up=lambda: self.nginx_running)

    def probe(self, candidate):
        status = self.statuses[candidate["name"]]
        if isinstance(status, Exception):
            raise status
        return status

    def run(self, argv):
        text = self.servers_file.read_text() if self.servers_file.exists() else None
        self.calls.append((argv[0], text))
        answer = self.answers.get(argv[0], Done())
        if isinstance(answer, Exception):
            raise answer
        return answer

    def clock(self):
        return self.now

    def drain(self, name):
        (self.drain_dir / name).touch()

    def undrain(self, name):
        (self.drain_dir / name).unlink()

    def ran(self):
        return [name for name, _text in self.calls]

    def servers(self):
        return self.servers_file.read_text() if self.servers_file.exists() else None

    def state(self):
        return json.loads(self.state_file.read_text())

    def once(self):
        self.calls.clear()
        self.logs.clear()
        self.now += 1.0
        return self.syncer.once()


@pytest.fixture
def world(tmp_path):
    # The tests of nginx -t, reload, drain and state: one probe moves an engine in or out.
    return World(tmp_path, fails=1, passes=1)


@pytest.fixture
def hysteresis(tmp_path):
    # The defaults: out after 3 failed probes in a row, in after 2 passed ones.
    return World(tmp_path)


def test_membership_change_writes_tests_then_reloads(world):
    world.statuses["spark-b"] = vh.SERVING
    state = world.once()
    expected = up.render_servers([B], up.MODE_LIVE)
    assert world.servers() == expected
    # nginx -t saw the new file, then the reload ran.
    assert world.calls == [("nginx-test", expected), ("nginx-reload", expected)]
    assert state == world.state()
    assert state == {
        "updated": world.now,
        "mode": "live",
        "members": ["spark-b"],
        "in_rotation": ["spark-b"],
        "statuses": {"spark-a": "loading", "spark-b": "serving"},
        "drained": [],
        "membership": {"spark-a": {"member": False, "fails": 1, "passes": 0},
                       "spark-b": {"member": True, "fails": 0, "passes": 1}},
        "nginx": {"up": True, "reload_failures": 0, "io_error": None},
    }
    prio, event = journal(world.logs)[-1]
    assert prio == daemon.INFO
    assert event["event"] == "membership" and event["applied"] is True and event["members"] == ["spark-b"]


def test_no_change_no_reload(world):
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    before = world.servers()
    state = world.once()
    assert world.calls == [] and world.logs == []  # same statuses, same file: quiet
    assert world.servers() == before
    assert state["in_rotation"] == ["spark-a"] and state["updated"] == world.now
    # A status change that keeps the members logs a probe event, still without a reload.
    world.statuses["spark-b"] = vh.DEAD
    world.once()
    assert world.calls == []
    prio, event = journal(world.logs)[-1]
    assert prio == daemon.INFO and event["event"] == "probe"


def test_second_engine_joins(world):
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    world.statuses["spark-b"] = vh.SERVING
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert world.servers() == up.render_servers([A, B], up.MODE_LIVE)
    assert state["in_rotation"] == ["spark-a", "spark-b"]


def test_nothing_serving_is_fallback_with_every_candidate(world):
    world.servers_file.write_text(up.render_servers([A], up.MODE_LIVE))
    state = world.once()
    assert world.servers() == up.render_servers([A, B], up.MODE_FALLBACK)
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["mode"] == "fallback" and state["members"] == ["spark-a", "spark-b"]
    assert state["in_rotation"] == []  # listed, but none serves


def test_nginx_test_failure_restores_previous_file_and_does_not_reload(world):
    previous = up.render_servers([A, B], up.MODE_FALLBACK)
    world.servers_file.write_text(previous)
    world.answers["nginx-test"] = Done(1, stderr="nginx: [emerg] unexpected end of file\n")
    world.statuses["spark-a"] = vh.SERVING
    state = world.once()
    assert world.ran() == ["nginx-test"]
    assert world.calls[0][1] == up.render_servers([A], up.MODE_LIVE)  # it tested the new file
    assert world.servers() == previous
    assert state["mode"] == "unknown" and state["members"] == [] and state["in_rotation"] == []
    assert state["statuses"] == {"spark-a": "serving", "spark-b": "loading"}
    # An error: journalctl -p err shows it.
    [(prio, record)] = logged(world.logs, "nginx_test_rejected")
    assert prio == daemon.ERR
    assert record["rc"] == 1 and record["output"] == "nginx: [emerg] unexpected end of file"
    # Tried again every pass until nginx accepts it.
    world.answers.clear()
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["in_rotation"] == ["spark-a"]


def test_nginx_test_failure_without_previous_file_removes_it(world):
    world.answers["nginx-test"] = Done(1, stdout="bad")
    world.once()
    assert world.servers() is None
    assert world.ran() == ["nginx-test"]


def test_test_command_that_cannot_run_is_a_failure(world):
    """nginx not installed: the untested file must not stay (the next pass would take it as installed)."""
    previous = up.render_servers([A, B], up.MODE_FALLBACK)
    world.servers_file.write_text(previous)
    world.answers["nginx-test"] = FileNotFoundError(2, "No such file or directory", "nginx-test")
    world.statuses["spark-a"] = vh.SERVING
    state = world.once()
    assert world.servers() == previous and world.ran() == ["nginx-test"]
    assert state["mode"] == "unknown"
    [(prio, record)] = logged(world.logs, "nginx_test_rejected")
    assert prio == daemon.ERR and record["rc"] == 127 and "could not run" in record["output"]
    world.once()
    assert world.ran() == ["nginx-test"]  # tried again


def test_reload_failure_is_retried_and_not_reported_in_rotation(world):
    world.answers["nginx-reload"] = Done(1, stderr="nginx.service is not active, cannot reload.")
    world.statuses["spark-a"] = vh.SERVING
    state = world.once()
    new = up.render_servers([A], up.MODE_LIVE)
    # nginx accepted the file: it stays, so a restart of nginx loads it...
    assert world.servers() == new
    # ... but nginx still runs the old upstream: nothing is in rotation yet.
    assert state["mode"] == "unknown" and state["in_rotation"] == []
    # A warning while it may be a hiccup (escalated after escalate_after passes, below).
    [(prio, record)] = logged(world.logs, "reload_failed")
    assert prio == daemon.WARNING and record["rc"] == 1 and "cannot reload" in record["output"]
    assert state["nginx"]["reload_failures"] == 1
    # The file matches, yet the next pass reloads again.
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["mode"] == "unknown"
    world.answers.clear()
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["mode"] == "live" and state["in_rotation"] == ["spark-a"]
    world.once()
    assert world.calls == []


def test_a_reload_that_keeps_failing_is_escalated_once_not_every_pass(world):
    """nginx's master stopped (seen: SIGQUIT from outside, nginx.service inactive): the checker logged
    reload_failed at err every second for good. Now: warnings, then one err line, again every minute,
    a metric with the count, and a notice when nginx runs the upstream again."""
    world.nginx_running = False
    world.answers["nginx-reload"] = Done(1, stderr="nginx.service is not active, cannot reload.")
    world.statuses["spark-a"] = vh.SERVING
    lines = []
    for dummy in range(up.DEFAULT_ESCALATE_AFTER + up.REPEAT_EVERY + 1):
        state = world.once()
        lines.append(list(world.logs))
    everything = [line for pass_lines in lines for line in pass_lines]
    warnings = logged(everything, "reload_failed")
    assert [prio for prio, dummy in warnings] == [daemon.WARNING] * (up.DEFAULT_ESCALATE_AFTER - 1)
    failing = logged(everything, "reload_failing")
    # At the third failure in a row, and again REPEAT_EVERY failures later.
    assert [(prio, record["failures"]) for prio, record in failing] == [
        (daemon.ERR, up.DEFAULT_ESCALATE_AFTER), (daemon.ERR, up.DEFAULT_ESCALATE_AFTER + up.REPEAT_EVERY)]
    assert failing[0][1]["cause"] == "reload_failed" and failing[0][1]["nginx_up"] is False
    assert "cannot reload" in failing[0][1]["output"]
    # nginx's master not running is its own err line, at the same pace.
    assert [record["down_passes"] for prio, record in logged(everything, "nginx_down")] == [
        up.DEFAULT_ESCALATE_AFTER, up.DEFAULT_ESCALATE_AFTER + up.REPEAT_EVERY]
    assert all(prio == daemon.ERR for prio, dummy in logged(everything, "nginx_down"))
    assert state["nginx"] == {"up": False, "reload_failures": up.DEFAULT_ESCALATE_AFTER + up.REPEAT_EVERY + 1,
                              "io_error": None}
    assert state["mode"] == "unknown"
    # systemd brought nginx back (Restart=always): the next reload works.
    world.nginx_running = True
    world.answers.clear()
    state = world.once()
    assert state["mode"] == "live" and state["nginx"] == {"up": True, "reload_failures": 0, "io_error": None}
    assert [prio for prio, dummy in logged(world.logs, "reload_recovered")] == [daemon.NOTICE]
    assert [prio for prio, dummy in logged(world.logs, "nginx_up")] == [daemon.NOTICE]
    world.once()
    assert world.logs == []


def test_the_escalation_pass_count_is_configurable(tmp_path):
    world = World(tmp_path, fails=1, passes=1, escalate_after=1)
    world.answers["nginx-reload"] = Done(1, stderr="failed")
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    assert logged(world.logs, "reload_failed") == []
    assert [prio for prio, dummy in logged(world.logs, "reload_failing")] == [daemon.ERR]


def test_nginx_down_without_a_change_is_reported(world):
    """No membership change, so no reload to fail: nginx's master not running is still reported."""
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    world.nginx_running = False
    for dummy in range(up.DEFAULT_ESCALATE_AFTER):
        state = world.once()
    assert world.calls == []
    assert [prio for prio, dummy in logged(world.logs, "nginx_down")] == [daemon.ERR]
    assert state["nginx"]["up"] is False
    families = {name: samples for name, dummy, dummy, samples in textfile.upstream_families(state, ["spark-a"])}
    assert families["factory_floor_upstream_nginx_up"] == [({}, 0)]


def test_nginx_running_reads_the_pid_file(tmp_path):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "comm").write_text("nginx\n")
    (proc / "4243").mkdir()
    (proc / "4243" / "comm").write_text("python3\n")
    pid_file = tmp_path / "nginx.pid"
    assert up.nginx_running(str(pid_file), str(proc)) is False   # no pid file: nginx quit
    for pid, running in (("4242", True), ("4243", False), ("4244", False), ("", False)):
        pid_file.write_text(pid + "\n")
        assert up.nginx_running(str(pid_file), str(proc)) is running, pid


class DiskFull:
    """write_temp that fails as a full disk does, for the files under ``where``; others are written."""

    def __init__(self, where):
        self.where = str(where)
        self.full = True

    def __call__(self, path, text, mode=0o644, sync=False):
        if self.full and str(path).startswith(self.where):
            raise OSError(28, "No space left on device")
        return daemon.write_temp(path, text, mode, sync)


def test_a_full_disk_keeps_the_last_good_upstream_and_the_checker_going(world, monkeypatch):
    """Seen: an I/O error ended the daemon (a crash loop, the member list frozen)."""
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    good = world.servers()
    full = DiskFull(world.servers_file)
    monkeypatch.setattr(up, "write_temp", full)
    world.statuses["spark-b"] = vh.SERVING
    state = world.once()   # does not raise
    assert world.servers() == good, "the last good upstream was replaced"
    assert world.calls == []   # nothing to test or reload: nothing was written
    assert state["mode"] == "unknown" and "No space left on device" in state["nginx"]["io_error"]
    assert state["statuses"] == {"spark-a": "serving", "spark-b": "serving"}   # still probing
    [(prio, dummy)] = logged(world.logs, "io_error")
    assert prio == daemon.ERR
    assert not [f for f in os.listdir(world.dir) if f.startswith(".upstream.conf")], "a temporary file was left"
    families = {name: samples for name, dummy, dummy, samples in textfile.upstream_families(state, ["spark-a"])}
    assert families["factory_floor_upstream_io_error"] == [({}, 1)]
    state = world.once()
    assert logged(world.logs, "io_error") == []   # the same error again: no new err line
    # Space again: the next pass writes and reloads.
    full.full = False
    state = world.once()
    assert world.servers() == up.render_servers([A, B], up.MODE_LIVE)
    assert state["mode"] == "live" and state["nginx"]["io_error"] is None
    assert [prio for prio, dummy in logged(world.logs, "io_recovered")] == [daemon.NOTICE]


def test_a_member_list_that_cannot_be_written_replaces_no_file(affinity, monkeypatch):
    """Both files or neither: a servers file whose member list did not follow would split nginx's
    upstream from the balancer's members."""
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.once()
    servers, members = affinity.servers(), lua_members(affinity)
    monkeypatch.setattr(up, "write_temp", DiskFull(affinity.config["members_file"]))
    affinity.statuses["spark-b"] = vh.SERVING
    state = affinity.once()
    assert affinity.servers() == servers and lua_members(affinity) == members
    assert state["nginx"]["io_error"] and affinity.calls == []


def test_a_state_file_that_cannot_be_written_ends_nothing(world, monkeypatch):
    def failing(path, text, *args, **kwargs):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(up, "write_atomic", failing)
    world.statuses["spark-a"] = vh.SERVING
    state = world.once()
    assert state["in_rotation"] == ["spark-a"] and "Input/output error" in state["nginx"]["io_error"]
    assert [prio for prio, dummy in logged(world.logs, "io_error")] == [daemon.ERR]


def test_a_cut_short_servers_file_is_written_again_at_the_first_pass(world):
    """A servers file nginx cannot load (cut short) keeps nginx from starting: the checker's first pass
    writes a whole one, and systemd's next start of nginx loads it."""
    world.servers_file.write_text("# Managed by factory-floor-upstream; mode=live. Do not edit.\nserver 10.0.0.1:80")
    world.nginx_running = False
    world.answers["nginx-reload"] = Done(1, stderr="nginx.service is not active, cannot reload.")
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    assert world.servers() == up.render_servers([A], up.MODE_LIVE)
    assert world.ran() == ["nginx-test", "nginx-reload"]


def test_a_pass_that_raises_is_a_journal_line_not_the_end(world, monkeypatch):
    monkeypatch.setattr(up, "read_drained", lambda path: 1 / 0)
    assert world.syncer.tick() is None
    [(prio, record)] = logged(world.logs, "pass_failed")
    assert prio == daemon.ERR and "ZeroDivisionError" in record["error"]
    monkeypatch.undo()
    world.statuses["spark-a"] = vh.SERVING
    assert world.syncer.tick()["in_rotation"] == ["spark-a"]


def test_install_files_puts_back_what_nginx_rejected(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_text("old one")
    undo = up.install_files([(str(one), "new one"), (str(two), "new two")])
    assert one.read_text() == "new one" and two.read_text() == "new two"
    up.undo_files(undo)
    assert one.read_text() == "old one" and not two.exists()
    assert sorted(os.listdir(tmp_path)) == ["one"]
    undo = up.install_files([(str(one), "newer")])
    up.drop_backups(undo)
    assert one.read_text() == "newer" and sorted(os.listdir(tmp_path)) == ["one"]


def test_probe_that_raises_is_an_error_status(world):
    world.statuses["spark-a"] = RuntimeError("probe bug")
    world.statuses["spark-b"] = vh.SERVING
    state = world.once()
    assert state["statuses"] == {"spark-a": "error: probe bug", "spark-b": "serving"}
    assert state["in_rotation"] == ["spark-b"]
    assert world.servers() == up.render_servers([B], up.MODE_LIVE)
    assert world.state() == state


def test_drain_is_reported_once_applied(world):
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    world.once()
    world.drain("spark-a")
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert world.servers() == up.render_servers([B], up.MODE_LIVE)
    assert state["drained"] == ["spark-a"] and state["in_rotation"] == ["spark-b"]
    assert state["members"] == ["spark-b"]
    world.undrain("spark-a")
    state = world.once()
    assert state["drained"] == [] and state["in_rotation"] == ["spark-a", "spark-b"]


def test_drain_not_reported_while_nginx_still_runs_the_engine(world):
    """drain.yml stops the engine once the state says drained: that must mean nginx no longer uses it."""
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    world.once()
    world.drain("spark-a")
    world.answers["nginx-test"] = Done(1, stderr="emerg")
    state = world.once()
    assert state["drained"] == [] and state["mode"] == "unknown"
    world.answers["nginx-test"] = Done()
    world.answers["nginx-reload"] = Done(1)
    assert world.once()["drained"] == []
    world.answers.clear()
    assert world.once()["drained"] == ["spark-a"]


def test_every_engine_drained(world):
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    world.drain("spark-a")
    world.drain("spark-b")
    state = world.once()
    assert world.servers() == up.render_servers([], up.MODE_DRAINED)
    assert up.PLACEHOLDER in world.servers()
    assert state == {"updated": world.now, "mode": "drained", "members": [], "in_rotation": [],
                     "statuses": {"spark-a": "serving", "spark-b": "serving"}, "drained": ["spark-a", "spark-b"],
                     "membership": {"spark-a": {"member": True, "fails": 0, "passes": 1},
                                    "spark-b": {"member": True, "fails": 0, "passes": 1}},
                     "nginx": {"up": True, "reload_failures": 0, "io_error": None}}


def test_without_state_file(world):
    del world.config["state_file"]
    world.statuses["spark-a"] = vh.SERVING
    assert world.once()["in_rotation"] == ["spark-a"]
    assert not world.state_file.parent.exists()


def test_state_file_without_directory(world, monkeypatch):
    monkeypatch.chdir(world.dir)
    world.config["state_file"] = "upstream-state.json"
    world.once()
    assert json.loads((world.dir / "upstream-state.json").read_text())["mode"] == "fallback"


# --- the member list for nginx's Lua balancer (conversation affinity) ------------------------


def test_render_members_sorted_resolved_with_max_num_seqs():
    a = dict(A, address="spark-a", max_num_seqs=12)
    b = dict(B, max_num_seqs=8)
    text = up.render_members([b, a], up.MODE_LIVE, {"spark-a": "10.89.7.10", "spark-b": "10.0.0.2"})
    assert json.loads(text) == {"mode": "live", "members": [
        {"name": "spark-a", "address": "spark-a", "host": "10.89.7.10", "port": 8000, "max_num_seqs": 12},
        {"name": "spark-b", "address": "10.0.0.2", "host": "10.0.0.2", "port": 8000, "max_num_seqs": 8}]}
    assert text == up.render_members([a, b], up.MODE_LIVE, {"spark-a": "10.89.7.10", "spark-b": "10.0.0.2"})


@pytest.mark.parametrize("seqs", [None, 0, -1, True, "12"])
def test_render_members_without_a_usable_max_num_seqs(seqs):
    member = dict(A) if seqs is None else dict(A, max_num_seqs=seqs)
    assert "max_num_seqs" not in json.loads(up.render_members([member], up.MODE_LIVE, {"spark-a": "10.0.0.1"}))["members"][0]


def test_render_members_leaves_out_a_name_that_does_not_resolve():
    assert json.loads(up.render_members([A, B], up.MODE_FALLBACK, {"spark-b": "10.0.0.2"})) == {
        "mode": "fallback", "members": [{"name": "spark-b", "address": "10.0.0.2", "host": "10.0.0.2", "port": 8000}]}


def test_render_members_drained_is_empty():
    assert json.loads(up.render_members([], up.MODE_DRAINED, {})) == {"mode": "drained", "members": []}


@pytest.mark.parametrize("address, expected", [("127.0.0.1", "127.0.0.1"), ("::1", "::1"),
                                               ("name-that-does-not-resolve.invalid", None), ("", None)])
def test_resolve_address(address, expected):
    assert up.resolve_address(address, 8000) == expected


@pytest.fixture
def affinity(tmp_path):
    """A world whose checker also writes the member list; names resolve through ``world.dns``."""
    world = World(tmp_path, candidates=(dict(A, address="spark-a", max_num_seqs=12), dict(B, address="spark-b")),
                  fails=1, passes=1, members_file=str(tmp_path / "members.json"))
    world.dns = {"spark-a": "10.89.7.10", "spark-b": "10.89.7.11"}
    world.syncer.resolve = lambda address, port: world.dns.get(address)
    world.members_file = tmp_path / "members.json"
    return world


def lua_members(world):
    return json.loads(world.members_file.read_text())


def test_affinity_writes_the_member_list_before_nginx_t(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    seen = []
    run = affinity.run

    def run_and_look(argv):
        seen.append((argv[0], affinity.members_file.read_text() if affinity.members_file.exists() else None))
        return run(argv)

    affinity.syncer.run = run_and_look
    state = affinity.once()
    expected = up.render_members([dict(A, address="spark-a", max_num_seqs=12)], up.MODE_LIVE,
                                 {"spark-a": "10.89.7.10"})
    # nginx -t and the reload both saw the new list, next to the new server lines.
    assert seen == [("nginx-test", expected), ("nginx-reload", expected)]
    assert lua_members(affinity)["members"] == [
        {"name": "spark-a", "address": "spark-a", "host": "10.89.7.10", "port": 8000, "max_num_seqs": 12}]
    assert state["mode"] == "live" and state["in_rotation"] == ["spark-a"]


def test_affinity_a_missing_member_list_is_written_though_the_servers_match(affinity):
    """Turning affinity on under a running checker: same server lines, no list yet -> written, reloaded."""
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.once()
    affinity.members_file.unlink()
    affinity.once()
    assert affinity.ran() == ["nginx-test", "nginx-reload"]
    assert lua_members(affinity)["mode"] == "live"
    affinity.once()
    assert affinity.ran() == []


def test_affinity_an_address_change_alone_reloads(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.once()
    affinity.dns["spark-a"] = "10.89.7.14"   # a lab host restarted with another address
    state = affinity.once()
    assert affinity.ran() == ["nginx-test", "nginx-reload"]
    assert lua_members(affinity)["members"][0]["host"] == "10.89.7.14" and state["mode"] == "live"


def test_affinity_a_name_that_stops_resolving_keeps_its_last_address(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.once()
    del affinity.dns["spark-a"]
    affinity.once()
    assert affinity.ran() == [] and lua_members(affinity)["members"][0]["host"] == "10.89.7.10"


def test_affinity_member_list_follows_membership(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.statuses["spark-b"] = vh.SERVING
    affinity.once()
    assert [m["name"] for m in lua_members(affinity)["members"]] == ["spark-a", "spark-b"]
    affinity.drain("spark-a")
    state = affinity.once()
    assert [m["name"] for m in lua_members(affinity)["members"]] == ["spark-b"] and state["drained"] == ["spark-a"]
    affinity.drain("spark-b")
    affinity.once()
    assert lua_members(affinity) == {"mode": "drained", "members": []}


def test_affinity_nginx_t_failure_restores_both_files(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.once()
    servers, members = affinity.servers(), affinity.members_file.read_text()
    affinity.statuses["spark-b"] = vh.SERVING
    affinity.answers["nginx-test"] = Done(1, stderr="init_by_lua error")
    state = affinity.once()
    assert affinity.ran() == ["nginx-test"]
    assert affinity.servers() == servers and affinity.members_file.read_text() == members
    assert state["mode"] == "unknown"


def test_affinity_nginx_t_failure_without_previous_files_removes_them(affinity):
    affinity.statuses["spark-a"] = vh.SERVING
    affinity.answers["nginx-test"] = Done(1)
    affinity.once()
    assert affinity.servers() is None and not affinity.members_file.exists()


def test_without_affinity_no_member_list(world):
    world.statuses["spark-a"] = vh.SERVING
    world.once()
    assert sorted(p.name for p in world.dir.iterdir()) == ["drain", "run", "upstream.conf"]


# --- hysteresis: fails / passes ----------------------------------------------------------------

TIMED_OUT = vh.ProbeResult(status=vh.DEAD, error="GET /health: connected, but no HTTP answer within 2s")
GONE_503 = vh.ProbeResult(status=vh.DEAD, error="GET /health answered HTTP 503", http_status=503)


def joined(world, *names):
    """Two passes with ``names`` serving: in."""
    for name in names:
        world.statuses[name] = vh.SERVING
    world.once()
    return world.once()


def test_defaults_are_three_fails_and_two_passes(hysteresis):
    assert (hysteresis.syncer.membership.fails, hysteresis.syncer.membership.passes) == (3, 2) == (
        up.DEFAULT_FAILS, up.DEFAULT_PASSES)


@pytest.mark.parametrize("between", [[], [TIMED_OUT], [vh.UNREACHABLE]])
def test_an_engine_joins_after_two_passed_probes_in_a_row(hysteresis, between):
    world = hysteresis
    world.statuses["spark-b"] = vh.SERVING
    first = world.once()
    assert first["members"] == ["spark-a", "spark-b"] and first["mode"] == "fallback"  # none in yet
    for status in between:   # a failure in between starts the count again
        world.statuses["spark-b"] = status
        world.once()
        world.statuses["spark-b"] = vh.SERVING
        assert world.once()["mode"] == "fallback"
    state = world.once()
    assert state["mode"] == "live" and state["members"] == ["spark-b"] and state["in_rotation"] == ["spark-b"]
    assert world.ran() == ["nginx-test", "nginx-reload"]


@pytest.mark.parametrize("failure", [TIMED_OUT, vh.UNREACHABLE, vh.DEAD, RuntimeError("probe bug")])
def test_an_engine_leaves_after_three_failed_probes_in_a_row(hysteresis, failure):
    world = hysteresis
    joined(world, "spark-a", "spark-b")
    world.statuses["spark-a"] = failure
    for look in (1, 2):
        state = world.once()
        assert world.calls == [], look                   # still in nginx's upstream: no reload
        assert state["members"] == ["spark-a", "spark-b"]
        assert state["in_rotation"] == ["spark-b"]       # its latest probe failed: not counted as serving
        assert state["membership"]["spark-a"] == {"member": True, "fails": look, "passes": 0}
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["members"] == ["spark-b"] and state["in_rotation"] == ["spark-b"]


def test_one_slow_answer_under_load_reloads_nothing(hysteresis):
    world = hysteresis
    joined(world, "spark-a", "spark-b")
    reloads = 0
    # Slow answers now and then, never three in a row.
    for status in [TIMED_OUT, vh.SERVING, TIMED_OUT, TIMED_OUT, vh.SERVING, vh.SERVING, TIMED_OUT, vh.SERVING] * 5:
        world.statuses["spark-a"] = status
        state = world.once()
        reloads += world.ran().count("nginx-reload")
        assert state["members"] == ["spark-a", "spark-b"]
        assert ("spark-a" in state["in_rotation"]) == (status == vh.SERVING)
    assert reloads == 0


def test_counts_stop_at_their_thresholds(hysteresis):
    world = hysteresis
    for _pass in range(10):
        world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.DEAD})
        state = world.once()
    assert state["membership"] == {"spark-a": {"member": True, "fails": 0, "passes": 2},
                                   "spark-b": {"member": False, "fails": 3, "passes": 0}}


@pytest.mark.parametrize("gone", [vh.LOADING, GONE_503, vh.WRONG_MODEL])
def test_an_engine_known_gone_leaves_at_once(hysteresis, gone):
    world = hysteresis
    joined(world, "spark-a", "spark-b")
    world.statuses["spark-a"] = gone
    state = world.once()
    assert world.ran() == ["nginx-test", "nginx-reload"]
    assert state["members"] == ["spark-b"] and state["in_rotation"] == ["spark-b"]
    assert world.servers() == up.render_servers([B], up.MODE_LIVE)
    # ... and comes back only after two passed probes in a row.
    world.statuses["spark-a"] = vh.SERVING
    assert world.once()["members"] == ["spark-b"]
    assert world.once()["members"] == ["spark-a", "spark-b"]


def test_the_counts_survive_a_restart_of_the_checker(hysteresis):
    world = hysteresis
    joined(world, "spark-a", "spark-b")
    world.statuses["spark-a"] = TIMED_OUT
    world.once()
    world.once()
    # systemd restarts the checker (a new configuration, a crash): the state file keeps the counts.
    world.syncer = up.Syncer(world.config, probe=world.probe, run=world.run, log=world.logs.append, clock=world.clock)
    assert world.syncer.membership.state["spark-a"] == {"member": True, "fails": 2, "passes": 0}
    state = world.once()
    assert state["members"] == ["spark-b"] and world.ran() == ["nginx-test", "nginx-reload"]


def test_a_state_file_without_counts_starts_from_what_nginx_runs(hysteresis):
    """A checker upgraded in place: its state file has no counts yet; the live members stay in."""
    world = hysteresis
    world.servers_file.write_text(up.render_servers([A, B], up.MODE_LIVE))
    world.state_file.parent.mkdir()
    world.state_file.write_text(json.dumps({"mode": "live", "members": ["spark-a", "spark-b"], "drained": []}))
    world.syncer = up.Syncer(world.config, probe=world.probe, run=world.run, log=world.logs.append, clock=world.clock)
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    state = world.once()
    assert world.calls == [] and state["in_rotation"] == ["spark-a", "spark-b"]


@pytest.mark.parametrize("content", ["not json", "[1, 2]", json.dumps({"membership": {"spark-a": "garbage"}})])
def test_an_unreadable_state_file_starts_afresh(hysteresis, content):
    world = hysteresis
    world.state_file.parent.mkdir()
    world.state_file.write_text(content)
    world.syncer = up.Syncer(world.config, probe=world.probe, run=world.run, log=world.logs.append, clock=world.clock)
    assert world.syncer.membership.state["spark-a"] == {"member": False, "fails": 0, "passes": 0}


@pytest.mark.parametrize("fails, passes, words", [
    (0, 2, "fails must be an integer >= 1"),
    (3, 0, "passes must be an integer >= 1"),
    (True, 2, "fails must be an integer >= 1"),
    (3, "2", "passes must be an integer >= 1"),
])
def test_membership_knobs_are_checked(fails, passes, words):
    with pytest.raises(ValueError, match=words):
        up.Membership(["spark-a"], fails=fails, passes=passes)


@pytest.mark.parametrize("status, http_status, gone", [
    (vh.LOADING, None, True),
    (vh.DEAD, 503, True),
    (vh.WRONG_MODEL, None, True),
    (vh.DEAD, None, False),        # no answer in time: may be slow
    (vh.DEAD, 500, False),
    (vh.DEAD, 401, False),
    (vh.UNREACHABLE, None, False),  # no route, connect timeout: may be the network
])
def test_known_gone(status, http_status, gone):
    assert up.known_gone(status, http_status) is gone


# --- main(): one pass against loopback servers ------------------------------------------------


@pytest.fixture
def engines():
    serving = FakeVLLM().start()
    dead = FakeVLLM().start()
    dead.health_status = 503
    wrong = FakeVLLM().start()
    wrong.models = ["other-model"]
    yield {"serving": serving, "dead": dead, "wrong": wrong}
    for fake in (serving, dead, wrong):
        fake.stop()


@pytest.fixture
def keep_sigterm():
    """main() installs a SIGTERM handler; give pytest its own back."""
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def write_config(tmp_path, engines, **extra):
    drain_dir = tmp_path / "drain"
    drain_dir.mkdir(exist_ok=True)
    config = {
        "candidates": [
            {"name": "spark-a", "address": "127.0.0.1", "port": engines["serving"].port},
            {"name": "spark-b", "address": "127.0.0.1", "port": engines["dead"].port},
            {"name": "spark-c", "address": "127.0.0.1", "port": free_port()},
            {"name": "spark-d", "address": "127.0.0.1", "port": engines["wrong"].port},
        ],
        "model": "tiny-llama",
        "api_key": None,
        "interval": 1.0,
        "probe_timeout": 2.0,
        "servers_file": str(tmp_path / "upstream.conf"),
        "state_file": str(tmp_path / "run" / "upstream.json"),
        "drain_dir": str(drain_dir),
        "test_command": ["true"],
        "reload_command": ["true"],
    }
    config.update(extra)
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps(config))
    return path


EXPECTED_STATUSES = {"spark-a": "serving", "spark-b": "dead", "spark-c": "loading", "spark-d": "wrong_model"}


def test_main_once(tmp_path, engines, keep_sigterm, capsys):
    path = write_config(tmp_path, engines)
    # One passed probe is not enough to join (passes 2): every candidate listed meanwhile.
    assert up.main(["--config", str(path), "--once"]) == 0
    state = json.loads((tmp_path / "run" / "upstream.json").read_text())
    assert state["mode"] == "fallback" and state["in_rotation"] == []
    assert state["membership"]["spark-a"] == {"member": False, "fails": 0, "passes": 1}
    # The next run reads the count from the state file: the second pass in a row joins.
    assert up.main(["--config", str(path), "--once"]) == 0
    servers = (tmp_path / "upstream.conf").read_text()
    assert servers == (
        "# Managed by factory-floor-upstream; mode=live. Do not edit.\n"
        "server 127.0.0.1:%d max_fails=0;  # spark-a\n" % engines["serving"].port)
    state = json.loads((tmp_path / "run" / "upstream.json").read_text())
    assert state["mode"] == "live" and state["members"] == ["spark-a"] and state["in_rotation"] == ["spark-a"]
    assert state["statuses"] == EXPECTED_STATUSES and state["drained"] == []
    # One journal line, its priority first (info), then the JSON.
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("<6>{")
    event = json.loads(line[len("<6>"):])
    assert event["event"] == "membership" and event["applied"] is True
    # The probe asked the serving engine for its model list, directly.
    assert "/v1/models" in [r[1] for r in engines["serving"].requests]


def test_main_once_fallback_and_drained(tmp_path, engines, keep_sigterm):
    """The serving engine is drained: the others are listed so the first to listen gets requests."""
    path = write_config(tmp_path, engines)
    (tmp_path / "drain" / "spark-a").touch()
    assert up.main(["--config", str(path), "--once"]) == 0
    servers = (tmp_path / "upstream.conf").read_text().splitlines()
    assert servers[0] == "# Managed by factory-floor-upstream; mode=fallback. Do not edit."
    assert [line.rsplit("# ", 1)[1] for line in servers[1:]] == ["spark-b", "spark-c", "spark-d"]
    state = json.loads((tmp_path / "run" / "upstream.json").read_text())
    assert state["mode"] == "fallback" and state["in_rotation"] == [] and state["drained"] == ["spark-a"]
    assert state["statuses"] == EXPECTED_STATUSES


def test_main_once_nginx_rejects(tmp_path, engines, keep_sigterm, capsys):
    path = write_config(tmp_path, engines, test_command=["false"])
    assert up.main(["--config", str(path), "--once"]) == 0
    assert not (tmp_path / "upstream.conf").exists()
    state = json.loads((tmp_path / "run" / "upstream.json").read_text())
    assert state["mode"] == "unknown" and state["in_rotation"] == []
    # At priority err (journald takes it from the prefix): journalctl -p err shows the rejection.
    lines = capsys.readouterr().out.splitlines()
    assert [prio for prio, record in journal(lines) if record["event"] == "nginx_test_rejected"] == [daemon.ERR]
    assert any(line.startswith("<3>{") and '"event": "nginx_test_rejected"' in line for line in lines)


def test_runs_as_installed_on_the_proxy_host(tmp_path, engines):
    """The site role installs the host package and the unit runs ``python3 -m _host.upstream``, no Ansible;
    with the unit's environment it writes node_exporter's textfile."""
    lib = host_layout.install(tmp_path / "lib")
    path = write_config(tmp_path, engines)
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    env = {"FACTORY_FLOOR_TEXTFILE_DIR": str(textfiles), "FACTORY_FLOOR_HOST": "gateway"}
    for _run in range(2):   # two passed probes in a row join (the count kept in the state file)
        done = host_layout.run(lib, "upstream", "--config", path, "--once", extra_env=env)
        assert done.returncode == 0, done.stderr
    state = json.loads((tmp_path / "run" / "upstream.json").read_text())
    assert state["in_rotation"] == ["spark-a"] and state["statuses"] == EXPECTED_STATUSES
    assert os.listdir(str(textfiles)) == ["factory_floor_upstream.prom"]
    text = (textfiles / "factory_floor_upstream.prom").read_text()
    assert 'factory_floor_upstream_in_rotation{backend="spark-a",host="gateway"} 1\n' in text
    assert 'factory_floor_upstream_engines_in_rotation{host="gateway"} 1\n' in text


# ------------------------------------------------- names resolved by the checker, never by nginx

class Resolver:
    """Names to addresses; a name mapped to None does not resolve (a host that is down)."""

    def __init__(self, table):
        self.table = dict(table)

    def __call__(self, name, port=None):
        return self.table.get(name, name if name[:1].isdigit() else None)


def named_world(tmp_path, table):
    world = World(tmp_path, candidates=({"name": "spark-a", "address": "spark-a", "port": 8000},
                                        {"name": "spark-b", "address": "spark-b", "port": 8000}), fails=1, passes=1)
    world.resolver = Resolver(table)
    world.syncer.resolve = world.resolver
    return world


def test_servers_are_written_by_address(tmp_path):
    world = named_world(tmp_path, {"spark-a": "10.89.7.10", "spark-b": "10.89.7.11"})
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    world.once()
    assert world.servers().splitlines()[1:] == [
        "server 10.89.7.10:8000 max_fails=0;  # spark-a", "server 10.89.7.11:8000 max_fails=0;  # spark-b"]


def test_probes_go_to_the_resolved_address(tmp_path):
    world = named_world(tmp_path, {"spark-a": "10.89.7.10", "spark-b": "10.89.7.11"})
    seen = []
    world.syncer.probe = lambda candidate: seen.append(up.server_key(candidate)) or vh.SERVING
    world.once()
    assert seen == ["10.89.7.10:8000", "10.89.7.11:8000"]


def test_a_name_that_stops_resolving_keeps_its_last_address(tmp_path):
    """The machine went down and its name left DNS: nginx -t must still pass, the engine leaves by its probes."""
    world = named_world(tmp_path, {"spark-a": "10.89.7.10", "spark-b": "10.89.7.11"})
    world.statuses.update({"spark-a": vh.SERVING, "spark-b": vh.SERVING})
    world.once()
    world.resolver.table["spark-b"] = None
    world.statuses["spark-b"] = vh.UNREACHABLE
    state = world.once()
    assert state["statuses"]["spark-b"] == vh.UNREACHABLE
    assert state["members"] == ["spark-a"]
    assert "spark-b" not in world.servers()


def test_a_name_that_never_resolved_is_unreachable_and_left_out(tmp_path):
    """At boot, the other machine down: its name does not resolve, nginx gets the one that does."""
    world = named_world(tmp_path, {"spark-a": "10.89.7.10", "spark-b": None})
    probed = []
    world.syncer.probe = lambda candidate: probed.append(candidate["name"]) or vh.LOADING
    state = world.once()
    assert probed == ["spark-a"]
    assert state["statuses"] == {"spark-a": vh.LOADING, "spark-b": vh.UNREACHABLE}
    assert state["mode"] == up.MODE_FALLBACK
    assert world.servers().splitlines()[1:] == ["server 10.89.7.10:8000 max_fails=0;  # spark-a"]
    world.resolver.table["spark-b"] = "10.89.7.11"
    world.syncer.probe = lambda candidate: vh.SERVING
    state = world.once()
    assert state["in_rotation"] == ["spark-a", "spark-b"]


def test_no_name_resolves_and_none_drained_is_fallback_with_the_placeholder(tmp_path):
    world = named_world(tmp_path, {"spark-a": None, "spark-b": None})
    state = world.once()
    assert state["mode"] == up.MODE_FALLBACK
    assert up.PLACEHOLDER in world.servers()


@pytest.mark.parametrize("candidate, key", [
    ({"address": "10.0.0.1"}, "10.0.0.1:8000"), ({"address": "fd00::1"}, "[fd00::1]:8000"),
    ({"address": "[fd00::1]"}, "[fd00::1]:8000"), ({"address": "spark-a", "host": "10.0.0.1"}, "10.0.0.1:8000")])
def test_server_key_uses_the_resolved_host_and_brackets_ipv6(candidate, key):
    assert up.server_key(dict(candidate, port=8000)) == key


@pytest.mark.parametrize("name, expected", [("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_resolve_address_of_a_literal(name, expected):
    assert up.resolve_address(name, 8000) == expected


def test_resolve_address_that_does_not_resolve(monkeypatch):
    def fail(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")
    monkeypatch.setattr(up.socket, "getaddrinfo", fail)
    assert up.resolve_address("spark-b", 8000) is None


# --- load_config() and --check-config -------------------------------------------------------------


@pytest.mark.parametrize("change, words", [
    ({"colour": "blue"}, "unknown key(s): colour"),
    ({"candidates": "spark-a"}, "candidates must be a list"),
    ({"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 0}]}, "a port 1-65535"),
    ({"interval": 0}, "interval must be a number of seconds above 0"),
    ({"fails": 0}, "fails must be a whole number of probes"),
    ({"passes": True}, "passes must be a whole number of probes"),
    ({"servers_file": 3}, "servers_file must be a string"),
    ({"reload_command": "systemctl reload nginx"}, "reload_command must be a command"),
])
def test_load_config_names_the_wrong_key(change, words):
    raw = {"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 8000}], "model": None, "api_key": None,
           "interval": 1.0, "fails": 3, "passes": 2, "servers_file": "/etc/nginx/upstream.conf"}
    assert up.load_config(dict(raw)) == raw
    with pytest.raises(ValueError) as err:
        up.load_config(dict(raw, **change))
    assert words in str(err.value)


def test_check_config(tmp_path, engines, capsys):
    path = write_config(tmp_path, engines)
    assert up.main(["--config", str(path), "--check-config"]) == 0
    assert capsys.readouterr().out == "%s: ok (4 engines, a probe every 1s)\n" % path
    assert not (tmp_path / "run" / "upstream.json").exists()
    path.write_text(json.dumps({"candidates": [], "fails": -1}))
    assert up.main(["--config", str(path), "--check-config"]) == 2
    assert "fails must be a whole number of probes" in capsys.readouterr().err


def test_load_config_takes_the_affinity_keys():
    raw = {"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 8000, "max_num_seqs": 12}],
           "members_file": "/etc/nginx/factory-floor-members.json"}
    assert up.load_config(dict(raw)) == raw


@pytest.mark.parametrize("change, words", [
    ({"members_file": 3}, "members_file must be a string"),
    ({"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 8000, "max_num_seqs": -1}]}, "max_num_seqs"),
    ({"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 8000, "max_num_seqs": "12"}]}, "max_num_seqs"),
])
def test_load_config_names_a_wrong_affinity_key(change, words):
    raw = {"candidates": [{"name": "spark-a", "address": "10.0.0.1", "port": 8000}]}
    with pytest.raises(ValueError) as err:
        up.load_config(dict(raw, **change))
    assert words in str(err.value)


def test_main_once_writes_the_member_list(tmp_path, engines, keep_sigterm):
    """With members_file (affinity), the list for nginx's Lua balancer next to the server lines."""
    path = write_config(tmp_path, engines, members_file=str(tmp_path / "members.json"),
                        candidates=[{"name": "spark-a", "address": "localhost", "port": engines["serving"].port,
                                     "max_num_seqs": 4}])
    for _run in range(2):
        assert up.main(["--config", str(path), "--once"]) == 0
    members = json.loads((tmp_path / "members.json").read_text())
    assert members["mode"] == "live"
    assert [(m["name"], m["port"], m["max_num_seqs"]) for m in members["members"]] == [
        ("spark-a", engines["serving"].port, 4)]
    assert members["members"][0]["host"] == "127.0.0.1"   # IPv4 first: localhost is also ::1


def test_nginx_workers_are_the_masters_children(tmp_path):
    (tmp_path / "nginx.pid").write_text("41\n")
    children = tmp_path / "proc" / "41" / "task" / "41"
    children.mkdir(parents=True)
    (children / "children").write_text("42 43 ")
    assert up.nginx_workers(str(tmp_path / "nginx.pid"), proc=str(tmp_path / "proc")) == {42, 43}
    assert up.nginx_workers(str(tmp_path / "missing.pid"), proc=str(tmp_path / "proc")) is None
    (tmp_path / "nginx.pid").write_text("not a pid")
    assert up.nginx_workers(str(tmp_path / "nginx.pid"), proc=str(tmp_path / "proc")) is None


@pytest.mark.parametrize("generations, waits, was_logged", [
    # the old workers twice more, then a new one: the state is written once nginx runs it
    ([{1, 2}, {1, 2}, {1, 2}, {1, 2, 3}], 2, False),
    # no new worker within reload_timeout: said, and the pass goes on
    ([{1, 2}] * 200, 100, True),
    # workers unreadable after the reload (nginx restarting): not waited for
    ([{1, 2}, None], 0, False),
])
def test_a_reload_is_waited_for_until_nginx_runs_a_new_worker(tmp_path, generations, waits, was_logged):
    world = World(tmp_path)
    seen, slept = list(generations), []

    def workers():
        return seen.pop(0) if len(seen) > 1 else seen[0]

    def sleep(seconds):
        slept.append(seconds)
        world.now += seconds

    world.syncer = up.Syncer(world.config, probe=world.probe, run=world.run, log=world.logs.append, clock=world.clock,
                             workers=workers, sleep=sleep, monotonic=world.clock)
    world.statuses["spark-a"] = vh.SERVING
    world.statuses["spark-b"] = vh.SERVING
    for _pass in range(up.DEFAULT_PASSES + 1):
        slept.clear()
        world.once()
        if "nginx-reload" in world.ran():
            break
    assert "nginx-reload" in world.ran()
    assert len(slept) in (waits, waits + 1)  # 0.1 s steps add up to a little under 10 s
    unconfirmed = logged(world.logs, "reload_unconfirmed")
    assert bool(unconfirmed) is was_logged
    assert all(prio == daemon.WARNING and record["timeout"] == 10 for prio, record in unconfirmed)
    assert world.state()["members"] == ["spark-a", "spark-b"]


def test_the_reload_wait_ignores_a_wall_clock_step_back(tmp_path):
    """The wait for nginx's new worker is bounded on the monotonic clock: a wall clock stepped back
    by an hour mid-wait (NTP, an operator) neither stretches it nor ends it early."""
    world = World(tmp_path)
    ticks = {"mono": 0.0}
    steps = []

    def wall():
        return 1_000_000.0 - 3600.0 * len(steps)

    def sleep(seconds):
        steps.append(seconds)
        ticks["mono"] += seconds

    world.syncer = up.Syncer(world.config, probe=world.probe, run=world.run, log=world.logs.append, clock=wall,
                             workers=lambda: {1, 2}, sleep=sleep, monotonic=lambda: ticks["mono"])
    world.statuses["spark-a"] = vh.SERVING
    world.statuses["spark-b"] = vh.SERVING
    for _pass in range(up.DEFAULT_PASSES + 1):
        steps.clear()
        world.once()
        if "nginx-reload" in world.ran():
            break
    assert "nginx-reload" in world.ran()
    assert 99 <= len(steps) <= 101
    assert logged(world.logs, "reload_unconfirmed")
