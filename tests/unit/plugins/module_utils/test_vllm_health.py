# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_vllm_health.py.

Every probe goes to a real HTTP server (http.server in a thread on 127.0.0.1, an
ephemeral port) that answers like vLLM's OpenAI-compatible server; nothing in
requests is mocked. Time in wait() is a fake clock, so waits take no real time.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_health as vh


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


@pytest.fixture
def server():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


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


def test_refused_is_loading():
    result = vh.probe("http://127.0.0.1:%d" % free_port())
    assert result.status == vh.LOADING
    assert "connection refused" in result.error
    assert result.models == [] and result.version is None and result.http_status is None


@pytest.mark.parametrize("status", [503, 500, 404])
def test_health_not_200_is_dead(server, status):
    server.health_status = status
    result = vh.probe(server.url, kind="generate", model="tiny-llama")
    assert result.status == vh.DEAD
    assert result.http_status == status
    assert "GET %s/health answered HTTP %d" % (server.url, status) in result.error
    assert ("engine is dead" in result.error) == (status == 503)
    # Nothing past /health was asked.
    assert [r[1] for r in server.requests] == ["/health"]


@pytest.mark.parametrize("kind", ["health", "models", "generate"])
def test_serving(server, kind):
    result = vh.probe(server.url, model="tiny-llama", kind=kind)
    assert result.status == vh.SERVING, result.error
    assert result.error is None and result.http_status is None
    assert result.models == ["tiny-llama"]
    assert result.version == "0.32.0"
    assert 0 < result.latency < 5
    asked = [r[1] for r in server.requests]
    assert ("/v1/completions" in asked) == (kind == "generate")


@pytest.mark.parametrize("kind", ["health", "models", "generate"])
def test_model_not_listed_is_wrong_model(server, kind):
    server.models = ["other-model"]
    result = vh.probe(server.url, model="tiny-llama", kind=kind)
    assert result.status == vh.WRONG_MODEL
    assert result.models == ["other-model"]
    assert "'tiny-llama' is not served" in result.error and "other-model" in result.error
    assert "/v1/completions" not in [r[1] for r in server.requests]


@pytest.mark.parametrize("kind, status", [("health", vh.SERVING), ("models", vh.DEAD), ("generate", vh.DEAD)])
def test_models_error_matters_only_when_asked_for(server, kind, status):
    server.models_status = 500
    result = vh.probe(server.url, kind=kind)
    assert result.status == status
    assert result.models == []
    if status == vh.DEAD:
        assert "/v1/models answered HTTP 500" in result.error


def test_generate_request_is_one_token_greedy(server):
    result = vh.probe(server.url, kind="generate", api_key="sk-test")
    assert result.status == vh.SERVING, result.error
    posts = [r for r in server.requests if r[0] == "POST"]
    assert len(posts) == 1
    _method, path, headers, body = posts[0]
    assert path == "/v1/completions"
    # No model given: the first one /v1/models lists.
    assert body["model"] == "tiny-llama" and body["max_tokens"] == 1 and body["temperature"] == 0
    assert headers["Authorization"] == "Bearer sk-test"


def test_hung_generation_is_dead(server):
    """A hung engine answers /health and /v1/models 200 but never finishes a generation."""
    server.completion_delay = 30
    started = time.monotonic()
    result = vh.probe(server.url, kind="generate", model="tiny-llama", generate_timeout=0.3)
    assert time.monotonic() - started < 5
    assert result.status == vh.DEAD
    assert result.error.startswith("1-token generation did not finish within 0.3s")
    assert result.models == ["tiny-llama"]  # /health and /v1/models still answered


@pytest.mark.parametrize("model, paths", [
    ("tiny-llama", ["/v1/completions"]),
    (None, ["/v1/models", "/v1/completions"]),   # no model given: the first one listed
])
def test_generate_without_health_first_goes_straight_to_the_completion(server, model, paths):
    # /health does not answer in time (an API server busy under load); the engine still generates.
    server.health_delay = 5
    result = vh.probe(server.url, model=model, kind="generate", timeout=0.5, health_first=False)
    assert result.status == vh.SERVING and result.error is None
    assert [r[1] for r in server.requests] == paths


