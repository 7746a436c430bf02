# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/systemd.py, the one reader of ``systemctl show``."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd as sd

SHOW = ("LoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\nExecMainStatus=0\nMainPID=0\n"
        "InvocationID=\nUnitFileState=enabled\nNRestarts=3\nExecMainStartTimestampMonotonic=12500000\n")


def test_parse_show_reads_every_property():
    state = sd.parse_show("vllm.service", SHOW)
    assert state == sd.UnitState("vllm.service", "loaded", "inactive", "dead", "success", 0, 3, 12500000,
                                 main_pid=None, invocation_id=None, unit_file_state="enabled")
    # vLLM's API server exits with status 0 when its engine core dies: down, although "success".
    assert state.down and state.wanted and not state.running


@pytest.mark.parametrize("load, active, sub, down", [
    ("loaded", "active", "running", False),
    ("loaded", "activating", "auto-restart", False),
    ("loaded", "deactivating", "stop-sigterm", False),
    ("loaded", "failed", "failed", True),
    ("loaded", "active", "exited", True),
    ("not-found", "inactive", "dead", True),
])
def test_down(load, active, sub, down):
    assert sd.UnitState("u", load, active, sub).down is down


def test_show_asks_for_the_properties_given():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "ActiveState=active\nSubState=running\n", ""

    state = sd.show("vllm.service", run, systemctl="/usr/bin/systemctl", properties=("ActiveState", "SubState"))
    assert calls == [["/usr/bin/systemctl", "show", "-p", "ActiveState,SubState", "--", "vllm.service"]]
    assert state.running and state.main_started is None


def test_show_properties_is_a_dict_of_the_properties_given():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "ControlGroup=/system.slice/x.service\nMainPID=812\n", ""

    assert sd.show_properties("x.service", ["ControlGroup", "MainPID"], run, "/usr/bin/systemctl") == {
        "ControlGroup": "/system.slice/x.service", "MainPID": "812"}
    assert calls == [["/usr/bin/systemctl", "show", "-p", "ControlGroup,MainPID", "--", "x.service"]]
    with pytest.raises(sd.UnitStateError) as err:
        sd.show_properties("x.service", ["MainPID"], lambda argv: (1, "", "Failed to connect to bus\n"))
    assert str(err.value) == "systemctl show -p MainPID -- x.service failed (rc 1): Failed to connect to bus"


@pytest.mark.parametrize("answer, words", [
    ((1, "", "Failed to connect to bus"), "failed (rc 1): Failed to connect to bus"),
    ((0, "garbage\n", ""), "did not report ActiveState"),
])
def test_show_errors(answer, words):
    with pytest.raises(sd.UnitStateError) as err:
        sd.show("vllm.service", lambda argv: answer)
    assert words in str(err.value)


def test_as_dict_with_fields():
    state = sd.parse_show("u", SHOW)
    assert state.as_dict(("name", "n_restarts")) == {"name": "u", "n_restarts": 3}
    assert set(state.as_dict()) >= {"main_pid", "invocation_id", "unit_file_state"}


def test_run_for_daemons():
    assert sd.run([sys.executable, "-c", "print('out')"]) == (0, "out\n", "")
    rc, out, err = sd.run(["/nonexistent/systemctl", "show"])
    assert rc == 127 and out == "" and err.startswith("/nonexistent/systemctl show could not run: ")


# --- what a unit's processes and journal say (a start-up wait's message) -----------------------


