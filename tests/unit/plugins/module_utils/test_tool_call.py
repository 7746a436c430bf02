# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_tool_call.py: running a suite (fake sessions, no HTTP) and the score."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_call as tc
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_suite as suites
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_tool_check import (
    CALL_IN_CONTENT,
    FLAT_WEATHER,
    PYDANTIC_WEATHER,
    TOOLS,
    WEATHER_ARGUMENTS,
    completion,
    sse,
)


def test_score():
    results = [{"id": "a", "category": "x", "passed": True, "latency": 1.0},
               {"id": "b", "category": "x", "passed": False, "latency": 3.0},
               {"id": "c", "category": "y", "passed": True, "latency": None}]
    summary = tc.score(results)
    assert summary["score"] == 66.7 and summary["total"] == 3 and summary["passed_count"] == 2
    assert summary["by_category"] == {"x": {"total": 2, "passed": 1, "score": 50.0}, "y": {"total": 1, "passed": 1, "score": 100.0}}
    assert summary["latency_mean"] == 2.0 and summary["latency_max"] == 3.0
    assert tc.score([])["score"] == 0.0


# --- Running a suite, one case at a time or several at once ------------------------

class FakeResponse:
    """What requests.Session.post returns, as far as tc.post reads it."""

    def __init__(self, status, payload=None, lines=None):
        self.status_code = status
        self.content = json.dumps(payload).encode("utf-8") if payload is not None else b""
        self._lines = lines or []

    def iter_lines(self):
        for line in self._lines:
            yield line.encode("utf-8")

    def close(self):
        pass


class FakeEngine:
    """A server behind fake sessions, counting the requests in flight at once.

    ``answer(body)`` -> (status, calls, content, finish_reason). ``hold(body)``, when
    set, runs while the request is in flight (a sleep stands for generation time, a
    barrier waits for other requests to arrive). :meth:`session` is the
    ``session_factory``; every session records the threads that used it.
    """

    def __init__(self, answer, hold=None):
        self.answer = answer
        self.hold = hold
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.bodies = []
        self.sessions = []

    def session(self):
        session = FakeSession(self)
        with self.lock:
            self.sessions.append(session)
        return session


class FakeSession:
    def __init__(self, engine):
        self.engine = engine
        self.threads = set()
        self.closed = False

    def post(self, url, **kwargs):
        engine, body = self.engine, kwargs["json"]
        self.threads.add(threading.get_ident())
        with engine.lock:
            engine.in_flight += 1
            engine.peak = max(engine.peak, engine.in_flight)
            engine.bodies.append(body)
        try:
            if engine.hold is not None:
                engine.hold(body)
            status, calls, content, finish = engine.answer(body)
        finally:
            with engine.lock:
                engine.in_flight -= 1
        if status != 200:
            return FakeResponse(status, {"object": "error", "message": "no", "code": status})
        if kwargs["stream"]:
            return FakeResponse(200, lines=sse(calls, content, finish, model=body["model"]))
        return FakeResponse(200, completion(calls, content, finish, model=body["model"]))

    def close(self):
        self.closed = True


CITIES = ["Paris", "Oslo", "Rome", "Lima", "Cairo", "Quito", "Hanoi", "Dakar"]
RUN_CASES = [{"id": "weather_%s" % city.lower(), "category": "single", "prompt": "Weather in %s?" % city,
              "tools": ["get_weather", "get_stock_price"], "tool_choice": "required",
              "expect": {"calls": [{"name": "get_weather", "arguments": {"city": city}}]}} for city in CITIES]


def prompt_of(body):
    return body["messages"][-1]["content"]


def city_answer(body):
    """Right calls for most cities; Oslo's call lands in content, Rome is asked for the wrong city."""
    city = prompt_of(body)[len("Weather in "):-1]
    if city == "Oslo":
        return 200, None, CALL_IN_CONTENT.replace("Paris", "Oslo"), "stop"
    return 200, [("get_weather", {"city": "Milan" if city == "Rome" else city})], None, None


def run_cases(engine, concurrency, cases=RUN_CASES, tools=None):
    return tc.run_suite("http://127.0.0.1:8000/v1", cases, TOOLS if tools is None else tools, "lab-chat",
                        concurrency=concurrency, session_factory=engine.session)


