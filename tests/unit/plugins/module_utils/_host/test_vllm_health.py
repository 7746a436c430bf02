# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/vllm_health.py (one probe, every status).

Every probe goes to a real HTTP server (http.server in a thread on 127.0.0.1, an
ephemeral port) that answers like vLLM's OpenAI-compatible server; nothing in
requests is mocked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as vh
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM, free_port


@pytest.fixture
def server():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


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


def test_probe_at_openai_base_url(server):
    assert vh.probe(server.url + "/v1").status == vh.SERVING


def test_importable_as_plain_module_without_ansible():
    """The daemons on the hosts import it as ``_host.vllm_health``, with no Ansible around."""
    code = (
        "import sys; sys.path.insert(0, %r); import _host.vllm_health; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ansible', 'ansible_collections')); "
        "assert not bad, bad; print(_host.vllm_health.HAS_REQUESTS)" % os.path.dirname(os.path.dirname(vh.__file__))
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# --- a request this side cannot send is a configuration error, never "dead" ------------------------------

SECRET = "sk-7f3e9a2c41d86b05"


@pytest.mark.parametrize("key", [SECRET + "\n", " " + SECRET, SECRET + "\\", '"%s"' % SECRET])
@pytest.mark.parametrize("kind", vh.PROBE_KINDS)
def test_a_key_that_is_no_bearer_token_is_a_config_error_never_dead(server, key, kind):
    # The engine serves, with the key the inventory meant.
    server.api_key = SECRET
    result = vh.probe(server.url, api_key=key, model="tiny-llama", kind=kind)
    assert result.status == vh.CONFIG_ERROR
    assert "api_key" in result.error and "7f3e" not in result.error
    assert result.http_status is None
    # Nothing was asked: the engine is not judged.
    assert server.requests == []


class _Refusing:
    """A session whose requests raise what requests raises before it sends anything."""

    def __init__(self, exc):
        self.exc = exc

    def get(self, *args, **kwargs):
        raise self.exc

    post = get


@pytest.mark.parametrize("exc", [
    vh.requests.exceptions.InvalidHeader(
        "Invalid leading whitespace, reserved character(s), or return character(s) in header value: 'Bearer %s\\n'"
        % SECRET),
    UnicodeEncodeError("latin-1", "Bearer %s\u20ac" % SECRET, 26, 27, "ordinal not in range(256)"),
    vh.requests.exceptions.InvalidURL("Failed to parse: http://[spark-a"),
])
@pytest.mark.parametrize("kind, health_first", [("health", True), ("generate", False)])
def test_what_requests_refuses_to_send_is_a_config_error_without_the_header(exc, kind, health_first):
    result = vh.probe("http://127.0.0.1:8000", model="tiny-llama", kind=kind, health_first=health_first,
                      session=_Refusing(exc))
    assert result.status == vh.CONFIG_ERROR
    assert "not sent" in result.error and SECRET not in result.error
    assert result.http_status is None