@pytest.mark.parametrize("attrs, status, http_status", [
    ({"completion_delay": 30}, vh.DEAD, None),      # a hung engine
    ({"completion_status": 404}, vh.DEAD, 404),     # another model served
    ({"completion_status": 500}, vh.DEAD, 500),
])
def test_generate_without_health_first_fails_as_the_completion_does(server, attrs, status, http_status):
    for name, value in attrs.items():
        setattr(server, name, value)
    result = vh.probe(server.url, model="tiny-llama", kind="generate", generate_timeout=0.3, health_first=False)
    assert (result.status, result.http_status) == (status, http_status)
    assert "/health" not in [r[1] for r in server.requests]


def test_generate_without_health_first_on_a_closed_port_is_loading():
    result = vh.probe("http://127.0.0.1:%d" % free_port(), model="m", kind="generate", health_first=False)
    assert result.status == vh.LOADING


def test_generation_error_is_dead(server):
    server.completion_status = 500
    result = vh.probe(server.url, kind="generate")
    assert result.status == vh.DEAD and result.http_status == 500
    assert "POST %s/v1/completions answered HTTP 500" % server.url in result.error


def test_health_without_answer_is_dead(server):
    server.health_delay = 30
    result = vh.probe(server.url, timeout=0.3)
    assert result.status == vh.DEAD
    assert "connected, but no HTTP answer within 0.3s" in result.error


@pytest.mark.parametrize("api_key, status, http_status", [(None, vh.DEAD, 401), ("wrong", vh.DEAD, 401), ("sk-right", vh.SERVING, None)])
def test_api_key(server, api_key, status, http_status):
    server.api_key = "sk-right"
    result = vh.probe(server.url, kind="models", api_key=api_key)
    assert (result.status, result.http_status) == (status, http_status)
    if http_status:
        assert "rejected the api_key" in result.error


def test_roots_say_which_directory_serves_each_model(server):
    server.models = ["lab-chat", "other"]
    server.roots = {"lab-chat": "/opt/models/SmolLM2-135M-Instruct"}
    result = vh.probe(server.url, kind="models", model="lab-chat")
    assert result.status == vh.SERVING
    assert result.roots == {"lab-chat": "/opt/models/SmolLM2-135M-Instruct"}
    assert result.models == ["lab-chat", "other"]


def test_connection_dropped_without_answer_is_dead():
    """Something accepts the connection and closes it without an HTTP answer."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def drop():
        while True:
            try:
                conn, _addr = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    try:
        result = vh.probe("http://127.0.0.1:%d" % listener.getsockname()[1])
    finally:
        listener.close()
    assert result.status == vh.DEAD
    assert "Remote end closed connection without response" in result.error


def test_name_that_does_not_resolve_is_unreachable(monkeypatch):
    # The resolver is the only thing replaced: no DNS query leaves the machine.
    def getaddrinfo(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    result = vh.probe("http://spark-nowhere:8000")
    assert result.status == vh.UNREACHABLE
    assert "Name or service not known" in result.error


def test_connect_timeout_is_unreachable():
    """A listener whose accept queue is full drops new SYNs: the connect times out, on loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for dummy in range(3):
            filler = socket.socket()
            filler.settimeout(0.2)
            try:
                filler.connect(("127.0.0.1", port))
            except OSError:
                pass
            fillers.append(filler)
        result = vh.probe("http://127.0.0.1:%d" % port, timeout=0.3)
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert result.status == vh.UNREACHABLE
    assert "TCP connect did not finish within 0.3s" in result.error


def test_environment_proxy_is_not_used(server, monkeypatch):
    dead_proxy = "http://127.0.0.1:%d" % free_port()
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert vh.probe(server.url).status == vh.SERVING


@pytest.mark.parametrize("given, base", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
    ("https://gw.example:443/vllm/v1/", "https://gw.example:443/vllm"),
])
def test_normalize_url(given, base):
    assert vh.normalize_url(given) == base


@pytest.mark.parametrize("bad", ["", "127.0.0.1:8000", "ftp://host", "http://"])
def test_normalize_url_rejects(bad):
    with pytest.raises(ValueError):
        vh.normalize_url(bad)


def test_probe_at_openai_base_url(server):
    assert vh.probe(server.url + "/v1").status == vh.SERVING


# --- wait(): transitions over time ------------------------------------------------------------


