# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``fake_openai``: a loopback HTTP server with the shape of vLLM's streamed chat API; ``metrics_server``: one that
serves recorded ``/metrics`` texts (vllm_metrics's and workload_profile's module tests); ``closed_port``.

A stand-in for the HTTP shape only (``GET /v1/models`` with ``max_model_len``, ``POST
/v1/chat/completions`` answered with chunked server-sent events, a role event, content
events, a ``usage`` event and ``data: [DONE]``), not vLLM: it generates nothing and its
token counts are whatever the test sets. Real engines are measured in the lab.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def prompt_tokens_of(body):
    """The fake's token count of a prompt: 4 per message plus 4 per 3 words (about English BPE)."""
    words = sum(len(m["content"].split()) for m in body["messages"])
    return 4 * len(body["messages"]) + (words * 4 + 2) // 3


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send_json(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, text):
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": self.server.model, "object": "model", "max_model_len": self.server.max_model_len}]})
        else:
            self._send_json(404, {"error": "not found"})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            server.bodies.append(body)
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        self._counted = True
        try:
            self._answer(body)
        finally:
            self._release()

    def _release(self):
        # Out of the count once the answer's content is written, before its closing events (usage, an error,
        # [DONE], the last chunk): a client that has read up to one of them may send its next request, which must
        # not find this one still counted (max_in_flight read 4 at concurrency 3 under load, twice: counted out
        # before the last chunk only, the client had stopped at [DONE]).
        if getattr(self, "_counted", False):
            self._counted = False
            with self.server.lock:
                self.server.in_flight -= 1

    def _answer(self, body):
        server = self.server
        mode = server.mode
        if mode == "status":
            self._release()
            self._send_json(503, {"error": {"message": "no engine", "code": 503}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        if server.upstream:
            self.send_header("X-Factory-Floor-Upstream", server.upstream)
        self.end_headers()
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": body["model"]}
        time.sleep(server.first_delay)
        self._chunk("data: %s\n\n" % json.dumps(dict(base, choices=[
            {"index": 0, "delta": {"role": "assistant", "content": ""}}], usage=None)))
        if mode == "error_event":
            self._release()
            self._chunk('data: {"error": {"message": "engine died", "code": 500}}\n\n')
            self._chunk("data: [DONE]\n\n")
            self._chunk("")
            return
        for number in range(server.events):
            if number:
                time.sleep(server.between)
            self._chunk("data: %s\n\n" % json.dumps(dict(base, choices=[
                {"index": 0, "delta": {"content": "tok%d " % number}}], usage=None)))
        self._release()
        if mode == "cut":
            self._chunk("")
            return
        if mode != "no_usage":
            completion = server.completion_tokens if server.completion_tokens is not None else body["max_tokens"]
            self._chunk("data: %s\n\n" % json.dumps(dict(base, choices=[], usage={
                "prompt_tokens": prompt_tokens_of(body), "completion_tokens": completion,
                "total_tokens": prompt_tokens_of(body) + completion})))
        self._chunk("data: [DONE]\n\n")
        self._chunk("")

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


@pytest.fixture
def fake_openai():
    """The server; set its attributes to shape answers. ``.base`` is its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.lock = threading.Lock()
    httpd.model = "lab-chat"
    httpd.max_model_len = 4096
    httpd.mode = "ok"                  # ok | status | error_event | cut | no_usage
    httpd.first_delay = 0.0            # seconds before the first event
    httpd.between = 0.0                # seconds between content events
    httpd.events = 3                   # content events per answer
    httpd.completion_tokens = None     # usage.completion_tokens (None: the request's max_tokens)
    httpd.upstream = None              # X-Factory-Floor-Upstream header
    httpd.bodies = []
    httpd.in_flight = 0
    httpd.max_in_flight = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base = "http://127.0.0.1:%d" % httpd.server_address[1]
    yield httpd
    httpd.shutdown()
    httpd.server_close()


class _MetricsHandler(BaseHTTPRequestHandler):
    """Serves ``server.routes[path]`` (a list of (status, body), taken in order, last one repeated) and notes
    ``(path, Authorization header)`` in ``server.seen``."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        queue = self.server.routes.get(self.path) or [(404, "not found\n")]
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


@pytest.fixture
def metrics_server():
    """The server of engines' ``/metrics``; set ``.routes``, read ``.seen``. ``.base`` is its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    httpd.daemon_threads = True
    httpd.routes, httpd.seen = {}, []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.base = "http://127.0.0.1:%d" % httpd.server_address[1]
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 that nothing listens on (connection refused)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    port = httpd.server_address[1]
    httpd.server_close()
    return port
