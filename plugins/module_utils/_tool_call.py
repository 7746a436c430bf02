# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run a tool-calling suite against an OpenAI-compatible server (vLLM) and score it.

Private to the collection; used by ``factory_floor.llm.tool_call_test``. This is the
HTTP layer (needs ``requests``) and the score; ``_tool_suite`` reads the suites and
builds the requests, ``_tool_check`` holds the rules a reply must pass (its docstring
states them: the gate's contract).
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_client as client
from ansible_collections.factory_floor.llm.plugins.module_utils._tool_check import (
    Reply,
    parse_completion,
    parse_stream,
    reply_errors,
    stream_mismatch,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._tool_suite import build_request, case_tools
# requests is optional: the module reports it missing with missing_required_lib().
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_client import (
    HAS_REQUESTS,
    REQUESTS_IMPORT_ERROR,
    requests,
)


# Bodies kept per failing case (characters); a runaway answer is cut here.
MAX_BODY_CHARS = 20000
# HTTP answers that mean the whole run is pointless (key rejected, wrong URL or model).
ABORT_STATUSES = (401, 403, 404)


class AbortRun(RuntimeError):
    """The server answered something that makes every further case pointless."""


# ---------------------------------------------------------------------------
# Running a suite against a server
# ---------------------------------------------------------------------------

def _headers(api_key) -> dict:
    return client.headers(api_key, accept=None, **{"Content-Type": "application/json"})


def _cut(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    return text[:MAX_BODY_CHARS] + "... (%d more characters)" % (len(text) - MAX_BODY_CHARS)


class Exchange:
    """One request and what came back."""

    def __init__(self):
        self.status = None  # HTTP status, None when none came
        self.body = ""      # the raw answer (JSON text, or the SSE lines)
        self.latency = None  # seconds from sending to the whole answer
        self.reply = None
        self.error = None   # transport or HTTP error, as a sentence


def post(session, url: str, body: dict, api_key, timeout: float) -> Exchange:
    """POST a chat completion (streamed when body['stream']) and read the whole answer."""
    exchange = Exchange()
    started = time.monotonic()
    try:
        response = session.post(url, json=body, headers=_headers(api_key), timeout=(min(timeout, 10.0), timeout),
                                proxies=client.no_proxies(), allow_redirects=False, stream=body["stream"])
        exchange.status = response.status_code
        if body["stream"] and response.status_code == 200:
            lines = []
            for raw in response.iter_lines():
                lines.append(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
                if time.monotonic() - started > timeout:
                    response.close()
                    exchange.error = "the stream did not end within %ss" % timeout
                    break
            exchange.body = _cut("\n".join(lines))
            if exchange.error is None:
                exchange.reply = parse_stream(lines)
        else:
            text = response.content.decode("utf-8", "replace")
            exchange.body = _cut(text)
            if response.status_code == 200:
                try:
                    exchange.reply = parse_completion(json.loads(text))
                except ValueError:
                    exchange.reply = Reply(error="the answer is not JSON")
            else:
                exchange.error = "HTTP %s" % response.status_code
    except requests.exceptions.ConnectionError as exc:
        exchange.error = "no answer from %s: %s" % (url, _reason(exc))
    except requests.exceptions.Timeout:
        exchange.error = "no answer from %s within %ss" % (url, timeout)
    except (requests.exceptions.RequestException, client.ClientConfigError, UnicodeError) as exc:
        exchange.error = "request to %s failed: %s" % (url, _reason(exc))
    exchange.latency = time.monotonic() - started
    if exchange.error is None and exchange.latency > timeout:
        exchange.error = "the answer took %.1fs, more than the timeout %ss" % (exchange.latency, timeout)
    return exchange


def _reason(exc) -> str:
    # Refused before it was sent: named, never quoted (requests' own text holds the header).
    words = client.config_error(exc)
    if words is not None:
        return "not sent: %s" % words
    text = str(exc)
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text[:300]


def run_case(session, url: str, case: dict, tools: dict, model: str, api_key=None, timeout: float = 120.0,
             temperature: float = 0.0, max_tokens: int = 512, streaming: bool = True) -> dict:
    """Run one case non-streamed (and streamed) and score it. Raises :class:`AbortRun` on 401/403/404."""
    offered = case_tools(case, tools)
    result = {"id": case["id"], "category": case["category"], "passed": False, "reasons": [],
              "latency": None, "stream_latency": None, "calls": [], "body": None, "stream_body": None, "answered": False}
    runs = [("non-stream", False)] + ([("stream", True)] if streaming else [])
    replies = {}
    for label, stream in runs:
        exchange = post(session, url, build_request(case, tools, model, temperature, max_tokens, stream),
                        api_key, timeout)
        if exchange.status in ABORT_STATUSES:
            raise AbortRun("POST %s answered HTTP %s%s: %s" % (
                url, exchange.status,
                " (the server rejected the api_key)" if exchange.status in (401, 403) else
                " (wrong URL, or the server does not serve model %r)" % model, exchange.body[:300]))
        result["answered"] = result["answered"] or exchange.status is not None
        result["stream_latency" if stream else "latency"] = round(exchange.latency, 3)
        result["stream_body" if stream else "body"] = exchange.body
        if exchange.error:
            result["reasons"].append("%s: %s" % (label, exchange.error))
            continue
        replies[label] = exchange.reply
        if not stream:
            result["calls"] = [{"name": name, "arguments": args} for name, args in exchange.reply.calls()]
        result["reasons"].extend("%s: %s" % (label, why) for why in reply_errors(exchange.reply, case, offered))
    if not result["reasons"] and "stream" in replies and "calls" in case["expect"]:
        mismatch = stream_mismatch(replies["non-stream"], replies["stream"])
        if mismatch:
            result["reasons"].append(mismatch)
    result["passed"] = not result["reasons"]
    return result


def score(results: list) -> dict:
    """Score 0-100 (percent of cases passed, one decimal) overall and per category."""
    by_category = {}
    for result in results:
        entry = by_category.setdefault(result["category"], {"total": 0, "passed": 0})
        entry["total"] += 1
        entry["passed"] += 1 if result["passed"] else 0
    for entry in by_category.values():
        entry["score"] = round(100.0 * entry["passed"] / entry["total"], 1)
    passed = sum(1 for result in results if result["passed"])
    latencies = [r["latency"] for r in results if r["latency"] is not None]
    return {
        "score": round(100.0 * passed / len(results), 1) if results else 0.0,
        "total": len(results),
        "passed_count": passed,
        "by_category": by_category,
        "latency_mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "latency_max": round(max(latencies), 3) if latencies else None,
    }


def run_suite(url: str, cases: list, tools: dict, model: str, api_key=None, timeout: float = 120.0,
              temperature: float = 0.0, max_tokens: int = 512, streaming: bool = True, concurrency: int = 1,
              session_factory=None) -> list:
    """Run the cases against ``url`` (the server's base URL); return the per-case results in the order of ``cases``.

    Up to ``concurrency`` cases run at once, each in its own thread with its own
    session (``session_factory()``, by default ``_vllm_client.session``; a session is
    never shared between threads). A case's requests (non-streamed, then streamed)
    stay one after the other inside it. Given the same answers, the results do
    not depend on ``concurrency``: they are collected in the order of ``cases``.

    :class:`AbortRun` (HTTP 401/403/404) stops the run: no case after the
    aborting one starts, the cases already running finish, and the cases before
    it still run, so the abort raised is the first in the order of ``cases``,
    the one a run one case at a time would raise.
    """
    if not HAS_REQUESTS:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency must be 1 (one case at a time) or more, got %r" % (concurrency,))
    endpoint = client.base_url(url) + "/v1/chat/completions"
    new_session = session_factory or client.session
    sessions = []
    sessions_lock = threading.Lock()
    per_thread = threading.local()
    # Index of the first case that raised; the cases after it are skipped.
    stop = {"at": len(cases)}
    stop_lock = threading.Lock()

    def thread_session():
        session = getattr(per_thread, "session", None)
        if session is None:
            session = per_thread.session = new_session()
            with sessions_lock:
                sessions.append(session)
        return session

    def one(index, case):
        with stop_lock:
            if index > stop["at"]:  # an earlier case aborted the run: send nothing more
                return None
        try:
            return run_case(thread_session(), endpoint, case, tools, model, api_key, timeout, temperature,
                            max_tokens, streaming)
        except BaseException:
            with stop_lock:
                stop["at"] = min(stop["at"], index)
            raise

    workers = min(concurrency, len(cases))
    try:
        if workers <= 1:
            return [one(index, case) for index, case in enumerate(cases)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tool-call") as pool:
            futures = [pool.submit(one, index, case) for index, case in enumerate(cases)]
        # Leaving the with block waited for every case.
        for future in futures:  # the first error in the order of the cases, as one case at a time meets it
            if future.exception() is not None:
                raise future.exception()
        return [future.result() for future in futures]
    finally:
        for session in sessions:
            session.close()


def combine_runs(runs: list) -> dict:
    """Judge each case by majority over repeated runs of the same cases (a tie fails).

    ``runs`` is a list of result lists, each in the same case order (``run_suite``'s
    return). A case whose verdict differs between runs is *flipped*: greedy decoding
    is not batch-invariant, and the same build can pass a case once and fail it the
    next time. Returns ``results`` (per case: the first run's result that agrees with
    the majority, its ``passed`` the majority verdict, ``verdicts`` every run's),
    ``flipped`` (case ids, in case order) and ``scores`` (each run's score).
    """
    if not runs or any(len(run) != len(runs[0]) for run in runs):
        raise ValueError("combine_runs needs one or more runs of the same cases")
    results = []
    flipped = []
    for index in range(len(runs[0])):
        verdicts = [bool(run[index]["passed"]) for run in runs]
        ids = {run[index]["id"] for run in runs}
        if len(ids) != 1:
            raise ValueError("runs list different cases at position %d: %s" % (index, sorted(ids)))
        passed = sum(verdicts) * 2 > len(verdicts)
        chosen = next(run[index] for run in runs if bool(run[index]["passed"]) == passed)
        result = dict(chosen, passed=passed, verdicts=verdicts)
        if len(set(verdicts)) > 1:
            flipped.append(result["id"])
            if not passed:
                result["reasons"] = list(result["reasons"]) + [
                    "passed in %d of %d runs (a majority is needed)" % (sum(verdicts), len(verdicts))]
        results.append(result)
    return {"results": results, "flipped": flipped, "scores": [score(run)["score"] for run in runs]}


def run_part(url: str, cases: list, tools: dict, model: str, done: list, repeat: int = 1, concurrency: int = 1,
             report_after=None, clock=time.monotonic, runner=None, **request_args) -> list:
    """Go on with a run of the selection that is cut into parts, so that each part can report.

    ``done`` holds, per repeat (``repeat`` lists, all of one length), the results of the
    cases already run, in case order (``[[]] * repeat`` at the start). The cases from there
    on run in batches of ``concurrency`` (each batch as :func:`run_suite` runs them, at
    once), every batch ``repeat`` times, until ``report_after`` seconds have passed since
    this part began (after at least one batch) or every case ran; None runs them all.
    Returns ``done`` extended. ``request_args`` go to :func:`run_suite` (``api_key``,
    ``timeout``, ``temperature``, ``max_tokens``, ``streaming``); ``runner`` replaces it in
    tests. A selection run in one part is :func:`run_suite` ``repeat`` times, batch by batch.
    """
    if repeat < 1 or len(done) != repeat or len({len(run) for run in done}) > 1:
        raise ValueError("done must hold one result list per repeat (%d), all of one length" % repeat)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency must be 1 (one case at a time) or more, got %r" % (concurrency,))
    runner = runner or run_suite
    runs = [list(run) for run in done]
    began = clock()
    while len(runs[0]) < len(cases):
        batch = cases[len(runs[0]):len(runs[0]) + concurrency]
        for run in runs:
            run.extend(runner(url, batch, tools, model, concurrency=concurrency, **request_args))
        if report_after is not None and clock() - began >= report_after:
            break
    return runs


def case_line(index: int, total: int, results: list) -> str:
    """One line for people about case ``index`` (0-based) of ``total``, from its result in each repeat.

    ``case 3 of 18: single_weather (single) passed in 4.1 s`` (the non-streamed answer's
    latency), ``... failed: non-stream: ...`` (its first reason), or with repeats
    ``... passed in 2 of 3 runs``.
    """
    first = results[0]
    head = "case %d of %d: %s (%s)" % (index + 1, total, first["id"], first["category"])
    if len(results) > 1:
        return "%s passed in %d of %d runs" % (head, sum(1 for r in results if r["passed"]), len(results))
    if first["passed"]:
        return "%s passed%s" % (head, " in %.1f s" % first["latency"] if first.get("latency") is not None else "")
    reason = (first.get("reasons") or ["no reason given"])[0]
    return "%s failed: %s" % (head, reason if len(reason) <= 200 else reason[:197] + "...")


def first_model(url: str, api_key=None, timeout: float = 10.0, session=None) -> str:
    """The first model id ``GET /v1/models`` lists."""
    target = client.base_url(url) + "/v1/models"
    getter = session or requests
    try:
        response = getter.get(target, headers=_headers(api_key), timeout=timeout, proxies=client.no_proxies())
    except (requests.exceptions.RequestException, client.ClientConfigError, UnicodeError) as exc:
        raise AbortRun("GET %s: %s" % (target, _reason(exc))) from exc
    if response.status_code != 200:
        raise AbortRun("GET %s answered HTTP %s: %s" % (target, response.status_code, response.text[:300]))
    try:
        return str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise AbortRun("GET %s did not list a model" % target) from exc