def without_latency(results):
    return [{k: v for k, v in r.items() if k not in ("latency", "stream_latency")} for r in results]


def test_concurrent_cases_are_in_flight_at_once_and_score_as_one_at_a_time():
    sequential_engine = FakeEngine(city_answer)
    sequential = run_cases(sequential_engine, 1)
    assert sequential_engine.peak == 1 and len(sequential_engine.sessions) == 1

    # Every non-streamed request waits at a barrier until 4 are in flight: the run
    # only gets through when 4 cases really run at once (8 cases, two rounds).
    barrier = threading.Barrier(4, timeout=10)
    engine = FakeEngine(city_answer, hold=lambda body: None if body["stream"] else barrier.wait())
    concurrent = run_cases(engine, 4)
    assert engine.peak == 4  # 4 at once, never more

    # The suite's order, and the same content as one case at a time.
    assert [r["id"] for r in concurrent] == [case["id"] for case in RUN_CASES]
    assert without_latency(concurrent) == without_latency(sequential)
    assert [r["passed"] for r in concurrent] == [True, False, False, True, True, True, True, True]
    assert all(r["latency"] is not None and r["stream_latency"] is not None for r in concurrent)

    # Each case: its non-streamed request, then its streamed one, asked as one at a time asks them.
    assert sorted(engine.bodies, key=json.dumps) == sorted(sequential_engine.bodies, key=json.dumps)
    for case in RUN_CASES:
        streams = [body["stream"] for body in engine.bodies if prompt_of(body) == case["prompt"]]
        assert streams == [False, True]

    # One session per thread, never shared, all closed.
    assert 2 <= len(engine.sessions) <= 4
    assert all(len(session.threads) == 1 and session.closed for session in engine.sessions)
    assert len(set().union(*(session.threads for session in engine.sessions))) == len(engine.sessions)


def test_the_barrier_holds_when_fewer_run_at_once():
    """The control for the test above: with 3 at once, 4 requests are never in flight together."""
    barrier = threading.Barrier(4, timeout=0.5)
    engine = FakeEngine(city_answer, hold=lambda body: None if body["stream"] else barrier.wait())
    with pytest.raises(threading.BrokenBarrierError):
        run_cases(engine, 3)
    assert engine.peak == 3


def test_four_at_once_take_about_a_quarter_of_the_time():
    """Every request takes 0.1 s: 16 one after another take 1.6 s; 4 cases at once, 2 rounds of 2 requests, 0.4 s.

    The only test here that reads the clock; the barrier tests above prove the concurrency itself.
    """
    timings = {}
    for concurrency in (1, 4):
        engine = FakeEngine(city_answer, hold=lambda body: time.sleep(0.1))
        started = time.monotonic()
        results = run_cases(engine, concurrency)
        timings[concurrency] = time.monotonic() - started
        assert engine.peak == concurrency and len(results) == 8
        assert all(r["latency"] >= 0.1 and r["stream_latency"] >= 0.1 for r in results)  # per case, as before
    assert timings[1] >= 1.6
    assert timings[4] < timings[1] / 2, timings  # about a quarter; half leaves room for a busy test machine


@pytest.mark.parametrize("concurrency", [1, 4])
def test_abort_stops_the_run_with_the_first_abort_in_suite_order(concurrency):
    """Case 3 answers 404 and case 5 401: both runs raise case 3's abort, as one case at a time does, and stop early."""
    cases = RUN_CASES + [dict(case, id=case["id"] + "_again") for case in RUN_CASES]
    lima_answered = threading.Event()

    def answer(body):
        city = prompt_of(body)[len("Weather in "):-1]
        if city == "Lima":
            lima_answered.set()
            return 404, None, None, None
        return (401, None, None, None) if city == "Quito" else city_answer(body)

    # With 4 at once, cases 0-2 are still in flight when case 3 aborts; case 5 may abort too.
    def hold(body):
        if concurrency > 1 and prompt_of(body) != "Weather in Lima?":
            lima_answered.wait(5)

    engine = FakeEngine(answer, hold=hold)
    with pytest.raises(tc.AbortRun) as aborted:
        run_cases(engine, concurrency, cases)
    assert str(aborted.value).startswith("POST http://127.0.0.1:8000/v1/chat/completions answered HTTP 404 "
                                         "(wrong URL, or the server does not serve model 'lab-chat')")
    asked = [(prompt_of(body), body["stream"]) for body in engine.bodies]
    for case in cases[:3]:  # the cases before the abort ran in full
        assert (case["prompt"], False) in asked and (case["prompt"], True) in asked
    if concurrency == 1:
        assert len(asked) == 7  # cases 0-2 twice, case 3 once
    assert len(asked) < 2 * len(cases)  # the run stopped
    assert all(session.closed for session in engine.sessions)


