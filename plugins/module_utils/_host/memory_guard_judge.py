# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory guard's configuration and its decision: from what the workloads use and
MemAvailable to what to stop, pause or resume. Pure logic, no I/O.

Private to the collection; the ``memory_guard`` role installs it next to
``_host/memory_guard_watch.py``, the daemon that measures and acts (see its docstring).
"""

from __future__ import annotations

from .daemon import ERR, INFO, NOTICE, WARNING
from .memory import GIB


STOP = "stop"
PAUSE = "pause"
RESUME = "resume"
ACTIONS = (STOP, PAUSE)

#: Reasons for an action.
PEAK = "peak"
FLOOR = "floor"
RECOVERED = "recovered"

#: syslog priorities, as systemd reads them from a "<N>" line prefix (SyslogLevelPrefix=).

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


# ------------------------------------------------------------------------ decision


def new_state():
    """What the guard remembers between ticks."""
    return {
        "acted": {},          # name -> {"action": "stopped"|"paused", "reason", "time", "mono", "invocation"}
        "last_step": None,    # monotonic time of the last action taken for the floor (or a peak while below it)
        "below": False,       # MemAvailable was below the floor at the last tick
        "nothing_left": False,
    }


def _describe(workload, reading):
    used = reading.get("used")
    return ("%s (%s, priority %d): uses %s GiB, declared peak %s GiB [%s]"
            % (workload["name"], workload["target"], workload["priority"],
               "?" if used is None else _gib(used), _gib(workload["peak"]), reading.get("source")))


def decide(config, mem_available, readings, state, now, wall=None):
    """The guard's decision for one tick. Pure: readings in, events out; updates ``state``.

    ``readings`` maps each workload's name to :func:`measure`'s dict. ``now`` is the
    host's monotonic clock (seconds): the settle time is measured on it, so a step of the
    wall clock neither holds the guard back nor hurries it. ``wall`` (UNIX time, default
    ``now``) only labels the events and records for people. Returns a list of events, each
    a dict with ``priority`` (syslog), ``message``, ``time`` and, for actions, ``action``
    (``stop``, ``pause``, ``resume``), ``reason`` (``peak``, ``floor``, ``recovered``),
    ``workload`` and the numbers.
    """
    wall = now if wall is None else wall
    events = []
    workloads = config["workloads"]
    floor, resume = config["floor"], config["resume"]
    engines = ", ".join(config["engine_units"])
    acted = state["acted"]

    def event(priority, message, **fields):
        fields.update(priority=priority, message="memory guard: " + message, time=wall)
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
                                       "time": wall, "mono": now, "invocation": reading.get("invocation", "")}

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
                    "MemAvailable is still below the floor %.0f s after it was paused"
                    % (now - record.get("mono", now))
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
