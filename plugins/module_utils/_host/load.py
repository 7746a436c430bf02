# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Load one vLLM engine with streamed chat completions and measure it.

Pure logic, standard library and ``requests`` (through ``_vllm_client``) only, never
``ansible``: used by the ``factory_floor.llm.concurrency_sweep`` module on the replica host
and copied, in the host programs' package (``_host/``), next to ``benchmarks/balance.py``
on the proxy host (imported there as ``_host.load``).

What is measured, per request (one streamed ``POST /v1/chat/completions`` with
``stream_options: {include_usage: true}``):

* TTFT: seconds from sending the request to the first server-sent event that carries
  generated output (``delta.content``, ``delta.reasoning_content`` or ``delta.tool_calls``;
  if no event ever carries any, the first event with a choice);
* end-to-end latency: seconds from sending to ``data: [DONE]``;
* prompt and completion tokens: the ``usage`` object of the last event, as the engine
  counted them. They are never estimated from the number of events: with speculative
  decoding one event carries several tokens;
* ITL (inter-token latency): the gaps, seconds, between successive events that carry a
  choice, from the first generated output on - ``vllm bench serve``'s definition
  (vllm/benchmarks/lib/endpoint_request_func.py: one gap per chunk after the first; a
  chunk of several tokens is one gap);
* TPOT (time per output token, the first excluded): (latency - TTFT) / (completion
  tokens - 1), where latency runs to the last event that carries a choice (the usage
  event and ``[DONE]`` carry no token) - ``vllm bench serve``'s definition
  (vllm/benchmarks/serve.py), for requests with more than one completion token.

Per level (one profile, one number of concurrent requests) ``concurrency`` workers each
send one request at a time, back to back (a closed loop), until the level's duration is
up or its request count is reached; requests already sent then finish. tokens/s is the
completion tokens of the requests that succeeded divided by the level's wall time (first
request sent to last request finished), the definition of vLLM's own serving benchmark.
Percentiles are linear between closest ranks, as ``numpy.percentile`` (and so ``vllm bench
serve``) computes them; ITL percentiles pool every gap of every request of the level.

Public API::

    percentile(values, q) -> float | None
    Workload(...).payload(profile, index) -> dict
    stream_chat(session, url, payload, headers=None, timeout=600, clock=...) -> record
    run_closed_loop(send, concurrency, duration=None, count=None, max_failures=None, clock=...) -> [record]
    summarize(records) -> dict
    preflight(base_url, model, ...) -> dict
    sweep(base_url, model, ...) -> dict

