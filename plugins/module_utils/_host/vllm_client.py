# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTTP basics every client of a vLLM engine shares: the ``requests`` guard, the
server's base URL, no environment proxies, the API key header, one JSON GET and the
events of a streamed answer.

Standard library and ``requests`` only; the daemons and the standalone clients (the
probe client, the benchmarks' load generator) load it from their package (``_host``).
It owns its import guard, so nothing here imports back from a caller.
"""

from __future__ import annotations

import json
import re
import traceback
from urllib.parse import urlsplit, urlunsplit

try:
    import requests
except ImportError:
    requests = None
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None


# What iter_sse yields for ``data: [DONE]``, the end of a stream that was not cut.
SSE_DONE = object()


class EventNotJSON(ValueError):
    """A ``data:`` line that is not JSON; ``data`` holds the line's text, the message is the parser's."""

    def __init__(self, message: str, data: str):
        super().__init__(message)
        self.data = data


def base_url(url: str) -> str:
    """Return the server's base URL: scheme, host, port, without a trailing ``/`` or ``/v1``.

    OpenAI clients are configured with ``http://host:8000/v1``; vLLM's ``/health``
    and ``/version`` live at the root, so both forms are accepted.
    Raises ``ValueError`` when the URL is not http(s) with a host.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url must be an http:// or https:// URL, got %r" % (url,))
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http:// or https:// URL with a host, got %r" % (url,))
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def no_proxies() -> dict:
    """Per-request ``proxies`` that switch off HTTP_PROXY, HTTPS_PROXY and ALL_PROXY.

    A reader of an engine has to reach the engine itself, not whatever a proxy answers
    for it. requests adds environment proxies to the dict it is given, so every request
    gets a fresh one.
    """
    return {"http": None, "https": None, "all": None}


def api_key_problem(api_key) -> str | None:
    """What makes ``api_key`` unfit for ``Authorization: Bearer``, in words that never quote it; None when fit.

    A key is RFC 6750's b64token: letters, digits and ``-._~+/``, then ``=`` padding only at
    its end. None and "" mean no key. Anything else cannot be sent as it is (requests refuses
    a newline or a leading space in a header before it connects), or reaches the engine
    altered: systemd's ``EnvironmentFile=`` unquotes and unescapes what docker's
    ``--env-file`` passes as written, and the clients' key file is read stripped. Only the
    kind of character is named, never the key or a piece of it.
    """
    if api_key is None or api_key == "":
        return None
    if not isinstance(api_key, str):
        return "is not a string (a %s): quote it in the inventory" % type(api_key).__name__
    if _BEARER_TOKEN.match(api_key):
        return None
    if not api_key.strip("="):
        return "holds only '=' (the padding that may end a token, with no token before it)"
    if api_key != api_key.rstrip("\r\n") and _BEARER_TOKEN.match(api_key.rstrip("\r\n")):
        return ("ends with a newline (what `echo KEY | ansible-vault encrypt_string` stores): encrypt it with "
                "`printf %s KEY | ansible-vault encrypt_string --stdin-name vllm_api_key`, or remove the newline")
    kinds = []
    for char in api_key:
        kind = _char_kind(char)
        if kind is not None and kind not in kinds:
            kinds.append(kind)
    return ("holds %s: an API key is sent as a bearer token (RFC 6750), so use letters, digits and - . _ ~ + / only, "
            "with = only at its end (for example the output of `openssl rand -hex 32`)" % ", ".join(kinds))


# RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*\Z")


def _char_kind(char: str) -> str | None:
    """The kind of a character a bearer token may not hold (None for one it may, ``=`` aside)."""
    if char == "=":
        return "'=' before its end"
    if re.match(r"[A-Za-z0-9\-._~+/]\Z", char):
        return None
    if char in "\r\n":
        return "a newline"
    if char in " \t":
        return "whitespace"
    if char == "\\":
        return "a backslash"
    if char in "\"'`":
        return "a quote"
    if char in "$%":
        return "a '$' or '%'"
    if ord(char) < 32 or ord(char) == 127:
        return "a control character"
    if ord(char) > 127:
        return "a non-ASCII character"
    return "other punctuation"


class ClientConfigError(ValueError):
    """A request this client cannot send as configured (an API key that is no bearer token, a URL
    requests refuses): the fault is on this side, so it never says anything about the server."""


def headers(api_key: str | None, accept: str | None = "application/json", **extra) -> dict:
    """Request headers: ``Accept``, the API key as a bearer token when there is one, and ``extra``.

    ``accept`` None leaves ``Accept`` out: ``headers(key, accept=None)`` is the API key alone.
    Raises :class:`ClientConfigError` (without the key in its message) when ``api_key`` is not a
    bearer token (:func:`api_key_problem`).
    """
    values = {"Accept": accept} if accept is not None else {}
    values.update(extra)
    if api_key:
        problem = api_key_problem(api_key)
        if problem is not None:
            raise ClientConfigError("the api_key %s" % problem)
        values["Authorization"] = "Bearer %s" % api_key
    return values


def config_error(exc: BaseException) -> str | None:
    """Words for an exception raised before a request left this client, else None.

    :class:`ClientConfigError`, and what requests refuses to send (a header value it will not
    write, an invalid URL or scheme, a header http.client cannot encode). Never the exception's
    own text where that could hold a header value (requests' InvalidHeader quotes it).
    """
    if isinstance(exc, ClientConfigError):
        return str(exc)
    if requests is not None:
        exceptions = requests.exceptions
        if isinstance(exc, exceptions.InvalidHeader):
            return "a request header is not valid (InvalidHeader; its value is not shown): check the api_key"
        if isinstance(exc, (exceptions.InvalidURL, exceptions.MissingSchema, exceptions.InvalidSchema,
                            exceptions.URLRequired)):
            return "the URL is not valid (%s)" % type(exc).__name__
    if isinstance(exc, UnicodeError):
        return "a request header or the URL cannot be encoded (%s; not shown): check the api_key" % type(exc).__name__
    return None


def redact(text, secrets) -> str | None:
    """``text`` with every secret of ``secrets`` (and its escaped form, as ``repr`` writes it) replaced by ``<hidden>``."""
    if not text:
        return text
    for secret in secrets or ():
        if not secret or not isinstance(secret, str):
            continue
        for form in (secret, repr(secret)[1:-1], secret.strip()):
            if len(form) >= 4:
                text = text.replace(form, "<hidden>")
    return text


# A key as a command line (--api-key K), an environment (VLLM_API_KEY=K), a config file (api-key: K)
# or vLLM's dump of its arguments ('api_key': ['K1', 'K2']) writes it, or as a request header
# (Bearer K): the words before it (group 1) and the key, to the end of its quotes or brackets
# (to the end of the text when they do not close).
_KEY_WORDS = re.compile(r"""(--api[_-]key(?:=|\s+)|api[_-]key['"]?\s*[:=]\s*|\bBearer\s+)"""
                        r"""(\[[^\]]*\]?|'[^']*'?|"[^"]*"?|[^\s,;)}\]]+)""", re.IGNORECASE)


def redact_key_words(text) -> str | None:
    """``text`` with every value written as a key (``_KEY_WORDS``) replaced by ``<hidden>``, whatever the key is:
    for text that may hold a key this side does not know (a journal line: the next key of a rotation)."""
    if not text:
        return text
    return _KEY_WORDS.sub(lambda found: found.group(1) + "<hidden>", text)


def require() -> None:
    """Raise RuntimeError naming the missing library when ``requests`` cannot be imported."""
    if requests is None:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)


