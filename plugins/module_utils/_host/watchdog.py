# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM watchdog: find a hung or dead engine fast, restart it safely, never fight a switch.

Private to the collection. Installed by the ``vllm_watchdog`` role next to
``_host/watchdog_judge.py`` (the verdicts: what each one means and the detection bound),
``_host/watchdog_config.py`` (the configuration and the restart budget), ``_host/daemon.py``,
``_host/systemd.py``, ``_host/proc.py``, ``_host/maintenance_lock.py``, ``_host/vllm_health.py`` and
``_host/vllm_metrics.py`` (the host programs' package, ``/usr/local/lib/factory-floor/_host``)
and run as ``python3 -m _host.watchdog --config /etc/factory-floor/<unit>.json`` by one systemd unit
per topology (``vllm-replica-watchdog.service``, ``vllm-split-watchdog.service``).
Standard library, ``requests`` and ``prometheus_client`` only (through the modules
above); no Ansible.

Restart. A hung or dead engine is first killed (``kill_commands``: SIGKILL to every
process of the unit, and to its container), then ``systemctl restart``. The kill is what
takes the engine out of the proxy: its port closes, nginx passes new connections to the
other engine at once (``proxy_next_upstream error``) and the proxy's membership checker
drops it at its next probe (refused: known gone). The checker only probes ``/health`` and
``/v1/models``, which a hung engine still answers; rather than a second, cross-host
channel, the watchdog (on the engine's own host) closes the port. Graceful shutdown is
pointless for a hung engine: its requests never finish, and a SIGSTOPped process takes no
SIGTERM.

Split topology (``role`` ``head`` on rank 0, ``worker`` on every other rank): one model
over the group's N ranks (a pair: N = 2), so a dead worker is a dead model. No ssh between
the hosts: each watchdog acts on its own unit and they talk over the direct link
(``status_listen``, ``peer_urls``: the head reads every other rank, each worker reads the
head). The head is the group's only judge and every restart it makes is a group restart,
in the order of the role's README (kill rank 0 and stop its unit, publish the request,
every other rank restarts and acknowledges, start rank 0 once all have acknowledged or
after ``pair_ack_timeout``): never a new rank 0 with an old worker.

Every decision goes to stdout, one JSON line with the evidence (unit state, health
status, counter values, seconds without progress, probe latency, budget), prefixed with
its syslog priority (``<3>`` err ... ``<6>`` info) for journald. The current state is
also written to ``status_file`` after every look, and what must survive a restart of
the watchdog (restart history, ``gave_up``, pair requests) to ``state_file``. systemd
is told the daemon is ready and, after every look, that it still ticks (``sd_notify``),
so a unit with ``WatchdogSec=`` restarts a watchdog whose loop stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import traceback
import uuid

from . import daemon
from . import maintenance_lock
from . import systemd
from . import vllm_client as client
from .proc import engine_cpu
from . import textfile
from . import vllm_health as health
from . import vllm_metrics as metrics
from .daemon import ERR, INFO, NOTICE, WARNING, write_atomic
# DEAD, HUNG and SLOW are read through this module by its tests (the verdicts it logs).
from .watchdog_config import (  # pylint: disable=unused-import
    BUSY, Budget, CONFIG_ERROR, Config, DEAD, DROPIN_NAME, FOLLOWING, GAVE_UP, GIVE_UP, HISTORY_KEPT,
    HUNG, MAINTENANCE, NONE, NOT_WANTED, PROBE, RESTART, ROLE_HEAD, ROLE_WORKER, SERVING, SLOW, STARTING,
    UNIT_PROPERTIES, UnitInfo, follow_decision, load_config, unit_info,
)
from .watchdog_judge import (
    Counters, Judge, Probe, Sample, Verdict, _secs,
)


# --------------------------------------------------------------------------- files

def read_lock(path: str, wall: float, untimed_for: float) -> dict | None:
    """The maintenance lock (``_maintenance_lock.read``, the one reader of its format), or None when absent.

    Any content counts as a lock until it expires (``_maintenance_lock.expires_at``: its own
    ``expires``, which the module wrote from this host's clock, or ``untimed_for`` seconds
    after the file was last written when it has none), judged on this host's clock
    (``wall``): ``expired``, and ``expires_in`` seconds. ``age`` is seconds since the file
    was last written.
    """
    try:
        lock = maintenance_lock.read(path)
    except OSError as exc:  # cannot even stat it: assume it is held rather than act
        return {"path": path, "holder": "unknown (%s)" % exc, "since": None, "age": None, "expires": None,
                "expires_in": None, "expired": False}
    if lock is None:
        return None
    expires = maintenance_lock.expires_at(lock, untimed_for)
    return {"path": path, "holder": lock["holder"], "since": lock["since"], "run": lock["run"],
            "age": round(max(0.0, wall - lock["mtime"]), 1), "expires": expires,
            "expires_in": round(expires - wall, 1), "expired": expires <= wall,
            "expiry": "recorded" if lock["expires"] is not None else "untimed"}


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


# --------------------------------------------------------------------------- the daemon

class Watchdog:
    """One watchdog loop. Every side effect goes through an injectable callable:

    ``health_probe()`` and ``generate_probe()`` -> :class:`Probe`; ``scrape()`` -> :class:`Counters`
    (raises on failure); ``run(argv, timeout)`` -> ``(rc, output)``; ``fetch_rank(url)`` -> dict, the
    state another rank's watchdog publishes at ``url`` (raises on failure; ``fetch_peer()``, without the
    URL, reads the one other rank of a pair); ``log(line)``; ``clock`` (monotonic), ``wall`` (UNIX time) and ``sleep``; ``cpu_seconds(main_pid)`` ->
    ``(seconds, stopped)`` as :func:`engine_cpu`; ``boot`` the boot id (``_daemon.boot_id``).

    Every wait and age is measured on ``clock``: restarts (``_daemon.age``), the pair's
    starts (each rank publishes how long its unit has run, ``running_for``, measured on its
    own clock when its state is read) and requests (``age``). The wall clock only labels
    records for people and judges the maintenance lock's expiry, which this host's clock wrote.
    """

    def __init__(self, config: Config, health_probe=None, generate_probe=None, scrape=None, run=None,
                 fetch_peer=None, log=None, clock=time.monotonic, wall=time.time, sleep=time.sleep, cpu_seconds=None,
                 boot=None, fetch_rank=None):
        self.config = config
        self.cpu_seconds = cpu_seconds or engine_cpu
        self.judge = Judge(config)
        self.budget = Budget(config.max_restarts, config.restart_window, config.backoff, config.backoff_max)
        self.health_probe = health_probe or self._health_probe
        self.generate_probe = generate_probe or self._generate_probe
        self.scrape = scrape or self._scrape
        self.run = run or self._run
        if fetch_rank is None and fetch_peer is not None:
            def fetch_rank(_url):
                # A pair's reader: the one other rank, whatever its URL.
                return fetch_peer()
        self.fetch_rank = fetch_rank or self._fetch_rank
        self.write_line = log or daemon.emit
        self.clock, self.wall, self.sleep = clock, wall, sleep
        self.boot = daemon.boot_id() if boot is None else boot
        self.state = load_state(config.state_file)
        # CLOCK_MONOTONIC when the engine unit's main process started (last look), and when this
        # watchdog made each pair request: what its published ages are measured from.
        self._started_mono = None
        self._request_mono = {}
        self._lock_expired_logged = None
        # The expired lock this watchdog no longer honours (published; None when there is none).
        self.expired_lock = None
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
        rc, out, err = systemd.run(argv, timeout or self.config.command_timeout)
        return rc, (out + err).strip()

    def _fetch_rank(self, url: str) -> dict:
        return client.get_json(url, self.config.request_timeout)

    # -- logging and state

    def log(self, priority: int, event: str, **fields) -> None:
        fields.setdefault("unit", self.config.unit)
        self.write_line(daemon.event_line(priority, event, fields))

    def save(self) -> None:
        try:
            write_atomic(self.config.state_file, json.dumps(self.state, sort_keys=True, default=str) + "\n")
        except OSError as exc:
            self.log(ERR, "state_file_error", error=str(exc), path=self.config.state_file)

    def _age(self, record: dict) -> float:
        return daemon.age(record, self.clock(), self.wall(), self.boot)

    def _publish(self, verdict: Verdict, unit: UnitInfo | None, lock: dict | None) -> None:
        cfg, wall = self.config, self.wall()
        check = self.budget.check(self.state["restarts"], self._age)
        started_at = None
        if unit is not None:
            self._started_mono = unit.started_mono or None
        if unit is not None and unit.started_mono:
            # For people only: the peer judges running_for, never this host's wall clock.
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
            "lock_expired": self.expired_lock,
            "gave_up": self.state.get("gave_up"),
            "restarts": self.budget.recent(self.state["restarts"], self._age),
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
        """The published state, with its ages measured now on this host's monotonic clock: ``running_for``
        (seconds the engine unit's main process has run) and the pair request's ``age``."""
        with self.status_lock:
            status = dict(self.status)
        now = self.clock()
        status["running_for"] = round(now - self._started_mono, 3) if self._started_mono else None
        request = status.get("request")
        if isinstance(request, dict):
            made = self._request_mono.get(request.get("id"))
            status["request"] = dict(request, age=round(now - made, 3) if made is not None else None)
        return (json.dumps(status, sort_keys=True, default=str) + "\n").encode()

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
            if verdict.state in (GAVE_UP, CONFIG_ERROR):
                priority = ERR
            self.log(priority, "verdict", verdict=verdict.state, action=verdict.action, reason=verdict.reason,
                     evidence=verdict.evidence)
            self._last_logged, self._last_log_time = key, now

    # -- one look

    def _query(self, argv):
        """``(rc, stdout, stderr)`` of ``argv`` for ``_systemd``'s readers; a failure's output cut to 300 characters.

        systemctl answers from PID 1, which a host starved of CPU (the 2-core lab under
        load) can leave waiting for more than 10 s.
        """
        rc, out = self.run(argv, max(self.config.request_timeout * 2, 30.0))
        return rc, out if rc == 0 else out[:300], ""

    def _read_unit(self):
        cfg = self.config
        # An unreadable unit means no verdict.
        try:
            return unit_info(systemd.show(cfg.unit, self._query, cfg.systemctl, UNIT_PROPERTIES)), None
        except systemd.UnitStateError as exc:
            return None, str(exc)

    def _peer(self, url: str):
        """``(state, None)`` of the rank whose watchdog publishes at ``url``, or ``(None, why)``."""
        try:
            return self.fetch_rank(url), None
        except Exception as exc:  # pylint: disable=broad-except  # an unreachable peer is evidence, not a crash
            return None, "%s: %s" % (type(exc).__name__, exc)

    def _peers(self) -> list:
        """``(state, error)`` of every other rank's watchdog in rank order (the head), or of the head (a worker)."""
        return [self._peer(url) for url in self.config.peer_urls]

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
        pid = systemd.container_pid(cfg.container["engine"], cfg.container["name"], self._query)
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

    def sample(self, peer=None, peer_error=None, peers=None) -> Sample:
        """One look at the engine; ``peers``, ``(state, error)`` of the other ranks in rank order (rank 1 is
        also ``peer``, ``peer_error``)."""
        unit, unit_error = self._read_unit()
        if peers:
            peer, peer_error = peers[0]
        sample = Sample(time=self.clock(), unit=unit, unit_error=unit_error,
                        peer=peer, peer_error=peer_error, peers=list(peers or []))
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
        peers = self._peers() if cfg.role in (ROLE_HEAD, ROLE_WORKER) else []
        peer, peer_error = peers[0] if peers else (None, None)
        lock = self._lock()
        for rank, (state, _error) in enumerate(peers, 1):
            held = state.get("lock") if state else None
            # That rank judged its own lock's expiry on its own clock; it publishes only one that holds. A lock
            # it only relays ("on", another rank's) is not honoured again: the ranks would echo it to each other
            # for ever after its host released it. (A worker's one peer is the head: rank 0, not rank 1.)
            if lock is None and isinstance(held, dict) and not held.get("expired") and not held.get("on"):
                lock = dict(held, on="peer")
                if cfg.role == ROLE_HEAD:
                    lock["rank"] = rank
        if lock is not None:
            return self._stand_down(lock)
        if self.standing_down is not None:
            self.log(NOTICE, "lock_released", lock=self.standing_down,
                     note="judging afresh: a new start-up grace, new counter baselines")
            self.standing_down = None
            self.judge.reset()
        if cfg.role == ROLE_WORKER:
            return self._follow(peer, peer_error)

        sample = self.sample(peers=peers)
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

    def _lock(self) -> dict | None:
        """This host's maintenance lock while it holds, or None (absent, or expired).

        An expired lock - its run died or forgot it - does not switch protection off: the
        watchdog acts again and says so (``lock_expired``, priority warning, again every
        ``log_every`` seconds while the file stays), and publishes it as ``lock_expired``
        (the metric ``factory_floor_watchdog_lock_expired``).
        """
        cfg = self.config
        lock = read_lock(cfg.lock_file, self.wall(), cfg.lock_stale_after)
        if lock is None or not lock["expired"]:
            self.expired_lock = None
            self._lock_expired_logged = None
            return lock
        self.expired_lock = lock
        now = self.clock()
        if self._lock_expired_logged is None or now - self._lock_expired_logged >= cfg.log_every:
            self.log(WARNING, "lock_expired", lock=lock, note=(
                "the maintenance lock %s expired %.0fs ago (%s): its run is presumed dead, so the watchdog acts "
                "again. Remove the file if no switch or upgrade runs; a run that still needs it takes it again"
                % (lock["path"], -lock["expires_in"], "its own expiry" if lock["expiry"] == "recorded"
                   else "no expiry of its own: lock_stale_after %gs after the file was last written" % cfg.lock_stale_after)))
            self._lock_expired_logged = now
        return None

    def _stand_down(self, lock: dict) -> Verdict:
        previous = self.standing_down
        if previous is None or previous.get("holder") != lock.get("holder") or previous.get("on") != lock.get("on"):
            self.log(NOTICE, "standing_down", lock=lock, note="maintenance lock held: no action until it is released "
                     "or expires (expires_in seconds)")
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
        lock = self._lock()
        if lock is not None:
            return self._stand_down(lock)
        check = self.budget.check(self.state["restarts"], self._age)
        if check.exhausted:
            return self._give_up(verdict, sample, "%s; last verdict %s: %s" % (check.why, verdict.state, verdict.reason))
        if not check.allowed:
            return Verdict(verdict.state, NONE, evidence=dict(verdict.evidence, budget=check.as_dict()),
                           reason="%s; restart held back: %s" % (verdict.reason, check.why))
        unit = sample.unit
        running = unit is not None and not unit.down
        record = dict(daemon.stamp(self.clock, self.wall, self.boot), verdict=verdict.state, reason=verdict.reason,
                      evidence=verdict.evidence, invocation=unit.invocation_id if unit is not None else None)
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
        after = self.budget.check(self.state["restarts"], self._age)
        self.log(WARNING if rc == 0 else ERR, "restart", verdict=verdict.state, reason=verdict.reason,
                 evidence=verdict.evidence, kill=record.get("kill"), pair=record.get("pair"), restart=record["restart"],
                 budget={"used": after.used, "max_restarts": cfg.max_restarts, "restart_window": cfg.restart_window})
        return Verdict(verdict.state, RESTART, reason=verdict.reason, evidence=verdict.evidence, hard=verdict.hard)

    def _pair_request(self, verdict: Verdict) -> dict:
        """Split head: ask every other rank's watchdog to restart its rank, wait for all their acknowledgements.

        The record says which ranks acknowledged (``acked_ranks``) and which did not within
        ``pair_ack_timeout`` (``missing``, with the last error reading each); ``acked`` is true
        when every rank did.
        """
        cfg = self.config
        ranks = list(range(1, len(cfg.peer_urls) + 1))
        # "time" is for people: the workers judge the request by the age this watchdog publishes.
        request = {"id": uuid.uuid4().hex, "time": self.wall(), "reason": verdict.reason, "verdict": verdict.state}
        self._request_mono = {request["id"]: self.clock()}
        self.state["request"] = request
        self.save()
        what = "pair restart" if len(ranks) == 1 else "group restart"
        self._publish(Verdict(verdict.state, RESTART, reason="%s: waiting for %s" % (what, _ranks(ranks)),
                              evidence=verdict.evidence), None, None)
        self.log(WARNING, "pair_restart_requested", request=request, note=(
            "rank 0 killed; waiting up to %gs for rank 1's watchdog to restart rank 1" % cfg.pair_ack_timeout
            if len(ranks) == 1 else "rank 0 killed; waiting up to %gs for the watchdogs of %s to restart them"
            % (cfg.pair_ack_timeout, _ranks(ranks))))
        started = self.clock()
        acked, errors = set(), {}
        while True:
            for rank, url in zip(ranks, cfg.peer_urls):
                if rank in acked:
                    continue
                state, error = self._peer(url)
                errors[rank] = error
                if state is not None and state.get("acked") == request["id"]:
                    acked.add(rank)
            missing = [rank for rank in ranks if rank not in acked]
            record = {"id": request["id"], "acked": not missing, "waited": _secs(self.clock() - started),
                      "acked_ranks": sorted(acked), "missing": missing}
            if not missing:
                return record
            if self.clock() - started >= cfg.pair_ack_timeout:
                last_error = errors.get(missing[0])
                if len(ranks) > 1:
                    record["peer_errors"] = {str(rank): errors.get(rank) for rank in missing}
                self.log(WARNING, "pair_ack_timeout", request=request, peer_error=last_error, missing=missing,
                         acked_ranks=sorted(acked),
                         note="starting rank 0 anyway; %s restarted when its watchdog sees the request"
                              % ("%s is" % _ranks(missing) if len(missing) == 1 else "%s are" % _ranks(missing)))
                return dict(record, peer_error=last_error)
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
        decision = follow_decision(self.state.get("seen_request"), request, cfg.pair_ack_timeout)
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


def _ranks(ranks) -> str:
    """``rank 1``, ``ranks 1, 2``: how the logs name the workers."""
    ranks = list(ranks)
    return ("rank %d" % ranks[0]) if len(ranks) == 1 else "ranks %s" % ", ".join("%d" % r for r in ranks)


# --------------------------------------------------------------------------- status server

def make_status_server(watchdog: Watchdog, address: str, port: int):
    """HTTP server answering ``GET /state`` with the watchdog's published state (JSON)."""
    return daemon.status_server(watchdog.status_json, address, port, path="/state")


def main(argv=None) -> int:
    args, config = daemon.configure(
        argv, "Watch one vLLM engine's systemd unit; restart it when hung or dead.", load_config,
        lambda path, c: "%s: ok (role %s, unit %s, hang detection bound %gs)" % (path, c.role, c.unit, c.detection_bound))
    if args is None:
        return config
    watchdog = Watchdog(config)
    stop = daemon.stop_event()
    server = None
    if config.status_listen:
        server = make_status_server(watchdog, config.status_listen["address"], config.status_listen["port"])
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
    watchdog.log(INFO, "started", role=config.role, url=config.url, model=config.model, interval=config.interval,
                 stall_window=config.stall_window, probe=config.probe, probe_timeout=config.probe_timeout,
                 startup_grace=config.startup_grace, detection_bound=config.detection_bound,
                 budget={"max_restarts": config.max_restarts, "restart_window": config.restart_window,
                         "backoff": config.backoff, "backoff_max": config.backoff_max},
                 lock_file=config.lock_file, peer_urls=config.peer_urls, status_listen=config.status_listen,
                 container=config.container)
    try:
        if args.once:
            verdict = _tick(watchdog)
            sys.stdout.write(json.dumps(verdict.as_dict() if verdict else None, sort_keys=True, default=str) + "\n")
            return 0
        daemon.loop(lambda: _tick(watchdog), config.interval, stop)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    watchdog.log(INFO, "stopped")
    return 0


def _tick(watchdog: Watchdog):
    try:
        return watchdog.tick()
    except Exception as exc:  # pylint: disable=broad-except  # a bug in one look must not end the watch
        watchdog.log(ERR, "error", error="%s: %s" % (type(exc).__name__, exc), traceback=traceback.format_exc())
        return None


if __name__ == "__main__":
    raise SystemExit(main())
