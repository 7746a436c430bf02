# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM watchdog: find a hung or dead engine fast, restart it safely, never fight a switch.

Private to the collection. Installed by the ``vllm_watchdog`` role next to
``_vllm_health.py`` and ``_vllm_metrics.py`` in ``/usr/local/lib/factory-floor`` and run
as ``python3 _watchdog.py --config /etc/factory-floor/<unit>.json`` by one systemd unit
per topology (``vllm-replica-watchdog.service``, ``vllm-split-watchdog.service``).
Standard library, ``requests`` and ``prometheus_client`` only (through the two modules
above); no Ansible.

Every ``interval`` seconds it takes one look (a :class:`Sample`) at the engine it
guards: the systemd unit (``systemctl show``), ``GET /health`` and ``/v1/models``
(``_vllm_health.probe``) and ``GET /metrics`` (``_vllm_metrics.parse_metrics``). The
pure :class:`Judge` turns the samples into a :class:`Verdict`:

``starting``
    Not served yet in this run of the unit (vLLM opens its port only when it is
    ready, so ``loading``), or systemd is (re)starting it. No action until
    ``startup_grace`` seconds after the unit's main process started. The grace ends
    the moment ``/health`` answers 200, not after a fixed wait.
``serving`` / ``busy``
    Serves; idle, or requests running/waiting and work was done within
    ``stall_window`` (however slowly): never restarted. Work done is
    ``vllm:generation_tokens_total``, ``vllm:prompt_tokens_total`` and the ``_count`` of
    ``vllm:iteration_tokens_total`` (engine steps that produced output) going up, and
    with ``cpu_progress`` the CPU seconds of the engine's processes while none of them
    is stopped. The gauges (``vllm:num_requests_waiting``, ``_running``,
    ``vllm:kv_cache_usage_perc``) never count: they move when clients keep sending
    requests to a frozen scheduler. For a busy engine the window counts from the last
    work done or from when requests were first seen, whichever is later, so an idle
    spell does not eat the window of the first step after it (a first-shape compile).
    The window must outlast the longest step that produces no output: vLLM counts
    prompt tokens and steps only when a step yields tokens, so a long chunked prefill
    and a kernel compile move nothing.
``suspect``
    No work done for ``stall_window`` seconds (with requests present, or idle), or
    ``/health`` failing without being known dead. With ``probe`` on, a 1-token
    completion bounded by ``probe_timeout`` (sent straight to ``/v1/completions``, not
    behind ``/health``) decides: it finishes -> alive (the window
    starts again); it does not -> ``hung`` (or ``dead``), unless work was done
    meanwhile (``busy``). The probe never rescues through the gauges: the queue it
    joins itself is not work. An idle engine is checked the same way, because a hang
    while idle freezes the gauges at "0 running" and the requests then pile up in the
    API server, invisible to ``/metrics``. With ``probe`` off, a stall with requests
    present is ``hung``.
``slow``
    ``/health`` fails (a read timeout under load, a status other than 200) but work
    is being done, or the 1-token probe finished: no action.
``hung``
    -> restart. ``/health`` and ``/v1/models`` still answer 200 in about 1 ms.
``dead``
    The engine is known gone - the port closed after it had served, no route to it,
    or ``/health`` 503 (vLLM's answer once its engine core died) - for
    ``dead_confirm`` seconds in the same run of the unit; or ``/health`` failed
    otherwise for ``dead_confirm`` seconds with no work done and the probe did not
    finish either; or never served within ``startup_grace``. Never while work is
    being done. The confirm time lets vLLM do what it does by itself: its API server
    exits (status 0) about 3.5 s after the engine core died and ``Restart=always``
    starts it again.
``down``
    The unit is inactive or failed while it is enabled (including after an exit with
    status 0 when the unit does not say ``Restart=always``) for ``down_confirm``
    seconds: systemd will not start it again by itself -> start it. A unit that hit
    systemd's own ``StartLimitBurst=`` (``Result=start-limit-hit``) is left alone and
    reported (``gave_up``): the watchdog never resets systemd's budget.
``wrong_model``, ``not_wanted``, ``maintenance``
    No action: another model is served (a restart cannot fix configuration); the unit
    is not enabled (not ours to run: the other topology runs); the maintenance lock
    file exists (a switch or a model upgrade holds it; the judgement starts afresh,
    with a new start-up grace, once it is released).

Restart. A hung or dead engine is first killed (``kill_commands``: SIGKILL to every
process of the unit, and to its container), then ``systemctl restart``. The kill is what
takes the engine out of the proxy: its port closes, nginx passes new connections to the
other engine at once (``proxy_next_upstream error``) and the proxy's membership checker
drops it at its next probe (refused: known gone). The checker only probes ``/health`` and
``/v1/models``, which a hung engine still answers; rather than a second, cross-host
channel, the watchdog (on the engine's own host) closes the port. Graceful shutdown is
pointless for a hung engine: its requests never finish, and a SIGSTOPped process takes no
SIGTERM.

Budget. At most ``max_restarts`` restarts by the watchdog within ``restart_window``
seconds, the first at once, each next one at least ``backoff`` x 2^(n-1) seconds (at
most ``backoff_max``) after the previous. When the budget is exhausted the watchdog
gives up: an engine that still runs is killed with a runtime drop-in ``Restart=no`` in
place, so the unit stays **failed** instead of looping and holding memory; the reason
goes to the journal at priority ``err`` and into the state file (``gave_up``). It acts
again once someone starts the unit (a new ``InvocationID``): then the drop-in and the
history are cleared. systemd's own restarts (``Restart=always`` after vLLM exits) are
bounded by the unit's ``StartLimitBurst=``, not counted here.

Split topology (``role`` ``head`` on rank 0, ``worker`` on rank 1). The two ranks form
one model: a dead worker is a dead model, and rank 0 waits (port closed) for a rank 1
that joins its own rendezvous, which a rank 1 from an older session never does. There
is no ssh between the hosts, so each watchdog acts on its own unit only, and they talk
over the direct link: each serves its state as JSON on ``status_listen``
(``GET /state``) and reads the other's at ``peer_url``. The head is the pair's only
judge (one place decides): it judges the model through rank 0's API as a replica's
watchdog does, and also calls the model dead when rank 1's unit is down (for
``down_confirm``) or started more than ``pair_skew`` seconds before rank 0's current run
while rank 0 has not served. Every restart by the head is a pair restart, in this
order: (1) kill rank 0 (the API goes away first) and stop its unit (so systemd's
``Restart=`` does not start it again meanwhile), (2) publish a restart request,
(3) rank 1's watchdog kills and restarts rank 1 and acknowledges, (4) rank 0 is started
(after the acknowledgement, or after ``pair_ack_timeout`` seconds without one). Rank 1
retries its connection to rank 0's rendezvous until rank 0 listens, so starting rank 1
first is safe; what must not happen is a new rank 0 with the old rank 1. The worker's
watchdog only follows requests (it keeps the last one it followed in its state file, so
a request made while it was down is followed when it comes back, and one older than
``pair_ack_timeout`` seen for the first time is adopted without a restart). A
maintenance lock on either host stops both. Clock skew between the hosts must stay well
under ``pair_skew`` (NTP).

Every decision goes to stdout, one JSON line with the evidence (unit state, health
status, counter values, seconds without progress, probe latency, budget), prefixed with
its syslog priority (``<3>`` err ... ``<6>`` info) for journald. The current state is
also written to ``status_file`` after every look, and what must survive a restart of
the watchdog (restart history, ``gave_up``, pair requests) to ``state_file``.

Detection bound for a hang (see :attr:`Config.detection_bound`): the last look that
saw work done (or, for an engine that was idle when it hung, the first look that saw a
request) is at most ``interval`` after the hang (or the request); the stall is declared
at the first look at least ``stall_window`` later; the probe takes at most
``probe_timeout``. With the role's defaults (5 s, 120 s, 15 s): 140 s, plus the time the
looks themselves take (milliseconds for a hung engine, whose API server still answers).
The window of 120 s is a judgement, not a measurement: GB10 users report first-shape
kernel compiles of 30-70 s, and a first long prefill takes tens of seconds more.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:  # inside the collection
    from ansible_collections.factory_floor.llm.plugins.module_utils import _textfile as textfile
    from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_health as health
    from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_metrics as metrics
except ImportError:  # installed next to the daemon on an engine host
    import _textfile as textfile  # type: ignore[no-redef]
    import _vllm_health as health  # type: ignore[no-redef]
    import _vllm_metrics as metrics  # type: ignore[no-redef]

try:
    import requests
except ImportError:
    requests = None
    REQUESTS_IMPORT_ERROR = traceback.format_exc()
else:
    REQUESTS_IMPORT_ERROR = None


ROLE_REPLICA = "replica"
ROLE_HEAD = "head"
ROLE_WORKER = "worker"
ROLES = (ROLE_REPLICA, ROLE_HEAD, ROLE_WORKER)

# Verdicts (see the module docstring).
STARTING = "starting"
SERVING = "serving"
BUSY = "busy"
SLOW = "slow"
SUSPECT = "suspect"
HUNG = "hung"
DEAD = "dead"
DOWN = "down"
WRONG_MODEL = "wrong_model"
NOT_WANTED = "not_wanted"
MAINTENANCE = "maintenance"
GAVE_UP = "gave_up"
FOLLOWING = "following"
UNKNOWN = "unknown"

# Actions a verdict asks for.
NONE = "none"
PROBE = "probe"
RESTART = "restart"
GIVE_UP = "give_up"

# syslog priorities; journald reads a "<N>" prefix on a service's stdout (SyslogLevelPrefix=yes).
ERR = 3
WARNING = 4
NOTICE = 5
INFO = 6

# UnitFileState values that mean "this unit should run".
WANTED_FILE_STATES = ("enabled", "enabled-runtime", "linked", "linked-runtime")
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainStatus", "MainPID",
                   "InvocationID", "UnitFileState", "NRestarts", "ExecMainStartTimestampMonotonic")