def test_loading_then_serving():
    """The port refuses while vLLM loads, then the server comes up on it."""
    port = free_port()
    fake = FakeVLLM()

    def world(sleeps):
        if sleeps == 3:
            fake.start(port)

    clock = FakeTime(on_sleep=world)
    try:
        outcome = vh.wait("http://127.0.0.1:%d" % port, model="tiny-llama", kind="generate",
                          timeout=60, interval=2, clock=clock.clock, sleep=clock.sleep)
    finally:
        fake.stop()
    assert outcome.ok and outcome.reason == "reached"
    assert outcome.last.status == vh.SERVING and outcome.last.error is None
    assert outcome.attempts == 4
    assert outcome.elapsed == pytest.approx(6.0)
    assert clock.sleeps == [2, 2, 2]


def test_timeout_names_endpoint_elapsed_and_last_state():
    url = "http://127.0.0.1:%d" % free_port()
    clock = FakeTime()
    outcome = vh.wait(url, timeout=5, interval=2, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "timeout"
    # Sleeps are shortened so the last probe runs at the deadline.
    assert clock.sleeps == [2, 2, 1]
    assert outcome.attempts == 4
    assert outcome.elapsed == pytest.approx(5.0)
    assert outcome.message == (
        "vLLM at %s was not serving after 5s (timeout 5s, 4 attempts, probe health); "
        "last status loading, last error: GET %s/health: connection refused (nothing listens on the port yet)" % (url, url))


def test_timeout_says_what_the_unit_was_doing():
    """A start-up that never finishes: the message ends with the unit's journal and its processes."""
    url = "http://127.0.0.1:%d" % free_port()
    clock = FakeTime()
    calls = []
    outcome = vh.wait(url, timeout=3, interval=2, clock=clock.clock, sleep=clock.sleep,
                      unit_state=lambda: vh.UnitState(name="vllm-replica.service", active_state="active", sub_state="running"),
                      unit_journal=lambda: calls.append("journal") or ["loading weights"],
                      unit_processes=lambda: calls.append("processes") or ["901 VLLM::EngineCor R 0.3 0 0"])
    assert not outcome.ok and outcome.reason == "timeout" and calls == ["journal", "processes"]
    assert outcome.journal == ["loading weights"] and outcome.processes == ["901 VLLM::EngineCor R 0.3 0 0"]
    assert outcome.message.endswith(
        "\nLast 1 journal lines of the unit:\nloading weights"
        "\nThe unit's processes (pid name state cpu_seconds last_core allowed_cores):\n901 VLLM::EngineCor R 0.3 0 0")


def _fake_proc(tmp_path, pid, ppid, name, state, utime, stime, core, allowed):
    folder = tmp_path / str(pid)
    folder.mkdir()
    # Fields after "(comm) ": state ppid ... utime is field 14, stime 15, processor 39 (1-based over the whole line).
    rest = [state, str(ppid)] + ["0"] * 9 + [str(utime), str(stime)] + ["0"] * 23 + [str(core)] + ["0"] * 5
    (folder / "stat").write_text("%d (%s) %s\n" % (pid, name, " ".join(rest)), encoding="utf-8")
    (folder / "status").write_text("Name:\t%s\nState:\t%s (x)\nCpus_allowed_list:\t%s\n" % (name, state, allowed),
                                   encoding="utf-8")


def test_process_lines_walks_the_tree_under_the_main_pid(tmp_path):
    _fake_proc(tmp_path, 1, 0, "systemd", "S", 5, 5, 0, "0-1")
    _fake_proc(tmp_path, 812, 1, "python3", "S", 4000, 120, 1, "0-1")
    _fake_proc(tmp_path, 901, 812, "VLLM::EngineCor", "R", 30, 0, 0, "0")
    _fake_proc(tmp_path, 950, 901, "VLLM::Worker", "R", 100, 50, 1, "1")
    _fake_proc(tmp_path, 77, 1, "nginx", "S", 1, 1, 0, "0-1")
    (tmp_path / "self").mkdir()
    assert vh.process_lines(812, str(tmp_path)) == [
        "812 python3 S 41.2 1 0-1", "901 VLLM::EngineCor R 0.3 0 0", "950 VLLM::Worker R 1.5 1 1"]
    assert vh.process_lines(4242, str(tmp_path)) == []
    assert vh.process_lines(812, str(tmp_path / "missing")) == []


def test_unit_process_lines_reads_the_main_pid(tmp_path):
    _fake_proc(tmp_path, 812, 1, "python3", "S", 100, 0, 1, "0-1")
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, "812\n", ""

    assert vh.unit_process_lines("vllm-replica.service", run, proc_dir=str(tmp_path)) == ["812 python3 S 1.0 1 0-1"]
    assert seen == [["systemctl", "show", "-p", "MainPID", "--value", "--", "vllm-replica.service"]]
    assert vh.unit_process_lines("x.service", lambda argv: (0, "0\n", ""), proc_dir=str(tmp_path)) == []
    assert vh.unit_process_lines("x.service", lambda argv: (1, "", "no"), proc_dir=str(tmp_path)) == []


def test_container_pid_reads_the_containers_main_process():
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, "WARN[0000] a podman warning\n4242\n", ""

    assert vh.container_pid("/usr/bin/podman", "vllm-replica", run) == 4242
    assert seen == [["/usr/bin/podman", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]]
    # Not running (docker prints 0), not there, not a number, the engine missing: 0, never an exception.
    assert vh.container_pid("docker", "x", lambda argv: (0, "0\n", "")) == 0
    assert vh.container_pid("docker", "x", lambda argv: (1, "", "Error: No such container: x")) == 0
    assert vh.container_pid("docker", "x", lambda argv: (0, "<no value>\n", "")) == 0

    def missing(argv):
        raise OSError("No such file or directory: /usr/bin/docker")

    assert vh.container_pid("/usr/bin/docker", "x", missing) == 0


def test_unit_process_lines_adds_the_containers_processes(tmp_path):
    # docker: the unit's main process is the `docker run` client; vLLM runs under containerd-shim.
    _fake_proc(tmp_path, 700, 1, "docker", "S", 10, 0, 0, "0-1")
    _fake_proc(tmp_path, 800, 1, "containerd-shim", "S", 5, 0, 1, "0-1")
    _fake_proc(tmp_path, 812, 800, "vllm", "S", 4000, 120, 1, "0-1")
    _fake_proc(tmp_path, 901, 812, "VLLM::EngineCor", "R", 30, 0, 0, "0")
    seen = []

    def run(argv):
        seen.append(argv)
        return (0, "700\n", "") if argv[0] == "systemctl" else (0, "812\n", "")

    lines = vh.unit_process_lines("vllm-replica.service", run, proc_dir=str(tmp_path), container_engine="/usr/bin/docker")
    assert lines == ["700 docker S 0.1 0 0-1", "812 vllm S 41.2 1 0-1", "901 VLLM::EngineCor R 0.3 0 0"]
    assert seen[1] == ["/usr/bin/docker", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]
    # The container's name can be given; a container that does not run adds nothing.
    seen.clear()
    assert vh.unit_process_lines("a.service", lambda argv: seen.append(argv) or (0, "0\n", ""), proc_dir=str(tmp_path),
                                 container_engine="docker", container_name="other") == []
    assert seen[1][-1] == "other"


def test_timeout_zero_probes_once_and_reports():
    clock = FakeTime()
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=0, clock=clock.clock, sleep=clock.sleep)
    assert outcome.ok and outcome.reason == "probed"
    assert outcome.last.status == vh.LOADING
    assert outcome.attempts == 1 and clock.sleeps == []