The recommendation and the table are in ``_concurrency_plan``.
"""

from __future__ import annotations

import math
import random
import threading
import time

from . import vllm_client as client


PROFILES = ("short", "long")
DEFAULT_CONCURRENCY = (1, 4, 8, 12, 16)
DEFAULT_SHORT_MAX_TOKENS = 128
DEFAULT_LONG_PROMPT_TOKENS = 3000
DEFAULT_LONG_MAX_TOKENS = 256
DEFAULT_TIMEOUT = 600.0
_CONNECT_TIMEOUT = 10.0


class LoadError(Exception):
    """The engine cannot be loaded as asked; the message says what was tried and what was seen."""


# ------------------------------------------------------------------ statistics


def percentile(values, q):
    """The ``q`` (0-1) quantile of ``values``, linear between closest ranks (numpy's default).

    None for no values.
    """
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    k = (len(ordered) - 1) * float(q)
    lo = int(math.floor(k))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _round(value, digits):
    return None if value is None else round(value, digits)


def summarize(records):
    """Statistics of one level from its request records (see ``stream_chat``).

    Seconds for latencies, tokens/s and requests/min for rates. Rates are None when no
    request succeeded, and tokens/s is None when a successful request's answer carried no
    ``usage`` (the engine did not honour ``stream_options.include_usage``): tokens are
    measured, never guessed. TTFT, TPOT and end-to-end percentiles are over the successful
    requests (TPOT over those with more than one completion token), ITL's over every gap
    of every successful request.
    """
    ok = [r for r in records if r["ok"]]
    summary = {
        "requests_ok": len(ok),
        "requests_failed": len(records) - len(ok),
        "duration_s": None,
        "completion_tokens": None,
        "completion_tokens_mean": None,
        "prompt_tokens_mean": None,
        "tokens_per_s": None,
        "requests_per_min": None,
        "ttft_p50": None,
        "ttft_p95": None,
        "ttft_p99": None,
        "e2e_p50": None,
        "e2e_p95": None,
        "e2e_p99": None,
        "tpot_mean": None,
        "tpot_p50": None,
        "tpot_p95": None,
        "tpot_p99": None,
        "itl_mean": None,
        "itl_p50": None,
        "itl_p95": None,
        "itl_p99": None,
        "usage_missing": sum(1 for r in ok if r.get("completion_tokens") is None),
        "errors": [],
    }
    for record in records:
        if not record["ok"] and record.get("error") and record["error"] not in summary["errors"]:
            summary["errors"].append(record["error"])
    summary["errors"] = summary["errors"][:5]
    if not records:
        return summary
    wall = max(r["end"] for r in records) - min(r["start"] for r in records)
    summary["duration_s"] = _round(wall, 3)
    if not ok:
        return summary
    if wall > 0:
        summary["requests_per_min"] = _round(len(ok) * 60.0 / wall, 2)
    prompt = [r["prompt_tokens"] for r in ok if r.get("prompt_tokens") is not None]
    if prompt:
        summary["prompt_tokens_mean"] = _round(sum(prompt) / float(len(prompt)), 1)
    if summary["usage_missing"] == 0:
        total = sum(r["completion_tokens"] for r in ok)
        summary["completion_tokens"] = total
        summary["completion_tokens_mean"] = _round(total / float(len(ok)), 1)
        if wall > 0:
            summary["tokens_per_s"] = _round(total / wall, 2)
    series = {
        "ttft": [r["ttft"] for r in ok if r.get("ttft") is not None],
        "e2e": [r["e2e"] for r in ok if r.get("e2e") is not None],
        "tpot": [r["tpot"] for r in ok if r.get("tpot") is not None],
        "itl": [gap for r in ok for gap in r.get("itl") or ()],
    }
    for name, values in series.items():
        for q in (50, 95, 99):
            summary["%s_p%d" % (name, q)] = _round(percentile(values, q / 100.0), 4)
        if name in ("tpot", "itl") and values:
            summary[name + "_mean"] = _round(sum(values) / float(len(values)), 4)
    return summary


# -------------------------------------------------------------------- prompts

_WORDS = (
    "account agenda approval budget calendar client contract customer deadline delivery design draft "
    "estimate feedback finance forecast invoice launch meeting milestone order partner payment plan "
    "policy price priority project proposal quarter quote release report request review risk schedule "
    "shipment signature staff supplier support survey target team timeline travel update vendor warehouse "
    "please could we should would will need send confirm check share attach forward schedule review move "
    "agree decide prepare update cancel approve finish start follow remind expect arrive return discuss "
    "today tomorrow monday tuesday wednesday thursday friday next last week month morning afternoon early "
    "late soon already still again also only just about before after during until since because however "
    "the a an this that these those our your their my its we you they i he she it us them "
    "and or but so if when then than as at by for from in into of on to with without within over under "
    "new final revised urgent small large first second third other same different main current previous"
).split()
_NAMES = ("Alice Martin", "Bruno Keller", "Chen Wei", "Dana Novak", "Emil Larsen", "Farah Haddad",
          "Greta Vogel", "Hugo Laurent", "Ines Costa", "Jonas Berg")
_SHORT_QUESTIONS = (
    "What is the capital of France?",
    "Give me three tips for writing a clear e-mail.",
    "Explain in two sentences what a load balancer does.",
    "Name four primary colours used in printing.",
    "How many minutes are there in a day?",
    "Suggest a title for a short report on quarterly sales.",
    "What does an invoice usually contain?",
    "Write a one-line reminder about tomorrow's meeting.",
)
SHORT_SYSTEM = "You are a helpful assistant. Answer briefly."
LONG_SYSTEM = (
    "You are the e-mail agent of a small company. Read the whole thread below. Then: summarise it in five "
    "sentences, list every action item with its owner and due date, point out anything that contradicts an "
    "earlier message, and draft a polite reply from the company that answers every open question."
)
# Words of random e-mail text per prompt token, first guess before calibration.
_WORDS_PER_TOKEN = 0.75


def email_thread(words, rng):
    """An e-mail thread of about ``words`` random words, different for every ``rng`` state."""
    out = []
    count = 0
    message = 0
    while count < words:
        sender, recipient = rng.sample(_NAMES, 2)
        subject = " ".join(rng.choice(_WORDS) for dummy in range(4))
        header = "From: %s\nTo: %s\nSubject: Re: %s (#%d)\n\n" % (sender, recipient, subject, rng.randrange(10 ** 6))
        out.append(header)
        count += 8
        for dummy in range(rng.randint(2, 5)):
            sentence = [rng.choice(_WORDS) for dummy2 in range(rng.randint(8, 20))]
            out.append(" ".join(sentence).capitalize() + ". ")
            count += len(sentence)
            if count >= words:
                break
        out.append("\n\n")
        message += 1
    return "".join(out)


class Workload:
    """Chat completion bodies for the ``short`` and ``long`` profiles.

    ``short``: a one-line question (different per request) and ``short_max_tokens`` to
    generate. ``long``: the e-mail agent: a shared system prompt (vLLM's prefix cache may
    keep it, as it would for a real agent) and an e-mail thread of about
    ``long_prompt_tokens`` tokens, different for every request so the prefix cache cannot
    skip its prefill. ``long_words`` is the thread's size in words; ``calibrate`` sets it
    from the prompt tokens the engine reports.
    """

    def __init__(self, model, short_max_tokens=DEFAULT_SHORT_MAX_TOKENS,
                 long_prompt_tokens=DEFAULT_LONG_PROMPT_TOKENS, long_max_tokens=DEFAULT_LONG_MAX_TOKENS,
                 ignore_eos=True, seed=0):
        self.model = model
        self.max_tokens = {"short": int(short_max_tokens), "long": int(long_max_tokens)}
        self.long_prompt_tokens = int(long_prompt_tokens)
        self.long_words = max(1, int(self.long_prompt_tokens * _WORDS_PER_TOKEN))
        self.ignore_eos = bool(ignore_eos)
        self.seed = seed

    def messages(self, profile, index):
        rng = random.Random("%s/%s/%d" % (self.seed, profile, index))
        if profile == "short":
            question = _SHORT_QUESTIONS[index % len(_SHORT_QUESTIONS)]
            return [{"role": "system", "content": SHORT_SYSTEM},
                    {"role": "user", "content": "(%d) %s" % (index, question)}]
        if profile == "long":
            return [{"role": "system", "content": LONG_SYSTEM},
                    {"role": "user", "content": email_thread(self.long_words, rng)}]
        raise LoadError("unknown profile %r; profiles are %s" % (profile, ", ".join(PROFILES)))

    def payload(self, profile, index, max_tokens=None):
        body = {
            "model": self.model,
            "messages": self.messages(profile, index),
            "max_tokens": self.max_tokens[profile] if max_tokens is None else max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.ignore_eos:
            # vLLM's sampling extension: generate exactly max_tokens, so every level
            # compares the same amount of work.
            body["ignore_eos"] = True
        return body


# ------------------------------------------------------------------- requests


def make_session():
    """A session straight to the engine, environment proxies ignored; LoadError without requests."""
    if client.requests is None:
        raise LoadError("the Python library requests is not installed")
    return client.session()


def auth_headers(api_key):
    """Only the API key's header (none without a key); LoadError, without the key, when it is not a bearer token."""
    try:
        return client.headers(api_key, accept=None)
    except client.ClientConfigError as exc:
        raise LoadError(str(exc)) from None


def _has_output(choice):
    delta = choice.get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                or delta.get("tool_calls") or choice.get("text"))