DROPIN_NAME = "50-factory-floor-watchdog-gave-up.conf"
# Restart records kept in the state file (the budget only looks at restart_window).
HISTORY_KEPT = 50


class ConfigError(ValueError):
    """The watchdog's configuration is wrong; the message names the key."""


# --------------------------------------------------------------------------- configuration

@dataclasses.dataclass
class Config:
    """The daemon's settings (``--config`` JSON). Times are seconds."""

    unit: str
    state_file: str
    role: str = ROLE_REPLICA
    url: str = "http://127.0.0.1:8000"
    model: str | None = None
    api_key: str | None = None
    interval: float = 5.0
    request_timeout: float = 5.0
    stall_window: float = 120.0
    probe: bool = True
    probe_timeout: float = 15.0
    cpu_progress: bool = False
    startup_grace: float = 1800.0
    dead_confirm: float = 15.0
    down_confirm: float = 10.0
    max_restarts: int = 3
    restart_window: float = 3600.0
    backoff: float = 60.0
    backoff_max: float = 600.0
    lock_file: str = "/run/factory-floor-maintenance"
    lock_stale_after: float = 7200.0
    status_file: str | None = None
    kill_commands: list = dataclasses.field(default_factory=list)
    restart_command: list | None = None
    # Container runtime: {"engine": "/usr/bin/docker", "name": "vllm-replica"}. The engine's
    # processes then run under containerd-shim (docker) or conmon (podman), not under the
    # unit's main process (the `docker run` client): cpu_progress reads the tree of the
    # container's main process, vLLM's API server, instead.
    container: dict | None = None
    systemctl: str = "systemctl"
    dropin_dir: str = "/run/systemd/system"
    status_listen: dict | None = None
    peer_url: str | None = None
    pair_ack_timeout: float = 60.0
    pair_skew: float = 120.0
    log_every: float = 300.0
    command_timeout: float = 120.0

    @property
    def detection_bound(self) -> float:
        """Seconds from a hang under load to the restart decision, at most (sampling time aside)."""
        looks = math.ceil(self.stall_window / self.interval) * self.interval
        return self.interval + looks + (self.probe_timeout if self.probe else 0.0)

    def restart_argv(self) -> list:
        return list(self.restart_command or [self.systemctl, "restart", self.unit])


_SECONDS = ("interval", "request_timeout", "stall_window", "probe_timeout", "startup_grace", "dead_confirm",
            "restart_window", "backoff_max", "lock_stale_after", "pair_ack_timeout", "pair_skew", "log_every",
            "command_timeout")
_SECONDS_OR_ZERO = ("down_confirm", "backoff")


