# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Is a vLLM OpenAI-compatible server serving? Probe it once, or wait until it is.

Private to the collection. It imports only the standard library and ``requests``
(no Ansible), because besides ``factory_floor.llm.vllm_health`` it is installed next
to small daemons on the hosts (the proxy membership checker, the watchdog) and
imported there as the plain module ``_vllm_health``.

Statuses, decided from what the endpoint does (this is the contract the daemons
and the module share):

``serving``
    ``GET /health`` answered 200; for probe ``models`` and ``generate``
    ``GET /v1/models`` answered a model list; if a model is expected, it is in
    that list; for probe ``generate`` a 1-token completion finished in time.
``loading``
    The TCP connection was refused: nothing listens on the port. vLLM binds its
    port only once the engine is ready, so this is what start-up looks like (it
    is also what a stopped server looks like; the systemd unit tells them apart).
``unreachable``
    No TCP connection could be made for any other reason: the host name does not
    resolve, no route to the host or network, or the connect timed out.
``dead``
    A TCP connection was made but the server does not serve: ``/health``
    answered anything but 200 (vLLM answers 503 once its EngineCore died), no
    HTTP answer came within the request timeout, the connection was dropped
    mid-request, ``/v1/models`` or the completion answered an error, or (probe
    ``generate``) the 1-token completion did not finish within
    ``generate_timeout`` -- a hung engine (stopped EngineCore or Worker) still
    answers ``/health`` and ``/v1/models`` with 200 in about 1 ms, so only a
    generation shows it.
``wrong_model``
    ``/health`` answered 200 and ``/v1/models`` answered, but the expected model
    is not among the served ids.