def _fake_proc(tmp_path, pid, ppid, name, state, utime, stime, core, allowed):
    folder = tmp_path / str(pid)
    folder.mkdir()
    # Fields after "(comm) ": state ppid ... utime is field 14, stime 15, processor 39 (1-based over the whole line).
    rest = [state, str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 23 + [str(core)] + ["0"] * 5
    (folder / "stat").write_text("%d (%s) %s\n" % (pid, name, " ".join(rest)), encoding="utf-8")
    (folder / "status").write_text("Name:\t%s\nState:\t%s (x)\nCpus_allowed_list:\t%s\n" % (name, state, allowed),
                                   encoding="utf-8")


def test_process_lines_walks_the_tree_under_the_main_pid(tmp_path):
    _fake_proc(tmp_path, 1, 0, "systemd", "S", 5, 5, 0, "0-1")
    _fake_proc(tmp_path, 812, 1, "python3", "S", 4000, 120, 1, "0-1")
    _fake_proc(tmp_path, 901, 812, "VLLM::EngineCor", "R", 30, 0, 0, "0")
    _fake_proc(tmp_path, 950, 901, "VLLM::Worker", "R", 100, 50, 1, "1")
    _fake_proc(tmp_path, 77, 1, "nginx", "S", 1, 1, 0, "0-1")
    (tmp_path / "self").mkdir()
    assert sd.process_lines(812, str(tmp_path)) == [
        "812 python3 S 41.2 1 0-1", "901 VLLM::EngineCor R 0.3 0 0", "950 VLLM::Worker R 1.5 1 1"]
    assert sd.process_lines(4242, str(tmp_path)) == []
    assert sd.process_lines(812, str(tmp_path / "missing")) == []


def test_unit_process_lines_reads_the_main_pid(tmp_path):
    _fake_proc(tmp_path, 812, 1, "python3", "S", 100, 0, 1, "0-1")
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, "MainPID=812\n", ""

    assert sd.unit_process_lines("vllm-replica.service", run, proc_dir=str(tmp_path)) == ["812 python3 S 1.0 1 0-1"]
    assert seen == [["systemctl", "show", "-p", "MainPID", "--", "vllm-replica.service"]]
    assert sd.unit_process_lines("x.service", lambda argv: (0, "MainPID=0\n", ""), proc_dir=str(tmp_path)) == []
    assert sd.unit_process_lines("x.service", lambda argv: (1, "", "no"), proc_dir=str(tmp_path)) == []


def test_container_pid_reads_the_containers_main_process():
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, "WARN[0000] a podman warning\n4242\n", ""

    assert sd.container_pid("/usr/bin/podman", "vllm-replica", run) == 4242
    assert seen == [["/usr/bin/podman", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]]
    # Not running (docker prints 0), not there, not a number, the engine missing: 0, never an exception.
    assert sd.container_pid("docker", "x", lambda argv: (0, "0\n", "")) == 0
    assert sd.container_pid("docker", "x", lambda argv: (1, "", "Error: No such container: x")) == 0
    assert sd.container_pid("docker", "x", lambda argv: (0, "<no value>\n", "")) == 0

    def missing(argv):
        raise OSError("No such file or directory: /usr/bin/docker")

    assert sd.container_pid("/usr/bin/docker", "x", missing) == 0


def test_unit_process_lines_adds_the_containers_processes(tmp_path):
    # docker: the unit's main process is the `docker run` client; vLLM runs under containerd-shim.
    _fake_proc(tmp_path, 700, 1, "docker", "S", 10, 0, 0, "0-1")
    _fake_proc(tmp_path, 800, 1, "containerd-shim", "S", 5, 0, 1, "0-1")
    _fake_proc(tmp_path, 812, 800, "vllm", "S", 4000, 120, 1, "0-1")
    _fake_proc(tmp_path, 901, 812, "VLLM::EngineCor", "R", 30, 0, 0, "0")
    seen = []

    def run(argv):
        seen.append(argv)
        return (0, "MainPID=700\n", "") if argv[0] == "systemctl" else (0, "812\n", "")

    lines = sd.unit_process_lines("vllm-replica.service", run, proc_dir=str(tmp_path), container_engine="/usr/bin/docker")
    assert lines == ["700 docker S 0.1 0 0-1", "812 vllm S 41.2 1 0-1", "901 VLLM::EngineCor R 0.3 0 0"]
    assert seen[1] == ["/usr/bin/docker", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]
    # The container's name can be given; a container that does not run adds nothing.
    seen.clear()
    assert sd.unit_process_lines("a.service", lambda argv: seen.append(argv) or (0, "0\n", ""), proc_dir=str(tmp_path),
                                 container_engine="docker", container_name="other") == []
    assert seen[1][-1] == "other"


def test_systemd_journal():
    calls = []

    def run_command(argv):
        calls.append(argv)
        return 0, "line one\nline two\n", ""

    assert sd.journal("vllm.service", run_command) == ["line one", "line two"]
    assert calls == [["journalctl", "-u", "vllm.service", "-n", "600", "--no-pager"]]
    assert sd.journal("vllm.service", lambda argv: (1, "", "No journal files were found.")) == [
        "(journalctl -u vllm.service -n 600 --no-pager failed, rc 1: No journal files were found.)"]


def test_systemd_journal_leaves_out_the_exit_leak_report():
    """The lab's split that died at its first request (2026-12-02): the journal's last 30 lines were all
    nanobind's report of what Triton's bindings leaked at exit, not the worker that died."""
    prefix = "Dec 02 03:41:49 spark-a docker[1068]: "
    cause = [prefix + "(EngineCore pid=23) ERROR 12-02 03:41:17 [multiproc_executor.py:315] Worker proc VllmWorker-0 "
             "died unexpectedly (exit code: None), shutting down executor.",
             prefix + "RuntimeError: Worker failed with error 'Illegal instruction'"]
    noise = [prefix + "nanobind: leaked 64 types!", prefix + " - leaked type \"triton._C.libtriton.ir.block\"",
             prefix + " - leaked instance 0x7f6d75d20848 of type \"triton._C.libtriton.ir.attribute\"",
             prefix + "nanobind: leaked 514 functions!", prefix + " - leaked function \"create_xor\"",
             prefix + " - ... skipped remainder"] * 20
    stopped = ["Dec 02 03:41:50 spark-a systemd[1]: vllm-split.service: Deactivated successfully."]
    lines = sd.journal("vllm-split.service", lambda argv: (0, "\n".join(cause + noise + stopped) + "\n", ""))
    assert lines == cause + stopped
    many = ["%s line %d" % (prefix, n) for n in range(100)]
    assert sd.journal("vllm.service", lambda argv: (0, "\n".join(many + noise), "")) == many[-30:]


# --------------------------------------------------------------------------- on the files on disk?

# The wall clock and CLOCK_MONOTONIC of "now" in these tests: the host booted 1,000,000 s before.
NOW_WALL, NOW_MONO = 1_767_225_600.0, 1_000_000.0


def _running(started_s_ago, need_daemon_reload=False, active="active", sub="running"):
    return sd.UnitState("w.service", "loaded", active, sub, main_pid=42, need_daemon_reload=need_daemon_reload,
                        main_started=int((NOW_MONO - started_s_ago) * 1e6))


def test_parse_show_reads_need_daemon_reload():
    assert sd.parse_show("u", "ActiveState=active\nNeedDaemonReload=yes\n").need_daemon_reload is True
    assert sd.parse_show("u", "ActiveState=active\nNeedDaemonReload=no\n").need_daemon_reload is False
    assert "NeedDaemonReload" in sd.PROPERTIES


def test_started_wallclock_places_the_monotonic_start_on_the_clock_of_now():
    assert sd.started_wallclock(int((NOW_MONO - 100) * 1e6), NOW_WALL, NOW_MONO) == pytest.approx(NOW_WALL - 100)
    assert sd.started_wallclock(None, NOW_WALL, NOW_MONO) is None


def test_an_interrupted_run_leaves_a_daemon_that_the_next_run_restarts():
    # The run before wrote the configuration 60 s ago and was interrupted; the watchdog has run
    # for a day on the old one. This run writes nothing (the file is as it wants it).
    mtimes = {"/etc/factory-floor/w.json": NOW_WALL - 60, "/usr/local/lib/factory-floor/_host/watchdog.py": NOW_WALL - 90_000,
              "/etc/systemd/system/w.service": None}
    state = _running(started_s_ago=86_400)
    assert sd.files_changed_since_start(state, mtimes, NOW_WALL, NOW_MONO) == ["/etc/factory-floor/w.json"]
    assert sd.restart_reasons(state, mtimes, NOW_WALL, NOW_MONO) == [
        "/etc/factory-floor/w.json was modified 86340 s after its main process started"]


def test_a_daemon_started_after_its_files_were_written_is_left_alone():
    mtimes = {"/etc/factory-floor/w.json": NOW_WALL - 60.5, "/etc/systemd/system/w.service": NOW_WALL - 61}
    assert sd.restart_reasons(_running(started_s_ago=60), mtimes, NOW_WALL, NOW_MONO) == []


def test_a_unit_file_systemd_has_not_loaded_is_a_reason():
    reasons = sd.restart_reasons(_running(started_s_ago=60, need_daemon_reload=True), {}, NOW_WALL, NOW_MONO)
    assert reasons == ["systemd has not loaded its unit file as it is on disk (NeedDaemonReload=yes)"]


def test_a_oneshot_is_judged_by_its_last_run():
    # The engines' firewall (Type=oneshot, RemainAfterExit=yes): active/exited, no main process left.
    state = _running(started_s_ago=3_600, sub="exited")
    state.main_pid = None
    assert sd.restart_reasons(state, {"/etc/factory-floor/firewall.nft": NOW_WALL - 10}, NOW_WALL, NOW_MONO)


@pytest.mark.parametrize("active, sub", [("inactive", "dead"), ("failed", "failed"), ("activating", "auto-restart")])
def test_a_unit_that_does_not_run_is_not_restarted(active, sub):
    # Its next start reads what is on disk (after the reload need_daemon_reload asks for).
    state = _running(started_s_ago=86_400, need_daemon_reload=True, active=active, sub=sub)
    assert sd.restart_reasons(state, {"/etc/factory-floor/w.json": NOW_WALL - 60}, NOW_WALL, NOW_MONO) == []


def test_a_unit_that_never_ran_has_no_start():
    state = sd.UnitState("w.service", "loaded", "active", "running")
    assert sd.files_changed_since_start(state, {"/x": NOW_WALL}, NOW_WALL, NOW_MONO) == []
    assert sd.restart_reasons(state, {"/x": NOW_WALL}, NOW_WALL, NOW_MONO) == []