def load_config(raw: dict) -> Config:
    """Check a configuration dict and return a :class:`Config`; raise :class:`ConfigError`.

    Unknown keys are errors (a misspelt setting must not silently fall back to its
    default); keys starting with ``_`` are comments.
    """
    if not isinstance(raw, dict):
        raise ConfigError("the configuration must be a JSON object, got %s" % type(raw).__name__)
    fields = {f.name for f in dataclasses.fields(Config)}
    # Keys starting with "_" are comments (the role writes "_comment").
    values = {k: v for k, v in raw.items() if not str(k).startswith("_")}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError("unknown key(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(fields))))
    for key in ("unit", "state_file"):
        if not isinstance(values.get(key), str) or not values.get(key):
            raise ConfigError("%s is required (a string)" % key)
    for key in _SECONDS + _SECONDS_OR_ZERO:
        if key not in values:
            continue
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
            raise ConfigError("%s must be a number of seconds, got %r" % (key, value))
        if value < 0 or (value == 0 and key in _SECONDS):
            raise ConfigError("%s must be %s seconds, got %r" % (key, ">= 0" if key in _SECONDS_OR_ZERO else "> 0", value))
        values[key] = float(value)
    if "max_restarts" in values:
        value = values["max_restarts"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError("max_restarts must be an integer >= 1, got %r" % (value,))
    for key in ("probe", "cpu_progress"):
        if key in values and not isinstance(values[key], bool):
            raise ConfigError("%s must be true or false, got %r" % (key, values[key]))
    config = Config(**values)
    if config.role not in ROLES:
        raise ConfigError("role must be one of %s, got %r" % (", ".join(ROLES), config.role))
    try:
        config.url = health.normalize_url(config.url)
    except ValueError as exc:
        raise ConfigError("url: %s" % exc) from None
    if config.stall_window < config.interval:
        raise ConfigError("stall_window (%gs) must be at least interval (%gs): one look cannot judge progress"
                          % (config.stall_window, config.interval))
    for key in ("kill_commands",):
        commands = getattr(config, key)
        if not isinstance(commands, list) or not all(
                isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in commands):
            raise ConfigError("%s must be a list of argv lists of strings, got %r" % (key, commands))
    if config.container is not None:
        container = config.container
        if (not isinstance(container, dict) or set(container) != {"engine", "name"}
                or not all(isinstance(container[k], str) and container[k] for k in ("engine", "name"))):
            raise ConfigError("container must be null or {engine, name} (the container engine's path and the container's "
                              "name), got %r" % (container,))
    if config.restart_command is not None and (
            not isinstance(config.restart_command, list) or not config.restart_command
            or not all(isinstance(a, str) for a in config.restart_command)):
        raise ConfigError("restart_command must be an argv list of strings, got %r" % (config.restart_command,))
    if config.role in (ROLE_HEAD, ROLE_WORKER):
        if not config.peer_url:
            raise ConfigError("role %s needs peer_url (the other rank's watchdog, http://ADDRESS:PORT/state)" % config.role)
        listen = config.status_listen
        if not isinstance(listen, dict) or not isinstance(listen.get("port"), int) or not listen.get("address"):
            raise ConfigError("role %s needs status_listen {address, port} (where the other rank reads this state)"
                              % config.role)
    return config


# --------------------------------------------------------------------------- evidence

@dataclasses.dataclass
class UnitInfo:
    """A systemd unit as ``systemctl show`` reports it (what the watchdog needs of it)."""

    name: str
    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    result: str | None = None
    exec_main_status: int | None = None
    main_pid: int | None = None
    invocation_id: str | None = None
    unit_file_state: str | None = None
    n_restarts: int | None = None
    # CLOCK_MONOTONIC seconds when the main process started (same clock as time.monotonic()).
    started_mono: float | None = None

    def _state(self):
        return health.UnitState(name=self.name, load_state=self.load_state, active_state=self.active_state,
                                sub_state=self.sub_state, result=self.result, exec_main_status=self.exec_main_status)

    @property
    def down(self) -> bool:
        """Not running, and systemd will not start it again by itself (see ``_vllm_health.UnitState.down``)."""
        return self._state().down

    @property
    def wanted(self) -> bool:
        """The unit exists and is enabled: it should run."""
        return self.load_state == "loaded" and self.unit_file_state in WANTED_FILE_STATES

    @property
    def running(self) -> bool:
        return self.active_state == "active" and self.sub_state == "running"

    def describe(self) -> str:
        return "%s, UnitFileState=%s, MainPID=%s, NRestarts=%s" % (
            self._state().describe(), self.unit_file_state, self.main_pid, self.n_restarts)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data) -> "UnitInfo | None":
        if not isinstance(data, dict) or not data.get("name"):
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_unit_show(name: str, text: str) -> UnitInfo:
    """Parse ``systemctl show -p ...`` output (``Key=value`` lines)."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    if "ActiveState" not in values:
        raise health.UnitStateError("systemctl show %s did not report ActiveState: %r" % (name, text))
    started = _int(values.get("ExecMainStartTimestampMonotonic"))
    return UnitInfo(
        name=name,
        load_state=values.get("LoadState") or None,
        active_state=values.get("ActiveState") or None,
        sub_state=values.get("SubState") or None,
        result=values.get("Result") or None,
        exec_main_status=_int(values.get("ExecMainStatus")),
        main_pid=_int(values.get("MainPID")) or None,
        invocation_id=values.get("InvocationID") or None,
        unit_file_state=values.get("UnitFileState") or None,
        n_restarts=_int(values.get("NRestarts")),
        started_mono=started / 1e6 if started else None,
    )


@dataclasses.dataclass
class Counters:
    """The engine's values from one ``/metrics`` read (None when not exported)."""

    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    generation_tokens_total: float | None = None
    prompt_tokens_total: float | None = None
    # Engine steps that produced output: the _count of vllm:iteration_tokens_total.
    iteration_tokens_total_count: float | None = None
    request_success_total: float | None = None
    num_preemptions_total: float | None = None
    kv_cache_usage_perc: float | None = None
    process_start_time_seconds: float | None = None
    # CPU seconds used by the engine's processes (cpu_progress only; None otherwise).
    cpu_seconds: float | None = None
    # The engine's processes that were stopped (state T) when cpu_seconds was read.
    cpu_stopped: tuple = ()

    # Counters only go up within one engine process.
    MONOTONIC = ("generation_tokens_total", "prompt_tokens_total", "iteration_tokens_total_count",
                 "request_success_total", "num_preemptions_total")
    # Work done: only these moving is progress. The gauges (queue lengths, KV-cache usage)
    # move when requests arrive at a frozen scheduler, so they never count; neither do
    # finished requests (an abort finishes one without work) or preemptions.
    WORK = ("generation_tokens_total", "prompt_tokens_total", "iteration_tokens_total_count", "cpu_seconds")

    @classmethod
    def from_parsed(cls, parsed: dict) -> "Counters":
        success = parsed.get("request_success_total")
        return cls(
            num_requests_running=parsed.get("num_requests_running"),
            num_requests_waiting=parsed.get("num_requests_waiting"),
            generation_tokens_total=parsed.get("generation_tokens_total"),
            prompt_tokens_total=parsed.get("prompt_tokens_total"),
            iteration_tokens_total_count=parsed.get("iteration_tokens_total_count"),
            request_success_total=math.fsum(success.values()) if success else (0.0 if success == {} else None),
            num_preemptions_total=parsed.get("num_preemptions_total"),
            kv_cache_usage_perc=parsed.get("kv_cache_usage_perc"),
            process_start_time_seconds=parsed.get("process_start_time_seconds"),
        )

    @classmethod
    def from_text(cls, text: str) -> "Counters":
        return cls.from_parsed(metrics.parse_metrics(text))

    @property
    def busy(self) -> bool:
        """Requests are running or waiting."""
        return (self.num_requests_running or 0) > 0 or (self.num_requests_waiting or 0) > 0

    def worked_since(self, before: "Counters") -> bool:
        """Work was done: a token counter or the engine-step count went up (or, with cpu_progress,
        the engine's CPU time). CPU time does not count while an engine process is (or was) stopped:
        the workers of a stopped engine core keep polling for its next step."""
        names = self.WORK
        if self.cpu_stopped or before.cpu_stopped:
            names = tuple(name for name in names if name != "cpu_seconds")
        for name in names:
            old, new = getattr(before, name), getattr(self, name)
            if old is not None and new is not None and new > old:
                return True
        return False

    def went_back(self, before: "Counters") -> bool:
        """A new engine process: its start time changed, or a counter went down."""
        if (before.process_start_time_seconds is not None and self.process_start_time_seconds is not None
                and before.process_start_time_seconds != self.process_start_time_seconds):
            return True
        for name in self.MONOTONIC:
            old, new = getattr(before, name), getattr(self, name)
            if old is not None and new is not None and new < old:
                return True
        return False

    def as_dict(self) -> dict:
        return {k: (int(v) if isinstance(v, float) and v.is_integer() else list(v) if isinstance(v, tuple) else v)
                for k, v in dataclasses.asdict(self).items()
                if k != "process_start_time_seconds" and not (k == "cpu_seconds" and v is None)
                and not (k == "cpu_stopped" and not v)}


@dataclasses.dataclass
class Probe:
    """What a health look or the 1-token probe saw (the fields of ``_vllm_health.ProbeResult`` used here)."""

    status: str
    error: str | None = None
    latency: float = 0.0
    http_status: int | None = None

    @classmethod
    def of(cls, result) -> "Probe":
        return cls(status=result.status, error=result.error, latency=round(result.latency, 3),
                   http_status=result.http_status)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Sample:
    """One look at the engine. ``time`` is monotonic, ``wall`` UNIX time, both seconds."""

    time: float
    wall: float = 0.0
    unit: UnitInfo | None = None
    unit_error: str | None = None
    health: Probe | None = None
    counters: Counters | None = None
    metrics_error: str | None = None
    # Split head only: the worker watchdog's published state, or why it could not be read.
    peer: dict | None = None
    peer_error: str | None = None


@dataclasses.dataclass
class Verdict:
    """What the engine is judged to be, what to do, why, and the evidence."""

    state: str
    action: str = NONE
    reason: str = ""
    evidence: dict = dataclasses.field(default_factory=dict)
    # Kill the engine's processes before the restart (it runs but is hung or dead).
    hard: bool = False

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def engine_cpu(root_pid: int, proc: str = "/proc") -> tuple:
    """CPU seconds (user + system) used by the processes under ``root_pid``, and which of them are stopped.

    Returns ``(seconds, stopped)``: ``seconds`` is None when ``root_pid`` is not
    there; ``stopped`` lists the descendants in state T or t (SIGSTOP, a tracer)
    as ``"NAME pid PID"``. ``root_pid`` is vLLM's API server - the unit's main
    process, or with the container runtime the container's main process
    (:meth:`Watchdog.engine_root`) - and is left out: it keeps answering /health
    and /metrics (and using CPU) while its engine hangs. Its descendants are the engine core
    (``VLLM::EngineCore``) and the workers (``VLLM::Worker``; a headless split rank
    runs workers only). All of them count: during one long step the engine core
    waits for its workers without using CPU while the workers compute. A worker also
    keeps polling shared memory (using CPU) for the next step of an engine core that
    is stopped, so the caller must not take CPU as progress while ``stopped`` is not
    empty (:meth:`Counters.worked_since`). Read from ``/proc/PID/stat`` (field 3 the
    state, fields 14 and 15 the CPU time in clock ticks).
    """
    if not root_pid:
        return None, []
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents, used, names_of, states = {}, {}, {}, {}
    try:
        names = os.listdir(proc)
    except OSError:
        return None, []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), encoding="ascii", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        # The command name (field 2) is in parentheses and may hold spaces: split after it.
        fields = text[text.rfind(")") + 2:].split()
        try:
            names_of[int(name)] = text[text.find("(") + 1:text.rfind(")")]
            states[int(name)] = fields[0]
            parents[int(name)] = int(fields[1])
            used[int(name)] = (int(fields[11]) + int(fields[12])) / float(ticks)
        except (IndexError, ValueError):
            continue
    if root_pid not in used:
        return None, []
    tree, todo = set(), [root_pid]
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid in tree:
            continue
        tree.add(pid)
        todo.extend(children.get(pid, []))
    tree.discard(root_pid)
    stopped = ["%s pid %d" % (names_of.get(pid, "?"), pid) for pid in sorted(tree) if states.get(pid) in ("T", "t")]
    return round(math.fsum(used[pid] for pid in tree if pid in used), 2), stopped


def _secs(value) -> float | None:
    return None if value is None else round(value, 1)


# --------------------------------------------------------------------------- the judge

