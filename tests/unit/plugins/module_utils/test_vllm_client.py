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


def test_headers():
    assert client.headers(None) == {"Accept": "application/json"}
    assert client.headers("k", accept="text/plain", **{"User-Agent": "x"}) == {
        "Accept": "text/plain", "User-Agent": "x", "Authorization": "Bearer k"}


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


def test_require_names_the_library(monkeypatch):
    monkeypatch.setattr(client, "requests", None)
    monkeypatch.setattr(client, "REQUESTS_IMPORT_ERROR", "ModuleNotFoundError: No module named 'requests'")
    with pytest.raises(RuntimeError, match="the Python library requests is required"):
        client.require()
