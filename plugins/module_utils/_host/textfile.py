# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The daemons' verdicts as metrics: files for node_exporter's textfile collector.

Private to the collection. The watchdog (``_host/watchdog.py``), the memory guard's watch
(``_host/memory_guard_watch.py``), the proxy's membership checker (``_host/upstream.py``) and the
floating address's watch (``_host/keepalived_watch.py``) call
:func:`write_textfile` once per look, at the point they have their verdict, with the
families one of the converters below builds from what they already publish (their
status file's fields). The roles install this file next to each daemon and set, in the
daemon's unit:

``FACTORY_FLOOR_TEXTFILE_DIR``
    node_exporter's ``--collector.textfile.directory``: the site role's
    ``site_textfile_dir``, one for every daemon (default ``/var/lib/node_exporter``, what
    the prometheus.prometheus collection's node_exporter role reads; Debian's
    prometheus-node-exporter reads ``/var/lib/prometheus/node-exporter``).
    Unset or empty: nothing is written.
``FACTORY_FLOOR_HOST``
    The inventory name of the host, added as label ``host`` to every sample: the label
    the engines' scrape targets carry, so rules can join a verdict to its engine.

Each file is written whole to a temporary name (``.<name>.prom.<random>``, which the
collector skips) and renamed over ``<name>.prom`` (``_daemon.write_atomic``), as
node_exporter's documentation asks, so a scrape never sees half a file. A write that fails never stops the daemon: the error
goes to stderr (the journal) once, and the file's age (``node_textfile_mtime_seconds``)
shows it. Metric names follow Prometheus' conventions: ``_bytes``, ``_seconds``, 0/1
gauges for states. Standard library only.
"""

from __future__ import annotations

import math
import os
import sys

from .daemon import write_atomic

ENV_DIR = "FACTORY_FLOOR_TEXTFILE_DIR"
ENV_HOST = "FACTORY_FLOOR_HOST"

_reported = {"error": None}


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if value.is_integer() and abs(value) < 2 ** 53 else repr(value)


def render(families, host=None) -> str:
    """The exposition text of ``families``: a list of ``(name, type, help, samples)``.

    ``samples`` is a list of ``(labels, value)``; a value of None leaves the sample out.
    With ``host``, every sample gets the label ``host``.
    """
    lines = []
    for name, kind, text, samples in families:
        lines.append("# HELP %s %s" % (name, text.replace("\\", "\\\\").replace("\n", "\\n")))
        lines.append("# TYPE %s %s" % (name, kind))
        for labels, value in samples:
            if value is None:
                continue
            labels = dict(labels, host=host) if host else dict(labels)
            inside = ",".join('%s="%s"' % (key, _escape(labels[key])) for key in sorted(labels))
            lines.append("%s%s %s" % (name, "{%s}" % inside if inside else "", _number(value)))
    return "\n".join(lines) + "\n"


def write_textfile(name, families, directory=None, host=None):
    """Write ``<directory>/<name>.prom`` for node_exporter's textfile collector.

    ``directory`` and ``host`` default to the environment (see the module docstring);
    without a directory nothing is written. Returns the path written, or None; never
    raises.
    """
    directory = directory if directory is not None else os.environ.get(ENV_DIR, "")
    if not directory:
        return None
    host = host if host is not None else os.environ.get(ENV_HOST) or None
    path = os.path.join(directory, name + ".prom")
    try:
        # node_exporter's directory is the role's to create: a missing one is an error here.
        write_atomic(path, render(families, host), 0o644, makedirs=False)
    except (OSError, TypeError, ValueError) as exc:
        # Without the file name an OSError carries (the temporary file's is new each time).
        message = "textfile %s not written: %s" % (path, getattr(exc, "strerror", None) or exc)
        if _reported["error"] != message:
            _reported["error"] = message
            sys.stderr.write("<4>%s\n" % message)
            sys.stderr.flush()
        return None
    _reported["error"] = None
    return path


def remove_textfile(name, directory=None):
    """Remove ``<directory>/<name>.prom`` (a daemon that stops for good); True when it was there."""
    directory = directory if directory is not None else os.environ.get(ENV_DIR, "")
    if not directory:
        return False
    try:
        os.unlink(os.path.join(directory, name + ".prom"))
    except OSError:
        return False
    return True


# ------------------------------------------------------------------ the watchdog


def watchdog_name(unit) -> str:
    """The watchdog's file name for the engine unit it guards (``factory_floor_watchdog_vllm-replica``)."""
    base = str(unit)
    return "factory_floor_watchdog_" + (base[:-len(".service")] if base.endswith(".service") else base)


def watchdog_families(status):
    """From the watchdog's status (``Watchdog._publish``: the fields of its ``status_file``)."""
    labels = {"unit": status.get("unit"), "role": status.get("role")}
    budget = status.get("budget") or {}
    unit_state = status.get("unit_state") or {}
    return [
        ("factory_floor_watchdog_verdict", "gauge",
         "1 for the watchdog's latest verdict on its engine unit (serving, busy, slow, suspect, hung, dead, down, "
         "starting, maintenance, gave_up, ...).",
         [(dict(labels, verdict=status.get("verdict")), 1)]),
        ("factory_floor_watchdog_gave_up", "gauge",
         "1 when the watchdog gave up on the engine (restart budget exhausted, or systemd's start limit hit): it "
         "acts again once someone starts the unit.",
         [(labels, 1 if status.get("gave_up") else 0)]),
        ("factory_floor_watchdog_restarts", "gauge",
         "Restarts of the engine by the watchdog within its restart_window (the budget used).",
         [(labels, budget.get("used"))]),
        ("factory_floor_watchdog_max_restarts", "gauge",
         "The watchdog's restart budget: max_restarts within restart_window.",
         [(labels, budget.get("max_restarts"))]),
        ("factory_floor_engine_unit_restarts", "gauge",
         "systemd's NRestarts of the engine unit: automatic restarts (Restart=) since the unit was last started "
         "by hand.",
         [(labels, unit_state.get("n_restarts"))]),
        ("factory_floor_watchdog_lock_expired", "gauge",
         "1 while this host's maintenance lock file has expired (by its own expiry, on this host's clock): its run "
         "is presumed dead, the watchdog acts again; remove the file.",
         [(labels, 1 if status.get("lock_expired") else 0)]),
        ("factory_floor_watchdog_updated_timestamp_seconds", "gauge",
         "When the watchdog last looked at its engine, Unix time.",
         [(labels, status.get("updated"))]),
    ]


# --------------------------------------------------------------- the memory guard


def memory_guard_families(now, mem_available, floor, state, workloads, readings):
    """From one look of the memory guard's watch: ``MemAvailable`` and the floor (bytes), its
    state (``below``, ``nothing_left``, ``acted``), the declared workloads and their readings."""
    acted = state.get("acted") or {}
    workload_samples = []
    used_samples = []
    for workload in workloads:
        labels = {"workload": workload["name"], "unit": workload["target"]}
        record = acted.get(workload["name"])
        workload_samples.append((dict(labels, action=record["action"]), 1) if record else (dict(labels, action="none"), 0))
        used_samples.append((labels, (readings.get(workload["name"]) or {}).get("used")))
    return [
        ("factory_floor_memory_available_bytes", "gauge",
         "MemAvailable from /proc/meminfo at the memory guard's last look.",
         [({}, mem_available)]),
        ("factory_floor_memory_floor_bytes", "gauge",
         "The memory guard's floor under MemAvailable (memory_guard_floor_gib).",
         [({}, floor)]),
        ("factory_floor_memory_below_floor", "gauge",
         "1 while MemAvailable is below the floor (the guard pauses or stops declared workloads, lowest priority "
         "first).",
         [({}, 1 if state.get("below") else 0)]),
        ("factory_floor_memory_guard_nothing_left", "gauge",
         "1 when MemAvailable is below the floor and no declared workload is left to act on (the engines are never "
         "acted on).",
         [({}, 1 if state.get("nothing_left") else 0)]),
        ("factory_floor_memory_workload_acted", "gauge",
         "1 for a declared workload the guard paused or stopped (label action), 0 (action none) otherwise.",
         workload_samples),
        ("factory_floor_memory_workload_used_bytes", "gauge",
         "A declared workload's memory use as the guard measures it (cgroup memory.current minus page cache, or "
         "the RSS of its processes).",
         used_samples),
        ("factory_floor_memory_guard_updated_timestamp_seconds", "gauge",
         "When the memory guard last looked, Unix time.",
         [({}, now)]),
    ]


# ---------------------------------------------------------- the proxy's membership


def upstream_families(state, candidates):
    """From one pass of the membership checker (the state it writes to its state file) and the
    candidate engines' names."""
    in_rotation = set(state.get("in_rotation") or ())
    members = set(state.get("members") or ())
    drained = set(state.get("drained") or ())
    statuses = state.get("statuses") or {}
    nginx = state.get("nginx") or {}
    return [
        ("factory_floor_upstream_in_rotation", "gauge",
         "1 for an engine in nginx's upstream whose latest probe passed (it gets requests), 0 otherwise.",
         [({"backend": name}, 1 if name in in_rotation else 0) for name in candidates]),
        ("factory_floor_upstream_member", "gauge",
         "1 for an engine listed in nginx's upstream (an engine on its way out after failed probes included).",
         [({"backend": name}, 1 if name in members else 0) for name in candidates]),
        ("factory_floor_upstream_drained", "gauge",
         "1 for an engine drained in the upstream nginx runs (a switch, an upgrade, nginx_proxy_drain).",
         [({"backend": name}, 1 if name in drained else 0) for name in candidates]),
        ("factory_floor_upstream_probe_serving", "gauge",
         "1 when the engine's latest probe passed (/health 200 and the model in /v1/models).",
         [({"backend": name}, 1 if statuses.get(name) == "serving" else 0) for name in candidates]),
        ("factory_floor_upstream_engines_in_rotation", "gauge",
         "Engines that get requests through this proxy now.",
         [({}, len(in_rotation))]),
        ("factory_floor_upstream_engines_drained", "gauge",
         "Engines drained in the upstream nginx runs.",
         [({}, len(drained))]),
        ("factory_floor_upstream_updated_timestamp_seconds", "gauge",
         "When the membership checker last probed the engines, Unix time.",
         [({}, state.get("updated"))]),
        ("factory_floor_upstream_nginx_up", "gauge",
         "1 when nginx's master process runs (its pid file names a live nginx), 0 when the proxy answers nothing.",
         [({}, None if "up" not in nginx else (1 if nginx["up"] else 0))]),
        ("factory_floor_upstream_reload_failures", "gauge",
         "Membership checker passes in a row whose upstream nginx did not get (nginx -t, reload or write failed); 0 when it runs it.",
         [({}, nginx.get("reload_failures"))]),
        ("factory_floor_upstream_io_error", "gauge",
         "1 when the membership checker's latest pass could not write a file (disk full, I/O error).",
         [({}, None if "io_error" not in nginx else (1 if nginx["io_error"] else 0))]),
    ]


# ------------------------------------------------------------- the floating address


def keepalived_families(status, address, now):
    """From one look of the floating address's watch: ``status`` (``_keepalived.host_status``, with
    ``holds_address`` None when the addresses could not be read), the address without its prefix,
    the time of the look."""
    current = status.get("vrrp_state") if status.get("vrrp_state_current") else ""
    holds = status.get("holds_address")
    return [
        ("factory_floor_keepalived_holds_address", "gauge",
         "1 while the floating address is on this host's interface (clients' requests to it land here), 0 when not. "
         "Summed over the proxy hosts: exactly 1.",
         [({"address": address}, None if holds is None else (1 if holds else 0))]),
        ("factory_floor_keepalived_up", "gauge",
         "1 while keepalived.service is active on this host (it can hold or take over the address), 0 otherwise.",
         [({}, 1 if status.get("service_state") == "active" else 0)]),
        ("factory_floor_keepalived_vrrp_state", "gauge",
         "1 for keepalived's current VRRP state as its notify script last wrote it (MASTER, BACKUP, FAULT, STOP); "
         "all 0 while keepalived does not run.",
         [({"state": state}, 1 if state == current else 0) for state in ("MASTER", "BACKUP", "FAULT", "STOP")]),
        ("factory_floor_keepalived_updated_timestamp_seconds", "gauge",
         "When the floating address's watch last looked, Unix time.",
         [({}, now)]),
    ]