class Judge:
    """Pure decision logic: samples in, verdicts out. Holds what one run of the unit showed so far."""

    def __init__(self, config: Config):
        self.config = config
        self.reset()

    def reset(self) -> None:
        """Forget everything: the next sample starts a new judgement (and a new start-up grace)."""
        self.known = False
        self.invocation = None
        self.started = None
        self.served = False
        self.served_at = None
        self.last_counters = None
        # Where the stall window starts: work seen done, a new baseline, or a probe that finished
        # (monotonic seconds); last_work: work seen done only.
        self.last_progress = None
        self.last_work = None
        # When requests were first seen running or waiting after an idle look.
        self.busy_since = None
        # When /health first failed after it had answered 200.
        self.bad_since = None
        self.down_since = None
        self.peer_down_since = None

    def _new_run(self, now: float, unit: UnitInfo) -> None:
        self.reset()
        self.known = True
        self.invocation = unit.invocation_id
        started = unit.started_mono
        # The grace counts from the main process's start when systemd says when that was.
        self.started = started if started and 0 < started <= now else now

    def restarted(self, now: float) -> None:
        """The watchdog just restarted the unit: a fresh start-up grace, whatever systemd reports next."""
        self.reset()
        self.known = True
        self.started = now

    # -- helpers

    def _evidence(self, sample: Sample, **extra) -> dict:
        evidence = {}
        if sample.unit is not None:
            evidence["unit"] = sample.unit.describe()
        if sample.health is not None:
            evidence["health"] = sample.health.status
            evidence["health_latency"] = sample.health.latency
            if sample.health.error:
                evidence["health_error"] = sample.health.error
        if sample.counters is not None:
            evidence["counters"] = sample.counters.as_dict()
        if sample.metrics_error:
            evidence["metrics_error"] = sample.metrics_error
        if self.started is not None:
            evidence["since_start"] = _secs(sample.time - self.started)
        if sample.peer is not None:
            peer_unit = UnitInfo.from_dict(sample.peer.get("unit_state"))
            evidence["rank1"] = peer_unit.describe() if peer_unit else "unit unknown"
        elif sample.peer_error:
            evidence["rank1"] = "watchdog unreachable: %s" % sample.peer_error
        evidence.update(extra)
        return evidence

    # -- judging

    def assess(self, sample: Sample) -> Verdict:
        """Judge one sample. The action is ``none``, ``probe`` (call :meth:`probed` with the result),
        ``restart`` or ``give_up``."""
        cfg, now, unit = self.config, sample.time, sample.unit
        if unit is None:
            return Verdict(UNKNOWN, reason="cannot read the unit: %s" % sample.unit_error)
        if not unit.wanted:
            self.reset()
            return Verdict(NOT_WANTED, reason="%s is not enabled (LoadState=%s, UnitFileState=%s): not ours to run"
                           % (unit.name, unit.load_state, unit.unit_file_state), evidence=self._evidence(sample))
        if not self.known or (unit.invocation_id and unit.invocation_id != self.invocation):
            self._new_run(now, unit)

        if unit.down:
            if unit.result == "start-limit-hit":
                return Verdict(DOWN, GIVE_UP, evidence=self._evidence(sample), reason=(
                    "%s hit systemd's own restart limit (StartLimitBurst= within StartLimitIntervalSec=): "
                    "systemd gave up, and the watchdog does not override it" % unit.name))
            self.down_since = self.down_since if self.down_since is not None else now
            waited = now - self.down_since
            if waited >= cfg.down_confirm:
                return Verdict(DOWN, RESTART, evidence=self._evidence(sample, down_for=_secs(waited)), reason=(
                    "%s is %s (Result=%s, exit status %s) while enabled, for %.0fs: systemd will not start it again"
                    % (unit.name, unit.active_state, unit.result, unit.exec_main_status, waited)))
            return Verdict(DOWN, evidence=self._evidence(sample, down_for=_secs(waited)),
                           reason="%s is %s; confirming for %gs" % (unit.name, unit.active_state, cfg.down_confirm))
        self.down_since = None
        if not unit.running:
            return Verdict(STARTING, evidence=self._evidence(sample), reason="systemd is working on %s (%s/%s)" % (
                unit.name, unit.active_state, unit.sub_state))

        pair = self._pair(sample) if cfg.role == ROLE_HEAD else None
        verdict = self._engine(sample)
        if pair is not None and verdict.action not in (RESTART, GIVE_UP):
            return pair
        return verdict

    def _engine(self, sample: Sample) -> Verdict:
        cfg, now = self.config, sample.time
        status = sample.health.status if sample.health else UNKNOWN
        if status == health.SERVING:
            extra = {}
            if not self.served:
                self.served, self.served_at = True, now
                extra["startup_took"] = _secs(now - self.started)
            self.bad_since = None
            return self._progress(sample, extra)
        if status == health.WRONG_MODEL:
            return Verdict(WRONG_MODEL, evidence=self._evidence(sample), reason=(
                "serves another model than %r: a restart cannot fix configuration" % cfg.model))
        if not self.served and status in (health.LOADING, health.UNREACHABLE):
            age = now - self.started
            if age < cfg.startup_grace:
                return Verdict(STARTING, evidence=self._evidence(sample), reason=(
                    "not serving yet (%s) %.0fs after its start; start-up grace %gs ends when it serves"
                    % (status, age, cfg.startup_grace)))
            return Verdict(DEAD, RESTART, hard=True, evidence=self._evidence(sample), reason=(
                "did not serve within the start-up grace (%gs; still %s after %.0fs)" % (cfg.startup_grace, status, age)))
        return self._failing(sample, status)

    def _observe(self, counters: "Counters | None", now: float, extra: dict) -> None:
        """Take one read of the counters: note work done, a new baseline, and since when requests wait or run."""
        if counters is None:
            return
        before = self.last_counters
        self.last_counters = counters
        if before is None or counters.went_back(before):
            # First read of this run, or a new engine process: a new baseline, not progress lost.
            self.last_progress = now
            if before is not None:
                extra["counters_reset"] = True
        elif counters.worked_since(before):
            self.last_progress = self.last_work = now
        if counters.busy:
            self.busy_since = self.busy_since if self.busy_since is not None else now
        else:
            self.busy_since = None

    def _stalled(self, now: float, busy) -> float:
        """Seconds without work done that count against the window: for a busy engine, from when it got busy
        at the earliest, so that an idle spell before a request does not eat the window of its first step."""
        since = self.last_progress
        if busy and self.busy_since is not None:
            since = max(since, self.busy_since)
        return now - since

    def _progress(self, sample: Sample, extra: dict) -> Verdict:
        cfg, now, counters = self.config, sample.time, sample.counters
        self._observe(counters, now, extra)
        if self.last_progress is None:
            self.last_progress = now
        busy = counters.busy if counters is not None else None
        stalled = self._stalled(now, busy)
        evidence = self._evidence(sample, no_progress_for=_secs(now - self.last_progress), **extra)
        if busy and self.busy_since is not None:
            evidence["busy_for"] = _secs(now - self.busy_since)
        if stalled >= cfg.stall_window:
            what = ("%s running, %s waiting" % (_fmt(counters.num_requests_running), _fmt(counters.num_requests_waiting))
                    if counters is not None else "/metrics unreadable")
            if cfg.probe:
                return Verdict(SUSPECT, PROBE, evidence=evidence, reason=(
                    "no work done (tokens, engine steps) for %.0fs (%s): a 1-token generation decides" % (stalled, what)))
            if busy:
                return Verdict(HUNG, RESTART, hard=True, evidence=evidence, reason=(
                    "no work done (tokens, engine steps) for %.0fs with %s" % (stalled, what)))
        if busy:
            return Verdict(BUSY, evidence=evidence, reason="requests in progress, work done within the stall window")
        return Verdict(SERVING, evidence=evidence, reason="serving")

    def _failing(self, sample: Sample, status: str) -> Verdict:
        """``/health`` not 200 (or no answer, or the port closed) after the engine had served in this run.

        An engine known gone - the port refuses or is unreachable, or ``/health`` answers 503, vLLM's
        word for a dead engine core - is dead once that lasted ``dead_confirm`` seconds (vLLM exits
        by itself and systemd restarts it meanwhile). Any other failure (a read timeout under load,
        another status) is only a suspicion: the 1-token probe decides. Either way, never dead while
        work is being done: each look still reads ``/metrics``.
        """
        cfg, now = self.config, sample.time
        extra = {}
        self.bad_since = self.bad_since if self.bad_since is not None else now
        self._observe(sample.counters, now, extra)
        worked_since = self.last_work if self.last_work is not None and self.last_work >= self.bad_since else None
        quiet = now - max(self.bad_since, worked_since or self.bad_since)
        probe = sample.health
        error = probe.error if probe else None
        gone = status in (health.LOADING, health.UNREACHABLE) or (probe is not None and probe.http_status == 503)
        evidence = self._evidence(sample, not_serving_for=_secs(now - self.bad_since), quiet_for=_secs(quiet), **extra)
        if quiet < cfg.dead_confirm:
            if worked_since is not None:
                return Verdict(SLOW, evidence=evidence, reason=(
                    "/health failing (%s: %s) but work is being done (tokens, engine steps): slow, not dead"
                    % (status, error)))
            return Verdict(DEAD, evidence=evidence, reason=(
                "not serving (%s: %s); confirming for %gs: vLLM exits by itself when its engine dies and systemd "
                "restarts it" % (status, error, cfg.dead_confirm)))
        if gone or not cfg.probe:
            return Verdict(DEAD, RESTART, hard=True, evidence=evidence, reason=(
                "not serving for %.0fs in the same run of the unit, no work done meanwhile (%s: %s)"
                % (now - self.bad_since, status, error)))
        return Verdict(SUSPECT, PROBE, evidence=evidence, reason=(
            "/health failing for %.0fs (%s: %s) and no work done meanwhile: a 1-token generation decides"
            % (now - self.bad_since, status, error)))

    def probed(self, sample: Sample, result: Probe, now: float | None = None, after: "Counters | None" = None) -> Verdict:
        """Judge the 1-token probe made after a ``probe`` verdict for ``sample``.

        ``after`` is a read of the counters once the probe is over. The probe finishing is work
        done by the scheduler: alive (``serving``/``busy``, or ``slow`` when ``/health`` was
        failing), and the window starts again. Not finishing, it is a hang (``hung``, or ``dead``
        when ``/health`` was failing) unless work was done between the last read and ``after``
        (an engine that is only too slow for the probe's bound: ``busy``). Only work counts: the
        queue the probe itself joined, or any other gauge, never rescues a frozen scheduler.
        """
        cfg = self.config
        now = sample.time + result.latency if now is None else now
        health_failing = sample.health is None or sample.health.status != health.SERVING
        stalled = now - self.last_progress if self.last_progress is not None else None
        evidence = self._evidence(sample, no_progress_for=_secs(stalled), probe=result.as_dict())
        before = self.last_counters
        worked = False
        if after is not None:
            evidence["counters_after_probe"] = after.as_dict()
            if before is not None and after.went_back(before):
                # A new engine process meanwhile: a new baseline; the next look judges it.
                self.last_counters, self.last_progress = after, now
                return Verdict(SUSPECT, evidence=evidence, reason="counters went back during the probe: a new engine "
                                                                  "process; judged afresh from the next look")
            worked = before is not None and after.worked_since(before)
            # The baseline includes the probe's own tokens, so they never count as progress later.
            self.last_counters = after
        if result.status == health.SERVING:
            self.last_progress = now
            if health_failing:
                self.bad_since = now
                return Verdict(SLOW, evidence=evidence, reason=(
                    "/health failing, but a 1-token generation finished in %.2fs: slow, not dead" % result.latency))
            busy = sample.counters is not None and sample.counters.busy
            return Verdict(BUSY if busy else SERVING, evidence=evidence, reason=(
                "no work done for %.0fs, but a 1-token generation finished in %.2fs" % (stalled or 0, result.latency)))
        if worked:
            self.last_progress = self.last_work = now
            return Verdict(BUSY, evidence=evidence, reason=(
                "a 1-token generation did not finish within %gs, but work was done meanwhile (tokens, engine steps): "
                "busy, not hung" % cfg.probe_timeout))
        if result.http_status is not None and 400 <= result.http_status < 500:
            self.last_progress = now
            return Verdict(SUSPECT, evidence=evidence, reason=(
                "the 1-token generation was refused (HTTP %s): check model and api_key; not restarting"
                % result.http_status))
        if health_failing:
            return Verdict(DEAD, RESTART, hard=True, evidence=evidence, reason=(
                "/health failing for %.0fs, no work done meanwhile, and a 1-token generation did not finish within %gs "
                "(%s)" % (now - (self.bad_since if self.bad_since is not None else now), cfg.probe_timeout,
                          result.error)))
        if result.status in (health.LOADING, health.UNREACHABLE) or result.http_status == 503:
            # The engine died meanwhile (port closed, or /health 503): judged as dead from the next look.
            return Verdict(DEAD, evidence=evidence, reason="the engine stopped serving during the probe (%s); judged "
                                                           "next look" % result.error)
        return Verdict(HUNG, RESTART, hard=True, evidence=evidence, reason=(
            "no work done (tokens, engine steps) for %.0fs and a 1-token generation did not finish within %gs (%s)"
            % (stalled or 0, cfg.probe_timeout, result.error)))

    def _pair(self, sample: Sample) -> Verdict | None:
        """Rank 0's view of rank 1 (split head): a dead or stale worker makes a dead model."""
        cfg, now = self.config, sample.time
        peer = sample.peer
        worker = UnitInfo.from_dict(peer.get("unit_state")) if peer else None
        if worker is None:
            self.peer_down_since = None
            return None
        if not worker.wanted:
            self.peer_down_since = None
            return None
        if worker.down:
            self.peer_down_since = self.peer_down_since if self.peer_down_since is not None else now
            waited = now - self.peer_down_since
            if waited >= cfg.down_confirm:
                return Verdict(DEAD, RESTART, hard=True, evidence=self._evidence(sample, rank1_down_for=_secs(waited)),
                               reason="rank 1 (%s on the peer) is %s for %.0fs: a dead worker is a dead model"
                                      % (worker.name, worker.active_state, waited))
            return None
        self.peer_down_since = None
        head_unit = sample.unit
        worker_started = peer.get("started_at")
        if (not self.served and worker.running and head_unit is not None and head_unit.started_mono
                and isinstance(worker_started, (int, float)) and sample.wall):
            head_started = sample.wall - (now - head_unit.started_mono)
            if worker_started < head_started - cfg.pair_skew:
                return Verdict(DEAD, RESTART, hard=True, evidence=self._evidence(
                    sample, rank0_started_at=round(head_started, 1), rank1_started_at=round(worker_started, 1)), reason=(
                    "rank 1 has run since %.0fs before rank 0's current start (more than pair_skew %gs): it belongs to an "
                    "older session and will not join; restarting the pair" % (head_started - worker_started, cfg.pair_skew)))
        return None


