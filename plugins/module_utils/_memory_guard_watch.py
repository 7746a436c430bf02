# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's watch: while vLLM runs, hold the co-resident workloads to their peaks.

Run by systemd (``factory-floor-memory-guard.service``, installed by the
``memory_guard`` role next to ``_memory.py``)::

    python3 _memory_guard_watch.py --config /etc/factory-floor/memory-guard.json

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

import argparse
import json
import os
import signal
import subprocess
import sys
import time

try:  # inside the collection
    from ansible_collections.factory_floor.llm.plugins.module_utils._memory import (
        GIB,
        MemoryPlanError,
        memory_facts,
        parse_meminfo,
        read_cgroup_memory,
    )
    from ansible_collections.factory_floor.llm.plugins.module_utils import _textfile as textfile
except ImportError:  # installed next to _memory.py on a host
    from _memory import (  # type: ignore[no-redef]
        GIB,
        MemoryPlanError,
        memory_facts,
        parse_meminfo,
        read_cgroup_memory,
    )
    import _textfile as textfile  # type: ignore[no-redef]

STOP = "stop"
PAUSE = "pause"
RESUME = "resume"
ACTIONS = (STOP, PAUSE)

#: Reasons for an action.
PEAK = "peak"
FLOOR = "floor"
RECOVERED = "recovered"

#: syslog priorities, as systemd reads them from a "<N>" line prefix (SyslogLevelPrefix=).
ERR = 3
WARNING = 4
NOTICE = 5
INFO = 6

#: Unit states in which a workload holds memory and can be acted on.
RUNNING_STATES = ("active", "activating", "reloading")

DEFAULTS = {
    "interval": 5.0,
    "floor_gib": 2.0,
    "resume_gib": 1.0,
    "settle": 15.0,
    "engine_units": ["vllm-replica.service", "vllm-split.service"],
    "own_unit": "factory-floor-memory-guard.service",
    "workloads": [],
    "status_file": "/run/factory-floor/memory-guard.json",
    "systemctl": "/usr/bin/systemctl",
    "meminfo": "/proc/meminfo",
    "proc_root": "/proc",
    "cgroup_root": "/sys/fs/cgroup",
}

#: How many past decisions the status file keeps.
HISTORY = 100


class ConfigError(ValueError):
    """The configuration file is unusable; the message names the key."""


def _gib(n_bytes):
    return "%.2f" % (n_bytes / GIB)


def _round_gib(n_bytes):
    return None if n_bytes is None else round(n_bytes / GIB, 3)


# ------------------------------------------------------------------ configuration


