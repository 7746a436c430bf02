# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog's configuration, its restart budget and the split pair's follow rule.

Private to the collection; pure logic (no I/O), standard library only. The
``vllm_watchdog`` role installs it next to ``_host/watchdog.py`` (the daemon, which also
describes the verdicts) and ``_host/watchdog_judge.py`` (the judgement).

Budget. At most ``max_restarts`` restarts by the watchdog within ``restart_window``
seconds, the first at once, each next one at least ``backoff`` x 2^(n-1) seconds (at
most ``backoff_max``) after the previous. When the budget is exhausted the watchdog
gives up: an engine that still runs is killed with a runtime drop-in ``Restart=no`` in
place, so the unit stays **failed** instead of looping and holding memory; the reason
goes to the journal at priority ``err`` and into the state file (``gave_up``). It acts
again once someone starts the unit (a new ``InvocationID``): then the drop-in and the
history are cleared. systemd's own restarts (``Restart=always`` after vLLM exits) are
bounded by the unit's ``StartLimitBurst=``, not counted here.
"""

from __future__ import annotations

import dataclasses
import math

from . import systemd
from . import vllm_client as client

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
# The watchdog cannot ask the engine (its own api_key or url is refused by the client):
# never a restart, an error in the journal until the configuration is fixed.
CONFIG_ERROR = "config_error"
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


# What the watchdog reads of its unit (the one systemctl show reader is _systemd).
UNIT_PROPERTIES = systemd.PROPERTIES
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
    # Required: the vllm_watchdog role renders its vllm_watchdog_lock_file, the one default.
    lock_file: str | None = None
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
    # Split: the other ranks' watchdog state URLs (http://ADDRESS:PORT/state). The head (rank 0):
    # every other rank's, in rank order (rank 1 first); a worker: the head's. peer_url, one URL,
    # is the same as a list of one (a pair's configuration before groups of N ranks).
    peer_urls: list | None = None
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
    for key in ("unit", "state_file", "lock_file"):
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
        config.url = client.base_url(config.url)
    except ValueError as exc:
        raise ConfigError("url: %s" % exc) from None
    if config.api_key is not None and client.api_key_problem(config.api_key) is not None:
        # Never echoed: the key goes to the journal otherwise.
        raise ConfigError("api_key %s" % client.api_key_problem(config.api_key))
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
    config.peer_urls = _peer_urls(config)
    if config.role == ROLE_HEAD and not config.peer_urls:
        raise ConfigError("role head needs peer_urls (every other rank's watchdog, http://ADDRESS:PORT/state, in rank "
                          "order) or peer_url (the one other rank of a pair)")
    if config.role == ROLE_WORKER and len(config.peer_urls) != 1:
        raise ConfigError("role worker needs peer_url, or peer_urls with exactly one URL (the head's watchdog, "
                          "http://ADDRESS:PORT/state; a worker follows rank 0 only), got %r" % (config.peer_urls,))
    if config.role in (ROLE_HEAD, ROLE_WORKER):
        listen = config.status_listen
        if not isinstance(listen, dict) or not isinstance(listen.get("port"), int) or not listen.get("address"):
            raise ConfigError("role %s needs status_listen {address, port} (where the other rank reads this state)"
                              % config.role)
    return config


def _peer_urls(config: Config) -> list:
    """``peer_urls`` as a list (``peer_url`` is a list of one); raise :class:`ConfigError` when malformed."""
    urls, url = config.peer_urls, config.peer_url
    if url is not None and (not isinstance(url, str) or not url):
        raise ConfigError("peer_url must be null or a URL (http://ADDRESS:PORT/state), got %r" % (url,))
    if urls is None:
        return [url] if url else []
    if not isinstance(urls, list) or not all(isinstance(u, str) and u for u in urls):
        raise ConfigError("peer_urls must be a list of URLs (http://ADDRESS:PORT/state), got %r" % (urls,))
    if url and urls and urls != [url]:
        raise ConfigError("set peer_urls or peer_url, not both (peer_url %r, peer_urls %r)" % (url, urls))
    if len(set(urls)) != len(urls):
        raise ConfigError("peer_urls names a rank twice: %r" % (urls,))
    return list(urls) if urls else ([url] if url else [])


# --------------------------------------------------------------------------- the unit

@dataclasses.dataclass
class UnitInfo(systemd.UnitState):
    """A systemd unit as ``systemctl show`` reports it (``_systemd.UnitState``), with the start as the watchdog reads it.

    ``started_mono`` is CLOCK_MONOTONIC seconds when the main process started (same clock as
    ``time.monotonic()``). What the watchdog publishes (:meth:`as_dict`: its state file, the
    pair's status) carries it in place of ``main_started``.
    """

    # CLOCK_MONOTONIC seconds when the main process started (same clock as time.monotonic()).
    started_mono: float | None = None

    def describe(self) -> str:
        return "%s, UnitFileState=%s, MainPID=%s, NRestarts=%s" % (
            super().describe(), self.unit_file_state, self.main_pid, self.n_restarts)

    def as_dict(self, fields=None) -> dict:
        values = super().as_dict(fields)
        values.pop("main_started", None)
        return values

    @classmethod
    def from_dict(cls, data) -> "UnitInfo | None":
        if not isinstance(data, dict) or not data.get("name"):
            return None
        names = {f.name for f in dataclasses.fields(cls)} - {"main_started"}
        return cls(**{k: v for k, v in data.items() if k in names})


def unit_info(state) -> UnitInfo:
    """The watchdog's :class:`UnitInfo` of a ``_systemd.UnitState`` (``main_started`` in seconds)."""
    values = dataclasses.asdict(state)
    values.pop("main_started")
    return UnitInfo(started_mono=state.main_started / 1e6 if state.main_started else None, **values)


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
    """At most ``max_restarts`` restarts in ``window`` seconds, spaced by a doubling backoff.

    ``age(record)`` says how many seconds ago a restart record was made, on the watchdog's
    own host (``_daemon.age``: its monotonic clock within one boot), so a step of the wall
    clock neither forgets restarts nor holds one back.
    """

    def __init__(self, max_restarts: int, window: float, backoff: float, backoff_max: float):
        self.max_restarts = max_restarts
        self.window = window
        self.backoff = backoff
        self.backoff_max = backoff_max

    def recent(self, history, age) -> list:
        return [r for r in history if isinstance(r, dict) and age(r) < self.window]

    def check(self, history, age) -> BudgetCheck:
        recent = self.recent(history, age)
        used = len(recent)
        if used >= self.max_restarts:
            return BudgetCheck(False, True, 0.0, used, "restart budget exhausted: %d restart(s) in the last %gs (max_restarts %d)"
                               % (used, self.window, self.max_restarts))
        if used == 0:
            return BudgetCheck(True, False, 0.0, used, "no restart in the last %gs" % self.window)
        since = min(age(r) for r in recent)
        spacing = min(self.backoff_max, self.backoff * 2 ** (used - 1))
        wait = spacing - since
        if wait > 0:
            return BudgetCheck(False, False, wait, used, "backoff: %d restart(s) in the last %gs, the next one not before "
                               "%.0fs after the last (%.0fs left)" % (used, self.window, spacing, wait))
        return BudgetCheck(True, False, 0.0, used, "%d of %d restart(s) used in the last %gs"
                           % (used, self.max_restarts, self.window))


def follow_decision(seen: str | None, request, fresh_for: float) -> str:
    """What rank 1's watchdog does with the head's last pair-restart request.

    ``follow`` (kill and restart rank 1, acknowledge), ``adopt`` (remember it without a
    restart: first contact, and the request is older than ``fresh_for`` seconds, so the
    head is no longer waiting for it) or ``none``. The request's ``age`` is what the
    head's watchdog measured on its own clock when it served its state; rank 1 never
    compares its clock with rank 0's. A request without one (made before the head's
    watchdog last started) counts as old.
    """
    if not isinstance(request, dict) or not request.get("id"):
        return "none"
    if request["id"] == seen:
        return "none"
    if seen is None:
        age = request.get("age")
        if isinstance(age, bool) or not isinstance(age, (int, float)) or math.isnan(age):
            age = math.inf
        if age > fresh_for:
            return "adopt"
    return "follow"