def _fmt(value) -> str:
    if value is None:
        return "?"
    return "%d" % value if float(value).is_integer() else "%g" % value


# --------------------------------------------------------------------------- budget

@dataclasses.dataclass
class BudgetCheck:
    """Whether a restart may happen now. ``wait`` seconds of backoff left; ``exhausted`` when no restart is left."""

    allowed: bool
    exhausted: bool
    wait: float
    used: int
    why: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class Budget:
    """At most ``max_restarts`` restarts in ``window`` seconds, spaced by a doubling backoff."""

    def __init__(self, max_restarts: int, window: float, backoff: float, backoff_max: float):
        self.max_restarts = max_restarts
        self.window = window
        self.backoff = backoff
        self.backoff_max = backoff_max

    def recent(self, history, now: float) -> list:
        return [r for r in history if isinstance(r, dict) and now - float(r.get("time", 0)) < self.window]

    def check(self, history, now: float) -> BudgetCheck:
        recent = self.recent(history, now)
        used = len(recent)
        if used >= self.max_restarts:
            return BudgetCheck(False, True, 0.0, used, "restart budget exhausted: %d restart(s) in the last %gs (max_restarts %d)"
                               % (used, self.window, self.max_restarts))
        if used == 0:
            return BudgetCheck(True, False, 0.0, used, "no restart in the last %gs" % self.window)
        last = max(float(r["time"]) for r in recent)
        spacing = min(self.backoff_max, self.backoff * 2 ** (used - 1))
        wait = last + spacing - now
        if wait > 0:
            return BudgetCheck(False, False, wait, used, "backoff: %d restart(s) in the last %gs, the next one not before "
                               "%.0fs after the last (%.0fs left)" % (used, self.window, spacing, wait))
        return BudgetCheck(True, False, 0.0, used, "%d of %d restart(s) used in the last %gs"
                           % (used, self.max_restarts, self.window))


