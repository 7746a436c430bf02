# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Is a vLLM OpenAI-compatible server serving? Probe it once (``_vllm_wait`` waits until it is).

Private to the collection. It imports only the standard library and ``requests``
(no Ansible), because besides ``factory_floor.llm.vllm_health`` it is installed with
small daemons on the hosts (the proxy membership checker, the watchdog), in the host
programs' package, and imported there as ``_host.vllm_health``.

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
``config_error``
    The request never left this client: its own configuration is wrong (an API key
    that is not a bearer token, a URL requests refuses). It says nothing about the
    server, so no caller may take it for ``dead``: waiting cannot end it and a
    restart cannot fix it. The message names what to fix and never quotes a header.
"""

from __future__ import annotations

import dataclasses
import time

from . import vllm_client as client

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
CONFIG_ERROR = "config_error"
STATUSES = (SERVING, LOADING, UNREACHABLE, DEAD, WRONG_MODEL, CONFIG_ERROR)

PROBE_KINDS = ("health", "models", "generate")

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


def _config_failure(method: str, url: str, exc: BaseException) -> "_Failed | None":
    """A _Failed with status config_error when ``exc`` was raised before the request was sent."""
    words = client.config_error(exc)
    return None if words is None else _Failed(CONFIG_ERROR, "%s %s not sent: %s" % (method, url, words))


def _get(session, url, headers, timeout):
    try:
        return session.get(url, headers=headers, timeout=timeout, proxies=_no_proxies(), allow_redirects=False)
    except (requests.exceptions.RequestException, UnicodeError) as exc:
        raise (_config_failure("GET", url, exc)
               or _Failed(classify_connection_error(exc), _describe_error("GET", url, exc, timeout))) from exc


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
    except (requests.exceptions.RequestException, UnicodeError) as exc:
        raise (_config_failure("POST", url, exc)
               or _Failed(classify_connection_error(exc), _describe_error("POST", url, exc, timeout))) from exc
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
    ``session`` is a ``requests.Session`` to reuse; by default a fresh one
    (``_vllm_client.session()``, nothing from the environment) is used and
    closed, so no stale keep-alive connection survives a restart.
    ``health_first`` False (kind ``generate`` only) goes straight to the 1-token
    completion, without ``/health``, ``/version`` or, when ``model`` is given,
    ``/v1/models``: the watchdog's check of an engine whose ``/health`` does not
    answer in time under load, where only the generation tells slow from dead.
    """
    if not HAS_REQUESTS:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
    if kind not in PROBE_KINDS:
        raise ValueError("kind must be one of %s, got %r" % (", ".join(PROBE_KINDS), kind))
    base = client.base_url(base_url)
    try:
        headers = _headers(api_key)
    except client.ClientConfigError as exc:
        return ProbeResult(status=CONFIG_ERROR, error="%s: no request sent (fix the key the caller was given)" % exc)
    own_session = session is None
    if own_session:
        session = client.session()
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
        # An answer's text is the server's: it never holds the key, unless a proxy echoes headers.
        result.error = client.redact(failed.error, [api_key])
        result.http_status = failed.http_status
    finally:
        result.latency = time.monotonic() - started
        if own_session:
            session.close()
    return result
