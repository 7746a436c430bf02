# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/vllm_client.py, the HTTP basics of every reader of vLLM."""

from __future__ import annotations

import json
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_client as client


def test_no_proxies_is_a_fresh_dict_each_time():
    first = client.no_proxies()
    first["http"] = "http://proxy:3128"
    assert client.no_proxies() == {"http": None, "https": None, "all": None}


# The forms every caller is given: the OpenAI base URL, the server's root, with or without a slash.
@pytest.mark.parametrize("given, base", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
    ("https://spark-a:8000/", "https://spark-a:8000"),
    ("http://spark-a", "http://spark-a"),
    ("http://[::1]:8000/v1", "http://[::1]:8000"),
    (" http://spark-a:8000/v1 ", "http://spark-a:8000"),
    ("https://gw.example:443/vllm/v1/", "https://gw.example:443/vllm"),
])
def test_base_url(given, base):
    assert client.base_url(given) == base


@pytest.mark.parametrize("bad, message", [
    ("", "url must be an http:// or https:// URL, got ''"),
    (None, "url must be an http:// or https:// URL, got None"),
    ("127.0.0.1:8000", "url must be an http:// or https:// URL with a host, got '127.0.0.1:8000'"),
    ("ftp://host", "url must be an http:// or https:// URL with a host, got 'ftp://host'"),
    ("http://", "url must be an http:// or https:// URL with a host, got 'http://'"),
])
def test_base_url_rejects(bad, message):
    with pytest.raises(ValueError) as raised:
        client.base_url(bad)
    assert str(raised.value) == message


def test_headers():
    assert client.headers(None) == {"Accept": "application/json"}
    assert client.headers("k", accept="text/plain", **{"User-Agent": "x"}) == {
        "Accept": "text/plain", "User-Agent": "x", "Authorization": "Bearer k"}


def test_headers_without_accept():
    assert client.headers(None, accept=None) == {}
    assert client.headers("k", accept=None) == {"Authorization": "Bearer k"}
    assert client.headers("", accept=None, **{"Content-Type": "application/json"}) == {"Content-Type": "application/json"}