def follow_decision(seen: str | None, request, now: float, fresh_for: float) -> str:
    """What rank 1's watchdog does with the head's last pair-restart request.

    ``follow`` (kill and restart rank 1, acknowledge), ``adopt`` (remember it without a
    restart: first contact, and the request is older than ``fresh_for`` seconds, so the
    head is no longer waiting for it) or ``none``.
    """
    if not isinstance(request, dict) or not request.get("id"):
        return "none"
    if request["id"] == seen:
        return "none"
    if seen is None:
        try:
            age = now - float(request.get("time"))
        except (TypeError, ValueError):
            age = math.inf
        if age > fresh_for:
            return "adopt"
    return "follow"


# --------------------------------------------------------------------------- files

def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_lock(path: str, wall: float) -> dict | None:
    """The maintenance lock, or None when the file does not exist.

    The playbooks write ``{"holder": ..., "since": ..., "run": ..., "by": ..., "expires": ...}``
    (_maintenance_lock.py); only ``holder`` and ``since`` are read here, and any other content
    still counts as a lock (``expires`` too is ignored: the lock is honoured while the file
    exists). ``age`` is seconds since the file was last written.
    """
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # cannot even stat it: assume it is held rather than act
        return {"path": path, "holder": "unknown (%s)" % exc, "since": None, "age": None}
    holder, since = None, None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(4096)
        data = json.loads(text) if text.strip() else {}
        if isinstance(data, dict):
            holder, since = data.get("holder"), data.get("since")
        else:
            holder = text.strip()[:100]
    except (OSError, ValueError):
        holder = "unreadable content"
    return {"path": path, "holder": holder, "since": since, "age": round(max(0.0, wall - stat.st_mtime), 1)}


def load_state(path: str) -> dict:
    """The persistent state (restart history, gave_up, pair requests); empty when absent or unreadable."""
    state = {"restarts": [], "gave_up": None, "request": None, "seen_request": None}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return state
    if isinstance(data, dict):
        state.update({k: data[k] for k in state if k in data})
        if not isinstance(state["restarts"], list):
            state["restarts"] = []
    return state


def _line(priority: int, event: str, fields: dict) -> str:
    record = {"event": event}
    record.update(fields)
    return "<%d>%s" % (priority, json.dumps(record, sort_keys=True, default=str))


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- the daemon