class LastFirstExecutor:
    """Stands in for ThreadPoolExecutor and runs the submitted cases last first, when the with block ends."""

    def __init__(self, max_workers=None, thread_name_prefix=""):
        self.tasks = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for future, fn, args in reversed(self.tasks):
            try:
                future.set_result(fn(*args))
            except Exception as exc:  # pylint: disable=broad-except
                future.set_exception(exc)
        return False

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        self.tasks.append((future, fn, args))
        return future


def test_any_execution_order_gives_the_suite_order_and_the_first_abort(monkeypatch):
    """Whatever order the threads run the cases in, results and aborts are those of one case at a time."""
    monkeypatch.setattr(tc, "ThreadPoolExecutor", LastFirstExecutor)
    engine = FakeEngine(city_answer)
    results = run_cases(engine, 4)
    assert [prompt_of(body) for body in engine.bodies[:2]] == ["Weather in Dakar?"] * 2  # the last case ran first
    assert without_latency(results) == without_latency(run_cases(FakeEngine(city_answer), 1))

    def answer(body):
        status = {"Weather in Lima?": 404, "Weather in Quito?": 401}.get(prompt_of(body))
        return (status, None, None, None) if status else city_answer(body)

    engine = FakeEngine(answer)
    with pytest.raises(tc.AbortRun, match="answered HTTP 404"):  # case 3's, though case 5 aborted first
        run_cases(engine, 4)
    # Cases 7 and 6 ran before anything aborted; case 5 aborted; case 4 still ran, case 3 aborted, and the
    # cases before it ran as they would have one at a time.
    assert [prompt_of(body) for body in engine.bodies] == [
        "Weather in %s?" % city for city in ("Dakar", "Dakar", "Hanoi", "Hanoi", "Quito", "Cairo", "Cairo", "Lima",
                                             "Rome", "Rome", "Oslo", "Oslo", "Paris", "Paris")]


@pytest.mark.parametrize("concurrency", [0, -1, True, 2.0, "4"])
def test_concurrency_below_one_is_refused(concurrency):
    engine = FakeEngine(city_answer)
    with pytest.raises(ValueError, match=r"^concurrency must be 1 \(one case at a time\) or more, got "):
        run_cases(engine, concurrency)
    assert engine.bodies == []


def _verdict(case_id, passed):
    return {"id": case_id, "category": "single", "passed": passed, "reasons": [] if passed else ["wrong"],
            "latency": 1.0}


@pytest.mark.parametrize("verdicts, passed, flipped", [
    ([True], True, False),
    ([False], False, False),
    ([True, False], False, True),  # a tie fails
    ([True, True, False], True, True),
    ([False, True, False], False, True),
    ([True, True, True], True, False),
])
def test_combine_runs_majority(verdicts, passed, flipped):
    runs = [[_verdict("a", v), _verdict("b", True)] for v in verdicts]
    combined = tc.combine_runs(runs)
    first = combined["results"][0]
    assert first["passed"] is passed and first["verdicts"] == verdicts
    assert combined["flipped"] == (["a"] if flipped else [])
    assert combined["results"][1]["passed"] is True
    assert combined["scores"] == [100.0 if v else 50.0 for v in verdicts]


def test_combine_runs_refuses_mismatched_runs():
    with pytest.raises(ValueError, match="different cases at position 0"):
        tc.combine_runs([[_verdict("a", True)], [_verdict("b", True)]])
    with pytest.raises(ValueError, match="one or more runs"):
        tc.combine_runs([])