@pytest.fixture
def server():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            body = {"/state": b'{"ok": true}', "/list": b"[1]"}.get(self.path, b"nope")
            self.send_response(200 if self.path != "/missing" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_get_json(server, monkeypatch):
    # Environment proxies never reroute a direct read.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert client.get_json(server + "/state", 5) == {"ok": True}
    with pytest.raises(ValueError, match="did not answer a JSON object"):
        client.get_json(server + "/list", 5)
    with pytest.raises(Exception):
        client.get_json(server + "/missing", 5)
    with pytest.raises(json.JSONDecodeError):
        client.get_json(server + "/other", 5)


def test_session_ignores_environment_proxies(server, monkeypatch):
    # A proxy that refuses every connection: a request through it would fail.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with client.session() as session:
        assert session.trust_env is False
        assert session.get(server + "/state", timeout=5).json() == {"ok": True}


def test_session_names_the_missing_library(monkeypatch):
    monkeypatch.setattr(client, "requests", None)
    with pytest.raises(RuntimeError, match="the Python library requests is required"):
        client.session()


def test_iter_sse_yields_events_then_done_and_skips_other_lines():
    lines = [": keep-alive", "event: message", 'data: {"choices": [{"delta": {"content": "Hi"}}]}', "",
             "id: 7", 'data:{"usage": {"completion_tokens": 1}}', "data: [DONE]", 'data: {"after": "done"}']
    events = list(client.iter_sse(lines))
    assert events == [{"choices": [{"delta": {"content": "Hi"}}]}, {"usage": {"completion_tokens": 1}}, client.SSE_DONE]


def test_iter_sse_reads_bytes():
    lines = [b'data: {"n": 1}', b"", b"data: [DONE]"]
    assert list(client.iter_sse(lines)) == [{"n": 1}, client.SSE_DONE]


def test_iter_sse_a_cut_stream_ends_without_done():
    events = list(client.iter_sse(['data: {"n": 1}', ""]))
    assert events == [{"n": 1}] and client.SSE_DONE not in events


def test_iter_sse_yields_error_events_as_they_are():
    # Whether an event is an error is the caller's rule; the iterator hands it over.
    lines = ['data: {"error": {"message": "engine died"}}', "data: [DONE]"]
    assert list(client.iter_sse(lines)) == [{"error": {"message": "engine died"}}, client.SSE_DONE]


@pytest.mark.parametrize("line, data", [
    ("data: {not json", "{not json"),
    (b"data: {\"a\": 1", '{"a": 1'),
    (b"data: \xff", "\ufffd"),
])
def test_iter_sse_an_event_that_is_not_json(line, data):
    events = client.iter_sse(['data: {"n": 1}', line, "data: [DONE]"])
    assert next(events) == {"n": 1}
    with pytest.raises(client.EventNotJSON) as raised:
        next(events)
    assert isinstance(raised.value, ValueError)
    assert raised.value.data == data and str(raised.value)


def test_require_names_the_library(monkeypatch):
    monkeypatch.setattr(client, "requests", None)
    monkeypatch.setattr(client, "REQUESTS_IMPORT_ERROR", "ModuleNotFoundError: No module named 'requests'")
    with pytest.raises(RuntimeError, match="the Python library requests is required"):
        client.require()


# --- the API key: a bearer token (RFC 6750 b64token), never quoted in a message ----------------------------

SECRET = "sk-7f3e9a2c41d86b05"


@pytest.mark.parametrize("key", [None, "", SECRET, "abc.DEF_123~+/-", "YWJjZA==", "a"])
def test_bearer_tokens_are_fit(key):
    assert client.api_key_problem(key) is None
    if key:
        assert client.headers(key, accept=None) == {"Authorization": "Bearer " + key}


@pytest.mark.parametrize("key, words", [
    # what `echo KEY | ansible-vault encrypt_string` stores
    (SECRET + "\n", "ends with a newline"),
    (SECRET + "\r\n", "ends with a newline"),
    (" " + SECRET, "whitespace"),
    ("sk 7f3e9a2c", "whitespace"),
    ('"%s"' % SECRET, "a quote"),
    ("'%s'" % SECRET, "a quote"),
    (SECRET + "\\", "a backslash"),
    ("sk-${HOME}7f3e", "a '$' or '%'"),
    ("sk-%h7f3e", "a '$' or '%'"),
    ("sk=7f3e9a2c", "'=' before its end"),
    ("==", "only '='"),
    ("clé-7f3e9a2c", "a non-ASCII character"),
    ("sk-\x007f3e9a2c", "a control character"),
    ("sk-7f3e,9a2c", "other punctuation"),
    (SECRET + "\nsecond", "a newline"),
    (12345, "is not a string (a int)"),
])
def test_keys_that_are_no_bearer_token_are_named_never_quoted(key, words):
    problem = client.api_key_problem(key)
    assert words in problem
    assert "7f3e" not in problem and "12345" not in problem
    with pytest.raises(client.ClientConfigError) as raised:
        client.headers(key)
    assert str(raised.value) == "the api_key " + problem


def test_requests_refusals_are_named_without_the_header():
    # requests' own check quotes the header value: the leak this guards against.
    with pytest.raises(requests.exceptions.InvalidHeader) as raised:
        requests.get("http://127.0.0.1:9/", headers={"Authorization": "Bearer %s\n" % SECRET}, timeout=1)
    assert SECRET in str(raised.value)
    words = client.config_error(raised.value)
    assert "InvalidHeader" in words and SECRET not in words
    assert "URL is not valid (InvalidURL)" in client.config_error(requests.exceptions.InvalidURL("http://[x"))
    assert "MissingSchema" in client.config_error(requests.exceptions.MissingSchema("spark-a:8000"))
    encode = UnicodeEncodeError("latin-1", "Bearer " + SECRET, 7, 8, "ordinal not in range(256)")
    assert SECRET not in client.config_error(encode)
    assert client.config_error(client.ClientConfigError("the api_key ends with a newline")) == \
        "the api_key ends with a newline"
    # what the server side did is no configuration error
    for exc in (requests.exceptions.ConnectionError("refused"), requests.exceptions.ReadTimeout("slow"), OSError(5)):
        assert client.config_error(exc) is None


def test_redact_hides_the_key_and_its_escaped_form():
    text = "header value: 'Bearer %s\\n' and %s" % (SECRET, SECRET)
    assert client.redact(text, [SECRET + "\n"]) == "header value: 'Bearer <hidden>' and <hidden>"
    assert client.redact(text, [None, ""]) == text
    assert client.redact(None, [SECRET]) is None
