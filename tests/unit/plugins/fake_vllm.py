# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Stand-ins the unit tests share: a loopback HTTP server that answers like vLLM, a port
nothing listens on, and a fake clock for waits (nothing in requests is mocked)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeVLLM:
    """A loopback HTTP server that answers like vLLM; change its attributes to change its state."""

    def __init__(self):
        self.health_status = 200
        self.health_delay = 0.0
        self.models = ["tiny-llama"]
        self.roots = {}  # model id -> the "root" /v1/models gives (vLLM: the --model it loaded)
        self.models_status = 200
        self.version = "0.32.0"
        self.completion_status = 200
        self.completion_delay = 0.0
        self.api_key = None  # when set, /v1/* answers 401 without "Bearer <api_key>"
        self.requests = []  # (method, path, headers, json body or None)
        self.release = threading.Event()  # ends every delay at teardown
        self.port = None
        self._server = None
        self._thread = None

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def start(self, port: int = 0) -> "FakeVLLM":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _answer(self, status, payload):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((method, self.path, dict(self.headers), body))
                if self.path.startswith("/v1/") and fake.api_key is not None:
                    if self.headers.get("Authorization") != "Bearer %s" % fake.api_key:
                        return self._answer(401, {"error": "Unauthorized"})
                if self.path == "/health":
                    fake.release.wait(fake.health_delay)
                    return self._answer(fake.health_status, {})
                if self.path == "/version":
                    return self._answer(200, {"version": fake.version})
                if self.path == "/v1/models":
                    data = [dict({"id": m, "object": "model", "owned_by": "vllm"},
                                 **({"root": fake.roots[m]} if m in fake.roots else {})) for m in fake.models]
                    return self._answer(fake.models_status, {"object": "list", "data": data})
                if self.path == "/v1/completions" and method == "POST":
                    fake.release.wait(fake.completion_delay)
                    return self._answer(fake.completion_status, {
                        "object": "text_completion", "model": body["model"],
                        "choices": [{"index": 0, "text": " world", "finish_reason": "length"}]})
                return self._answer(404, {"detail": "Not Found"})

            def do_GET(self):  # noqa: N802 - http.server's naming
                self._handle("GET")

            def do_POST(self):  # noqa: N802
                self._handle("POST")

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class FakeTime:
    """clock()/sleep() for wait(): sleep advances the clock and may run a hook (the world changing)."""

    def __init__(self, on_sleep=None):
        self.now = 1000.0
        self.sleeps = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


# --- probe(): one probe, every status ---------------------------------------------------------