def stream_chat(session, url, payload, headers=None, timeout=DEFAULT_TIMEOUT, clock=time.perf_counter):
    """Send one streamed chat completion and measure it.

    Returns a record: ``ok``, ``status`` (HTTP), ``error`` (None or what went wrong),
    ``start``/``end`` (``clock()`` values), ``ttft`` and ``e2e`` (seconds),
    ``prompt_tokens``/``completion_tokens`` (from ``usage``; None when absent), ``itl``
    (the gaps between events after the first output, seconds), ``last_token`` (seconds to
    the last event with a choice), ``tpot`` (seconds per output token after the first;
    None without usage or with one token), ``upstream`` (the proxy's
    ``X-Factory-Floor-Upstream`` header, if any) and ``route`` (its
    ``X-Factory-Floor-Route``: where the affinity balancer found the routing key). Never
    raises for a failed request.
    """
    record = {"ok": False, "status": None, "error": None, "start": clock(), "end": None, "ttft": None,
              "e2e": None, "prompt_tokens": None, "completion_tokens": None, "itl": [], "last_token": None,
              "tpot": None, "upstream": None, "route": None}
    first_choice = None
    done = False
    try:
        with session.post(url, json=payload, headers=headers or {}, stream=True,
                          timeout=(_CONNECT_TIMEOUT, timeout)) as response:
            record["status"] = response.status_code
            record["upstream"] = response.headers.get("X-Factory-Floor-Upstream")
            record["route"] = response.headers.get("X-Factory-Floor-Route")
            if response.status_code != 200:
                record["error"] = "HTTP %d: %s" % (response.status_code, " ".join(response.text.split())[:200])
            else:
                for chunk in client.iter_sse(response.iter_lines(chunk_size=None)):
                    if chunk is client.SSE_DONE:
                        done = True
                        break
                    if chunk.get("error"):
                        error = chunk["error"]
                        record["error"] = "error event: %s" % (error.get("message", error) if isinstance(error, dict) else error)
                        break
                    usage = chunk.get("usage")
                    if usage:
                        record["prompt_tokens"] = usage.get("prompt_tokens")
                        record["completion_tokens"] = usage.get("completion_tokens")
                    choices = chunk.get("choices") or []
                    if not choices:
                        continue  # the usage event: no token
                    now = clock() - record["start"]
                    if first_choice is None:
                        first_choice = now
                    if record["ttft"] is None:
                        if any(_has_output(c) for c in choices):
                            record["ttft"] = record["last_token"] = now
                    else:
                        record["itl"].append(now - record["last_token"])
                        record["last_token"] = now
                if not done and record["error"] is None:
                    record["error"] = "the stream ended without data: [DONE]"
    except Exception as exc:  # pylint: disable=broad-except  # requests' and the socket's errors alike
        # Refused before it was sent (requests' InvalidHeader is a ValueError too): named, never quoted.
        words = client.config_error(exc)
        if words is not None:
            record["error"] = "%s: not sent: %s" % (type(exc).__name__, words)
        elif isinstance(exc, client.EventNotJSON):
            record["error"] = "an event was not JSON: %s" % exc
        else:
            record["error"] = "%s: %s" % (type(exc).__name__, exc)
    record["end"] = clock()
    record["e2e"] = record["end"] - record["start"]
    if record["ttft"] is None:
        record["ttft"] = first_choice
    record["ok"] = record["error"] is None
    tokens = record["completion_tokens"]
    if record["ok"] and tokens and tokens > 1 and record["last_token"] is not None:
        record["tpot"] = (record["last_token"] - record["ttft"]) / (tokens - 1)
    return record