class Watchdog:
    """One watchdog loop. Every side effect goes through an injectable callable:

    ``health_probe()`` and ``generate_probe()`` -> :class:`Probe`; ``scrape()`` -> :class:`Counters`
    (raises on failure); ``run(argv, timeout)`` -> ``(rc, output)``; ``fetch_peer()`` -> dict (raises
    on failure); ``log(line)``; ``clock`` (monotonic), ``wall`` (UNIX time) and ``sleep``; ``cpu_seconds(main_pid)`` ->
    ``(seconds, stopped)`` as :func:`engine_cpu`.
    """

    def __init__(self, config: Config, health_probe=None, generate_probe=None, scrape=None, run=None,
                 fetch_peer=None, log=None, clock=time.monotonic, wall=time.time, sleep=time.sleep, cpu_seconds=None):
        self.config = config
        self.cpu_seconds = cpu_seconds or engine_cpu
        self.judge = Judge(config)
        self.budget = Budget(config.max_restarts, config.restart_window, config.backoff, config.backoff_max)
        self.health_probe = health_probe or self._health_probe
        self.generate_probe = generate_probe or self._generate_probe
        self.scrape = scrape or self._scrape
        self.run = run or self._run
        self.fetch_peer = fetch_peer or self._fetch_peer
        self.write_line = log or _stdout
        self.clock, self.wall, self.sleep = clock, wall, sleep
        self.state = load_state(config.state_file)
        self.standing_down = None
        self.status = {}
        self.status_lock = threading.Lock()
        self._last_logged = None
        self._last_log_time = None
        self._fetch = None
        # (InvocationID, MainPID) of the unit run whose container's main PID was read, and that PID.
        self._container_root = None
        self._publish(Verdict(STARTING, reason="watchdog started"), None, None)

    # -- default I/O

    def _health_probe(self) -> Probe:
        cfg = self.config
        return Probe.of(health.probe(cfg.url, api_key=cfg.api_key or None, model=cfg.model or None,
                                     kind="health", timeout=cfg.request_timeout))

    def _generate_probe(self) -> Probe:
        cfg = self.config
        # Straight to the completion: when /health is what fails (a read timeout under load),
        # only the generation tells a slow engine from a dead one.
        return Probe.of(health.probe(cfg.url, api_key=cfg.api_key or None, model=cfg.model or None,
                                     kind="generate", timeout=cfg.request_timeout, generate_timeout=cfg.probe_timeout,
                                     health_first=False))

    def _scrape(self) -> Counters:
        if self._fetch is None:
            self._fetch = metrics.make_fetch(timeout=self.config.request_timeout, api_key=self.config.api_key or None)
        return Counters.from_text(self._fetch(metrics.metrics_url(self.config.url)))

    def _run(self, argv, timeout=None):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  timeout=timeout or self.config.command_timeout)
        except (OSError, subprocess.SubprocessError) as exc:
            return 127, "%s could not run: %s" % (" ".join(argv), exc)
        return done.returncode, ((done.stdout or "") + (done.stderr or "")).strip()

    def _fetch_peer(self) -> dict:
        if requests is None:
            raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
        response = requests.get(self.config.peer_url, timeout=self.config.request_timeout,
                                proxies={"http": None, "https": None, "all": None}, allow_redirects=False)
        response.raise_for_status()
        data = response.json()
        if not isinstance(data, dict):
            raise ValueError("GET %s did not answer a JSON object" % self.config.peer_url)
        return data

    # -- logging and state

    def log(self, priority: int, event: str, **fields) -> None:
        fields.setdefault("unit", self.config.unit)
        self.write_line(_line(priority, event, fields))

    def save(self) -> None:
        try:
            write_atomic(self.config.state_file, json.dumps(self.state, sort_keys=True, default=str) + "\n")
        except OSError as exc:
            self.log(ERR, "state_file_error", error=str(exc), path=self.config.state_file)

    def _publish(self, verdict: Verdict, unit: UnitInfo | None, lock: dict | None) -> None:
        cfg, wall = self.config, self.wall()
        check = self.budget.check(self.state["restarts"], wall)
        started_at = None
        if unit is not None and unit.started_mono:
            started_at = round(wall - (self.clock() - unit.started_mono), 3)
        status = {
            "updated": wall,
            "role": cfg.role,
            "unit": cfg.unit,
            "unit_state": unit.as_dict() if unit is not None else None,
            "started_at": started_at,
            "verdict": verdict.state,
            "action": verdict.action,
            "reason": verdict.reason,
            "evidence": verdict.evidence,
            "lock": lock,
            "gave_up": self.state.get("gave_up"),
            "restarts": self.budget.recent(self.state["restarts"], wall),
            "restarts_total": len(self.state["restarts"]),
            "budget": {"max_restarts": cfg.max_restarts, "restart_window": cfg.restart_window, "used": check.used,
                       "allowed_now": check.allowed, "why": check.why},
            "detection_bound": cfg.detection_bound,
            "request": self.state.get("request"),
            "acked": self.state.get("seen_request"),
        }
        with self.status_lock:
            self.status = status
        # The verdict for node_exporter's textfile collector (when the unit names its directory).
        textfile.write_textfile(textfile.watchdog_name(cfg.unit), textfile.watchdog_families(status))
        if cfg.status_file:
            try:
                write_atomic(cfg.status_file, json.dumps(status, sort_keys=True, default=str) + "\n")
            except OSError as exc:
                self.log(ERR, "status_file_error", error=str(exc), path=cfg.status_file)

    def status_json(self) -> bytes:
        with self.status_lock:
            return (json.dumps(self.status, sort_keys=True, default=str) + "\n").encode()

    def _report(self, verdict: Verdict, unit: UnitInfo | None, lock: dict | None = None) -> None:
        """Publish the state; log the verdict when it changed, asked for an action, or every log_every seconds."""
        self._publish(verdict, unit, lock)
        key = (verdict.state, verdict.action)
        now = self.clock()
        if verdict.action in (RESTART, GIVE_UP):
            # Already logged, with its evidence, as the "restart" / "gave_up" event.
            self._last_logged, self._last_log_time = key, now
        elif (key != self._last_logged or verdict.action != NONE or self._last_log_time is None
                or now - self._last_log_time >= self.config.log_every):
            priority = INFO if verdict.state in (STARTING, SERVING, BUSY, NOT_WANTED, FOLLOWING, MAINTENANCE) else WARNING
            if verdict.state == GAVE_UP:
                priority = ERR
            self.log(priority, "verdict", verdict=verdict.state, action=verdict.action, reason=verdict.reason,
                     evidence=verdict.evidence)
            self._last_logged, self._last_log_time = key, now

    # -- one look

    def _read_unit(self):
        cfg = self.config
        argv = [cfg.systemctl, "show", "-p", ",".join(UNIT_PROPERTIES), "--", cfg.unit]
        # systemctl answers from PID 1, which a host starved of CPU (the 2-core lab under
        # load) can leave waiting for more than 10 s; an unreadable unit means no verdict.
        rc, out = self.run(argv, max(cfg.request_timeout * 2, 30.0))
        if rc != 0:
            return None, "%s failed (rc %s): %s" % (" ".join(argv), rc, out[:300])
        try:
            return parse_unit_show(cfg.unit, out), None
        except health.UnitStateError as exc:
            return None, str(exc)

    def _peer(self):
        try:
            return self.fetch_peer(), None
        except Exception as exc:  # pylint: disable=broad-except  # an unreachable peer is evidence, not a crash
            return None, "%s: %s" % (type(exc).__name__, exc)

    def engine_root(self, unit) -> int | None:
        """The PID whose descendants are the engine's processes: the unit's main process, or the container's.

        The container's main PID is read once per run of the unit (``docker run`` without
        a restart policy: the container lives exactly as long as its client, the unit's
        main process), and again while it was not running yet.
        """
        cfg = self.config
        if unit is None or not unit.main_pid:
            return None
        if cfg.container is None:
            return unit.main_pid
        key = (unit.invocation_id, unit.main_pid)
        if self._container_root is not None and self._container_root[0] == key:
            return self._container_root[1]

        def run3(argv):
            rc, out = self.run(argv, max(cfg.request_timeout * 2, 30.0))
            return rc, out, ""

        pid = health.container_pid(cfg.container["engine"], cfg.container["name"], run3)
        self._container_root = (key, pid) if pid > 0 else None
        return pid if pid > 0 else None

    def _counters(self, unit) -> Counters:
        """vLLM's counters, plus the engine processes' CPU seconds when cpu_progress is on."""
        counters = self.scrape()
        if self.config.cpu_progress:
            root = self.engine_root(unit)
            if root:
                seconds, stopped = self.cpu_seconds(root)
                counters = dataclasses.replace(counters, cpu_seconds=seconds, cpu_stopped=tuple(stopped))
        return counters

    def sample(self, peer=None, peer_error=None) -> Sample:
        unit, unit_error = self._read_unit()
        sample = Sample(time=self.clock(), wall=self.wall(), unit=unit, unit_error=unit_error,
                        peer=peer, peer_error=peer_error)
        if unit is not None and unit.running and unit.wanted:
            sample.health = self.health_probe()
            # Also when /health fails on an open connection (a read timeout under load): work
            # counters that still move say the engine is only slow.
            if sample.health.status in (health.SERVING, health.DEAD):
                try:
                    sample.counters = self._counters(unit)
                except Exception as exc:  # pylint: disable=broad-except  # no metrics is evidence too
                    sample.metrics_error = str(exc) or type(exc).__name__
            sample.time = self.clock()
        return sample

    def tick(self) -> Verdict:
        """One look, one judgement, at most one action."""
        cfg = self.config
        peer, peer_error = (None, None)
        if cfg.role in (ROLE_HEAD, ROLE_WORKER):
            peer, peer_error = self._peer()
        lock = read_lock(cfg.lock_file, self.wall())
        if lock is None and peer and peer.get("lock"):
            lock = dict(peer["lock"], on="peer")
        if lock is not None:
            return self._stand_down(lock)
        if self.standing_down is not None:
            self.log(NOTICE, "lock_released", lock=self.standing_down,
                     note="judging afresh: a new start-up grace, new counter baselines")
            self.standing_down = None
            self.judge.reset()
        if cfg.role == ROLE_WORKER:
            return self._follow(peer, peer_error)

        sample = self.sample(peer, peer_error)
        if self.state.get("gave_up"):
            held = self._still_gave_up(sample)
            if held is not None:
                self._report(held, sample.unit)
                return held
        verdict = self.judge.assess(sample)
        if verdict.action == PROBE:
            result = self.generate_probe()
            try:
                after = self._counters(sample.unit)
            except Exception:  # pylint: disable=broad-except  # unreadable now: judge on the probe alone
                after = None
            verdict = self.judge.probed(sample, result, now=self.clock(), after=after)
        if verdict.action == GIVE_UP:
            verdict = self._give_up(verdict, sample, verdict.reason)
        elif verdict.action == RESTART:
            verdict = self._restart(verdict, sample)
        self._report(verdict, sample.unit)
        return verdict

    # -- actions

    def _stand_down(self, lock: dict) -> Verdict:
        cfg = self.config
        previous = self.standing_down
        if previous is None or previous.get("holder") != lock.get("holder") or previous.get("on") != lock.get("on"):
            self.log(NOTICE, "standing_down", lock=lock, note="maintenance lock held: no action until it is released")
        elif lock.get("age") is not None and lock["age"] > cfg.lock_stale_after and (
                self._last_log_time is None or self.clock() - self._last_log_time >= cfg.log_every):
            self.log(WARNING, "lock_old", lock=lock, note="the maintenance lock is older than %gs; still honoured. "
                     "Remove %s if no switch or upgrade runs" % (cfg.lock_stale_after, lock.get("path")))
            self._last_log_time = self.clock()
        self.standing_down = lock
        self.judge.reset()
        verdict = Verdict(MAINTENANCE, reason="maintenance lock %s held by %s: no action" % (lock.get("path"), lock.get("holder")),
                          evidence={"lock": lock})
        unit, _error = self._read_unit()
        self._publish(verdict, unit, lock)
        return verdict

    def _kill(self) -> list:
        done = []
        for argv in self.config.kill_commands:
            rc, out = self.run(argv, self.config.command_timeout)
            done.append({"argv": argv, "rc": rc, "output": out[-200:]})
        return done

    def _restart(self, verdict: Verdict, sample: Sample) -> Verdict:
        cfg = self.config
        wall = self.wall()
        lock = read_lock(cfg.lock_file, wall)
        if lock is not None:
            return self._stand_down(lock)
        check = self.budget.check(self.state["restarts"], wall)
        if check.exhausted:
            return self._give_up(verdict, sample, "%s; last verdict %s: %s" % (check.why, verdict.state, verdict.reason))
        if not check.allowed:
            return Verdict(verdict.state, NONE, evidence=dict(verdict.evidence, budget=check.as_dict()),
                           reason="%s; restart held back: %s" % (verdict.reason, check.why))
        unit = sample.unit
        running = unit is not None and not unit.down
        record = {"time": wall, "verdict": verdict.state, "reason": verdict.reason, "evidence": verdict.evidence,
                  "invocation": unit.invocation_id if unit is not None else None}
        if running and (verdict.hard or cfg.role == ROLE_HEAD):
            record["kill"] = self._kill()
        if cfg.role == ROLE_HEAD:
            # Hold rank 0 down while rank 1 restarts: the unit's Restart=always would start it
            # again RestartSec after the kill, and a new rank 0 must not meet the old rank 1.
            hold = [cfg.systemctl, "stop", cfg.unit]
            rc, out = self.run(hold, cfg.command_timeout)
            record["hold"] = {"argv": hold, "rc": rc, "output": out[-200:]}
            record["pair"] = self._pair_request(verdict)
        argv = cfg.restart_argv()
        rc, out = self.run(argv, cfg.command_timeout)
        record["restart"] = {"argv": argv, "rc": rc, "output": out[-300:]}
        self.state["restarts"] = (self.state["restarts"] + [record])[-HISTORY_KEPT:]
        self.save()
        self.judge.restarted(self.clock())
        after = self.budget.check(self.state["restarts"], wall)
        self.log(WARNING if rc == 0 else ERR, "restart", verdict=verdict.state, reason=verdict.reason,
                 evidence=verdict.evidence, kill=record.get("kill"), pair=record.get("pair"), restart=record["restart"],
                 budget={"used": after.used, "max_restarts": cfg.max_restarts, "restart_window": cfg.restart_window})
        return Verdict(verdict.state, RESTART, reason=verdict.reason, evidence=verdict.evidence, hard=verdict.hard)

    def _pair_request(self, verdict: Verdict) -> dict:
        """Split head: ask rank 1's watchdog to restart rank 1, wait for its acknowledgement."""
        cfg = self.config
        request = {"id": uuid.uuid4().hex, "time": self.wall(), "reason": verdict.reason, "verdict": verdict.state}
        self.state["request"] = request
        self.save()
        self._publish(Verdict(verdict.state, RESTART, reason="pair restart: waiting for rank 1", evidence=verdict.evidence),
                      None, None)
        self.log(WARNING, "pair_restart_requested", request=request,
                 note="rank 0 killed; waiting up to %gs for rank 1's watchdog to restart rank 1" % cfg.pair_ack_timeout)
        started = self.clock()
        last_error = None
        while True:
            peer, last_error = self._peer()
            if peer is not None and peer.get("acked") == request["id"]:
                return {"id": request["id"], "acked": True, "waited": _secs(self.clock() - started)}
            if self.clock() - started >= cfg.pair_ack_timeout:
                self.log(WARNING, "pair_ack_timeout", request=request, peer_error=last_error,
                         note="starting rank 0 anyway; rank 1 is restarted when its watchdog sees the request")
                return {"id": request["id"], "acked": False, "waited": _secs(self.clock() - started),
                        "peer_error": last_error}
            self.sleep(min(1.0, cfg.interval))

    def _dropin_path(self) -> str:
        return os.path.join(self.config.dropin_dir, "%s.d" % self.config.unit, DROPIN_NAME)

    def _give_up(self, verdict: Verdict, sample: Sample, why: str) -> Verdict:
        cfg = self.config
        unit = sample.unit
        actions = []
        if unit is not None and not unit.down:
            # It still runs but is hung or dead: take it out of service (port closed, memory freed)
            # and keep systemd from starting it again, so the unit stays failed.
            path = self._dropin_path()
            try:
                write_atomic(path, "# Written by the Factory Floor watchdog when it gave up on %s; removed when the unit is\n"
                                   "# started again by hand (systemctl restart %s).\n[Service]\nRestart=no\n"
                             % (cfg.unit, cfg.unit))
                actions.append({"dropin": path})
            except OSError as exc:
                actions.append({"dropin": path, "error": str(exc)})
            rc, out = self.run([cfg.systemctl, "daemon-reload"], cfg.command_timeout)
            actions.append({"argv": [cfg.systemctl, "daemon-reload"], "rc": rc, "output": out[-200:]})
            actions.extend(self._kill())
        self.state["gave_up"] = {"time": self.wall(), "why": why, "verdict": verdict.state, "reason": verdict.reason,
                                 "evidence": verdict.evidence, "invocation": unit.invocation_id if unit is not None else None}
        self.save()
        self.log(ERR, "gave_up", why=why, verdict=verdict.state, reason=verdict.reason, evidence=verdict.evidence,
                 actions=actions, resume="fix the cause, then: systemctl restart %s (the watchdog resumes on the new start)"
                 % cfg.unit)
        return Verdict(GAVE_UP, GIVE_UP, reason=why, evidence=verdict.evidence)

    def _still_gave_up(self, sample: Sample) -> Verdict | None:
        """None when someone started the unit again since the watchdog gave up (then it resumes)."""
        cfg = self.config
        gave_up = self.state["gave_up"]
        unit = sample.unit
        if (unit is not None and unit.invocation_id and unit.invocation_id != gave_up.get("invocation")
                and (unit.running or unit.active_state == "activating")):
            path = self._dropin_path()
            removed = False
            if os.path.exists(path):
                try:
                    os.unlink(path)
                    removed = True
                except OSError as exc:
                    self.log(ERR, "dropin_error", path=path, error=str(exc))
                self.run([cfg.systemctl, "daemon-reload"], cfg.command_timeout)
            self.log(NOTICE, "resumed", gave_up=gave_up, unit_state=unit.describe(), dropin_removed=removed,
                     note="the unit was started again; restart history cleared")
            self.state["gave_up"] = None
            self.state["restarts"] = []
            self.save()
            self.judge.reset()
            return None
        return Verdict(GAVE_UP, reason="gave up: %s. Resume: systemctl restart %s" % (gave_up.get("why"), cfg.unit),
                       evidence={"gave_up": gave_up, "unit": unit.describe() if unit is not None else sample.unit_error})

    def _follow(self, peer, peer_error) -> Verdict:
        """Split worker: restart rank 1 when the head asks for a pair restart; publish rank 1's state."""
        cfg = self.config
        unit, unit_error = self._read_unit()
        request = (peer or {}).get("request")
        decision = follow_decision(self.state.get("seen_request"), request, self.wall(), cfg.pair_ack_timeout)
        if decision == "adopt":
            self.state["seen_request"] = request["id"]
            self.save()
            self.log(INFO, "pair_request_adopted", request=request,
                     note="first contact with rank 0's watchdog; its last request is old: no restart")
        elif decision == "follow":
            actions = []
            if unit is not None and unit.wanted:
                if not unit.down:
                    actions.extend(self._kill())
                argv = cfg.restart_argv()
                rc, out = self.run(argv, cfg.command_timeout)
                actions.append({"argv": argv, "rc": rc, "output": out[-300:]})
            else:
                actions.append({"skipped": "%s is not enabled here (%s)" % (
                    cfg.unit, unit.describe() if unit is not None else unit_error)})
            self.state["seen_request"] = request["id"]
            self.save()
            self.log(WARNING, "pair_restart_followed", request=request, actions=actions,
                     note="rank 1 restarted for rank 0's pair restart")
            unit, unit_error = self._read_unit()
        reason = "rank 1 follows rank 0's pair restarts"
        if peer is None:
            reason += "; rank 0's watchdog unreachable: %s" % peer_error
        verdict = Verdict(FOLLOWING, reason=reason, evidence={
            "unit": unit.describe() if unit is not None else unit_error, "last_request": request})
        self._report(verdict, unit)
        return verdict