def load_config(data):
    """Check a configuration mapping and fill in the defaults; raise :class:`ConfigError`.

    Workloads: ``name``, ``unit`` (a ``.service``) or ``slice`` (a ``.slice``),
    ``peak_gib`` (> 0), ``priority`` (int, higher = more important, default 0),
    ``action`` (``stop`` or ``pause``, default ``stop``). The result carries
    ``peak`` in bytes and ``target`` (the unit or slice) for each.
    """
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a JSON object, got %s" % type(data).__name__)
    unknown = sorted(set(data) - set(DEFAULTS) - {"_comment"})
    if unknown:
        raise ConfigError("unknown keys: %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    config = dict(DEFAULTS)
    config.update({k: v for k, v in data.items() if k != "_comment"})
    for key in ("interval", "settle", "floor_gib", "resume_gib"):
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError("%s must be a number >= 0, got %r" % (key, value))
    if config["interval"] <= 0:
        raise ConfigError("interval must be > 0 seconds, got %r" % config["interval"])
    engines = config["engine_units"]
    if not isinstance(engines, list) or not all(isinstance(u, str) and u for u in engines):
        raise ConfigError("engine_units must be a list of unit names, got %r" % (engines,))
    protected = set(engines) | {config["own_unit"]}
    workloads = []
    seen = set()
    if not isinstance(config["workloads"], list):
        raise ConfigError("workloads must be a list, got %r" % (config["workloads"],))
    for index, item in enumerate(config["workloads"]):
        where = "workloads[%d]" % index
        if not isinstance(item, dict):
            raise ConfigError("%s must be an object, got %r" % (where, item))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError("%s has no name" % where)
        if name in seen:
            raise ConfigError("workload %s is declared twice" % name)
        seen.add(name)
        unit, slice_ = item.get("unit") or None, item.get("slice") or None
        if bool(unit) == bool(slice_):
            raise ConfigError("workload %s must name one unit (a .service) or one slice (a .slice), got unit=%r slice=%r"
                              % (name, unit, slice_))
        target = unit or slice_
        if unit and not unit.endswith(".service"):
            raise ConfigError("workload %s: unit must be a .service, got %r" % (name, unit))
        if slice_ and not slice_.endswith(".slice"):
            raise ConfigError("workload %s: slice must be a .slice, got %r" % (name, slice_))
        if slice_ in ("-.slice", "system.slice", "user.slice", "machine.slice"):
            raise ConfigError("workload %s: %s is systemd's own slice; the guard would act on everything in it"
                              % (name, slice_))
        if target in protected:
            raise ConfigError("workload %s names %s, which the guard never acts on (the engines %s and the guard "
                              "itself): the model is never a co-resident workload"
                              % (name, target, ", ".join(sorted(engines))))
        peak = item.get("peak_gib")
        if isinstance(peak, bool) or not isinstance(peak, (int, float)) or peak <= 0:
            raise ConfigError("workload %s: peak_gib must be a number > 0 (GiB), got %r" % (name, peak))
        priority = item.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ConfigError("workload %s: priority must be an integer, got %r" % (name, priority))
        action = item.get("action", STOP) or STOP
        if action not in ACTIONS:
            raise ConfigError("workload %s: action must be one of %s, got %r" % (name, ", ".join(ACTIONS), action))
        workloads.append({
            "name": name,
            "unit": unit,
            "slice": slice_,
            "target": target,
            "peak": int(round(peak * GIB)),
            "priority": priority,
            "action": action,
        })
    config["workloads"] = workloads
    config["floor"] = int(round(config["floor_gib"] * GIB))
    config["resume"] = int(round(config["resume_gib"] * GIB))
    return config


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
        """``systemctl show -p P1 -p P2 UNIT`` as a dict; empty when systemctl fails."""
        argv = [self.systemctl, "show"] + ["--property=%s" % p for p in properties] + ["--", unit]
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return {}
        if done.returncode != 0:
            return {}
        values = {}
        for line in done.stdout.splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                values[key] = value
        return values

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
        for pid in self._proc_pids():
            try:
                text = self.read_text("%s/%d/stat" % (self.proc_root, pid))
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
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


# ------------------------------------------------------------------------ decision


def new_state():
    """What the guard remembers between ticks."""
    return {
        "acted": {},          # name -> {"action": "stopped"|"paused", "reason", "time", "invocation"}
        "last_step": None,    # time of the last action taken for the floor (or a peak while below it)
        "below": False,       # MemAvailable was below the floor at the last tick
        "nothing_left": False,
    }


def _describe(workload, reading):
    used = reading.get("used")
    return ("%s (%s, priority %d): uses %s GiB, declared peak %s GiB [%s]"
            % (workload["name"], workload["target"], workload["priority"],
               "?" if used is None else _gib(used), _gib(workload["peak"]), reading.get("source")))


def decide(config, mem_available, readings, state, now):
    """The guard's decision for one tick. Pure: readings in, events out; updates ``state``.

    ``readings`` maps each workload's name to :func:`measure`'s dict. Returns a
    list of events, each a dict with ``priority`` (syslog), ``message`` and, for
    actions, ``action`` (``stop``, ``pause``, ``resume``), ``reason`` (``peak``,
    ``floor``, ``recovered``), ``workload`` and the numbers.
    """
    events = []
    workloads = config["workloads"]
    floor, resume = config["floor"], config["resume"]
    engines = ", ".join(config["engine_units"])
    acted = state["acted"]

    def event(priority, message, **fields):
        fields.update(priority=priority, message="memory guard: " + message, time=now)
        events.append(fields)

    def act(workload, reading, action, reason, why):
        verb = {STOP: "stopping", PAUSE: "pausing (SIGSTOP)", RESUME: "resuming (SIGCONT)"}[action]
        how = {STOP: "systemctl stop %s" % workload["target"],
               PAUSE: "SIGSTOP to its processes, resumed once memory is back" if reason == FLOOR
               else "SIGSTOP to its processes, until its unit runs again",
               RESUME: "SIGCONT to its processes"}[action]
        event(NOTICE if action == RESUME else WARNING,
              "%s %s: %s (%s). MemAvailable %s GiB, floor %s GiB; the engines (%s) are never touched."
              % (verb, _describe(workload, reading), why, how,
                 "?" if mem_available is None else _gib(mem_available), _gib(floor), engines),
              action=action, reason=reason, workload=workload["name"], target=workload["target"],
              used=reading.get("used"), peak=workload["peak"], mem_available=mem_available, floor=floor)
        if action == RESUME:
            acted.pop(workload["name"], None)
        else:
            acted[workload["name"]] = {"action": "stopped" if action == STOP else "paused", "reason": reason,
                                       "time": now, "invocation": reading.get("invocation", "")}

    # What the guard did before and that no longer holds: the unit ran again, or stopped.
    for workload in workloads:
        record = acted.get(workload["name"])
        reading = readings.get(workload["name"])
        if record is None or reading is None or reading["state"] == "unknown":
            continue  # no reading (systemctl failed): nothing is known to have changed
        running = reading["state"] in RUNNING_STATES
        if record["action"] == "stopped" and not running:
            record["seen_down"] = True
        elif record["action"] == "stopped" and (record.get("seen_down") or reading["invocation"] != record["invocation"]):
            event(INFO, "%s runs again (a new start); watching it again." % workload["name"])
            acted.pop(workload["name"])
        elif record["action"] == "paused" and (not running or reading["invocation"] != record["invocation"]):
            event(INFO, "%s, which the guard had paused, was %s; watching it again."
                  % (workload["name"], "restarted" if running else "stopped (%s)" % reading["state"]))
            acted.pop(workload["name"])

    # 1. Each workload above its declared peak: its own action, whatever MemAvailable says.
    stepped = False
    for workload in workloads:
        reading = readings.get(workload["name"])
        if reading is None or reading["state"] not in RUNNING_STATES or reading["used"] is None:
            continue
        if reading["used"] <= workload["peak"]:
            continue
        record = acted.get(workload["name"])
        if record is not None:
            if record["action"] == "paused" and record["reason"] == FLOOR:
                record["reason"] = PEAK  # above its peak: not resumed when memory comes back
            continue
        act(workload, reading, workload["action"], PEAK,
            "above its declared peak by %s GiB" % _gib(reading["used"] - workload["peak"]))
        stepped = True

    # 2. The floor on MemAvailable: one workload at a time, lowest priority first.
    if mem_available is None:
        event(ERR, "cannot read MemAvailable from %s; only the declared peaks are enforced" % config["meminfo"])
        return events
    below = mem_available < floor
    if below and not state["below"]:
        event(WARNING, "MemAvailable %s GiB is below the floor %s GiB" % (_gib(mem_available), _gib(floor)),
              reason=FLOOR, mem_available=mem_available, floor=floor)
    elif not below and state["below"]:
        event(INFO, "MemAvailable %s GiB is back above the floor %s GiB" % (_gib(mem_available), _gib(floor)),
              mem_available=mem_available, floor=floor)
        state["nothing_left"] = False
    state["below"] = below

    settled = state["last_step"] is None or now - state["last_step"] >= config["settle"]
    if below and stepped:
        state["last_step"] = now
    elif below and settled:
        order = sorted(workloads, key=lambda w: (w["priority"], -(readings.get(w["name"], {}).get("used") or 0)))
        for workload in order:
            reading = readings.get(workload["name"])
            if reading is None or reading["state"] not in RUNNING_STATES:
                continue
            record = acted.get(workload["name"])
            others = ["%s (priority %d)" % (w["name"], w["priority"]) for w in order
                      if w is not workload and w["name"] not in acted
                      and readings.get(w["name"], {}).get("state") in RUNNING_STATES]
            rest = "; next: %s" % ", ".join(others) if others else "; nothing else is left to act on"
            if record is None:
                act(workload, reading, workload["action"], FLOOR,
                    "MemAvailable is below the floor and it is the lowest-priority workload still running" + rest)
            elif record["action"] == "paused":
                act(workload, reading, STOP, FLOOR,
                    "MemAvailable is still below the floor %.0f s after it was paused" % (now - record["time"])
                    + rest)
            else:
                # Stopped by the guard and still stopping: one at a time, so the next
                # workload waits until this one has let go of its memory.
                break
            state["last_step"] = now
            break
        else:
            if not state["nothing_left"]:
                event(ERR, "MemAvailable %s GiB is below the floor %s GiB and no declared workload is left to act on; "
                      "the engines (%s) are never stopped by the guard. Look for what else holds memory "
                      "(systemd-cgtop, ps aux --sort=-rss)." % (_gib(mem_available), _gib(floor), engines),
                      reason=FLOOR, mem_available=mem_available, floor=floor)
                state["nothing_left"] = True

    # 3. Memory is back: resume what was paused for the floor, highest priority first, one at a time.
    if not below and mem_available >= floor + resume and settled:
        paused = [w for w in workloads
                  if acted.get(w["name"], {}).get("action") == "paused" and acted[w["name"]]["reason"] == FLOOR]
        if paused:
            workload = max(paused, key=lambda w: w["priority"])
            act(workload, readings.get(workload["name"], {"used": None, "source": "not measured"}), RESUME,
                RECOVERED, "MemAvailable is at least the floor + %s GiB again" % _gib(resume))
            state["last_step"] = now
    return events


# ------------------------------------------------------------------------- the loop


class Guard:
    """One guard: configuration, host, memory of past decisions, journal."""

    def __init__(self, config, host, log, clock=time.time, dry_run=False):
        self.config = config
        self.host = host
        self.log = log
        self.clock = clock
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
        now = self.clock()
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
        events = decide(self.config, mem_available, readings, self.state, now)
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
        self.write_status(now)
        # The verdict for node_exporter's textfile collector (when the unit names its directory).
        textfile.write_textfile("factory_floor_memory_guard", textfile.memory_guard_families(
            now, mem_available, self.config["floor"], self.state, self.config["workloads"], readings))
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
        self.write_status(self.clock())

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
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(status, handle, indent=1, sort_keys=True)
                handle.write("\n")
            os.replace(tmp, path)
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

    def run(self, sleep=time.sleep, ticks=None):
        config = self.config
        watched = ", ".join("%s (%s, peak %s GiB, priority %d, %s)"
                            % (w["name"], w["target"], _gib(w["peak"]), w["priority"], w["action"])
                            for w in config["workloads"])
        self.log(INFO, "memory guard: watching %s every %.0f s; MemAvailable floor %s GiB (resume at %s GiB); "
                 "never acting on %s"
                 % (watched or "no workloads", config["interval"], _gib(config["floor"]),
                    _gib(config["floor"] + config["resume"]), ", ".join(config["engine_units"] + [config["own_unit"]])))
        self.restore()
        count = 0
        while ticks is None or count < ticks:
            started = self.clock()
            self.tick()
            count += 1
            if ticks is not None and count >= ticks:
                break
            sleep(max(config["interval"] - (self.clock() - started), 0.0))


def _journal(priority, line):
    sys.stdout.write("<%d>%s\n" % (priority, line))
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="_memory_guard_watch.py",
        description="Factory Floor memory guard: hold co-resident workloads to their declared peaks and keep a "
                    "floor under MemAvailable, never acting on the vLLM engines.")
    parser.add_argument("--config", required=True, help="the guard's JSON configuration")
    parser.add_argument("--check-config", action="store_true", help="check the configuration and exit")
    parser.add_argument("--once", action="store_true", help="one look, then exit")
    parser.add_argument("--dry-run", action="store_true", help="decide and log, act on nothing")
    args = parser.parse_args(argv)
    try:
        with open(args.config, encoding="utf-8") as handle:
            config = load_config(json.load(handle))
    except (OSError, ValueError) as exc:
        sys.stderr.write("memory guard: %s: %s\n" % (args.config, exc))
        return 2
    if args.check_config:
        sys.stdout.write("memory guard: %s: %d workloads, floor %s GiB, every %.0f s\n"
                         % (args.config, len(config["workloads"]), _gib(config["floor"]), config["interval"]))
        return 0
    host = Host(systemctl=config["systemctl"], proc_root=config["proc_root"], cgroup_root=config["cgroup_root"],
                meminfo=config["meminfo"])
    guard = Guard(config, host, _journal, dry_run=args.dry_run)

    def on_term(signum, dummy_frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        guard.run(ticks=1 if args.once else None)
    finally:
        if not args.once and not args.dry_run:
            guard.resume_all("the guard stops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