def unit(active_state, sub_state, result="success", status=0, load_state="loaded"):
    return vh.UnitState("vllm.service", load_state, active_state, sub_state, result, status)


@pytest.mark.parametrize("state", [
    unit("failed", "failed", "exit-code", 1),
    unit("inactive", "dead"),  # vLLM's API server exits 0 after its engine died
    unit("active", "exited"),
    unit("inactive", "dead", load_state="not-found"),
])
def test_unit_down_fails_at_once_with_journal(state):
    clock = FakeTime()
    journal_calls = []

    def journal():
        journal_calls.append(1)
        return ["vllm[812]: RuntimeError: Engine core initialization failed.", "systemd[1]: vllm.service: Failed."]

    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=1200, interval=2,
                      unit_state=lambda: state, unit_journal=journal, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "unit_down"
    assert outcome.attempts == 1 and clock.sleeps == []  # not after the timeout
    assert journal_calls == [1]
    assert outcome.unit == state
    assert outcome.journal[0].endswith("Engine core initialization failed.")
    assert outcome.message.startswith("systemd unit vllm.service is %s (ActiveState=%s, SubState=%s, Result=%s" % (
        state.active_state, state.active_state, state.sub_state, state.result))
    assert "last status loading" in outcome.message
    assert "Last 2 journal lines of vllm.service:\nvllm[812]: RuntimeError" in outcome.message


