# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What systemd says of a unit: the one reader of ``systemctl show`` for modules and daemons,
and what a unit that does not start shows of itself (its processes in ``/proc``, its journal).

Standard library only, so the daemons (watchdog, memory guard, membership checker) load
it from their package on a host. ``run(argv)`` returns ``(rc, stdout, stderr)`` like
``AnsibleModule.run_command``; :func:`run` is the same for a daemon. Callers read
properties through :func:`show_properties` (a dict) or :func:`show` (a :class:`UnitState`),
never by building their own ``systemctl show`` command.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess

from .proc import stat_table

# Every property a caller reads (one place to add one).
PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainStatus", "MainPID", "InvocationID",
              "UnitFileState", "NRestarts", "ExecMainStartTimestampMonotonic", "NeedDaemonReload")
# UnitFileState values of a unit that is enabled: it should run.
WANTED_FILE_STATES = ("enabled", "enabled-runtime", "linked", "linked-runtime")


class UnitStateError(RuntimeError):
    """systemctl could not be asked, or did not answer with a unit state."""


def _int(text):
    try:
        return int(text) if text not in (None, "") else None
    except (TypeError, ValueError):
        return None


@dataclasses.dataclass
class UnitState:
    """A systemd unit's state, as ``systemctl show`` reports it.

    ``n_restarts`` is ``NRestarts`` (systemd's own restarts under ``Restart=``; reset when
    the unit is started by hand), ``main_started`` is ``ExecMainStartTimestampMonotonic``
    (microseconds of CLOCK_MONOTONIC when the current main process started; changes with
    every new run; None when it never ran). ``need_daemon_reload`` is ``NeedDaemonReload``:
    the unit file or one of its drop-ins on disk is not what systemd loaded, so a start
    or restart now would run the loaded (older) definition until ``systemctl daemon-reload``.
    """

    name: str
    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    result: str | None = None
    exec_main_status: int | None = None
    n_restarts: int | None = None
    main_started: int | None = None
    main_pid: int | None = None
    invocation_id: str | None = None
    unit_file_state: str | None = None
    need_daemon_reload: bool = False

    @property
    def down(self) -> bool:
        """True when the unit is not running and systemd will not start it again by itself.

        ``failed``; ``inactive`` (stopped, or vLLM's API server exited with status 0
        after its engine died, so ``Restart=on-failure`` does not fire); ``active``
        with SubState ``exited`` (no main process left); or the unit does not exist.
        ``activating`` (including SubState ``auto-restart``) and ``deactivating``
        are not down: systemd is still working on it.
        """
        if self.load_state in ("not-found", "masked", "error", "bad-setting"):
            return True
        if self.active_state in ("failed", "inactive"):
            return True
        return self.active_state == "active" and self.sub_state == "exited"

    @property
    def wanted(self) -> bool:
        """The unit exists and is enabled: it should run."""
        return self.load_state == "loaded" and self.unit_file_state in WANTED_FILE_STATES

    @property
    def running(self) -> bool:
        return self.active_state == "active" and self.sub_state == "running"

    def describe(self) -> str:
        return "ActiveState=%s, SubState=%s, Result=%s, ExecMainStatus=%s%s" % (
            self.active_state,
            self.sub_state,
            self.result,
            self.exec_main_status,
            "" if self.load_state in (None, "loaded") else ", LoadState=%s" % self.load_state,
        )

    def as_dict(self, fields=None) -> dict:
        """The state as a dict; only ``fields`` (attribute names) when given."""
        values = dataclasses.asdict(self)
        return values if fields is None else {name: values[name] for name in fields}