"""

from __future__ import annotations

import dataclasses
import time

from urllib.parse import urlsplit, urlunsplit

try:  # installed next to a daemon on a host (tried first: nothing of Ansible is imported there)
    import _systemd as systemd  # type: ignore[no-redef]
    import _vllm_client as client  # type: ignore[no-redef]
except ImportError:  # inside the collection
    from ansible_collections.factory_floor.llm.plugins.module_utils import _systemd as systemd
    from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_client as client

# The unit's state a start-up wait reads (the one systemctl show reader is _systemd's), and
# what its processes and journal say when it does not start (also _systemd's).
PROCESS_COLUMNS = systemd.PROCESS_COLUMNS
container_pid = systemd.container_pid
process_lines = systemd.process_lines
systemd_journal = systemd.journal
unit_process_lines = systemd.unit_process_lines
UnitState = systemd.UnitState
UnitStateError = systemd.UnitStateError
# InvocationID names the current run's journal lines (what a start-up wait reads of vLLM's own log).
WAIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts",
                   "ExecMainStartTimestampMonotonic", "InvocationID")
WAIT_FIELDS = ("name", "load_state", "active_state", "sub_state", "result", "exec_main_status", "n_restarts",
               "main_started")

requests = client.requests
HAS_REQUESTS = client.HAS_REQUESTS
REQUESTS_IMPORT_ERROR = client.REQUESTS_IMPORT_ERROR
# urllib3 (requests' own transport, reached through requests so that only requests is
# imported) raises this for every failure to open the TCP connection.
_NEW_CONNECTION_ERRORS = (requests.packages.urllib3.exceptions.NewConnectionError,) if requests is not None else ()


SERVING = "serving"
LOADING = "loading"
UNREACHABLE = "unreachable"
DEAD = "dead"
WRONG_MODEL = "wrong_model"
STATUSES = (SERVING, LOADING, UNREACHABLE, DEAD, WRONG_MODEL)

PROBE_KINDS = ("health", "models", "generate")
WAIT_FOR = ("serving", "dead")

# Seconds allowed for the connect and for the answer of each plain GET
# (/health, /v1/models, /version). vLLM answers these in about 1 ms, even when
# its engine is hung.
REQUEST_TIMEOUT = 5.0
GENERATE_TIMEOUT = 30.0

# HTTP answers that mean "your api_key is not accepted": waiting cannot fix them.
REJECTED = (401, 403)

# The prompt of the 1-token generation. Any text works; the model only has to
# produce one token.
GENERATE_PROMPT = "Hello"


@dataclasses.dataclass
class ProbeResult:
    """What one probe saw.

    ``status`` is one of :data:`STATUSES`. ``models`` are the ids ``GET /v1/models``
    listed (empty when it was not asked or failed); ``roots`` maps each of them to
    its ``root``, the model directory or name vLLM loaded it from (vLLM's
    ``--model``), where the list gives one. ``version`` is vLLM's version from
    ``GET /version`` (``None`` when it did not answer). ``latency`` is the wall-clock
    time in seconds of the whole probe, every request it made included.
    ``error`` says why the status is not ``serving`` (``None`` when serving).
    ``http_status`` is the HTTP status of the answer that decided a ``dead``
    status, if there was one.
    """

    status: str
    models: list = dataclasses.field(default_factory=list)
    roots: dict = dataclasses.field(default_factory=dict)
    version: str | None = None
    latency: float = 0.0
    error: str | None = None
    http_status: int | None = None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


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
    server refused the api_key). ``elapsed`` is in seconds, measured with the ``clock``
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


def normalize_url(base_url: str) -> str:
    """Return the server's base URL: scheme, host, port, without a trailing ``/`` or ``/v1``.

    OpenAI clients are configured with ``http://host:8000/v1``; vLLM's ``/health``
    and ``/version`` live at the root, so both forms are accepted.
    Raises ``ValueError`` when the URL is not http(s) with a host.
    """
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError("url must be an http:// or https:// URL, got %r" % (base_url,))
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http:// or https:// URL with a host, got %r" % (base_url,))
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _causes(exc: BaseException):
    """Yield exc and everything it wraps (requests -> urllib3 -> socket)."""
    seen = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # urllib3's MaxRetryError keeps the real error in .reason; requests
        # passes exceptions on as the first argument of its own.
        wrapped = [current.__cause__, current.__context__, getattr(current, "reason", None)]
        wrapped.extend(getattr(current, "args", ()))
        todo.extend(w for w in wrapped if isinstance(w, BaseException))


def classify_connection_error(exc: BaseException) -> str:
    """Map a failed request to ``loading``, ``unreachable`` or ``dead`` (see the module docstring)."""
    causes = list(_causes(exc))
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return LOADING
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.ConnectTimeout):
        return UNREACHABLE
    # urllib3 wraps every other failure to open the connection (name resolution,
    # no route, network unreachable) in NewConnectionError.
    if any(isinstance(c, _NEW_CONNECTION_ERRORS) for c in causes):
        return UNREACHABLE
    # Connected, then no answer in time, or the connection dropped mid-request.
    return DEAD


def _describe_error(method: str, url: str, exc: BaseException, timeout: float) -> str:
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.ConnectTimeout):
        return "%s %s: TCP connect did not finish within %ss" % (method, url, _fmt(timeout))
    if HAS_REQUESTS and isinstance(exc, requests.exceptions.ReadTimeout):
        return "%s %s: connected, but no HTTP answer within %ss" % (method, url, _fmt(timeout))
    status = classify_connection_error(exc)
    if status == LOADING:
        return "%s %s: connection refused (nothing listens on the port yet)" % (method, url)
    # The socket-level error carries the useful words ("Name or service not known",
    # "Remote end closed connection without response"); requests' own exceptions
    # are OSErrors too, so leave them out.
    lowest = [c for c in _causes(exc) if isinstance(c, OSError) and not isinstance(c, requests.exceptions.RequestException)]
    shown = lowest[-1] if lowest else exc
    return "%s %s: %s" % (method, url, str(shown) or type(shown).__name__)


def _fmt(seconds: float) -> str:
    return ("%.3f" % seconds).rstrip("0").rstrip(".")


_no_proxies = client.no_proxies
_headers = client.headers


class _Failed(Exception):
    def __init__(self, status: str, error: str, http_status: int | None = None):
        super().__init__(error)
        self.status = status
        self.error = error
        self.http_status = http_status


def _get(session, url, headers, timeout):
    try:
        return session.get(url, headers=headers, timeout=timeout, proxies=_no_proxies(), allow_redirects=False)
    except requests.exceptions.RequestException as exc:
        raise _Failed(classify_connection_error(exc), _describe_error("GET", url, exc, timeout)) from exc


def _http_error(method: str, url: str, response) -> _Failed:
    text = (response.text or "").strip().replace("\n", " ")
    if len(text) > 200:
        text = text[:200] + "..."
    hint = " (the server rejected the api_key)" if response.status_code in REJECTED else ""
    return _Failed(DEAD, "%s %s answered HTTP %s%s%s" % (method, url, response.status_code, hint, ": " + text if text else ""), response.status_code)


def _model_list(session, base: str, headers: dict, timeout: float) -> list:
    """``[(id, root), ...]`` of ``GET /v1/models`` (``root`` None where it gives none)."""
    url = base + "/v1/models"
    response = _get(session, url, headers, timeout)
    if response.status_code != 200:
        raise _http_error("GET", url, response)
    try:
        data = response.json()["data"]
        return [(str(entry["id"]), None if entry.get("root") is None else str(entry["root"])) for entry in data]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _Failed(DEAD, "GET %s did not answer an OpenAI model list" % url, response.status_code) from exc


def _version(session, base: str, headers: dict, timeout: float) -> str | None:
    try:
        response = session.get(base + "/version", headers=headers, timeout=timeout, proxies=_no_proxies(), allow_redirects=False)
        if response.status_code == 200:
            version = response.json().get("version")
            return None if version is None else str(version)
    except (requests.exceptions.RequestException, ValueError, AttributeError):
        pass
    return None


def _generate(session, base: str, headers: dict, model: str, timeout: float, generate_timeout: float) -> None:
    url = base + "/v1/completions"
    body = {"model": model, "prompt": GENERATE_PROMPT, "max_tokens": 1, "temperature": 0}
    started = time.monotonic()
    try:
        response = session.post(url, headers=headers, json=body, timeout=(timeout, generate_timeout), proxies=_no_proxies(), allow_redirects=False)
    except requests.exceptions.ReadTimeout as exc:
        raise _Failed(DEAD, "1-token generation did not finish within %ss (POST %s, model %s)" % (
            _fmt(generate_timeout), url, model)) from exc
    except requests.exceptions.RequestException as exc:
        raise _Failed(classify_connection_error(exc), _describe_error("POST", url, exc, timeout)) from exc
    took = time.monotonic() - started
    if response.status_code != 200:
        raise _http_error("POST", url, response)
    # requests bounds each socket read, not the whole answer: check the total too.
    if took > generate_timeout:
        raise _Failed(DEAD, "1-token generation did not finish within %ss (took %ss; POST %s, model %s)" % (
            _fmt(generate_timeout), _fmt(took), url, model))
    try:
        choices = response.json()["choices"]
    except (ValueError, KeyError, TypeError):
        choices = None
    if not choices:
        raise _Failed(DEAD, "POST %s answered 200 without choices" % url, response.status_code)


def probe(
    base_url: str,
    api_key: str | None = None,
    model: str | None = None,
    kind: str = "health",
    timeout: float = REQUEST_TIMEOUT,
    session=None,
    generate_timeout: float = GENERATE_TIMEOUT,
    health_first: bool = True,
) -> ProbeResult:
    """Probe a vLLM server once and return what it saw.

    ``kind`` is ``health`` (``GET /health``), ``models`` (also ``GET /v1/models``
    must answer) or ``generate`` (also a 1-token ``POST /v1/completions`` with
    ``max_tokens`` 1 and ``temperature`` 0 for ``model``, or for the first served
    model when ``model`` is None, must finish within ``generate_timeout`` seconds).
    With ``model`` set, every kind also checks that ``/v1/models`` lists it.
    ``timeout`` (seconds) bounds the connect and the answer of each GET.
    Once ``/health`` answered 200, ``/v1/models`` and ``/version`` are read for the
    ``models`` and ``version`` fields in any case; with kind ``health`` and no
    ``model`` their failure does not change the status.
    ``session`` is a ``requests.Session`` to reuse; by default a fresh one is
    used and closed, so no stale keep-alive connection survives a restart.
    ``health_first`` False (kind ``generate`` only) goes straight to the 1-token
    completion, without ``/health``, ``/version`` or, when ``model`` is given,
    ``/v1/models``: the watchdog's check of an engine whose ``/health`` does not
    answer in time under load, where only the generation tells slow from dead.
    """
    if not HAS_REQUESTS:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
    if kind not in PROBE_KINDS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(PROBE_KINDS), kind))
    base = normalize_url(base_url)
    headers = _headers(api_key)
    own_session = session is None
    if own_session:
        session = requests.Session()
    started = time.monotonic()
    result = ProbeResult(status=SERVING)
    try:
        if not health_first and kind == "generate":
            target = model
            if target is None:
                listed = _model_list(session, base, headers, timeout)
                result.models = [model_id for model_id, dummy in listed]
                target = result.models[0] if result.models else None
            if target is None:
                raise _Failed(DEAD, "no model to generate with: /v1/models lists nothing")
            _generate(session, base, headers, target, timeout, generate_timeout)
            return result
        health_url = base + "/health"
        response = _get(session, health_url, headers, timeout)
        if response.status_code != 200:
            failed = _http_error("GET", health_url, response)
            if response.status_code == 503:
                failed.error += " (vLLM answers 503 once its engine is dead)"
            raise failed
        result.version = _version(session, base, headers, timeout)
        models_required = kind != "health" or model is not None
        try:
            listed = _model_list(session, base, headers, timeout)
            result.models = [model_id for model_id, dummy in listed]
            result.roots = {model_id: root for model_id, root in listed if root is not None}
        except _Failed:
            if models_required:
                raise
        if model is not None and model not in result.models:
            raise _Failed(WRONG_MODEL, "model %r is not served; /v1/models lists %s" % (
                model, ", ".join(result.models) if result.models else "nothing"))
        if kind == "generate":
            target = model if model is not None else (result.models[0] if result.models else None)
            if target is None:
                raise _Failed(DEAD, "no model to generate with: /v1/models lists nothing")
            _generate(session, base, headers, target, timeout, generate_timeout)
    except _Failed as failed:
        result.status = failed.status
        result.error = failed.error
        result.http_status = failed.http_status
    finally:
        result.latency = time.monotonic() - started
        if own_session:
            session.close()
    return result


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
    * waiting for ``serving``, ``unit_state()`` returns a :class:`UnitState` that is
      :attr:`UnitState.down`. ``unit_journal()`` is then called once and its lines
      land in ``WaitResult.journal``. ``unit_state`` is only read while the
      endpoint is not serving, after each probe. It may raise
      :class:`UnitStateError`; that propagates;
    * waiting for ``serving``, the unit crashed the second time since the wait began
      (:class:`CrashCounter` over the ``unit_state()`` reads; the first read is the
      baseline): at the first read after that crash, within ``interval`` plus one
      probe, with the journal as above (reason ``crash_loop``), instead of waiting
      for systemd's start limit or the deadline.

    On a timeout, ``unit_journal()`` and ``unit_processes()`` (what each process of
    the unit is doing, see :func:`process_lines`) are called once, when given, and
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
    base = normalize_url(base_url)

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
                journal = list(unit_journal()) if unit_journal is not None else []
                elapsed = clock() - started
                message = ("systemd unit %s crashed %d times since the wait for vLLM at %s began %ss ago (NRestarts %s, "
                           "%s): a crash loop, giving up (%d attempts, probe %s); %s" % (
                               unit.name, crashes.crashes, base, _fmt(elapsed), unit.n_restarts, unit.describe(),
                               attempts, kind, seen))
                if journal:
                    message += "\nLast %d journal lines of %s:\n%s" % (len(journal), unit.name, "\n".join(journal))
                return _ended(False, "crash_loop", last, base, elapsed, attempts, message, unit, journal,
                              crashes=crashes.crashes)
            if unit is not None and unit.down:
                journal = list(unit_journal()) if unit_journal is not None else []
                elapsed = clock() - started
                message = "systemd unit %s is %s (%s) after %ss of waiting for vLLM at %s to be serving (%d attempts, probe %s); %s" % (
                    unit.name, unit.active_state, unit.describe(), _fmt(elapsed), base, attempts, kind, seen)
                if journal:
                    message += "\nLast %d journal lines of %s:\n%s" % (len(journal), unit.name, "\n".join(journal))
                return _ended(False, "unit_down", last, base, elapsed, attempts, message, unit, journal,
                              crashes=crashes.crashes)

        if timeout == 0:
            return _ended(True, "probed", last, base, clock() - started, attempts, crashes=crashes.crashes)

        now = clock()
        if now >= deadline:
            wanted = "serving" if wait_for == "serving" else "dead (no longer serving)"
            message = "vLLM at %s was not %s after %ss (timeout %ss, %d attempts, probe %s); %s" % (
                base, wanted, _fmt(now - started), _fmt(timeout), attempts, kind, seen)
            journal = list(unit_journal()) if unit_journal is not None else []
            processes = list(unit_processes()) if unit_processes is not None else []
            if journal:
                message += "\nLast %d journal lines of the unit:\n%s" % (len(journal), "\n".join(journal))
            if processes:
                message += "\nThe unit's processes (%s):\n%s" % (PROCESS_COLUMNS, "\n".join(processes))
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
    """Read what a start-up wait needs of a unit (``_systemd.show``); raises :class:`UnitStateError`.

    ``run_command(argv)`` returns ``(rc, stdout, stderr)`` like ``AnsibleModule.run_command``.
    """
    return systemd.show(unit, run_command, systemctl, properties=WAIT_PROPERTIES)