@pytest.mark.parametrize("state", [unit("activating", "start"), unit("activating", "auto-restart"),
                                   unit("active", "running"), unit("deactivating", "stop-sigterm")])
def test_unit_still_working_keeps_waiting(state):
    clock = FakeTime()
    read = []
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=4, interval=2,
                      unit_state=lambda: state, unit_journal=lambda: read.append(clock.clock()) or [],
                      clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout" and outcome.attempts == 3
    assert read == [pytest.approx(1004.0)]  # the journal only once the wait gave up (FakeTime starts at 1000)


def test_unit_goes_down_while_waiting():
    states = iter([unit("activating", "start"), unit("active", "running"), unit("failed", "failed", "exit-code", 1)])
    clock = FakeTime()
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=1200, interval=2,
                      unit_state=lambda: next(states), unit_journal=lambda: [], clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "unit_down" and outcome.attempts == 3
    assert outcome.elapsed == pytest.approx(4.0)


# --- crash loops --------------------------------------------------------------------------------


def run_of(n_restarts, started, sub_state="start", active_state="activating"):
    """One read of a unit under Restart=always: NRestarts, ExecMainStartTimestampMonotonic (us), SubState."""
    return vh.UnitState("vllm.service", "loaded", active_state, sub_state, "success", 0, n_restarts, started)


@pytest.mark.parametrize("reads, crashes", [
    # Baseline, then systemd restarts it twice (each seen between two reads).
    ([run_of(0, 100), run_of(1, 200), run_of(2, 300)], [0, 1, 2]),
    # Two restarts between two reads (RestartSec shorter than the poll interval).
    ([run_of(0, 100), run_of(2, 300)], [0, 2]),
    # Each crash seen while systemd waits RestartSec (auto-restart), then its restart: counted once.
    ([run_of(0, 100), run_of(0, 100, "auto-restart"), run_of(1, 200), run_of(1, 200, "auto-restart")], [0, 1, 1, 2]),
    # systemd counts the restart before the new main process starts (ExecStartPre= runs between:
    # seconds for a container unit); that start, seen at the next read, is the same restart.
    ([run_of(0, 100, "running", "active"), run_of(1, 100), run_of(1, 200), run_of(1, 200, "running", "active")],
     [0, 1, 1, 1]),
    ([run_of(0, 100), run_of(0, 100, "auto-restart"), run_of(1, 100), run_of(1, 200), run_of(2, 200), run_of(2, 300)],
     [0, 1, 1, 1, 2, 2]),
    # systemd raises NRestarts when it queues the restart, while the unit still waits (auto-restart):
    # seen waiting, then with the raised count, then started: one crash (the watchdog scenario's SIGKILL).
    ([run_of(0, 100, "running", "active"), run_of(0, 100, "auto-restart"), run_of(1, 100, "auto-restart"),
      run_of(1, 100), run_of(1, 200, "running", "active")], [0, 1, 1, 1, 1]),
    # The raised count seen first, the unit still waiting at the next read: one crash.
    ([run_of(0, 100, "running", "active"), run_of(1, 100, "auto-restart"), run_of(1, 100, "auto-restart"),
      run_of(1, 200)], [0, 1, 1, 1]),
    # Started again by hand (systemctl restart resets NRestarts): the run ended all the same.
    ([run_of(3, 100), run_of(0, 200), run_of(0, 300)], [0, 1, 2]),
    # A run that ended before the wait began is not the wait's, nor its restart.
    ([run_of(0, 100, "auto-restart"), run_of(1, 200), run_of(1, 200)], [0, 0, 0]),
    # Nothing changes: a long start-up.
    ([run_of(5, 100)] * 4, [0, 0, 0, 0]),
    # systemd too old to say (no NRestarts): the start timestamps alone.
    ([run_of(None, 100), run_of(None, 100), run_of(None, 250)], [0, 0, 1]),
])
def test_crash_counter(reads, crashes):
    counter = vh.CrashCounter()
    assert [counter.update(unit, t) for t, unit in enumerate(reads)] == crashes


