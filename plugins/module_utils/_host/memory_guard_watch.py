# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's watch: while vLLM runs, hold the co-resident workloads to their peaks.

Run by systemd (``factory-floor-memory-guard.service``, installed by the
``memory_guard`` role next to ``_host/memory.py``)::

    python3 -m _host.memory_guard_watch --config /etc/factory-floor/memory-guard.json

The share vLLM gets (``gpu_memory_utilization``) was computed to leave each
declared workload its peak. On a cgroup v2 host (GB10) the kernel holds each
workload to it (``MemoryMax=`` on its unit or slice). Where the kernel cannot
(a cgroup v1 host that does not delegate the memory controller, as the lab's
containers), or when memory runs short anyway, this loop acts. Every
``interval`` seconds it reads ``MemAvailable`` from ``/proc/meminfo`` and each
workload's use (:func:`measure`), then (:func:`decide`):

1. **peak**: a workload that uses more than its declared peak is stopped
   (``systemctl stop --no-block``) or, when declared ``action: pause``, paused
   (``SIGSTOP`` to each of its processes). It stays paused until its unit runs
   again (a new invocation), since resuming would only let it grow again.
2. **floor**: while ``MemAvailable`` is below ``floor``, the guard acts on the
   lowest-priority workload still running (its declared ``action``), then waits
   ``settle`` seconds for the memory to come back before it acts on the next
   one: one at a time, lowest priority first. A workload it paused for the floor
   is stopped on the next step if pausing was not enough; it is resumed
   (``SIGCONT``), highest priority first, once ``MemAvailable`` is at least
   ``floor + resume`` again.
3. **never the engines**: the vLLM units (``engine_units``) and the guard's own
   unit are never acted on: a workload that names one is refused by the
   configuration check, a declared slice that holds one is never stopped, and
   their processes are never signalled. When nothing is left to act on, the
   guard says so (priority ``err``) and leaves the model serving.

Every decision is one journal line with its evidence (the use, where it was read,
the peak, ``MemAvailable`` and the floor); the last state and decisions are in
``status_file`` (JSON). When the guard stops (``SIGTERM``) it resumes what it
paused, so nothing stays frozen without a guard to resume it.

How use is measured (:func:`measure`), from the unit's ``ControlGroup``:

* cgroup v2 with the memory controller (GB10): ``memory.current`` minus the
  cgroup's page cache (``file`` in ``memory.stat``), as ``_memory`` measures it;
* otherwise (cgroup v1, memory controller not delegated): the sum of
  ``RssAnon + RssShmem`` (``/proc/PID/status``) of the processes in the unit's
  cgroup, found under ``/sys/fs/cgroup/unified``, ``/sys/fs/cgroup/systemd`` or,
  failing those, in ``/proc/PID/cgroup``; for a service whose cgroup cannot be
  found at all, its ``MainPID`` and that process's descendants.

Stdlib only, no Ansible imports; the decision (:func:`decide`) is a pure
function of readings, so it is tested with plain tables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from . import daemon
from . import memory
from . import memory_guard_judge as judge
from . import systemd
from . import textfile
from .proc import stat_table

# The names this module uses, bound once for both ways of importing it (its tests read
# the priorities through it too).
ERR, INFO, NOTICE, WARNING = daemon.ERR, daemon.INFO, daemon.NOTICE, daemon.WARNING
HISTORY, PAUSE, RESUME = judge.HISTORY, judge.PAUSE, judge.RESUME
RUNNING_STATES, STOP = judge.RUNNING_STATES, judge.STOP
decide, load_config, new_state = judge.decide, judge.load_config, judge.new_state
_gib, _round_gib = judge._gib, judge._round_gib  # pylint: disable=protected-access
MemoryPlanError, memory_facts = memory.MemoryPlanError, memory.memory_facts
parse_meminfo, read_cgroup_memory = memory.parse_meminfo, memory.read_cgroup_memory


# -------------------------------------------------------------------- measurement


