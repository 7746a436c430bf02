# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/probe_client.py against a loopback fake proxy.

The fake answers ``POST /v1/chat/completions`` like nginx in front of vLLM (200
with ``X-Factory-Floor-Upstream``, or 502/503); nothing in requests is mocked.
Runs are bounded by ``duration`` or a stop event, with short real-time waits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window
from ansible_collections.factory_floor.llm.plugins.module_utils._host import probe_client as pc
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import free_port
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout
from ansible_collections.factory_floor.llm.tests.unit.roles import nginx_proxy_harness as harness

PATH = "/v1/chat/completions"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))


class FakeProxy:
    """A loopback HTTP server answering chat completions; change its attributes to change its answers."""

    def __init__(self, certificate=None):
        # (certificate, key) files: the fake answers https, as the proxy with TLS.
        self.certificate = certificate
        self.status = 200
        self.upstream = "10.0.0.1:8000"
        self.proxy_host = None  # X-Factory-Floor-Proxy: which proxy host answered
        self.error_body = "<html><head><title>503 Service Temporarily Unavailable</title></head></html>"
        self.delay = 0.0
        self.requests = []  # (path, headers, json body)
        self.release = threading.Event()  # ends every delay at teardown
        self.port = None
        self._server = None

    @property
    def url(self):
        if self.certificate:
            return "https://localhost:%d%s" % (self.port, PATH)
        return "http://127.0.0.1:%d%s" % (self.port, PATH)

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                fake.requests.append((self.path, dict(self.headers), body))
                fake.release.wait(fake.delay)
                if fake.status == 200:
                    data = json.dumps({"object": "chat.completion", "model": body["model"], "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}]})
                else:
                    data = fake.error_body
                payload = data.encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json" if fake.status == 200 else "text/html")
                self.send_header("Content-Length", str(len(payload)))
                if fake.status == 200 and fake.upstream:
                    self.send_header("X-Factory-Floor-Upstream", fake.upstream)
                if fake.proxy_host:
                    self.send_header("X-Factory-Floor-Proxy", fake.proxy_host)
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.certificate:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.certificate)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self):
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def proxy():
    fake = FakeProxy().start()
    yield fake
    fake.stop()


@pytest.fixture
def session():
    with requests.Session() as sess:
        yield sess


PAYLOAD = {"model": "tiny-llama", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0}


def read_records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- one_request() ----------------------------------------------------------------------------


def test_one_request_ok_names_the_upstream(proxy, session):
    before = time.time()
    record = pc.one_request(session, proxy.url, PAYLOAD, {}, 5.0)
    assert record["status"] == 200 and record["error"] is None
    assert record["upstream"] == "10.0.0.1:8000"
    assert before <= record["t"] <= record["end"] <= time.time()
    # The latency is on the monotonic clock, t and end on the wall clock (read a moment apart).
    assert abs(record["latency"] - (record["end"] - record["t"])) < 0.005
    assert set(record) == {"t", "end", "status", "latency", "upstream", "proxy", "error"}
    assert record["proxy"] is None  # the fake sends no X-Factory-Floor-Proxy
    assert proxy.requests[0][0] == PATH and proxy.requests[0][2] == PAYLOAD


@pytest.mark.parametrize("status", [502, 503])
def test_one_request_error_status_keeps_the_answer(proxy, session, status):
    proxy.status = status
    proxy.error_body = "x" * 300
    record = pc.one_request(session, proxy.url, PAYLOAD, {}, 5.0)
    assert record["status"] == status and record["upstream"] is None
    assert record["error"] == "x" * 200


def test_one_request_refused_is_status_zero(session):
    record = pc.one_request(session, "http://127.0.0.1:%d%s" % (free_port(), PATH), PAYLOAD, {}, 5.0)
    assert record["status"] == 0 and record["upstream"] is None
    assert record["error"].startswith("ConnectionError: ")
    assert record["end"] >= record["t"]


def test_one_request_without_answer_in_time_is_status_zero(proxy, session):
    proxy.delay = 30
    started = time.monotonic()
    record = pc.one_request(session, proxy.url, PAYLOAD, {}, 0.3)
    assert time.monotonic() - started < 5
    assert record["status"] == 0 and record["error"].startswith("ReadTimeout: ")


