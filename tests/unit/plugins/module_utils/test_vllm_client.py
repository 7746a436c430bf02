# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_vllm_client.py, the HTTP basics of every reader of vLLM."""

from __future__ import annotations

import json
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_client as client


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