def test_anyof_ref_tool_scores_like_its_flattened_equivalent():
    """Issue 23's acceptance: a tool schema with anyOf/$ref/$defs/const scores like its flattened equivalent.

    One case per argument set of WEATHER_ARGUMENTS; the server answers each with that set (right
    where the schema allows it). The case expects exactly those values, so only the schema decides.
    """
    cases = [{"id": "weather_%02d" % index, "category": "schema", "prompt": "case %d" % index,
              "tools": ["get_weather"], "tool_choice": "required",
              "expect": {"calls": [{"name": "get_weather", "arguments": arguments}]}}
             for index, (arguments, dummy) in enumerate(WEATHER_ARGUMENTS)]

    def answer(body):
        index = int(prompt_of(body).split()[1])
        return 200, [("get_weather", WEATHER_ARGUMENTS[index][0])], None, None

    scored = {}
    for name, parameters in (("pydantic", PYDANTIC_WEATHER), ("flat", FLAT_WEATHER)):
        suite = suites.merge_suites([{"name": name, "tools": {"get_weather": {"parameters": parameters}}, "cases": cases}])
        results = run_cases(FakeEngine(answer), 1, suite["cases"], suite["tools"])
        summary = {k: v for k, v in tc.score(results).items() if not k.startswith("latency")}
        scored[name] = ([r["passed"] for r in results], summary)
    valid = [ok for dummy, ok in WEATHER_ARGUMENTS]
    assert scored["pydantic"][0] == scored["flat"][0] == valid
    assert scored["pydantic"][1] == scored["flat"][1]
    assert scored["flat"][1]["score"] == round(100.0 * sum(valid) / len(valid), 1)


# --- a selection run in parts ----------------------------------------------------------------------


def _fake_runner(calls):
    def runner(url, batch, tools, model, concurrency=1, **request_args):
        calls.append([case["id"] for case in batch])
        return [{"id": case["id"], "category": "single", "passed": True, "reasons": [], "latency": 1.0} for case in batch]
    return runner


class Ticks:
    """A clock that moves ``step`` seconds at every reading."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


CASES5 = [{"id": "c%d" % n} for n in range(5)]


@pytest.mark.parametrize("report_after, concurrency, repeat, parts", [
    (None, 1, 1, [5]),        # all in one part
    (0.5, 1, 1, [1, 1, 1, 1, 1]),  # a part per case
    (0.5, 2, 1, [2, 2, 1]),   # a part per batch of concurrency
    (2.5, 1, 1, [3, 2]),      # ends after the batch during which report_after passed
    (0.5, 1, 3, [1, 1, 1, 1, 1]),  # each batch repeat times, then the part ends
])
def test_run_part(report_after, concurrency, repeat, parts):
    calls, done, sizes = [], [[] for _run in range(repeat)], []
    while len(done[0]) < len(CASES5):
        before = len(done[0])
        done = tc.run_part("http://x", CASES5, {}, "m", done, repeat=repeat, concurrency=concurrency,
                           report_after=report_after, clock=Ticks(1.0), runner=_fake_runner(calls))
        sizes.append(len(done[0]) - before)
    assert sizes == parts
    assert all([r["id"] for r in run] == ["c0", "c1", "c2", "c3", "c4"] for run in done)
    assert len(calls) == repeat * len(range(0, 5, concurrency))


@pytest.mark.parametrize("done, repeat, concurrency", [([[]], 2, 1), ([[], [{"id": "c0"}]], 2, 1), ([[]], 1, 0)])
def test_run_part_refuses_what_no_run_left(done, repeat, concurrency):
    with pytest.raises(ValueError):
        tc.run_part("http://x", CASES5, {}, "m", done, repeat=repeat, concurrency=concurrency, runner=_fake_runner([]))


@pytest.mark.parametrize("results, line", [
    ([{"id": "w", "category": "single", "passed": True, "latency": 4.123}], "case 3 of 18: w (single) passed in 4.1 s"),
    ([{"id": "w", "category": "single", "passed": True, "latency": None}], "case 3 of 18: w (single) passed"),
    ([{"id": "w", "category": "single", "passed": False, "reasons": ["non-stream: finish_reason is stop"]}],
     "case 3 of 18: w (single) failed: non-stream: finish_reason is stop"),
    ([{"id": "w", "category": "single", "passed": True}, {"id": "w", "category": "single", "passed": False}],
     "case 3 of 18: w (single) passed in 1 of 2 runs"),
])
def test_case_line(results, line):
    assert tc.case_line(2, 18, results) == line