def test_environment_proxy_is_not_used(proxy, session, monkeypatch):
    """The client measures our proxy: an HTTP_PROXY in the environment must not stand in between."""
    dead_proxy = "http://127.0.0.1:%d" % free_port()
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert pc.one_request(session, proxy.url, PAYLOAD, {}, 5.0)["status"] == 200


# --- run() ------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 2])
def test_run_stops_after_duration_and_writes_json_lines(proxy, tmp_path, concurrency):
    out = tmp_path / "probe.jsonl"
    started = time.monotonic()
    pc.run(proxy.url, "tiny-llama", str(out), interval=0.05, concurrency=concurrency, timeout=5.0,
           api_key="sk-test", duration=0.4)
    assert time.monotonic() - started < 5
    records = read_records(out)
    assert len(records) == len(proxy.requests) >= 1
    assert all(r["status"] == 200 and r["upstream"] == "10.0.0.1:8000" for r in records)
    # Every line is one whole record, keys sorted.
    assert all(line == json.dumps(json.loads(line), sort_keys=True) for line in out.read_text().splitlines())
    _path, headers, body = proxy.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    # Each request its own conversation: numbered, so a proxy routing by conversation spreads them.
    contents = [r[2]["messages"][0]["content"] for r in proxy.requests]
    assert sorted(contents) == sorted("Say OK. (request %d)" % n for n in range(1, len(contents) + 1))
    assert dict(body, messages=PAYLOAD["messages"]) == PAYLOAD


def test_run_appends(proxy, tmp_path):
    out = tmp_path / "probe.jsonl"
    out.write_text(json.dumps({"t": 1.0, "end": 1.1, "status": 200}) + "\n")
    pc.run(proxy.url, "tiny-llama", str(out), interval=0.05, duration=0.1)
    records = read_records(out)
    assert records[0]["t"] == 1.0 and len(records) >= 2


def test_run_records_failures_and_keeps_going(tmp_path):
    out = tmp_path / "probe.jsonl"
    pc.run("http://127.0.0.1:%d%s" % (free_port(), PATH), "tiny-llama", str(out), interval=0.05, duration=0.3)
    records = read_records(out)
    assert len(records) >= 2
    assert all(r["status"] == 0 and r["error"].startswith("ConnectionError") for r in records)


def test_run_until_stopped(proxy, tmp_path):
    out = tmp_path / "probe.jsonl"
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    started = time.monotonic()
    try:
        # A long interval: the stop event, not the next request, ends the wait.
        pc.run(proxy.url, "tiny-llama", str(out), interval=30, stop=stop)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 5
    assert len(read_records(out)) == 1 and "Authorization" not in proxy.requests[0][1]


def test_run_duration_zero_sends_nothing(proxy, tmp_path):
    out = tmp_path / "probe.jsonl"
    pc.run(proxy.url, "tiny-llama", str(out), interval=0.05, duration=0)
    assert not out.exists() and proxy.requests == []


# --- main() -----------------------------------------------------------------------------------


@pytest.fixture
def keep_signals():
    """main() installs SIGTERM and SIGINT handlers; give pytest its own back."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def test_main(proxy, tmp_path, keep_signals):
    out = tmp_path / "probe.jsonl"
    key_file = tmp_path / "api_key"
    key_file.write_text("sk-file\n")
    code = pc.main(["--url", proxy.url, "--model", "tiny-llama", "--out", str(out), "--interval", "0.05",
                    "--concurrency", "2", "--duration", "0.2", "--api-key-file", str(key_file)])
    assert code == 0
    assert read_records(out)[0]["status"] == 200
    assert proxy.requests[0][1]["Authorization"] == "Bearer sk-file"


def test_main_through_a_proxy_with_tls(tmp_path, keep_signals):
    """nginx_proxy_tls_certificate set: the probe client speaks https and verifies the proxy's certificate
    with the CA file it is given; a certificate it cannot verify is a failed request, not an answer."""
    cert, key = harness.self_signed(tmp_path, "localhost")
    fake = FakeProxy(certificate=(cert, key)).start()
    try:
        out = tmp_path / "probe.jsonl"
        assert pc.main(["--url", fake.url, "--model", "tiny-llama", "--out", str(out), "--interval", "0.05",
                        "--duration", "0.2", "--ca-file", str(cert)]) == 0
        assert read_records(out)[0]["status"] == 200
        untrusted = tmp_path / "untrusted.jsonl"
        assert pc.main(["--url", fake.url, "--model", "tiny-llama", "--out", str(untrusted), "--interval", "0.05",
                        "--duration", "0.2"]) == 0
        first = read_records(untrusted)[0]
        assert first["status"] == 0 and "certificate verify failed" in first["error"].lower()
    finally:
        fake.stop()


def test_main_without_requests(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pc, "requests", None)
    assert pc.main(["--url", "http://127.0.0.1:9/v1/chat/completions", "--model", "m", "--out", str(tmp_path / "o")]) == 2
    assert "python3-requests is required" in capsys.readouterr().err


def _read_request(conn):
    """The whole request, headers and body: a server that closes with unread bytes sends a reset, which
    the client would see instead of the answer (under load one recv() can return only part)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _sep, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return data


