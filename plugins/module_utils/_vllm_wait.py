# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Wait until a vLLM server is serving (or no longer is), watching its systemd unit meanwhile.

Private to the collection, behind ``factory_floor.llm.vllm_health``. One probe is
``_vllm_health.probe`` (its statuses are the contract); this is the loop around it: the
deadline, the unit that went down or crash-loops (``_systemd``), a wait cut into calls
that report as they go. Standard library only, like the probe it repeats.
"""

from __future__ import annotations

import dataclasses
import re
import time

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_client as client
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_health import (
    CONFIG_ERROR,
    GENERATE_TIMEOUT,
    PROBE_KINDS,
    REJECTED,
    REQUEST_TIMEOUT,
    SERVING,
    ProbeResult,
    _fmt,
    probe,
)

WAIT_FOR = ("serving", "dead")
UnitState = systemd.UnitState
# What a timed-out wait's message lists of each process (``unit_processes`` lines).
PROCESS_COLUMNS = systemd.PROCESS_COLUMNS
# InvocationID names the current run's journal lines (what a start-up wait reads of vLLM's own log).
WAIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts",
                   "ExecMainStartTimestampMonotonic", "InvocationID")
WAIT_FIELDS = ("name", "load_state", "active_state", "sub_state", "result", "exec_main_status", "n_restarts",
               "main_started")

# The journal line a failed start's headline quotes, cut to this many characters.
CAUSE_CHARS = 300
# Lines that say why an engine ended, as the runtime or vLLM write them: docker's refusal to
# start the container ("docker: Error response from daemon: ..."), podman's ("Error: ..."),
# a Python exception's last line ("RuntimeError: ..."), a binary for another architecture.
_CAUSE = re.compile(r"Error response from daemon"
                    r"|(?:^|[\s\]:])(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_]*(?:Error|Exception|Exit): \S"
                    r"|(?i:exec format error)")
# journalctl's prefix of a line ("Jan 02 03:04:05 spark-a vllm-replica[812]: ").
_JOURNAL_PREFIX = re.compile(r"^[A-Z][a-z]{2} [ 0-9][0-9] [0-9:]{8} \S+ [^\s:]+: ")
# Ends the lines a message quotes (the journal's, the unit's processes): what a caller adds after
# the message (abort.yml's note on the maintenance lock) does not read as the last line's.
END_OF_LINES = "-- end of the unit's lines --"


def cause_line(journal, secrets=(), limit=CAUSE_CHARS) -> str:
    """The last line of ``journal`` that looks like why the engine ended (``_CAUSE``), without journalctl's prefix,
    cut to ``limit`` characters; "" when none does.

    Never a key: each of ``secrets`` (the api_key this side knows) and any value the line writes as a key
    (``_vllm_client.redact_key_words``: a key rotation's next key, which this side does not know) is hidden
    before the line is cut, so a key cut in two cannot slip past Ansible's no_log either.
    """
    for line in reversed(list(journal or [])):
        text = _JOURNAL_PREFIX.sub("", str(line).rsplit("\r", maxsplit=1)[-1].strip(), count=1)
        if not _CAUSE.search(text):
            continue
        text = client.redact_key_words(client.redact(text, list(secrets or ())))
        return text if len(text) <= limit else text[:limit - 3] + "..."
    return ""


def hide_keys(lines, secrets=()) -> list:
    """``lines`` with every key hidden as :func:`cause_line` hides it: each of ``secrets`` (the api_key, which
    Ansible's no_log hides as well, but not once a line holding it is cut) and any value written as a key."""
    return [client.redact_key_words(client.redact(str(line), list(secrets or ()))) for line in lines or ()]


def _read_journal(unit_journal, api_key=None) -> list:
    """``unit_journal()``'s lines, keys hidden (:func:`hide_keys`); none without it."""
    return hide_keys(unit_journal(), [api_key]) if unit_journal is not None else []


def _quoted(journal, api_key=None):
    """The words a failed start's headline gives its journal's cause line (:func:`cause_line`), "" without one."""
    line = cause_line(journal, [api_key])
    return ' - its journal says: "%s"' % line if line else ""


def _with_lines(message, blocks):
    """``message``, then each ``(title, lines)`` block that has lines, then :data:`END_OF_LINES` after them."""
    blocks = [(title, lines) for title, lines in blocks if lines]
    if not blocks:
        return message
    return message + "".join("\n%s:\n%s" % (title, "\n".join(lines)) for title, lines in blocks) + "\n" + END_OF_LINES


# A start-up wait gives up at the unit's second crash since it began: one crash may be a
# passing fault that the restart cures; two in a row are a loop that waiting will not end.
CRASH_LOOP_CRASHES = 2


class CrashCounter:
    """How many runs of a unit ended (crashed) since the first read, from ``systemctl show``.

    The first :meth:`update` is the baseline. After it, a run ended when ``NRestarts``
    went up (by as many as it went up: systemd's ``Restart=`` started it again, maybe
    more than once between two reads), when the main process started again while
    ``NRestarts`` did not go up (someone ran ``systemctl restart``, which also resets
    ``NRestarts``), or as soon as the unit waits to be restarted (SubState
    ``auto-restart``: the run has ended, systemd starts the next after ``RestartSec=``);
    that run is not counted again when ``NRestarts`` then goes up. systemd counts a restart
    before it starts the new main process (``ExecStartPre=`` runs in between: seconds for a
    container unit), so a main process start seen after the ``NRestarts`` that announced it
    is that restart's, not another run. ``last_at`` is the clock reading of the read that
    counted the last crash.
    """

    def __init__(self):
        self.crashes = 0
        self.last_at = None
        self._seen = False
        self._n_restarts = None
        self._main_started = None
        # A run that ended was counted while waiting for its restart.
        self._pending = False
        # A restart was counted whose new main process had not started at that read.
        self._start_owed = False
        # The unit waits to be restarted (auto-restart) and that ended run is counted already:
        # systemd raises NRestarts while the unit still waits, when it queues the restart.
        self._episode = False

    def state(self) -> dict:
        """What the counter knows, as JSON-able data (:meth:`from_state` continues from it)."""
        return {"crashes": self.crashes, "last_at": self.last_at, "seen": self._seen, "n_restarts": self._n_restarts,
                "main_started": self._main_started, "pending": self._pending, "start_owed": self._start_owed, "episode": self._episode}

    @classmethod
    def from_state(cls, state: dict) -> "CrashCounter":
        """A counter that goes on from :meth:`state` (a wait resumed in another process on the same host)."""
        counter = cls()
        counter.crashes = int(state.get("crashes") or 0)
        counter.last_at = state.get("last_at")
        counter._seen = bool(state.get("seen"))
        counter._n_restarts = state.get("n_restarts")
        counter._main_started = state.get("main_started")
        counter._pending = bool(state.get("pending"))
        counter._start_owed = bool(state.get("start_owed"))
        counter._episode = bool(state.get("episode"))
        return counter

    def update(self, unit: "UnitState", now: float) -> int:
        """Count what changed since the last read; return the crashes since the baseline."""
        waiting_restart = unit.sub_state == "auto-restart"
        if not self._seen:
            self._seen = True
            self._n_restarts, self._main_started = unit.n_restarts, unit.main_started
            # A run that ended before the wait began is not the wait's: nor is its restart.
            self._pending = self._episode = waiting_restart
            return 0
        new = 0
        main_started_again = bool(unit.main_started and self._main_started and unit.main_started != self._main_started)
        if unit.n_restarts is not None and self._n_restarts is not None and unit.n_restarts > self._n_restarts:
            new = unit.n_restarts - self._n_restarts
            self._start_owed = not main_started_again
            if self._pending:
                new -= 1
                self._pending = False
            if waiting_restart:
                self._episode = True
        elif main_started_again:
            if self._start_owed:
                self._start_owed = False
            else:
                new = 1
        if not waiting_restart:
            self._episode = False
        elif not self._episode:
            new += 1
            self._pending = self._episode = True
        if unit.n_restarts is not None:
            self._n_restarts = unit.n_restarts
        if unit.main_started:
            self._main_started = unit.main_started
        if new:
            self.crashes += new
            self.last_at = now
        return self.crashes


@dataclasses.dataclass
class WaitResult:
    """How :func:`wait` ended.

    ``ok`` is True when the wanted state was reached, or when ``timeout`` was 0 and
    the single probe's state is simply reported. ``reason`` is one of ``reached``,
    ``probed`` (timeout 0), ``timeout``, ``unit_down``, ``crash_loop`` (the unit
    crashed :data:`CRASH_LOOP_CRASHES` times since the wait began), ``rejected`` (the
    server refused the api_key), ``config_error`` (the probe could not send its request:
    this side's configuration is wrong, whichever state was waited for). ``elapsed`` is in seconds, measured with the ``clock``
    given to :func:`wait`. ``message`` explains a failure (``None`` when ok).
    ``crashes`` counts the unit's runs that ended since the wait began (0 without a unit).
    ``reason`` ``waiting`` (``ok`` True): the wait goes on, ``report_after`` seconds of this
    call passed; ``resume`` is then what the next call continues from, and ``last_unit``
    the unit's last state read (None without a unit, or before the first read).
    """

    ok: bool
    reason: str
    last: ProbeResult
    url: str
    elapsed: float
    attempts: int
    message: str | None = None
    unit: UnitState | None = None
    journal: list = dataclasses.field(default_factory=list)
    processes: list = dataclasses.field(default_factory=list)
    crashes: int = 0
    resume: dict | None = None
    last_unit: UnitState | None = None


def wait(
    base_url: str,
    api_key: str | None = None,
    model: str | None = None,
    kind: str = "health",
    wait_for: str = "serving",
    timeout: float = 1800.0,
    interval: float = 2.0,
    generate_timeout: float = GENERATE_TIMEOUT,
    request_timeout: float = REQUEST_TIMEOUT,
    unit_state=None,
    unit_journal=None,
    unit_processes=None,
    clock=time.monotonic,
    sleep=time.sleep,
    session=None,
    report_after: float | None = None,
    resume: dict | None = None,
) -> WaitResult:
    """Probe every ``interval`` seconds until the endpoint is in ``wait_for`` or ``timeout`` seconds passed.

    ``wait_for`` ``serving`` waits for status ``serving``; ``dead`` waits until the
    endpoint is no longer serving (any other status: a killed engine reports
    ``dead`` for a few seconds, then its API server exits and the port refuses,
    ``loading``). ``timeout`` 0 probes once and reports the state (``ok`` True)
    whatever it is. The deadline is checked between probes, so the wait can run
    over by at most one probe (a few request timeouts plus ``generate_timeout``).

    Fails fast, without waiting for the deadline, when:

    * the server answers 401/403 (api_key rejected; waiting cannot fix that);
    * the probe could not send its request (status ``config_error``: an api_key that is not
      a bearer token, a URL requests refuses), also when waiting for ``dead``: the server was
      never asked, so it cannot be taken for gone;
    * waiting for ``serving``, ``unit_state()`` returns a :class:`UnitState` that is
      :attr:`UnitState.down`. ``unit_journal()`` is then called once and its lines
      land in ``WaitResult.journal``. ``unit_state`` is only read while the
      endpoint is not serving, after each probe. It may raise
      ``_systemd.UnitStateError``; that propagates;
    * waiting for ``serving``, the unit crashed the second time since the wait began
      (:class:`CrashCounter` over the ``unit_state()`` reads; the first read is the
      baseline): at the first read after that crash, within ``interval`` plus one
      probe, with the journal as above (reason ``crash_loop``), instead of waiting
      for systemd's start limit or the deadline.

    On a timeout, ``unit_journal()`` and ``unit_processes()`` (what each process of
    the unit is doing, see ``_systemd.process_lines``) are called once, when given, and
    their lines end the message: a start-up that never finishes says why.

    ``clock`` (seconds, monotonic) and ``sleep`` are injectable so tests control time.

    A long wait can be cut into calls, each of which returns to say how it goes (a start-up
    takes 5-20 minutes on GB10; a process that waits cannot print): with ``report_after``
    (seconds), a call that has not ended the wait after that long returns reason
    ``waiting`` with ``resume``, and a call given that ``resume`` goes on with the same
    wait - the same start (so the same deadline, ``timeout`` after the first call began),
    attempts and crash count (a crash loop is still caught at the second crash of the whole
    wait). ``resume`` holds readings of ``clock`` (by default the host's monotonic clock,
    the same in every process), so only a call on the same host continues it; one whose
    start lies in the future (a rebooted host) starts afresh.
    """
    if kind not in PROBE_KINDS:
        raise ValueError("probe must be one of %s, got %r" % (", ".join(PROBE_KINDS), kind))
    if wait_for not in WAIT_FOR:
        raise ValueError("wait_for must be one of %s, got %r" % (", ".join(WAIT_FOR), wait_for))
    if timeout < 0:
        raise ValueError("timeout must be 0 or more seconds, got %s" % timeout)
    if interval <= 0:
        raise ValueError("interval must be more than 0 seconds, got %s" % interval)
    if generate_timeout <= 0:
        raise ValueError("generate_timeout must be more than 0 seconds, got %s" % generate_timeout)
    if report_after is not None and report_after <= 0:
        raise ValueError("report_after must be more than 0 seconds, got %s" % report_after)
    base = client.base_url(base_url)

    call_started = started = clock()
    attempts = 0
    crashes = CrashCounter()
    if resume:
        try:
            earlier = float(resume["started"])
            if earlier <= started:
                started = earlier
                attempts = int(resume.get("attempts") or 0)
                crashes = CrashCounter.from_state(resume.get("crashes") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError("resume must be what an earlier call of the same wait returned, got %r" % (resume,)) from exc
    deadline = started + timeout
    unit = None
    while True:
        attempts += 1
        last = probe(base, api_key=api_key, model=model, kind=kind, timeout=request_timeout,
                     session=session, generate_timeout=generate_timeout)
        seen = "last status %s, last error: %s" % (last.status, last.error)

        if last.status == CONFIG_ERROR:
            message = "could not ask vLLM at %s: %s" % (base, last.error)
            return _ended(False, "config_error", last, base, clock() - started, attempts, message, crashes=crashes.crashes)

        if last.http_status in REJECTED:
            message = "vLLM at %s rejected the api_key (HTTP %s); waiting cannot fix that; %s" % (
                base, last.http_status, seen)
            return _ended(False, "rejected", last, base, clock() - started, attempts, message, crashes=crashes.crashes)

        if wait_for == "serving":
            reached = last.status == SERVING
        else:
            reached = last.status != SERVING
        if reached:
            return _ended(True, "reached", last, base, clock() - started, attempts, crashes=crashes.crashes)

        if unit_state is not None and wait_for == "serving":
            unit = unit_state()
            if unit is not None and crashes.update(unit, clock()) >= CRASH_LOOP_CRASHES:
                journal = _read_journal(unit_journal, api_key)
                elapsed = clock() - started
                message = ("systemd unit %s crashed %d times since the wait for vLLM at %s began %ss ago (NRestarts %s, "
                           "%s): a crash loop, giving up%s (%d attempts, probe %s); %s" % (
                               unit.name, crashes.crashes, base, _fmt(elapsed), unit.n_restarts, unit.describe(),
                               _quoted(journal, api_key), attempts, kind, seen))
                message = _with_lines(message, [("Last %d journal lines of %s" % (len(journal), unit.name), journal)])
                return _ended(False, "crash_loop", last, base, elapsed, attempts, message, unit, journal,
                              crashes=crashes.crashes)
            if unit is not None and unit.down:
                journal = _read_journal(unit_journal, api_key)
                elapsed = clock() - started
                message = "systemd unit %s is %s (%s) after %ss of waiting for vLLM at %s to be serving%s (%d attempts, probe %s); %s" % (
                    unit.name, unit.active_state, unit.describe(), _fmt(elapsed), base, _quoted(journal, api_key),
                    attempts, kind, seen)
                message = _with_lines(message, [("Last %d journal lines of %s" % (len(journal), unit.name), journal)])
                return _ended(False, "unit_down", last, base, elapsed, attempts, message, unit, journal,
                              crashes=crashes.crashes)

        if timeout == 0:
            return _ended(True, "probed", last, base, clock() - started, attempts, crashes=crashes.crashes)

        now = clock()
        if now >= deadline:
            wanted = "serving" if wait_for == "serving" else "dead (no longer serving)"
            message = "vLLM at %s was not %s after %ss (timeout %ss, %d attempts, probe %s); %s" % (
                base, wanted, _fmt(now - started), _fmt(timeout), attempts, kind, seen)
            journal = _read_journal(unit_journal, api_key)
            processes = list(unit_processes()) if unit_processes is not None else []
            message = _with_lines(message, [("Last %d journal lines of the unit" % len(journal), journal),
                                            ("The unit's processes (%s)" % PROCESS_COLUMNS, processes)])
            result = _ended(False, "timeout", last, base, now - started, attempts, message, journal=journal,
                            crashes=crashes.crashes)
            result.processes = processes
            result.last_unit = unit
            return result
        sleep(min(interval, deadline - now))
        # After the sleep: the next call probes at once, as this loop would have.
        now = clock()
        if report_after is not None and now - call_started >= report_after:
            result = _ended(True, "waiting", last, base, now - started, attempts, crashes=crashes.crashes)
            result.resume = {"started": started, "attempts": attempts, "crashes": crashes.state()}
            result.last_unit = unit
            return result


def _ended(ok, reason, last, url, elapsed, attempts, message=None, unit=None, journal=None, crashes=0) -> WaitResult:
    return WaitResult(ok=ok, reason=reason, last=last, url=url, elapsed=elapsed, attempts=attempts,
                      message=message, unit=unit, journal=journal or [], crashes=crashes)


def systemd_unit_state(unit: str, run_command, systemctl: str = "systemctl") -> UnitState:
    """Read what a start-up wait needs of a unit (``_systemd.show``); raises ``_systemd.UnitStateError``.

    ``run_command(argv)`` returns ``(rc, stdout, stderr)`` like ``AnsibleModule.run_command``.
    """
    return systemd.show(unit, run_command, systemctl, properties=WAIT_PROPERTIES)