def run_closed_loop(send, concurrency, duration=None, count=None, max_failures=None, clock=time.perf_counter):
    """``concurrency`` workers, each sending one request at a time until the level ends.

    ``send(index, worker)`` performs request number ``index`` (0, 1, ...) on worker
    ``worker`` and returns its record. No request starts once ``duration`` seconds have
    passed or ``count`` requests were started (whichever comes first), or once
    ``max_failures`` requests failed; started requests finish. Returns the records in the
    order they were started.
    """
    if duration is None and count is None:
        raise LoadError("give a duration or a request count per level")
    if int(concurrency) < 1:
        raise LoadError("concurrency must be at least 1, got %r" % concurrency)
    lock = threading.Lock()
    state = {"issued": 0, "failed": 0}
    records = {}
    started = clock()

    def worker(number):
        while True:
            with lock:
                if count is not None and state["issued"] >= count:
                    return
                if duration is not None and clock() - started >= duration:
                    return
                if max_failures is not None and state["failed"] >= max_failures:
                    return
                index = state["issued"]
                state["issued"] += 1
            record = send(index, number)
            with lock:
                records[index] = record
                if not record["ok"]:
                    state["failed"] += 1

    threads = [threading.Thread(target=worker, args=(n,), name="load-%d" % n, daemon=True)
               for n in range(int(concurrency))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [records[i] for i in sorted(records)]


# -------------------------------------------------------------------- engine


def engine_model(session, base_url, model, headers=None, timeout=10.0):
    """The served model's card from ``GET /v1/models`` (vLLM adds ``max_model_len``)."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        response = session.get(url, headers=headers or {}, timeout=timeout)
    except Exception as exc:  # pylint: disable=broad-except
        words = client.config_error(exc)
        if words is not None:
            raise LoadError("GET %s not sent: %s" % (url, words)) from None
        raise LoadError("GET %s failed: %s: %s; is the engine serving, and may this host reach it "
                        "(the API port accepts loopback, the proxy hosts and vllm_allowed_clients)?"
                        % (url, type(exc).__name__, exc)) from None
    if response.status_code != 200:
        raise LoadError("GET %s answered HTTP %d: %s" % (url, response.status_code, response.text[:200]))
    try:
        cards = response.json()["data"]
    except (ValueError, KeyError, TypeError):
        raise LoadError("GET %s did not answer an OpenAI model list: %s" % (url, response.text[:200])) from None
    for card in cards:
        if card.get("id") == model:
            return card
    raise LoadError("the engine at %s serves %s, not %r" % (base_url, [c.get("id") for c in cards], model))


def calibrate(workload, send_once, attempts=3, within=0.03):
    """Size the long profile's thread so its prompt has about ``long_prompt_tokens`` tokens.

    ``send_once(payload)`` sends one request and returns its record. Each attempt asks for
    1 token with the current size and scales the word count by target / measured prompt
    tokens. Returns the measured prompt tokens of the last attempt.
    """
    measured = None
    for attempt in range(attempts):
        record = send_once(workload.payload("long", 10 ** 6 + attempt, max_tokens=1))
        if not record["ok"]:
            raise LoadError("calibrating the long profile (%d words) failed: %s" % (workload.long_words, record["error"]))
        measured = record["prompt_tokens"]
        if not measured:
            raise LoadError("the engine's answer carried no usage.prompt_tokens; it must honour "
                            "stream_options.include_usage (vLLM does)")
        if abs(measured - workload.long_prompt_tokens) <= within * workload.long_prompt_tokens:
            break
        workload.long_words = max(1, int(round(workload.long_words * workload.long_prompt_tokens / float(measured))))
    return measured


def preflight(base_url, model, profiles=PROFILES, long_prompt_tokens=DEFAULT_LONG_PROMPT_TOKENS,
              long_max_tokens=DEFAULT_LONG_MAX_TOKENS, api_key=None, session_factory=make_session):
    """What a sweep checks before it loads the engine; sends no chat completion.

    The profiles are known, ``GET /v1/models`` lists ``model``, and the long profile's
    prompt and answer fit the engine's ``max_model_len``. Returns ``engine`` (``url``,
    ``model``, ``max_model_len``); raises :class:`LoadError` naming what is wrong.
    """
    for profile in profiles:
        if profile not in PROFILES:
            raise LoadError("unknown profile %r; profiles are %s" % (profile, ", ".join(PROFILES)))
    session = session_factory()
    try:
        card = engine_model(session, base_url, model, auth_headers(api_key))
    finally:
        session.close()
    max_model_len = card.get("max_model_len")
    if "long" in profiles and max_model_len and long_prompt_tokens + long_max_tokens > max_model_len:
        raise LoadError("the long profile needs %d + %d tokens but the engine's max_model_len is %d; "
                        "lower long_prompt_tokens" % (long_prompt_tokens, long_max_tokens, max_model_len))
    return {"url": base_url, "model": model, "max_model_len": max_model_len}


def sweep(base_url, model, concurrency=DEFAULT_CONCURRENCY, profiles=PROFILES, duration=60.0, count=None,
          warmup=1, short_max_tokens=DEFAULT_SHORT_MAX_TOKENS, long_prompt_tokens=DEFAULT_LONG_PROMPT_TOKENS,
          long_max_tokens=DEFAULT_LONG_MAX_TOKENS, ignore_eos=True, timeout=DEFAULT_TIMEOUT, api_key=None,
          seed=0, max_failures=10, session_factory=make_session, send=stream_chat, report_after=None, resume=None,
          clock=time.monotonic):
    """Run every profile at every concurrency level against one engine; return the levels.

    The result: ``engine`` (URL, model, ``max_model_len``), ``profiles`` (what each sends,
    with the long prompt's measured size), ``levels`` (one ``summarize`` dict per profile
    and level, with ``profile`` and ``concurrency``, in the order they ran: each profile's
    levels in turn) and ``done``.

    A sweep can be cut into calls, so that each can report: with ``report_after``
    (seconds) a call returns after the first level that ends that long after the call
    began, with ``done`` False and ``resume``; a call given that ``resume`` (and the same
    profiles and levels) goes on with the next level, without the preflight and the long
    profile's calibration again (its thread size is in ``resume``). A profile's warm-up
    runs before its first level, whichever call runs it.
    """
    levels_asked = [int(c) for c in concurrency]
    if not levels_asked or min(levels_asked) < 1:
        raise LoadError("concurrency levels must be integers >= 1, got %r" % (list(concurrency),))
    plan = [(profile, level) for profile in profiles for level in levels_asked]
    headers = auth_headers(api_key)
    url = base_url.rstrip("/") + "/v1/chat/completions"
    workload = Workload(model, short_max_tokens, long_prompt_tokens, long_max_tokens, ignore_eos, seed)
    control = session_factory()

    def send_once(payload):
        return send(control, url, payload, headers, timeout)

    if resume:
        try:
            engine, described, levels = resume["engine"], resume["profiles"], list(resume["levels"])
            workload.long_words = int(resume["long_words"])
            if len(levels) >= len(plan) or [(l["profile"], l["concurrency"]) for l in levels] != plan[:len(levels)]:
                raise ValueError("levels")
        except (KeyError, TypeError, ValueError) as exc:
            raise LoadError("resume is not what an earlier call of this sweep returned (the profiles or levels "
                            "changed?): %r" % (exc,)) from exc
    else:
        engine = preflight(base_url, model, profiles, long_prompt_tokens, long_max_tokens, api_key, session_factory)
        described = {}
        if "long" in profiles:
            measured = calibrate(workload, send_once)
            described["long"] = {"max_tokens": workload.max_tokens["long"], "prompt_tokens_target": long_prompt_tokens,
                                 "prompt_tokens_calibrated": measured, "thread_words": workload.long_words}
        if "short" in profiles:
            described["short"] = {"max_tokens": workload.max_tokens["short"]}
        levels = []

    began = clock()
    for index in range(len(levels), len(plan)):
        profile, level = plan[index]
        if index % len(levels_asked) == 0:  # the profile's first level
            for number in range(int(warmup)):
                record = send_once(workload.payload(profile, 2 * 10 ** 6 + number))
                if not record["ok"]:
                    raise LoadError("the %s profile's warm-up request to %s failed: %s" % (profile, url, record["error"]))
        sessions = [session_factory() for dummy in range(level)]

        def one(number, worker, profile=profile, sessions=sessions):
            return send(sessions[worker], url, workload.payload(profile, number), headers, timeout)

        records = run_closed_loop(one, level, duration=duration, count=count, max_failures=max_failures)
        levels.append(dict(summarize(records), profile=profile, concurrency=level))
        for session in sessions:
            session.close()
        if report_after is not None and clock() - began >= report_after and len(levels) < len(plan):
            return {"engine": engine, "profiles": described, "levels": levels, "done": False,
                    "resume": {"engine": engine, "profiles": described, "levels": levels,
                               "long_words": workload.long_words}}
    return {
        "engine": engine,
        "profiles": described,
        "levels": levels,
        "done": True,
    }


def level_line(index, total, level):
    """One line for people about level ``index`` (0-based) of ``total`` of a sweep, from its summary.

    ``level 3 of 10: short x 8: 109.2 tokens/s, 26.1 requests/min, TTFT p95 0.41 s, TPOT 0.031 s, e2e p95 4.2 s,
    0 failed``; figures the level could not measure are ``-``.
    """
    def fig(key, form):
        value = level.get(key)
        return "-" if value is None else form % value

    return ("level %d of %d: %s x %d: %s tokens/s, %s requests/min, TTFT p95 %s s, TPOT %s s, e2e p95 %s s, %d failed"
            % (index + 1, total, level.get("profile"), level.get("concurrency") or 0, fig("tokens_per_s", "%.1f"),
               fig("requests_per_min", "%.1f"), fig("ttft_p95", "%.2f"), fig("tpot_mean", "%.3f"),
               fig("e2e_p95", "%.1f"), level.get("requests_failed") or 0))