def parse_properties(text: str) -> dict:
    """``Key=value`` lines as a dict (values stripped)."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def parse_show(name: str, text: str) -> UnitState:
    """A :class:`UnitState` from ``systemctl show`` output; raises :class:`UnitStateError` without ActiveState."""
    values = parse_properties(text)
    if "ActiveState" not in values:
        raise UnitStateError("systemctl show %s did not report ActiveState: %r" % (name, text))
    return UnitState(
        name=name,
        load_state=values.get("LoadState") or None,
        active_state=values.get("ActiveState") or None,
        sub_state=values.get("SubState") or None,
        result=values.get("Result") or None,
        exec_main_status=_int(values.get("ExecMainStatus")),
        n_restarts=_int(values.get("NRestarts")),
        # 0 when the unit never ran.
        main_started=_int(values.get("ExecMainStartTimestampMonotonic")) or None,
        main_pid=_int(values.get("MainPID")) or None,
        invocation_id=values.get("InvocationID") or None,
        unit_file_state=values.get("UnitFileState") or None,
        need_daemon_reload=values.get("NeedDaemonReload") == "yes",
    )


def show_argv(unit: str, properties=PROPERTIES, systemctl: str = "systemctl") -> list:
    return [systemctl, "show", "-p", ",".join(properties), "--", unit]


def _show_output(unit: str, properties, run, systemctl: str):
    """``(argv, stdout)`` of ``systemctl show -p P1,P2,... -- UNIT``; raises :class:`UnitStateError` when it fails."""
    argv = show_argv(unit, properties, systemctl)
    rc, out, err = run(argv)
    if rc != 0:
        raise UnitStateError("%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out or "").strip()))
    return argv, out


def show_properties(unit: str, properties, run, systemctl: str = "systemctl") -> dict:
    """A unit's ``properties`` as ``{name: value}`` (``systemctl show -p P1,P2,... -- UNIT``).

    ``run(argv)`` -> ``(rc, stdout, stderr)``. A property systemctl does not know is
    missing from the dict. Raises :class:`UnitStateError` when systemctl fails.
    """
    return parse_properties(_show_output(unit, properties, run, systemctl)[1])


def show(unit: str, run, systemctl: str = "systemctl", properties=PROPERTIES) -> UnitState:
    """Read a unit's state with ``systemctl show -p P1,P2,... -- UNIT``; raises :class:`UnitStateError`."""
    argv, out = _show_output(unit, properties, run, systemctl)
    try:
        return parse_show(unit, out)
    except UnitStateError:
        raise UnitStateError("%s did not report ActiveState: %r" % (" ".join(argv), out))


# ActiveState of a unit whose current process (or, Type=oneshot with RemainAfterExit=, whose
# last run) is what it runs now. "activating" (a start, an auto-restart) reads its files
# when it gets there.
_CURRENT_STATES = ("active", "reloading")


def started_wallclock(main_started_us, now_wall: float, now_monotonic: float):
    """When the unit's main process started, in seconds since the epoch; None when it never ran.

    ``main_started_us`` is ``ExecMainStartTimestampMonotonic`` (CLOCK_MONOTONIC, the clock of
    ``time.monotonic()``), placed on the wall clock of now: ``now_wall - (now_monotonic -
    start)``. A step of the wall clock between the start and now (the clock set at boot, by
    NTP, by hand) therefore moves the start with it, where systemd's own wall-clock
    ``ExecMainStartTimestamp`` would keep the clock of that moment. (CLOCK_MONOTONIC does
    not count time suspended: a server that suspends would see its starts too late.)
    """
    if not main_started_us:
        return None
    return now_wall - (now_monotonic - main_started_us / 1e6)


def files_changed_since_start(state: UnitState, mtimes: dict, now_wall: float, now_monotonic: float) -> list:
    """The paths of ``mtimes`` (``{path: st_mtime}``, None for a missing file) modified after the unit's main process started.

    Sorted; [] when the unit has no main process start (it never ran). A missing file is
    left out: what is gone cannot be restarted onto.
    """
    started = started_wallclock(state.main_started, now_wall, now_monotonic)
    if started is None:
        return []
    return sorted(path for path, mtime in mtimes.items() if mtime is not None and mtime > started)