def _closing_server(closes):
    """Loopback server that reads a request, then closes the first ``closes`` connections without
    answering (as nginx closes a kept-alive connection when it reloads) and answers 200 after that."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    served = {"connections": 0}

    def serve():
        while True:
            try:
                conn, _addr = listener.accept()
            except OSError:
                return
            with conn:
                _read_request(conn)
                served["connections"] += 1
                if served["connections"] <= closes:
                    continue
                body = b'{"object": "chat.completion", "choices": []}'
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    threading.Thread(target=serve, daemon=True).start()
    return listener, served


def test_connection_closed_before_answer_is_resent_once(session):
    listener, served = _closing_server(closes=1)
    try:
        record = pc.one_request(session, "http://127.0.0.1:%d%s" % (listener.getsockname()[1], PATH), PAYLOAD, {}, 5.0)
    finally:
        listener.close()
    assert record["status"] == 200 and served["connections"] == 2
    assert "RemoteDisconnected" in record["retried"] or "Remote end closed" in record["retried"]


def test_connection_closed_twice_is_status_zero(session):
    listener, served = _closing_server(closes=5)
    try:
        record = pc.one_request(session, "http://127.0.0.1:%d%s" % (listener.getsockname()[1], PATH), PAYLOAD, {}, 5.0)
    finally:
        listener.close()
    assert record["status"] == 0 and served["connections"] == 2
    assert record["error"].startswith("ConnectionError: ")


def test_the_proxy_host_that_answered_is_recorded(proxy, session):
    proxy.proxy_host = "spark-b"
    record = pc.one_request(session, proxy.url, PAYLOAD, {}, 5.0)
    assert record["proxy"] == "spark-b"


def test_refused_is_not_resent_by_default(session):
    """A refused connection never reached a proxy: without the option it is a failure, as before."""
    record = pc.one_request(session, "http://127.0.0.1:%d%s" % (free_port(), PATH), PAYLOAD, {}, 5.0)
    assert record["status"] == 0 and "retried" not in record


def test_retry_connection_errors_resends_once_on_a_new_connection(session):
    """A client that retries once on a connection error (a proxy host that went away, its address
    now elsewhere): the record keeps the first error, the answer is the second try's."""
    fake = FakeProxy()
    calls = {"n": 0}
    real_post = session.post

    def post(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise requests.exceptions.ConnectionError("('Connection aborted.', ConnectionResetError(104, 'reset'))")
        return real_post(*args, **kwargs)

    fake.start()
    try:
        session.post = post
        record = pc.one_request(session, fake.url, PAYLOAD, {}, 5.0, retry_connection_errors=True)
    finally:
        fake.stop()
    assert calls["n"] == 2
    assert record["status"] == 200
    assert "ConnectionResetError" in record["retried"]


def test_retry_connection_errors_fails_when_the_second_try_fails(session):
    record = pc.one_request(session, "http://127.0.0.1:%d%s" % (free_port(), PATH), PAYLOAD, {}, 5.0,
                            retry_connection_errors=True)
    assert record["status"] == 0
    assert record["retried"].startswith("ConnectionError")
    assert record["error"].startswith("ConnectionError: ")


def test_a_read_timeout_is_not_a_connection_error(proxy, session):
    proxy.delay = 30
    record = pc.one_request(session, proxy.url, PAYLOAD, {}, 0.3, retry_connection_errors=True)
    assert record["status"] == 0 and "retried" not in record
    assert "Timeout" in record["error"]


def test_main_retry_connection_errors_flag(tmp_path, keep_signals):
    out = tmp_path / "probe.jsonl"
    code = pc.main(["--url", "http://127.0.0.1:%d%s" % (free_port(), PATH), "--model", "m", "--out", str(out),
                    "--interval", "0.05", "--duration", "0.1", "--retry-connection-errors"])
    assert code == 0
    assert all("retried" in record for record in read_records(out))


# --- as installed on the proxy host -----------------------------------------------------------


def probe_tasks():
    """The block of maintenance_window's probe entry point that installs and starts the client."""
    with open(os.path.join(ROOT, "roles", "maintenance_window", "tasks", "probe.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    (block,) = [task["block"] for task in tasks if "block" in task]
    return block


def test_the_role_installs_the_package_and_runs_the_client_from_it():
    """The probe entry point installs the host programs (site's host_programs); maintenance_probe runs
    ``-m _host.probe_client`` with the package on PYTHONPATH."""
    block = probe_tasks()
    includes = [task["ansible.builtin.include_role"] for task in block if "ansible.builtin.include_role" in task]
    assert {"name": "factory_floor.llm.site", "tasks_from": "host_programs"} in includes
    start = _maintenance_window.probe_argv({"unit": "ff-probe", "max_seconds": 60, "lib_dir": "/usr/local/lib/ff",
                                            "url": "http://127.0.0.1:8080", "model": "m", "log": "/tmp/p.jsonl",
                                            "interval": 0.5, "concurrency": 1, "api_key_file": "/etc/ff/key"})
    at = start.index("/usr/bin/python3")
    assert start[at - 1] == "--setenv=PYTHONPATH=/usr/local/lib/ff"
    assert start[at + 1:at + 3] == ["-m", "_host.probe_client"]


def test_runs_as_installed_on_the_proxy_host(proxy, tmp_path):
    """The package copied whole, ``python3 -m _host.probe_client`` with PYTHONPATH, no collection, no Ansible."""
    lib = host_layout.install(tmp_path / "lib")
    done = host_layout.run(lib, "probe_client", "--help")
    assert done.returncode == 0, done.stderr
    assert "--retry-connection-errors" in done.stdout
    out = tmp_path / "probe.jsonl"
    key_file = tmp_path / "api_key"
    key_file.write_text("sk-file\n")
    done = host_layout.run(lib, "probe_client", "--url", proxy.url, "--model", "tiny-llama", "--out", out,
                           "--interval", "0.05", "--duration", "0.3", "--api-key-file", key_file)
    assert done.returncode == 0, done.stderr
    assert read_records(out)[0]["status"] == 200
    assert proxy.requests[0][1]["Authorization"] == "Bearer sk-file"
    # The HTTP basics came from the package installed with it, not from a collection.
    done = subprocess.run([sys.executable, "-s", "-c", "import _host.probe_client as p, _host.vllm_client as c; "
                           "print(p.vllm_client is c, c.__file__)"], capture_output=True, text=True, cwd="/",
                          env=host_layout.env(lib), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", os.path.join(lib, "_host", "vllm_client.py")]


# --- the clocks ------------------------------------------------------------------------------


@pytest.fixture
def wall_clock_stepped_back(monkeypatch):
    """The host's wall clock steps back an hour just after the run starts (NTP, or a person with `date`)."""
    real, calls = time.time, [0]

    def stepped():
        calls[0] += 1
        return real() - (3600.0 if calls[0] > 1 else 0.0)

    monkeypatch.setattr(time, "time", stepped)
    return real


def test_duration_is_measured_on_the_monotonic_clock(proxy, tmp_path, wall_clock_stepped_back):
    out = tmp_path / "probe.jsonl"
    stop = threading.Event()
    worker = threading.Thread(target=pc.run, args=(proxy.url, "tiny-llama", str(out)),
                              kwargs={"interval": 0.05, "duration": 0.4, "stop": stop}, daemon=True)
    worker.start()
    worker.join(10)
    stopped_by_itself = not worker.is_alive()
    stop.set()
    worker.join(10)
    assert stopped_by_itself, "--duration 0.4 ran on for 10 s after the wall clock stepped back an hour"
    records = read_records(out)
    # The records keep the wall clock people read (stepped back with it); the latency is the request's own.
    assert len(records) >= 2 and records[-1]["t"] < wall_clock_stepped_back() - 3000
    assert all(0 <= r["latency"] < 5 for r in records)