def crash_loop_world(restart_sec, crash_after):
    """A unit under Restart=always whose run k starts at k x (crash_after + restart_sec), crashes
    ``crash_after`` seconds later and is started again ``restart_sec`` after that; its port never
    opens. Returns (clock, unit_state, crash time of run k)."""
    clock = FakeTime()
    t0, period = clock.now, crash_after + restart_sec

    def unit_state():
        k = int((clock.now - t0) // period)
        crashed = clock.now - t0 - k * period >= crash_after
        return run_of(k, 1000 + k, "auto-restart" if crashed else "start")

    return clock, unit_state, lambda k: t0 + k * period + crash_after


@pytest.mark.parametrize("restart_sec, crash_after", [(5, 40), (0.1, 40), (25, 10), (5, 1)])
def test_a_crash_loop_gives_up_within_30_s_of_the_second_crash(restart_sec, crash_after):
    clock, unit_state, crash_time = crash_loop_world(restart_sec, crash_after)
    journal = ["vllm[812]: RuntimeError: Engine core initialization failed."]
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=1800, interval=2, unit_state=unit_state,
                      unit_journal=lambda: journal, clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "crash_loop" and outcome.crashes == 2
    assert 0 <= clock.now - crash_time(1) <= 30
    assert outcome.journal == journal and outcome.unit is not None
    assert outcome.message.startswith("systemd unit vllm.service crashed 2 times since the wait for vLLM at ")
    assert "Last 1 journal lines of vllm.service:\nvllm[812]: RuntimeError" in outcome.message


def test_one_crash_keeps_the_wait_going():
    reads = iter([run_of(0, 100), run_of(0, 100, "auto-restart")] + [run_of(1, 200)] * 100)
    clock = FakeTime()
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=60, interval=2, unit_state=lambda: next(reads),
                      unit_journal=lambda: [], clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout" and outcome.crashes == 1


def _sliced(report_after, **kwargs):
    """vh.wait cut into calls of ``report_after`` seconds, each resuming the last; returns the calls' outcomes."""
    outcomes, resume = [], None
    for _call in range(1000):
        outcome = vh.wait(report_after=report_after, resume=resume, **kwargs)
        outcomes.append(outcome)
        if outcome.reason != "waiting":
            return outcomes
        assert outcome.ok and outcome.resume is not None
        resume = outcome.resume
    raise AssertionError("the wait never ended")


@pytest.mark.parametrize("restart_sec, crash_after", [(5, 40), (25, 10), (5, 1)])
def test_a_wait_cut_into_calls_still_catches_a_crash_loop_at_the_second_crash(restart_sec, crash_after):
    clock, unit_state, crash_time = crash_loop_world(restart_sec, crash_after)
    outcomes = _sliced(30, base_url="http://127.0.0.1:%d" % free_port(), timeout=1800, interval=2, unit_state=unit_state,
                       unit_journal=lambda: ["x"], clock=clock.clock, sleep=clock.sleep)
    last = outcomes[-1]
    assert last.reason == "crash_loop" and last.crashes == 2
    assert 0 <= clock.now - crash_time(1) <= 30
    # a line at least every 30 s of the wait (plus one probe) until it ended
    assert len(outcomes) >= (clock.now - crash_time(0) + crash_after) // 32
    assert all(o.reason == "waiting" and o.last_unit is not None for o in outcomes[:-1])


def test_a_wait_cut_into_calls_keeps_its_deadline_and_attempts():
    clock = FakeTime()
    outcomes = _sliced(30, base_url="http://127.0.0.1:%d" % free_port(), timeout=100, interval=2,
                       clock=clock.clock, sleep=clock.sleep)
    assert [o.reason for o in outcomes] == ["waiting"] * 3 + ["timeout"]
    assert [round(o.elapsed) for o in outcomes] == [30, 60, 90, 100]
    assert outcomes[-1].attempts == 51 and "was not serving after 100s (timeout 100s, 51 attempts" in outcomes[-1].message
    assert outcomes[0].last_unit is None


def test_a_wait_cut_into_calls_ends_as_soon_as_the_engine_serves(server):
    outcome = vh.wait(server.url, report_after=30, resume={"started": time.monotonic() - 600, "attempts": 300,
                                                           "crashes": {"crashes": 1, "seen": True}})
    assert outcome.ok and outcome.reason == "reached" and outcome.attempts == 301 and outcome.crashes == 1
    assert outcome.elapsed >= 600 and outcome.resume is None


def test_a_resumed_wait_whose_start_lies_in_the_future_starts_afresh():
    clock = FakeTime()
    outcome = vh.wait("http://127.0.0.1:%d" % free_port(), timeout=10, interval=2, clock=clock.clock, sleep=clock.sleep,
                      resume={"started": clock.now + 5000, "attempts": 7, "crashes": {"crashes": 1}})
    assert outcome.reason == "timeout" and outcome.attempts == 6 and outcome.crashes == 0


@pytest.mark.parametrize("resume", [{"attempts": 3}, {"started": "soon"}, {"started": None}])
def test_a_resume_that_no_wait_returned_is_refused(resume):
    with pytest.raises(ValueError, match="resume must be"):
        vh.wait("http://127.0.0.1:%d" % free_port(), timeout=10, resume=resume, clock=FakeTime().clock)


def test_crash_counter_state_round_trip():
    counter = vh.CrashCounter()
    for t, unit in enumerate([run_of(0, 100), run_of(0, 100, "auto-restart")]):
        counter.update(unit, t)
    again = vh.CrashCounter.from_state(json.loads(json.dumps(counter.state())))
    # its restart is the same crash, not another; the next one is the second
    assert again.update(run_of(1, 200), 3) == 1
    assert again.update(run_of(2, 300), 4) == 2


def test_default_budget_covers_a_20_minute_start_up():
    # GB10: up to 20 minutes from start to serving; the default leaves half as much again.
    assert inspect.signature(vh.wait).parameters["timeout"].default == 1800 >= 1.5 * 20 * 60


def test_unit_not_read_when_serving(server):
    outcome = vh.wait(server.url, unit_state=lambda: pytest.fail("unit read"), clock=FakeTime().clock)
    assert outcome.ok and outcome.attempts == 1


def test_wait_for_dead_serving_then_engine_dies(server):
    """wait_for dead: /health 200 until the EngineCore is killed, then 503."""

    def world(sleeps):
        if sleeps == 2:
            server.health_status = 503

    clock = FakeTime(on_sleep=world)
    # A down unit does not matter when waiting for dead.
    outcome = vh.wait(server.url, wait_for="dead", timeout=60, interval=1,
                      unit_state=lambda: unit("failed", "failed"), clock=clock.clock, sleep=clock.sleep)
    assert outcome.ok and outcome.reason == "reached"
    assert outcome.last.status == vh.DEAD and outcome.attempts == 3


def test_wait_for_dead_hung_engine(server):
    server.completion_delay = 30
    outcome = vh.wait(server.url, wait_for="dead", kind="generate", generate_timeout=0.3, timeout=0,
                      clock=FakeTime().clock)
    assert outcome.ok and outcome.last.status == vh.DEAD
    assert "1-token generation did not finish within 0.3s" in outcome.last.error


def test_wait_for_dead_times_out_while_serving(server):
    clock = FakeTime()
    outcome = vh.wait(server.url, wait_for="dead", timeout=3, interval=1, clock=clock.clock, sleep=clock.sleep)
    assert outcome.reason == "timeout"
    assert outcome.message.startswith("vLLM at %s was not dead (no longer serving) after 3s" % server.url)
    assert "last status serving, last error: None" in outcome.message


@pytest.mark.parametrize("wait_for", ["serving", "dead"])
def test_rejected_api_key_fails_at_once(server, wait_for):
    server.api_key = "sk-right"
    clock = FakeTime()
    outcome = vh.wait(server.url, api_key="sk-wrong", kind="models", wait_for=wait_for,
                      clock=clock.clock, sleep=clock.sleep)
    assert not outcome.ok and outcome.reason == "rejected" and clock.sleeps == []
    assert "rejected the api_key (HTTP 401)" in outcome.message


@pytest.mark.parametrize("kwargs", [
    {"kind": "metrics"}, {"wait_for": "loading"}, {"timeout": -1}, {"interval": 0}, {"generate_timeout": 0},
    {"base_url": "localhost:8000"},
])
def test_wait_rejects_bad_arguments(kwargs):
    args = {"base_url": "http://127.0.0.1:8000"}
    args.update(kwargs)
    with pytest.raises(ValueError):
        vh.wait(**args)


# --- systemd helpers --------------------------------------------------------------------------


SHOW_FAILED = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n"


def test_systemd_unit_state_parses_systemctl_show():
    calls = []

    def run_command(argv):
        calls.append(argv)
        return 0, SHOW_FAILED, ""

    state = vh.systemd_unit_state("vllm.service", run_command, systemctl="/usr/bin/systemctl")
    assert calls == [["/usr/bin/systemctl", "show", "-p", "LoadState,ActiveState,SubState,Result,ExecMainStatus,"
                      "NRestarts,ExecMainStartTimestampMonotonic,InvocationID", "--", "vllm.service"]]
    assert state == vh.UnitState("vllm.service", "loaded", "failed", "failed", "exit-code", 1)
    assert state.down


def test_systemd_unit_state_reads_restarts_and_the_main_process_start():
    text = SHOW_FAILED + "NRestarts=4\nExecMainStartTimestampMonotonic=1284077332\n"
    state = vh.systemd_unit_state("vllm.service", lambda argv: (0, text, ""))
    assert (state.n_restarts, state.main_started) == (4, 1284077332)
    never_ran = vh.systemd_unit_state("vllm.service", lambda argv: (0, SHOW_FAILED + "ExecMainStartTimestampMonotonic=0\n", ""))
    assert (never_ran.n_restarts, never_ran.main_started) == (None, None)


@pytest.mark.parametrize("answer", [(1, "", "Failed to connect to bus"), (0, "garbage\n", "")])
def test_systemd_unit_state_errors(answer):
    with pytest.raises(vh.UnitStateError):
        vh.systemd_unit_state("vllm.service", lambda argv: answer)


def test_systemd_journal():
    calls = []

    def run_command(argv):
        calls.append(argv)
        return 0, "line one\nline two\n", ""

    assert vh.systemd_journal("vllm.service", run_command) == ["line one", "line two"]
    assert calls == [["journalctl", "-u", "vllm.service", "-n", "600", "--no-pager"]]
    assert vh.systemd_journal("vllm.service", lambda argv: (1, "", "No journal files were found.")) == [
        "(journalctl -u vllm.service -n 600 --no-pager failed, rc 1: No journal files were found.)"]


def test_systemd_journal_leaves_out_the_exit_leak_report():
    """The lab's split that died at its first request (2026-12-02): the journal's last 30 lines were all
    nanobind's report of what Triton's bindings leaked at exit, not the worker that died."""
    prefix = "Dec 02 03:41:49 spark-a docker[1068]: "
    cause = [prefix + "(EngineCore pid=23) ERROR 12-02 03:41:17 [multiproc_executor.py:315] Worker proc VllmWorker-0 "
             "died unexpectedly (exit code: None), shutting down executor.",
             prefix + "RuntimeError: Worker failed with error 'Illegal instruction'"]
    noise = [prefix + "nanobind: leaked 64 types!", prefix + " - leaked type \"triton._C.libtriton.ir.block\"",
             prefix + " - leaked instance 0x7f6d75d20848 of type \"triton._C.libtriton.ir.attribute\"",
             prefix + "nanobind: leaked 514 functions!", prefix + " - leaked function \"create_xor\"",
             prefix + " - ... skipped remainder"] * 20
    stopped = ["Dec 02 03:41:50 spark-a systemd[1]: vllm-split.service: Deactivated successfully."]
    lines = vh.systemd_journal("vllm-split.service", lambda argv: (0, "\n".join(cause + noise + stopped) + "\n", ""))
    assert lines == cause + stopped
    many = ["%s line %d" % (prefix, n) for n in range(100)]
    assert vh.systemd_journal("vllm.service", lambda argv: (0, "\n".join(many + noise), "")) == many[-30:]


def test_importable_as_plain_module_without_ansible():
    """The daemons on the hosts import the file as ``_vllm_health``, with no Ansible around."""
    code = (
        "import sys; sys.path.insert(0, %r); import _vllm_health; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ansible', 'ansible_collections')); "
        "assert not bad, bad; print(_vllm_health.HAS_REQUESTS)" % os.path.dirname(vh.__file__)
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