def restart_reasons(state: UnitState, mtimes: dict, now_wall: float, now_monotonic: float) -> list:
    """Why a running unit is not on the files on disk now, one sentence each; [] when it is, or when it does not run.

    The rule the collection's daemons (watchdog, membership checker, memory watch) and its
    oneshot units (the engines' firewall) are restarted by, whatever run wrote the files: a
    run that wrote them and was interrupted before the restart leaves a process that the
    next run, which writes nothing new, still finds here. The unit runs (``ActiveState``
    active or reloading, a main process start known) and

    - systemd has not loaded its unit file or a drop-in as it is on disk
      (``NeedDaemonReload=yes``): it was started from an older definition; or
    - one of ``mtimes`` (its code, configuration, unit file: ``{path: st_mtime}``) was
      modified after its main process started (:func:`files_changed_since_start`).

    A restart after ``systemctl daemon-reload`` puts it on what is on disk.
    """
    if state.active_state not in _CURRENT_STATES or not state.main_started:
        return []
    reasons = []
    if state.need_daemon_reload:
        reasons.append("systemd has not loaded its unit file as it is on disk (NeedDaemonReload=yes)")
    started = started_wallclock(state.main_started, now_wall, now_monotonic)
    for path in files_changed_since_start(state, mtimes, now_wall, now_monotonic):
        reasons.append("%s was modified %.0f s after its main process started" % (path, mtimes[path] - started))
    return reasons


def run(argv, timeout: float = 30.0):
    """``(rc, stdout, stderr)`` of a command, for a daemon (127 when it cannot run)."""
    try:
        # For the daemons on the hosts, which have no AnsibleModule (modules pass their run_command).
        # pylint: disable-next=ansible-bad-function
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, "", "%s could not run: %s" % (" ".join(argv), exc)
    return done.returncode, done.stdout or "", done.stderr or ""


PROCESS_COLUMNS = "pid name state cpu_seconds last_core allowed_cores"