# --------------------------------------------------------------------------- status server

def make_status_server(watchdog: Watchdog, address: str, port: int) -> ThreadingHTTPServer:
    """HTTP server answering ``GET /state`` with the watchdog's published state (JSON)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # the journal gets decisions, not every peer read
            pass

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path.rstrip("/") not in ("/state", ""):
                body, status = b'{"error": "not found; GET /state"}\n', 404
            else:
                body, status = watchdog.status_json(), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    return server


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Watch one vLLM engine's systemd unit; restart it when hung or dead.")
    parser.add_argument("--config", required=True, help="JSON file written by the vllm_watchdog role")
    parser.add_argument("--once", action="store_true", help="one look, print the verdict, exit")
    parser.add_argument("--check-config", action="store_true", help="check the configuration file and exit")
    args = parser.parse_args(argv)
    try:
        with open(args.config, encoding="utf-8") as handle:
            config = load_config(json.load(handle))
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s: %s\n" % (args.config, exc))
        return 2
    if args.check_config:
        sys.stdout.write("%s: ok (role %s, unit %s, hang detection bound %gs)\n" % (
            args.config, config.role, config.unit, config.detection_bound))
        return 0

    watchdog = Watchdog(config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *args: stop.set())
    signal.signal(signal.SIGINT, lambda *args: stop.set())
    server = None
    if config.status_listen:
        server = make_status_server(watchdog, config.status_listen["address"], config.status_listen["port"])
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
    watchdog.log(INFO, "started", role=config.role, url=config.url, model=config.model, interval=config.interval,
                 stall_window=config.stall_window, probe=config.probe, probe_timeout=config.probe_timeout,
                 startup_grace=config.startup_grace, detection_bound=config.detection_bound,
                 budget={"max_restarts": config.max_restarts, "restart_window": config.restart_window,
                         "backoff": config.backoff, "backoff_max": config.backoff_max},
                 lock_file=config.lock_file, peer_url=config.peer_url, status_listen=config.status_listen,
                 container=config.container)
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                verdict = watchdog.tick()
            except Exception as exc:  # pylint: disable=broad-except  # a bug in one look must not end the watch
                watchdog.log(ERR, "error", error="%s: %s" % (type(exc).__name__, exc), traceback=traceback.format_exc())
                verdict = None
            if args.once:
                sys.stdout.write(json.dumps(verdict.as_dict() if verdict else None, sort_keys=True, default=str) + "\n")
                return 0
            stop.wait(max(0.0, config.interval - (time.monotonic() - started)))
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    watchdog.log(INFO, "stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
