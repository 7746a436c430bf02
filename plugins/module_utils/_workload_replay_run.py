# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The replay's network side (issue 38): run a ``_workload_replay.plan()`` against an OpenAI-compatible endpoint.

Standard library only (``http.client``, ``threading``); the API key check and the server-sent events reader are
the engines' clients' (``_host.vllm_client``), the percentile ``vllm bench serve``'s (``_host.load``).

Open loop: request ``i`` is sent at ``start + at_seconds`` whether or not earlier ones finished, each on its own
thread. ``max_in_flight`` bounds the requests in flight; a request whose time comes while the bound is reached is
**not sent** (never queued to be sent late, which would turn the replay into a closed loop): it is counted in
``in_flight_bound.requests_not_sent`` and the first such time is reported. ``send_lag_seconds`` is how late the
sends were against the plan (the client's own delay, not the server's).

Each request streams (``stream: true``, ``stream_options: {include_usage: true}``) with ``max_tokens`` = the planned
output and ``ignore_eos: true`` (vLLM's sampling parameter), so the output is as long as planned.

The prompt is made from the conversation's number, as the plan's docstring says: the conversation's own text is one
endless stream drawn from ``(seed, conversation)``; a first turn is its first ``prompt_tokens`` tokens, a later turn
its first ``prefix_tokens`` tokens then ``prompt_tokens - prefix_tokens`` tokens drawn from the request's index, so
every turn of a conversation starts the same and the engine's prefix cache can find it. ``prompt: token_ids``
(``/v1/completions`` only) sends token ids, exact lengths; ``prompt: text`` sends one common English word per planned
token (one token each in the BPE vocabularies of the usual models; a chat template adds its own), and the engines'
count (``usage.prompt_tokens``) is reported next to the plan's.

Measured per request (``vllm bench serve``'s definitions, as ``_host.load``): TTFT, seconds from sending to the first
event that carries output; TPOT, (last output event - TTFT) / (completion tokens - 1); completion tokens from the
last event's ``usage``, or, when the server sends none, the output events counted. The engine that answered is the
proxy's ``X-Factory-Floor-Upstream`` header (nginx's ``$upstream_addr``, set with ``nginx_proxy_expose_upstream``;
after a retry it lists every engine tried, the last one answered); without it the engine is ``unknown``.

Report (``summarize``), in total and per engine: ``tokens_per_s`` (output tokens of the requests that succeeded over
the wall time, first send to last end), ``requests_per_min`` (requests that succeeded, same wall time), TTFT and TPOT
p50/p95 (seconds), ``errors`` and ``errors_by_status`` (the HTTP status as a string; ``no_answer`` when none came,
``stream`` when a 200's stream broke or carried an error event).
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
from urllib.parse import urlsplit

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_client as client
from ansible_collections.factory_floor.llm.plugins.module_utils._host.load import percentile

SCHEMA = "factory_floor.llm.workload_replay/1"
ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
PROMPTS = ("token_ids", "text")
DEFAULT_MAX_IN_FLIGHT = 256
DEFAULT_TIMEOUT = 600.0
DEFAULT_TOKEN_ID_RANGE = (1000, 20000)
UPSTREAM_HEADER = "X-Factory-Floor-Upstream"
USER = "factory-floor-workload-replay"
# Words that are one token each (with their leading space) in GPT-2's, Llama's and Qwen's BPE vocabularies.
_WORD_LIST = ("the of and to in is was for on are with as at be by this from or have an they which one you had not but "
              "all were when we there can been has more if no out do so up what its about than into them only some "
              "could time these two may first then any like other over new also after use most made many well year "
              "way even work back life day part place world")
WORDS = tuple(" " + word for word in _WORD_LIST.split())


class ReplayError(ValueError):
    """The replay cannot start as asked (a malformed key or URL, an endpoint the prompt kind does not fit)."""


# ------------------------------------------------------------------ prompts


def id_range(requested=None, vocab_size=None):
    """The token ids prompts are drawn from, ``(lowest, one past the highest)``: ``requested``, else the default range
    within ``vocab_size`` (the served model's ``config.json``; vLLM answers 400 "out of vocabulary" past it). Raises
    ReplayError for a range that is no range, or reaches past ``vocab_size``."""
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2):
        raise ReplayError("vocab_size must be the model's vocabulary, a count of at least 2 tokens, got %r" % (vocab_size,))
    if requested is None:
        low, high = DEFAULT_TOKEN_ID_RANGE
        if vocab_size is not None and vocab_size < high:
            # A small vocabulary (a test model): its ids past the first tenth, which hold the special tokens.
            high = vocab_size
            low = min(low, high // 10)
        return low, high
    ids = list(requested)
    if len(ids) != 2 or not 0 <= ids[0] < ids[1]:
        raise ReplayError("token_id_range must be [lowest, one past the highest] with 0 <= lowest < highest, got %s"
                          % (ids,))
    if vocab_size is not None and ids[1] > vocab_size:
        raise ReplayError("token_id_range %s reaches past the model's vocabulary of %d tokens (vocab_size of its "
                          "config.json): give one with highest <= %d, or leave it out to draw within the vocabulary"
                          % (ids, vocab_size, vocab_size))
    return ids[0], ids[1]


def _stream(key, count, token_ids, id_range):
    rng = random.Random(key)
    if token_ids:
        low, high = id_range
        return [rng.randrange(low, high) for _number in range(count)]
    return [rng.choice(WORDS) for _number in range(count)]


def prompt_of(request, seed, index, token_ids=True, id_range=DEFAULT_TOKEN_ID_RANGE):
    """The prompt of planned ``request`` number ``index``: token ids (a list) or text, ``prompt_tokens`` long.

    A first turn (``prefix_tokens`` 0) is the conversation's text; a later turn starts with ``prefix_tokens`` of it.
    """
    total = int(request["prompt_tokens"])
    prefix = int(request.get("prefix_tokens") or 0) or total
    prefix = min(prefix, total)
    own = _stream("%s/conversation/%s" % (seed, request["conversation"]), prefix, token_ids, id_range)
    rest = _stream("%s/request/%s" % (seed, index), total - prefix, token_ids, id_range)
    parts = own + rest
    return parts if token_ids else "".join(parts).lstrip()


def body_of(request, seed, index, model, endpoint="completions", token_ids=True, id_range=DEFAULT_TOKEN_ID_RANGE):
    """The JSON body of one streamed request."""
    prompt = prompt_of(request, seed, index, token_ids, id_range)
    body = {"model": model, "max_tokens": int(request["output_tokens"]), "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0, "user": USER}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


# ------------------------------------------------------------------ one request


def _connection(url, timeout, context):
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout, context=context)
    return http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)


def _has_output(choice):
    delta = choice.get("delta") or {}
    return bool(choice.get("text") or delta.get("content") or delta.get("reasoning_content")
                or delta.get("reasoning") or delta.get("tool_calls"))


def engine_of(header):
    """The engine that answered, from ``$upstream_addr`` (``a:8000, b:8000`` after a retry: the last)."""
    if not header:
        return "unknown"
    return header.replace(" : ", ",").split(",")[-1].strip() or "unknown"


def send(url, path, body, headers, timeout=DEFAULT_TIMEOUT, context=None, clock=time.monotonic):
    """Send one streamed request and measure it; never raises for a failed request.

    Returns ``{ok, status, error, error_kind, engine, start, end, ttft, tpot, last_token, completion_tokens,
    prompt_tokens, output_events}``; times in seconds of ``clock``, ``ttft``/``last_token`` from ``start``.
    """
    record = {"ok": False, "status": None, "error": None, "error_kind": None, "engine": "unknown", "start": clock(),
              "end": None, "ttft": None, "tpot": None, "last_token": None, "completion_tokens": None,
              "prompt_tokens": None, "output_events": 0}
    connection = None
    done = False
    try:
        connection = _connection(url, timeout, context)
        payload = json.dumps(body).encode("utf-8")
        connection.request("POST", path, body=payload, headers=dict(headers, **{
            "Content-Type": "application/json", "Accept": "text/event-stream"}))
        response = connection.getresponse()
        record["status"] = response.status
        record["engine"] = engine_of(response.getheader(UPSTREAM_HEADER))
        if response.status != 200:
            text = response.read(2000).decode("utf-8", "replace")
            record["error"] = "HTTP %d: %s" % (response.status, " ".join(text.split())[:200])
            record["error_kind"] = str(response.status)
        else:
            for event in client.iter_sse(iter(response.readline, b"")):
                if event is client.SSE_DONE:
                    done = True
                    break
                if event.get("error"):
                    error = event["error"]
                    record["error"] = "error event: %s" % (error.get("message", error) if isinstance(error, dict) else error)
                    break
                usage = event.get("usage")
                if usage:
                    record["completion_tokens"] = usage.get("completion_tokens")
                    record["prompt_tokens"] = usage.get("prompt_tokens")
                choices = event.get("choices") or []
                if any(_has_output(c) for c in choices):
                    now = clock() - record["start"]
                    record["output_events"] += 1
                    if record["ttft"] is None:
                        record["ttft"] = now
                    record["last_token"] = now
            if not done and record["error"] is None:
                record["error"] = "the stream ended without data: [DONE]"
            if record["error"] is not None:
                record["error_kind"] = "stream"
    except client.EventNotJSON as exc:
        record["error"], record["error_kind"] = "an event was not JSON: %s" % exc, "stream"
    except (OSError, http.client.HTTPException, ValueError) as exc:  # socket.timeout is an OSError
        record["error"] = "%s: %s" % (type(exc).__name__, exc)
        record["error_kind"] = "stream" if record["status"] == 200 else "no_answer"
    finally:
        if connection is not None:
            connection.close()
    record["end"] = clock()
    record["ok"] = record["error"] is None
    if record["completion_tokens"] is None and record["output_events"]:
        record["completion_tokens"] = record["output_events"]
    tokens = record["completion_tokens"]
    if record["ok"] and tokens and tokens > 1 and record["ttft"] is not None:
        record["tpot"] = (record["last_token"] - record["ttft"]) / (tokens - 1)
    return record


# ------------------------------------------------------------------ the open loop


def run_open_loop(requests, send_one, max_in_flight=DEFAULT_MAX_IN_FLIGHT, clock=time.monotonic,
                  sleep=time.sleep, join_timeout=None):
    """Send ``send_one(index, request)`` at each request's ``at_seconds`` from now, each on its own thread.

    Returns ``{records, not_sent, started, ended, send_lag_seconds}``: a record per request sent (with ``index``,
    ``at_seconds`` and ``sent_late_seconds``), in plan order; ``not_sent`` the planned requests skipped because
    ``max_in_flight`` were in flight at their time (``[{index, at_seconds, in_flight}]``).
    """
    if int(max_in_flight) < 1:
        raise ReplayError("max_in_flight must be at least 1, got %r" % (max_in_flight,))
    lock = threading.Lock()
    state = {"in_flight": 0}
    records, not_sent, threads = {}, [], []
    started = clock()

    def worker(index, request, late):
        try:
            record = send_one(index, request)
        except Exception as exc:  # pylint: disable=broad-except  # a sender's bug is a failed request, not a hang
            record = {"ok": False, "status": None, "error": "%s: %s" % (type(exc).__name__, exc),
                      "error_kind": "no_answer", "engine": "unknown", "start": None, "end": clock()}
        record.update(index=index, at_seconds=request["at_seconds"], sent_late_seconds=late)
        with lock:
            records[index] = record
            state["in_flight"] -= 1

    for index, request in enumerate(requests):
        wait = started + request["at_seconds"] - clock()
        if wait > 0:
            sleep(wait)
        late = max(clock() - started - request["at_seconds"], 0.0)
        with lock:
            if state["in_flight"] >= max_in_flight:
                not_sent.append({"index": index, "at_seconds": request["at_seconds"], "in_flight": state["in_flight"]})
                continue
            state["in_flight"] += 1
        thread = threading.Thread(target=worker, args=(index, request, late), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(join_timeout)
    lags = [r["sent_late_seconds"] for r in records.values()]
    return {"records": [records[i] for i in sorted(records)], "not_sent": not_sent, "started": started,
            "ended": clock(), "send_lag_seconds": {"p50": _round(percentile(lags, 0.5)),
                                                   "max": _round(max(lags) if lags else None)}}


# ------------------------------------------------------------------ the report


def _round(value, digits=6):
    return None if value is None else round(value, digits)


def _section(records):
    ok = [r for r in records if r["ok"]]
    if ok:
        ends = [r["end"] for r in records if r.get("end") is not None]
        wall = max(ends) - min(r["start"] for r in records if r.get("start") is not None)
    else:
        wall = None
    tokens = sum(r["completion_tokens"] or 0 for r in ok)
    errors = {}
    for record in records:
        if not record["ok"]:
            kind = record.get("error_kind") or "no_answer"
            errors[kind] = errors.get(kind, 0) + 1
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    tpot = [r["tpot"] for r in ok if r["tpot"] is not None]
    counted = [r for r in ok if r.get("prompt_tokens") is not None]
    return {
        "requests_sent": len(records),
        "requests_ok": len(ok),
        "errors": len(records) - len(ok),
        "errors_by_status": errors,
        "wall_seconds": _round(wall, 3),
        "output_tokens": tokens,
        "tokens_per_s": _round(tokens / wall, 3) if wall else None,
        "requests_per_min": _round(len(ok) * 60.0 / wall, 3) if wall else None,
        "ttft_seconds": {"p50": _round(percentile(ttft, 0.5)), "p95": _round(percentile(ttft, 0.95))},
        "tpot_seconds": {"p50": _round(percentile(tpot, 0.5)), "p95": _round(percentile(tpot, 0.95))},
        "prompt_tokens_counted": sum(r["prompt_tokens"] for r in counted) if counted else None,
    }


def summarize(run, plan):
    """The replay's report: ``total`` and ``engines`` (by the engine that answered), the in-flight bound, the plan."""
    records = run["records"]
    total = _section(records)
    total["requests_planned"] = len(plan["requests"])
    total["output_tokens_planned"] = sum(r["output_tokens"] for r in plan["requests"])
    sent = {r["index"] for r in records}
    total["prompt_tokens_planned_sent"] = sum(r["prompt_tokens"] for i, r in enumerate(plan["requests"]) if i in sent)
    engines = {}
    for record in records:
        engines.setdefault(record.get("engine") or "unknown", []).append(record)
    errors = [{"index": r["index"], "engine": r.get("engine"), "status": r.get("status"), "error": r["error"]}
              for r in records if not r["ok"]][:5]
    not_sent = run["not_sent"]
    return {
        "schema": SCHEMA,
        "plan": {"seed": plan.get("seed"), "duration_seconds": plan.get("duration_seconds"),
                 "arrival_rate_requests_per_s": plan.get("arrival_rate_requests_per_s"), "summary": plan.get("summary")},
        "total": total,
        "engines": [dict(_section(engines[name]), name=name) for name in sorted(engines)],
        "in_flight_bound": {"max_in_flight": run.get("max_in_flight"), "hit": bool(not_sent),
                            "requests_not_sent": len(not_sent),
                            "first_at_seconds": not_sent[0]["at_seconds"] if not_sent else None},
        "send_lag_seconds": run["send_lag_seconds"],
        "first_errors": errors,
    }


def check_target(url, api_key, endpoint, prompt):
    """The base URL (no ``/v1``) and the request headers; ReplayError naming what to change, never the key."""
    if endpoint not in ENDPOINTS:
        raise ReplayError("endpoint must be one of %s, not %r" % (", ".join(ENDPOINTS), endpoint))
    if prompt not in PROMPTS:
        raise ReplayError("prompt must be one of %s, not %r" % (", ".join(PROMPTS), prompt))
    if prompt == "token_ids" and endpoint == "chat":
        raise ReplayError("prompt token_ids needs endpoint completions (/v1/chat/completions takes text only)")
    try:
        base = client.base_url(url)
    except ValueError as exc:
        raise ReplayError(str(exc)) from None
    problem = client.api_key_problem(api_key)
    if problem is not None:
        raise ReplayError("the api_key %s" % problem)
    headers = {"User-Agent": USER}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return base, headers


def replay(plan, url, model, api_key=None, endpoint="completions", prompt="token_ids",
           max_in_flight=DEFAULT_MAX_IN_FLIGHT, timeout=DEFAULT_TIMEOUT, context=None,
           id_range=DEFAULT_TOKEN_ID_RANGE):
    """Run ``plan`` open loop against ``url`` (the proxy's base URL) and return ``summarize``'s report."""
    base, headers = check_target(url, api_key, endpoint, prompt)
    parts = urlsplit(base)
    path = parts.path + ENDPOINTS[endpoint]
    token_ids = prompt == "token_ids"
    seed = plan.get("seed")

    def send_one(index, request):
        body = body_of(request, seed, index, model, endpoint, token_ids, id_range)
        return send(base, path, body, headers, timeout=timeout, context=context)

    run = run_open_loop(plan["requests"], send_one, max_in_flight=max_in_flight)
    run["max_in_flight"] = max_in_flight
    report = summarize(run, plan)
    report.update(url=base + ENDPOINTS[endpoint], endpoint=endpoint, prompt=prompt, model=model)
    return report


def tls_context(validate_certs=True, ca_path=None):
    """An ``ssl`` context for an https proxy."""
    if not validate_certs:
        return ssl._create_unverified_context()  # pylint: disable=protected-access  # the operator asked for it
    return ssl.create_default_context(cafile=ca_path or None)