def process_lines(root_pid: int, proc_dir: str = "/proc") -> list:
    """One line per process in the tree under ``root_pid`` (itself included), from ``/proc``.

    Columns: :data:`PROCESS_COLUMNS` - state as ``/proc/PID/status`` says it (R, S,
    D, T ...), CPU seconds (utime + stime, at the kernel's 100 ticks a second),
    the core it last ran on, and the cores it may run on (``Cpus_allowed_list``).
    A process runnable (R) for minutes with no CPU seconds gained is held somewhere.
    Processes that vanish while being read are left out. Never raises.
    """
    parents = {pid: (int(fields[1]), fields) for pid, (dummy, fields) in (stat_table(proc_dir) or {}).items()
               if len(fields) > 36}
    tree = [root_pid] if root_pid in parents else []
    for pid in tree:  # grows while it is walked: breadth first
        tree.extend(sorted(child for child, entry in parents.items() if entry[0] == pid and child not in tree))
    lines = []
    for pid in tree:
        fields = parents[pid][1]
        status = {}
        try:
            with open(os.path.join(proc_dir, str(pid), "status"), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    key, sep, value = line.partition(":")
                    if sep:
                        status[key] = value.strip()
        except OSError:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / 100.0
        lines.append("%d %s %s %.1f %s %s" % (pid, status.get("Name", "?"), (status.get("State") or "?").split()[0],
                                              cpu, fields[36], status.get("Cpus_allowed_list", "?")))
    return lines


def container_pid(engine: str, name: str, run_command) -> int:
    """Host PID of a container's main process (``ENGINE container inspect --format {{.State.Pid}} NAME``).

    With the container runtime the engine's processes are not under the unit's main
    process (the ``docker run`` / ``podman run`` client): docker starts them under
    containerd-shim, podman under conmon. The container's main process is vLLM's API
    server (the role runs it with ``--entrypoint vllm``), the root of the same tree
    the unit's MainPID is with the venv runtime. ``run_command(argv)`` returns
    ``(rc, stdout, stderr)``. 0 when the container does not run or cannot be read;
    never raises.
    """
    try:
        rc, out, _err = run_command([engine, "container", "inspect", "--format", "{{.State.Pid}}", name])
    except Exception:  # pylint: disable=broad-except
        return 0
    if rc != 0:
        return 0
    # The last line that is a number: podman may print warnings first (on the same stream for some callers).
    for line in reversed((out or "").splitlines()):
        if line.strip().isdigit():
            return int(line.strip())
    return 0


def unit_process_lines(unit: str, run_command, systemctl: str = "systemctl", proc_dir: str = "/proc",
                       container_engine: str = "", container_name: str = "") -> list:
    """:func:`process_lines` of the unit's main process (``systemctl show -p MainPID``). Never raises.

    With ``container_engine`` (and ``container_name``, default the unit's name without
    ``.service``, as the vllm role names its containers), the lines of the
    container's processes follow (:func:`container_pid`): the unit's own tree is then
    only the engine's client.
    """
    try:
        pid = _int(show_properties(unit, ("MainPID",), run_command, systemctl).get("MainPID")) or 0
    except Exception:  # pylint: disable=broad-except
        pid = 0
    lines = process_lines(pid, proc_dir) if pid > 0 else []
    if container_engine:
        name = container_name or (unit[:-len(".service")] if unit.endswith(".service") else unit)
        root = container_pid(container_engine, name, run_command)
        lines += process_lines(root, proc_dir) if root > 0 else []
    return lines


# What an exiting vLLM prints that says nothing of why it ended: nanobind's report of the
# objects Triton's bindings leaked at interpreter exit, hundreds of lines after the error.
_EXIT_LEAK_REPORT = re.compile(r"nanobind: leaked \d+ \w+!|: +- (leaked (instance|type|function) |\.\.\. skipped remainder)")
# How many lines are read for each line returned: room for that report.
_JOURNAL_READ_FACTOR = 20


def journal(unit: str, run_command, lines: int = 30, journalctl: str = "journalctl") -> list:
    """Return the unit's last ``lines`` journal lines, without an exiting vLLM's leak report.

    Reads ``journalctl -u UNIT -n LINES*20 --no-pager`` and leaves out nanobind's report of
    what Triton's bindings leaked at exit, which would otherwise fill the tail and hide the
    error that ended the engine. Never raises: when journalctl fails, the one line
    returned says why.
    """
    out = _cat_journal([journalctl, "-u", unit, "-n", str(lines * _JOURNAL_READ_FACTOR), "--no-pager"], run_command)
    return [line for line in out if not _EXIT_LEAK_REPORT.search(line)][-lines:]


def invocation_journal(invocation_id: str, run_command, lines: int = 300, journalctl: str = "journalctl") -> list:
    """The last ``lines`` journal lines of one run of a unit, as its processes wrote them. Never raises.

    ``journalctl -q -a -o cat -n LINES --no-pager _SYSTEMD_INVOCATION_ID=ID``: every run
    of a unit (each start, each ``Restart=``) has its own ``InvocationID``, so these are
    the current (or last) run's lines only - with the container runtime the container's
    output too, which the attached ``docker run`` / ``podman run`` client writes to the
    unit's stdout. ``-o cat`` leaves out journald's prefix, ``-a`` keeps lines with
    control characters (tqdm's progress bars start with a carriage return) instead of
    ``[N blob data]``. Empty without an ``invocation_id``; when journalctl fails, the one
    line returned says why.
    """
    if not invocation_id:
        return []
    return _cat_journal([journalctl, "-q", "-a", "-o", "cat", "-n", str(lines), "--no-pager",
                         "_SYSTEMD_INVOCATION_ID=" + invocation_id], run_command)


def unit_log(unit: str, run_command, lines: int = 300, journalctl: str = "journalctl") -> list:
    """The last ``lines`` journal lines of every run of a unit, as its processes wrote them (as
    :func:`invocation_journal`, ``journalctl -u UNIT``), for a unit whose run has no ``InvocationID`` any more."""
    return _cat_journal([journalctl, "-q", "-a", "-o", "cat", "-n", str(lines), "--no-pager", "-u", unit], run_command)


def _cat_journal(argv, run_command) -> list:
    """What ``argv`` (a journalctl command) printed, as lines; the one line returned says why it could not."""
    try:
        rc, out, err = run_command(argv)
    except Exception as exc:  # pylint: disable=broad-except
        return ["(%s could not run: %s)" % (" ".join(argv), exc)]
    if rc != 0:
        return ["(%s failed, rc %s: %s)" % (" ".join(argv), rc, (err or out or "").strip())]
    return (out or "").rstrip("\n").splitlines()
