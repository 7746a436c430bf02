# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for module_utils/_workload_replay_run.py against a stub of an OpenAI-compatible server on 127.0.0.1.

The stub is not vLLM: it answers each streamed request after known delays (``ttft`` seconds to the first token, then
``gap`` seconds between tokens), with the status, the upstream header and the stream's end a test asks for. What is
tested is the client's timing, parsing and accounting. Margins: a measured time is never below its stub delay, and
at most ``SLACK`` above it (thread start, loopback, JSON). Measured on this 2-core shared machine, five runs of
the timing test: TTFT 0.2 s read as 0.2007-0.2018 s, TPOT 0.05 s as 0.05012-0.05034 s, the wall 0.75 s as
0.752-0.756 s, send lag at most 0.0009 s; the margins (0.1 s, TPOT 0.02 s, lag 0.05 s) are over 20 times those.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_replay_run as rr

SLACK = 0.1  # seconds


class _Stub(BaseHTTPRequestHandler):
    """Answers POST /v1/completions and /v1/chat/completions as ``server.behave(body)`` says."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append((self.path, dict(self.headers), body))
        how = self.server.behave(body)
        if how.get("status", 200) != 200:
            payload = json.dumps({"error": {"message": "stub says %s" % how["status"]}}).encode()
            self.send_response(how["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if how.get("upstream"):
            self.send_header("X-Factory-Floor-Upstream", how["upstream"])
        self.end_headers()
        tokens = body["max_tokens"]
        time.sleep(how.get("ttft", 0.0))
        for number in range(tokens):
            if number:
                time.sleep(how.get("gap", 0.0))
            if how.get("cut_after") == number:
                return  # the connection closes without [DONE]
            choice = {"index": 0, "text": " tok"} if "prompt" in body else {"index": 0, "delta": {"content": " tok"}}
            self._event({"choices": [choice]})
        if how.get("usage", True):
            self._event({"choices": [], "usage": {"prompt_tokens": len(body.get("prompt") or []),
                                                  "completion_tokens": tokens}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, data):
        self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        self.wfile.flush()

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.bodies = []
    server.behave = lambda body: {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield server
    server.shutdown()
    server.server_close()


def plan_of(rows, seed=3):
    """A plan as ``_workload_replay.plan()`` returns it: rows of (at_seconds, output_tokens[, conversation, prefix])."""
    requests = []
    for row in rows:
        at, output = row[0], row[1]
        conversation = row[2] if len(row) > 2 else len(requests)
        prefix = row[3] if len(row) > 3 else 0
        requests.append({"at_seconds": at, "conversation": conversation, "prompt_tokens": 40, "prefix_tokens": prefix,
                         "cached_tokens": 0, "output_tokens": output})
    return {"schema": "factory_floor.llm.workload_replay_plan/1", "seed": seed, "duration_seconds": 1.0,
            "arrival_rate_requests_per_s": 1.0, "requests": requests, "summary": {}}


def test_prompt_prefix_repeats_within_a_conversation():
    first = {"conversation": 4, "prompt_tokens": 100, "prefix_tokens": 0, "output_tokens": 5}
    later = {"conversation": 4, "prompt_tokens": 120, "prefix_tokens": 96, "output_tokens": 5}
    other = {"conversation": 5, "prompt_tokens": 100, "prefix_tokens": 0, "output_tokens": 5}
    a, b, c = rr.prompt_of(first, 9, 0), rr.prompt_of(later, 9, 1), rr.prompt_of(other, 9, 2)
    assert len(a) == 100 and len(b) == 120
    assert b[:96] == a[:96] and b[96:] != a[96:100] + a[:16]
    assert c[:16] != a[:16]
    assert all(rr.DEFAULT_TOKEN_ID_RANGE[0] <= t < rr.DEFAULT_TOKEN_ID_RANGE[1] for t in a)
    assert rr.prompt_of(later, 9, 1) == b  # same seed, same prompt
    text_a, text_b = rr.prompt_of(first, 9, 0, token_ids=False), rr.prompt_of(later, 9, 1, token_ids=False)
    assert len(text_a.split()) == 100 and len(text_b.split()) == 120
    assert text_b.split()[:96] == text_a.split()[:96]


@pytest.mark.parametrize("requested, vocab_size, expected", [
    pytest.param(None, None, (1000, 20000), id="default"),
    pytest.param(None, 151936, (1000, 20000), id="default within a large vocabulary"),
    pytest.param(None, 367, (36, 367), id="a small vocabulary: past its first tenth"),
    pytest.param(None, 5000, (500, 5000), id="smaller than the default's top"),
    pytest.param([3, 360], 367, (3, 360), id="asked for, within"),
    pytest.param([3, 367], 367, (3, 367), id="asked for, up to its end"),
    pytest.param([3, 360], None, (3, 360), id="asked for, vocabulary unknown"),
])
def test_id_range(requested, vocab_size, expected):
    assert rr.id_range(requested, vocab_size) == expected


@pytest.mark.parametrize("requested, vocab_size, message", [
    pytest.param([3, 368], 367, "reaches past the model's vocabulary of 367 tokens", id="past the vocabulary"),
    pytest.param([5, 5], None, "must be [lowest, one past the highest]", id="empty"),
    pytest.param([-1, 5], None, "must be [lowest, one past the highest]", id="negative"),
    pytest.param([1, 2, 3], None, "must be [lowest, one past the highest]", id="three"),
    pytest.param(None, 0, "vocab_size must be", id="no vocabulary"),
    pytest.param(None, True, "vocab_size must be", id="a bool"),
])
def test_id_range_refusals(requested, vocab_size, message):
    with pytest.raises(rr.ReplayError, match=re.escape(message)):
        rr.id_range(requested, vocab_size)


def test_body_asks_for_the_planned_output():
    request = {"conversation": 0, "prompt_tokens": 8, "prefix_tokens": 0, "output_tokens": 33}
    body = rr.body_of(request, 1, 0, "m")
    assert body["max_tokens"] == 33 and body["ignore_eos"] is True and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True} and len(body["prompt"]) == 8
    chat = rr.body_of(request, 1, 0, "m", endpoint="chat", token_ids=False)
    assert "prompt" not in chat and len(chat["messages"][0]["content"].split()) == 8


def test_streamed_tokens_and_timing(stub):
    stub.behave = lambda body: {"ttft": 0.2, "gap": 0.05, "upstream": "10.0.0.1:8000"}
    report = rr.replay(plan_of([(0.0, 10), (0.05, 10), (0.1, 10)]), stub.url, "m", api_key="k-1")
    total = report["total"]
    assert total["requests_ok"] == 3 and total["errors"] == 0 and total["errors_by_status"] == {}
    assert total["output_tokens"] == 30 == total["output_tokens_planned"]
    assert total["prompt_tokens_counted"] == 120 == total["prompt_tokens_planned_sent"]
    for key in ("p50", "p95"):
        assert 0.2 <= total["ttft_seconds"][key] <= 0.2 + SLACK
        assert 0.05 <= total["tpot_seconds"][key] <= 0.05 + SLACK / 5
    # wall: the last request starts at 0.1 and takes 0.2 + 9 x 0.05 = 0.65 s
    assert 0.75 <= total["wall_seconds"] <= 0.75 + SLACK
    assert total["tokens_per_s"] == pytest.approx(30 / total["wall_seconds"], rel=1e-3)
    assert total["requests_per_min"] == pytest.approx(3 * 60 / total["wall_seconds"], rel=1e-3)
    assert [e["name"] for e in report["engines"]] == ["10.0.0.1:8000"]
    path, headers, body = stub.bodies[0]
    assert path == "/v1/completions" and headers["Authorization"] == "Bearer k-1"
    assert body["ignore_eos"] is True and body["max_tokens"] == 10


def test_tokens_counted_from_events_without_usage(stub):
    stub.behave = lambda body: {"usage": False, "gap": 0.01}
    report = rr.replay(plan_of([(0.0, 7)]), stub.url + "/v1", "m", endpoint="chat", prompt="text")
    assert report["total"]["output_tokens"] == 7 and report["total"]["prompt_tokens_counted"] is None
    assert stub.bodies[0][0] == "/v1/chat/completions"


def test_errors_counted_by_status_and_engine(stub):
    def behave(body):
        return {5: {"status": 503}, 6: {"status": 429}, 7: {"cut_after": 3, "upstream": "10.0.0.2:8000"},
                8: {"upstream": "10.0.0.9:8000, 10.0.0.2:8000"}}.get(body["max_tokens"], {"upstream": "10.0.0.1:8000"})
    stub.behave = behave
    report = rr.replay(plan_of([(0.0, 5), (0.0, 6), (0.01, 7), (0.02, 8), (0.03, 4), (0.04, 5)]), stub.url, "m")
    total = report["total"]
    assert total["errors_by_status"] == {"503": 2, "429": 1, "stream": 1} and total["errors"] == 4
    assert total["requests_ok"] == 2 and total["output_tokens"] == 12
    engines = {e["name"]: e for e in report["engines"]}
    assert engines["10.0.0.2:8000"]["requests_ok"] == 1 and engines["10.0.0.2:8000"]["errors_by_status"] == {"stream": 1}
    assert engines["10.0.0.1:8000"]["output_tokens"] == 4
    assert engines["unknown"]["errors_by_status"] == {"503": 2, "429": 1}
    assert len(report["first_errors"]) == 4 and "HTTP 503" in report["first_errors"][0]["error"]


def test_no_answer_counted():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    report = rr.replay(plan_of([(0.0, 3)]), "http://127.0.0.1:%d" % port, "m", timeout=2)
    assert report["total"]["errors_by_status"] == {"no_answer": 1} and report["total"]["tokens_per_s"] is None


def test_in_flight_bound_reported(stub):
    stub.behave = lambda body: {"ttft": 0.5}
    report = rr.replay(plan_of([(0.0, 2), (0.01, 2), (0.02, 2), (0.03, 2)]), stub.url, "m", max_in_flight=2)
    bound = report["in_flight_bound"]
    assert bound == {"max_in_flight": 2, "hit": True, "requests_not_sent": 2, "first_at_seconds": 0.02}
    assert report["total"]["requests_sent"] == 2 and report["total"]["requests_planned"] == 4
    assert len(stub.bodies) == 2


def test_open_loop_a_slow_answer_does_not_delay_the_next_send(stub):
    stub.behave = lambda body: {"ttft": 1.0} if body["max_tokens"] == 2 else {}
    started = time.monotonic()
    run = rr.run_open_loop(plan_of([(0.0, 2), (0.1, 3), (0.2, 3)])["requests"],
                           lambda i, r: rr.send(stub.url, "/v1/completions", rr.body_of(r, 1, i, "m"), {}))
    slow, fast, last = run["records"]
    assert fast["start"] - started == pytest.approx(0.1, abs=SLACK / 2)
    assert last["start"] - started == pytest.approx(0.2, abs=SLACK / 2)
    assert last["end"] < slow["end"]  # sent and answered while the slow one still streamed
    assert run["send_lag_seconds"]["max"] < SLACK / 2 and run["not_sent"] == []


@pytest.mark.parametrize("key", ["zq9 x", "zq9\n", "zq9'", "zq9\u00fc"])
def test_malformed_key_refused_without_quoting_it(key):
    with pytest.raises(rr.ReplayError) as caught:
        rr.check_target("http://127.0.0.1:1", key, "completions", "token_ids")
    assert "api_key" in str(caught.value) and "zq9" not in str(caught.value)


@pytest.mark.parametrize("endpoint, prompt, words", [
    ("chat", "token_ids", "needs endpoint completions"),
    ("embeddings", "text", "endpoint must be one of"),
    ("completions", "words", "prompt must be one of"),
])
def test_target_refused(endpoint, prompt, words):
    with pytest.raises(rr.ReplayError, match=words):
        rr.check_target("http://127.0.0.1:1", None, endpoint, prompt)


def test_engine_of_names_the_engine_that_answered():
    assert rr.engine_of("10.0.0.9:8000, 10.0.0.2:8000") == "10.0.0.2:8000"
    assert rr.engine_of("10.0.0.9:8000 : 10.0.0.2:8000") == "10.0.0.2:8000"
    assert rr.engine_of(None) == "unknown"