def session():
    """A ``requests.Session`` that takes nothing from the environment (``trust_env`` off).

    So no HTTP_PROXY/ALL_PROXY (the client must reach the engine itself), no ``.netrc``
    and no REQUESTS_CA_BUNDLE. For a client that sends many requests; one session a
    thread, a session is not shared between threads.
    """
    require()
    new = requests.Session()
    new.trust_env = False
    return new


def get_json(url: str, timeout: float) -> dict:
    """GET ``url`` and return its JSON object; raises on a transport error, a status other than 2xx or other JSON."""
    require()
    response = requests.get(url, timeout=timeout, proxies=no_proxies(), allow_redirects=False)
    response.raise_for_status()
    data = response.json()
    if not isinstance(data, dict):
        raise ValueError("GET %s did not answer a JSON object" % url)
    return data


def iter_sse(lines):
    """Yield the JSON value of each ``data:`` line of a server-sent event stream, then :data:`SSE_DONE`.

    ``lines`` are the answer's lines (str or bytes, without newlines: ``iter_lines()``).
    Other lines (blank separators, ``:`` comments, ``event:``/``id:`` fields) are skipped.
    ``data: [DONE]`` yields :data:`SSE_DONE` and ends the iteration; when the lines end
    without it, nothing more is yielded, so a caller that did not see :data:`SSE_DONE`
    knows the stream was cut. Error events are yielded like any other: what makes one
    is the caller's rule. A ``data:`` line that is not JSON raises :class:`EventNotJSON`.
    """
    for line in lines:
        if isinstance(line, bytes):
            if not line.startswith(b"data:"):
                continue
            raw = line[5:].strip()
            try:
                data = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EventNotJSON(str(exc), raw.decode("utf-8", "replace")) from exc
        else:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
        if data == "[DONE]":
            yield SSE_DONE
            return
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise EventNotJSON(str(exc), data) from exc
        yield event