class Host:
    """The host as the guard sees it: ``systemctl``, ``/proc``, the cgroup tree, signals.

    Every path and the ``systemctl`` binary come from the configuration, so tests
    run this class against a fake ``/proc``, a fake cgroup tree and a fake
    ``systemctl`` script.
    """

    def __init__(self, systemctl="/usr/bin/systemctl", proc_root="/proc", cgroup_root="/sys/fs/cgroup",
                 meminfo="/proc/meminfo", kill=os.kill):
        self.systemctl = systemctl
        self.proc_root = proc_root.rstrip("/") or "/"
        self.cgroup_root = cgroup_root.rstrip("/") or "/"
        self.meminfo = meminfo
        self._kill = kill

    # -- reading

    @staticmethod
    def read_text(path):
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def mem_available(self):
        """``MemAvailable`` in bytes (``MemFree + Buffers + Cached`` on old kernels), or None."""
        try:
            return memory_facts(parse_meminfo(self.read_text(self.meminfo)))["available"]
        except (OSError, MemoryPlanError):
            return None

    def show(self, unit, properties):
        """The unit's ``properties`` as a dict (``_systemd.show_properties``); empty when systemctl fails."""
        try:
            return systemd.show_properties(unit, properties, systemd.run, self.systemctl)
        except systemd.UnitStateError:
            return {}

    def cgroup_dir(self, cgroup):
        """The directory of a unit's cgroup (``ControlGroup``) in this host's cgroup tree, or None.

        Tried in order: the unified (v2) tree at the root, the unified tree of a
        hybrid host, the named ``systemd`` v1 tree. Inside a container the path
        systemd reports may carry the container's own cgroup in front of what
        is mounted, so leading components are dropped until a directory matches.
        """
        parts = [p for p in (cgroup or "").split("/") if p]
        if not parts:
            return None
        for base in (self.cgroup_root, self.cgroup_root + "/unified", self.cgroup_root + "/systemd"):
            for start in range(len(parts)):
                path = base + "/" + "/".join(parts[start:])
                if os.path.isdir(path):
                    return path
        return None

    def pids_in_dir(self, path):
        """Every process in a cgroup directory and the cgroups below it."""
        pids = []
        for root, dummy_dirs, files in os.walk(path):
            if "cgroup.procs" not in files:
                continue
            try:
                text = self.read_text(os.path.join(root, "cgroup.procs"))
            except OSError:
                continue
            pids.extend(int(word) for word in text.split() if word.isdigit())
        return sorted(set(pids))

    def _proc_pids(self):
        try:
            return [int(name) for name in os.listdir(self.proc_root) if name.isdigit()]
        except OSError:
            return []

    def pids_by_proc_cgroup(self, cgroup):
        """Processes whose ``/proc/PID/cgroup`` (systemd's hierarchy) is the unit's cgroup or below it."""
        cgroup = "/" + "/".join(p for p in cgroup.split("/") if p)
        found = []
        for pid in self._proc_pids():
            try:
                text = self.read_text("%s/%d/cgroup" % (self.proc_root, pid))
            except OSError:
                continue
            for line in text.splitlines():
                fields = line.split(":", 2)
                if len(fields) != 3 or not (fields[0] == "0" or fields[1] == "name=systemd"):
                    continue
                path = fields[2].rstrip("/")
                if path.endswith(cgroup) or (cgroup + "/") in path:
                    found.append(pid)
                    break
        return sorted(found)

    def pids_of_tree(self, root_pid):
        """``root_pid`` and its descendants (from ``/proc/PID/stat``)."""
        children = {}
        for pid, (dummy, fields) in (stat_table(self.proc_root) or {}).items():
            try:
                children.setdefault(int(fields[1]), []).append(pid)
            except (IndexError, ValueError):
                continue
        if not os.path.isdir("%s/%d" % (self.proc_root, root_pid)):
            return []
        tree, todo = set(), [root_pid]
        while todo:
            pid = todo.pop()
            if pid not in tree:
                tree.add(pid)
                todo.extend(children.get(pid, []))
        return sorted(tree)

    def rss(self, pid):
        """Memory a process holds, in bytes: ``RssAnon + RssShmem`` (else ``VmRSS``); None when gone.

        Mapped files (``RssFile``: the interpreter, shared libraries) are page
        cache and not counted, as ``memory.current - file`` leaves them out.
        """
        try:
            text = self.read_text("%s/%d/status" % (self.proc_root, pid))
        except OSError:
            return None
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            parts = value.split()
            if sep and parts and parts[0].isdigit():
                fields[key.strip()] = int(parts[0]) * 1024
        if "RssAnon" in fields:
            return fields["RssAnon"] + fields.get("RssShmem", 0)
        return fields.get("VmRSS", 0)

    # -- acting

    def stop(self, unit):
        """``systemctl stop --no-block UNIT``; returns None or the error."""
        try:
            # The memory guard's daemon on the host: no AnsibleModule, so no run_command.
            # pylint: disable-next=ansible-bad-function
            done = subprocess.run([self.systemctl, "stop", "--no-block", "--", unit], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
        if done.returncode != 0:
            return "systemctl stop %s exited %d: %s" % (unit, done.returncode, done.stderr.strip())
        return None

    def signal(self, pids, signum):
        """Send ``signum`` to each pid; returns the pids it reached."""
        reached = []
        for pid in pids:
            try:
                self._kill(pid, signum)
            except OSError:
                continue
            reached.append(pid)
        return reached


def measure(host, unit):
    """What one unit (a service or a slice) holds now.

    Returns a dict: ``state`` (``ActiveState``), ``invocation`` (``InvocationID``),
    ``used`` (bytes, None when it cannot be measured), ``pids``, ``cgroup`` and
    ``source`` (where ``used`` was read, for the journal).
    """
    props = host.show(unit, ["ActiveState", "ControlGroup", "MainPID", "InvocationID"])
    state = props.get("ActiveState") or "unknown"
    cgroup = props.get("ControlGroup", "")
    reading = {"state": state, "invocation": props.get("InvocationID", ""), "used": None, "pids": [],
               "cgroup": cgroup, "source": None}
    if state not in RUNNING_STATES and state != "deactivating":
        reading["used"] = 0
        reading["source"] = "not running (%s)" % state
        return reading
    path = host.cgroup_dir(cgroup)
    if path is not None:
        reading["pids"] = host.pids_in_dir(path)
        v2 = read_cgroup_memory(path, host.read_text)
        if v2 is not None:
            reading["used"] = v2["used"]
            reading["source"] = "%s/memory.current - file" % path
            return reading
        where = path
    elif cgroup:
        reading["pids"] = host.pids_by_proc_cgroup(cgroup)
        where = "/proc/*/cgroup under %s" % cgroup
    else:
        where = None
    if not reading["pids"]:
        try:
            main_pid = int(props.get("MainPID") or 0)
        except ValueError:
            main_pid = 0
        if main_pid > 0:
            reading["pids"] = host.pids_of_tree(main_pid)
            where = "MainPID %d and its descendants" % main_pid
    if where is None:
        reading["source"] = "no cgroup or process found"
        return reading
    sizes = [size for size in (host.rss(pid) for pid in reading["pids"]) if size is not None]
    reading["used"] = sum(sizes)
    reading["source"] = "RSS of %d process%s in %s" % (len(sizes), "" if len(sizes) == 1 else "es", where)
    return reading


# ------------------------------------------------------------------------- the loop


class Guard:
    """One guard: configuration, host, memory of past decisions, journal."""

    def __init__(self, config, host, log, clock=time.monotonic, dry_run=False, notify=None, wall=time.time):
        self.config = config
        self.host = host
        self.log = log
        # systemd's readiness and liveness (sd_notify); nothing outside systemd.
        self.notify = notify or daemon.sd_notify
        # Waits (the settle time) on the monotonic clock; the wall clock only stamps what people read.
        self.clock = clock
        self.wall = wall
        self.dry_run = dry_run
        self.state = new_state()
        self.history = []
        self.readings = {}
        self.mem_available = None
        self.sources = {}

    def engine_pids(self):
        pids = set()
        for unit in self.config["engine_units"] + [self.config["own_unit"]]:
            pids.update(measure(self.host, unit)["pids"])
        pids.add(os.getpid())
        return pids

    def engines_inside(self, reading):
        """Engine units whose cgroup lies inside this workload's cgroup (a slice that holds an engine)."""
        inside = []
        prefix = (reading.get("cgroup") or "").rstrip("/")
        if not prefix:
            return inside
        for unit in self.config["engine_units"]:
            cgroup = self.host.show(unit, ["ControlGroup"]).get("ControlGroup", "")
            if cgroup and (cgroup + "/").startswith(prefix + "/"):
                inside.append(unit)
        return inside

    def execute(self, item, reading):
        """Carry out one action; returns ``(error, retry)``: None, or why it could not be done.

        ``retry``: forget the action, so the next tick decides again (a failed
        ``systemctl stop``); a refusal to touch an engine is kept.
        """
        workload = next(w for w in self.config["workloads"] if w["name"] == item["workload"])
        inside = self.engines_inside(reading)
        if inside:
            return ("%s holds %s: the guard never acts on the engines, so it leaves %s alone"
                    % (workload["target"], ", ".join(inside), workload["name"])), False
        engines = self.engine_pids()
        pids = [p for p in reading.get("pids", []) if p not in engines]
        if item["action"] == STOP:
            error = self.host.stop(workload["target"])
            # A paused workload gets SIGCONT so that it can take the stop's SIGTERM
            # (systemd sends one too).
            self.host.signal(pids, signal.SIGCONT)
            return error, True
        if not pids:
            return "no process of %s found to signal" % workload["target"], True
        signum = signal.SIGSTOP if item["action"] == PAUSE else signal.SIGCONT
        if not self.host.signal(pids, signum):
            return "no process of %s could be signalled (pids %s)" % (workload["target"], pids), True
        return None, False

    def tick(self):
        """Measure, decide, act, log; returns the events of this tick."""
        now, wall = self.clock(), self.wall()
        mem_available = self.host.mem_available()
        readings = {w["name"]: measure(self.host, w["target"]) for w in self.config["workloads"]}
        # A workload the guard paused stays paused: processes it started since are stopped too.
        for name, record in self.state["acted"].items():
            if record["action"] == "paused" and readings.get(name, {}).get("state") in RUNNING_STATES \
                    and not self.dry_run:
                engines = self.engine_pids()
                self.host.signal([p for p in readings[name]["pids"] if p not in engines], signal.SIGSTOP)
        self.readings, self.mem_available = readings, mem_available
        for workload in self.config["workloads"]:
            # Say once how each workload is measured (and again when the way changes).
            source = readings[workload["name"]]["source"] or ""
            kind = source.split(" of ")[0] if source.startswith("RSS") else source
            if source and not source.startswith("not running") and self.sources.get(workload["name"]) != kind:
                self.sources[workload["name"]] = kind
                self.log(INFO, "memory guard: %s (%s) is measured from %s"
                         % (workload["name"], workload["target"], source))
        events = decide(self.config, mem_available, readings, self.state, now, wall)
        for item in events:
            if "action" in item and not self.dry_run:
                error, retry = self.execute(item, readings.get(item["workload"], {}))
                if error is not None:
                    item["error"] = error
                    item["message"] += " FAILED: %s" % error
                    item["priority"] = ERR
                    if retry and item["action"] != RESUME:
                        self.state["acted"].pop(item["workload"], None)
            self.log(item["priority"], item["message"] + (" (dry run)" if self.dry_run else ""))
        self.history.extend(events)
        self.history = self.history[-HISTORY:]
        self.write_status(wall)
        # The verdict for node_exporter's textfile collector (when the unit names its directory).
        textfile.write_textfile("factory_floor_memory_guard", textfile.memory_guard_families(
            wall, mem_available, self.config["floor"], self.state, self.config["workloads"], readings))
        return events

    def resume_all(self, why):
        """Resume every workload the guard paused (it is going away)."""
        for name, record in list(self.state["acted"].items()):
            if record["action"] != "paused":
                continue
            workload = next((w for w in self.config["workloads"] if w["name"] == name), None)
            if workload is None:
                continue
            reading = measure(self.host, workload["target"])
            engines = self.engine_pids()
            self.host.signal([p for p in reading["pids"] if p not in engines], signal.SIGCONT)
            self.log(NOTICE, "memory guard: resuming (SIGCONT) %s (%s), which it had paused: %s"
                     % (name, workload["target"], why))
            self.state["acted"].pop(name)
        self.write_status(self.wall())

    def write_status(self, now):
        path = self.config["status_file"]
        if not path:
            return
        readings = self.readings
        blank = {"state": "unknown", "used": None, "source": None}
        status = {
            "time": now,
            "interval": self.config["interval"],
            "mem_available_gib": _round_gib(self.mem_available),
            "floor_gib": _round_gib(self.config["floor"]),
            "below_floor": self.state["below"],
            "engine_units": self.config["engine_units"],
            "workloads": [
                {"name": w["name"], "unit": w["target"], "priority": w["priority"], "action": w["action"],
                 "peak_gib": _round_gib(w["peak"]), "state": readings.get(w["name"], blank)["state"],
                 "used_gib": _round_gib(readings.get(w["name"], blank)["used"]),
                 "source": readings.get(w["name"], blank)["source"],
                 "guard": self.state["acted"].get(w["name"])}
                for w in self.config["workloads"]],
            "events": [dict(e) for e in self.history],
        }
        try:
            daemon.write_atomic(path, json.dumps(status, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            self.log(ERR, "memory guard: cannot write %s: %s" % (path, exc))

    def restore(self):
        """Take over what a previous run paused (its status file), so it can be resumed."""
        try:
            with open(self.config["status_file"], encoding="utf-8") as handle:
                previous = json.load(handle)
        except (OSError, ValueError, TypeError):
            return
        names = set(w["name"] for w in self.config["workloads"])
        for item in previous.get("workloads", []):
            record = item.get("guard")
            if isinstance(record, dict) and record.get("action") == "paused" and item.get("name") in names:
                self.state["acted"][item["name"]] = record
                self.log(INFO, "memory guard: %s was paused by the previous run (%s); still treated as paused"
                         % (item["name"], record.get("reason")))

    def run(self, stop, once=False):
        """Look every ``interval`` seconds until ``stop`` is set, or once.

        The loop is the daemons' shell (``_daemon.loop``): ``READY=1`` before the first look,
        ``WATCHDOG=1`` after each (the unit has ``WatchdogSec=``), and a stop ends it after
        the current look, so no action is cut in half.
        """
        config = self.config
        watched = ", ".join("%s (%s, peak %s GiB, priority %d, %s)"
                            % (w["name"], w["target"], _gib(w["peak"]), w["priority"], w["action"])
                            for w in config["workloads"])
        self.log(INFO, "memory guard: watching %s every %.0f s; MemAvailable floor %s GiB (resume at %s GiB); "
                 "never acting on %s"
                 % (watched or "no workloads", config["interval"], _gib(config["floor"]),
                    _gib(config["floor"] + config["resume"]), ", ".join(config["engine_units"] + [config["own_unit"]])))
        self.restore()
        if once:
            self.tick()
            return
        daemon.loop(self.tick, config["interval"], stop, notify=self.notify)


def _journal(priority, line):
    daemon.emit(daemon.journal_line(priority, line))


def main(argv=None):
    args, config = daemon.configure(
        argv, "Factory Floor memory guard: hold co-resident workloads to their declared peaks and keep a floor under "
        "MemAvailable, never acting on the vLLM engines.", load_config,
        lambda path, c: "%s: %d workloads, floor %s GiB, every %.0f s" % (path, len(c["workloads"]), _gib(c["floor"]),
                                                                          c["interval"]),
        prefix="memory guard: ", dry_run=True, prog="python3 -m _host.memory_guard_watch")
    if args is None:
        return config
    host = Host(systemctl=config["systemctl"], proc_root=config["proc_root"], cgroup_root=config["cgroup_root"],
                meminfo=config["meminfo"])
    guard = Guard(config, host, _journal, dry_run=args.dry_run)
    stop = daemon.stop_event()
    try:
        guard.run(stop, once=args.once)
    finally:
        if not args.once and not args.dry_run:
            guard.resume_all("the guard stops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
