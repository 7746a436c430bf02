# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watchdog's judgement: from one look at the engine to a verdict. Pure logic, no I/O.

Private to the collection; the ``vllm_watchdog`` role installs it next to ``_host/watchdog.py``
(the daemon that takes the looks and acts on the verdicts).

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
``config_error``
    No action: the watchdog's own request could not be sent (``_vllm_health``'s
    ``config_error``: its api_key is not a bearer token, its url is refused). It says
    nothing about the engine, so it never counts towards ``dead``; logged at ``err``.
``wrong_model``, ``not_wanted``, ``maintenance``
    No action: another model is served (a restart cannot fix configuration); the unit
    is not enabled (not ours to run: the other topology runs); the maintenance lock
    file exists and has not expired (a switch or a model upgrade holds it; the
    judgement starts afresh, with a new start-up grace, once it is released; an
    expired one - its run died - no longer counts).

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

import dataclasses
import math

from . import vllm_health as health
from . import vllm_metrics as metrics
from .watchdog_config import (
    BUSY, CONFIG_ERROR, Config, DEAD, DOWN, GIVE_UP, HUNG, NONE, NOT_WANTED, PROBE, RESTART, ROLE_HEAD, SERVING,
    SLOW, STARTING, SUSPECT, UNKNOWN, UnitInfo, WRONG_MODEL,
)


# --------------------------------------------------------------------------- evidence

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
    """One look at the engine. ``time`` is this host's monotonic clock, seconds."""

    time: float
    unit: UnitInfo | None = None
    unit_error: str | None = None
    health: Probe | None = None
    counters: Counters | None = None
    metrics_error: str | None = None
    # Split head only: rank 1's watchdog's published state, or why it could not be read.
    peer: dict | None = None
    peer_error: str | None = None
    # Split head of a group of N ranks: (state, error) of every other rank's watchdog in rank
    # order, rank 1 first (its pair is also ``peer``, ``peer_error``). Empty: rank 1 alone, as above.
    peers: list = dataclasses.field(default_factory=list)

    def ranks(self) -> list:
        """``(rank, state, error)`` of every other rank whose watchdog was asked (rank 1 first)."""
        if self.peers:
            return [(rank, state, error) for rank, (state, error) in enumerate(self.peers, 1)]
        if self.peer is not None or self.peer_error:
            return [(1, self.peer, self.peer_error)]
        return []


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
        # Per rank (1, 2, ...): since when its unit has been down while enabled.
        self.peer_down_since = {}

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
        for rank, peer, error in sample.ranks():
            if peer is not None:
                peer_unit = UnitInfo.from_dict(peer.get("unit_state"))
                evidence["rank%d" % rank] = peer_unit.describe() if peer_unit else "unit unknown"
            elif error:
                evidence["rank%d" % rank] = "watchdog unreachable: %s" % error
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
        if status == health.CONFIG_ERROR:
            return Verdict(CONFIG_ERROR, evidence=self._evidence(sample), reason=(
                "cannot ask the engine: %s; fix the watchdog's configuration (vllm_api_key, the engine's address); "
                "not judged, not restarted" % (sample.health.error,)))
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
        if result.status == health.CONFIG_ERROR:
            return Verdict(CONFIG_ERROR, evidence=evidence, reason=(
                "the 1-token generation could not be sent: %s; not judged, not restarted" % result.error))
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
        """Rank 0's view of the other ranks (split head): a dead or stale worker makes a dead model.

        Each worker is judged on its own (the first verdict in rank order is the group's); an
        unreachable watchdog is evidence only. A pair (two ranks) is "the pair", more ranks "the group".
        """
        ranks = sample.ranks()
        group = "the pair" if len(ranks) <= 1 else "the group"
        verdict = None
        for rank, peer, _error in ranks:
            found = self._rank(sample, rank, peer, group)
            verdict = verdict or found
        return verdict

    def _rank(self, sample: Sample, rank: int, peer: dict | None, group: str) -> Verdict | None:
        """Rank 0's view of one worker (``rank``): down for ``down_confirm`` s, or older than rank 0's start."""
        cfg, now = self.config, sample.time
        worker = UnitInfo.from_dict(peer.get("unit_state")) if peer else None
        if worker is None or not worker.wanted:
            self.peer_down_since.pop(rank, None)
            return None
        if worker.down:
            since = self.peer_down_since.setdefault(rank, now)
            waited = now - since
            if waited >= cfg.down_confirm:
                return Verdict(DEAD, RESTART, hard=True, evidence=self._evidence(
                    sample, **{"rank%d_down_for" % rank: _secs(waited)}),
                    reason="rank %d (%s on the peer) is %s for %.0fs: a dead worker is a dead model"
                           % (rank, worker.name, worker.active_state, waited))
            return None
        self.peer_down_since.pop(rank, None)
        head_unit = sample.unit
        # Ages, each measured on its own host's monotonic clock: never a worker's wall clock against rank 0's.
        worker_running = peer.get("running_for")
        if (not self.served and worker.running and head_unit is not None and head_unit.started_mono
                and isinstance(worker_running, (int, float)) and not isinstance(worker_running, bool)):
            head_running = now - head_unit.started_mono
            if worker_running > head_running + cfg.pair_skew:
                return Verdict(DEAD, RESTART, hard=True, evidence=self._evidence(sample, **{
                    "rank0_running_for": _secs(head_running), "rank%d_running_for" % rank: _secs(worker_running)}),
                    reason=("rank %d has run %.0fs longer than rank 0's current start (more than pair_skew %gs): it "
                            "belongs to an older session and will not join; restarting %s"
                            % (rank, worker_running - head_running, cfg.pair_skew, group)))
        return None


def _fmt(value) -> str:
    if value is None:
        return "?"
    return "%d" % value if float(value).is_integer() else "%g" % value
