#!/usr/bin/env python3
"""Conversation affinity vs least_conn, with real vLLM and prefix caching (issue 22).

Run on the proxy host (with the health checkers, the only host that may reach the
engines' own ports). The deployed proxy must run affinity (the nginx_proxy role's
default ``nginx_proxy_balance: affinity``); the least_conn arms go through a temporary
nginx on 127.0.0.1 with the deployed proxy's directives and ``least_conn`` (the one
benchmarks/balance.py starts, checked with ``nginx -t``, stopped at the end). Each
workload runs its arms A B B A (least_conn, affinity, affinity, least_conn), so drift
weighs on both alike, with the same requests in the same order in every arm.

Workloads (``--parts``):

* ``agent``: ``--clients`` agents at once, each working ``--per-client`` conversations in
  rotation, a turn of each in turn (as an agent does while its tools run for the
  others): all ``--clients`` x ``--per-client`` conversations stay open, ``--clients``
  requests in flight. A conversation is an e-mail thread of about ``--context-tokens`` tokens
  (0.5-1.5x, different per conversation) under the agent's system prompt, then
  ``--turns`` turns: each appends the agent's previous answer (a fixed text of about
  ``--answer-tokens``, so every arm sends the same bytes) and a new message of about
  ``--turn-tokens`` (a tool result), and asks for ``--answer-tokens`` tokens. The clients
  send no key (``--key prefix``: the proxy keys by the conversation's first messages, as
  for an unmodified client), or ``X-Session-Id`` (``header``) or ``prompt_cache_key``.
  With ``--think`` (seconds, the default) every conversation sends on its own instead,
  each follow-up a think time after its last answer (its tools ran), so requests in
  flight vary and least_conn sees the load as many users' agents make it.
* ``keyless``: the balance benchmark's mixed workload (short questions and long e-mail
  agent prompts, ``--long-share``), one request per conversation, as many clients as the
  caps add up to, ``--duration`` seconds per arm. No client key; with affinity each
  request is its own conversation.
* ``skewed``: the same clients, but ``--skew-share`` of the requests belong to one
  conversation family (one shared e-mail thread, a new question each time), the rest
  are short questions. With affinity the family's key has one engine: the load bound
  must move the excess elsewhere.

Every arm's texts begin with a word of their own (the arm's salt): no arm finds another
arm's prompts in vLLM's prefix cache, while the requests' shape, sizes and order stay
the same.

Per arm: TTFT p50/p95 (the agent: of follow-up turns, and of first turns apart),
completion tokens/s and requests/min as the clients saw them (plugins/module_utils/_host/load.py),
each engine's prefix cache hit rate over the arm (the increase of vllm:prefix_cache_hits
over that of vllm:prefix_cache_queries, read from each engine's own /metrics), and the
in-flight balance: requests per engine, the mean and peak of each engine's
vllm:num_requests_running + vllm:num_requests_waiting sampled every ``--sample-interval``
seconds. With affinity also the proxy's own counts (its /factory-floor/affinity) and how
often a key spilled to another engine (X-Factory-Floor-Route ``+spill``).

Targets, printed as ratios of one run: follow-up TTFT p50, least_conn / affinity >= 3;
tokens/s, affinity / least_conn >= 1 (agent) and >= 0.97 (key-less); skewed: no sample
where an engine of the affinity arm was above its bound (its max_num_seqs, or, with more
in flight than half the engines' max_num_seqs together, ceil(balance factor x (all in
flight + 1) / engines) plus one for requests chosen in the same instant) while another
engine had room, judged while the clients still send (after the
last request started, the engine still finishing long answers holds them alone).

Prints the tables, progress (``arm n of N``) as it goes, and one JSON line
(``RESULT {...}``). Not a pass/fail test.
"""

import argparse
import json
import math
import os
import random
import re
import sys
import threading
import time
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
# balance.py and the collection's host package (_host): installed next to this script by affinity.yml;
# in the repository: here and plugins/module_utils/_host.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "plugins", "module_utils")]

from _host import load as _load  # noqa: E402  pylint: disable=wrong-import-position
import balance  # noqa: E402  pylint: disable=wrong-import-position

ARMS = ("least_conn", "affinity", "affinity", "least_conn")
AGENT_SYSTEM = (
    "You are the operations agent of a small company. You read the e-mail thread the user gives you, call tools "
    "when you need figures, and answer each follow-up briefly and precisely, quoting the thread where you can."
)
# Words per token of the e-mail text, before calibration against the engine's own count.
WORDS_PER_TOKEN = 0.75
METRIC_RE = re.compile(r"^(vllm:[a-z_]+?)(?:_total)?(?:\{[^}]*\})? ([0-9.eE+-]+|NaN)$", re.M)
COUNTED = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries", "vllm:num_requests_running",
           "vllm:num_requests_waiting", "vllm:generation_tokens")


def progress(message):
    print(message, flush=True)
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- engines


def read_metrics(session, base, headers):
    """The few vLLM metrics this benchmark reads, summed over series; {} when unreadable."""
    try:
        response = session.get(base + "/metrics", headers=headers, timeout=5)
    except Exception:  # pylint: disable=broad-except
        return {}
    if response.status_code != 200:
        return {}
    out = {}
    for name, value in METRIC_RE.findall(response.text):
        if name in COUNTED and value != "NaN":
            out[name] = out.get(name, 0.0) + float(value)
    return out


class Sampler:
    """Every ``interval`` seconds: each engine's running + waiting requests, and the proxy's
    own in-flight counts when ``status_url`` is given."""

    def __init__(self, engines, headers, interval, status_url=None):
        self.engines = engines
        self.headers = headers
        self.interval = interval
        self.status_url = status_url
        self.samples = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        session = _load.make_session()
        while not self.stop.is_set():
            sample = {"t": time.time(), "engine": {}, "proxy": None}
            for name, base in self.engines:
                metrics = read_metrics(session, base, self.headers)
                if metrics:
                    sample["engine"][name] = (metrics.get("vllm:num_requests_running", 0)
                                              + metrics.get("vllm:num_requests_waiting", 0))
            if self.status_url:
                try:
                    sample["proxy"] = session.get(self.status_url, timeout=2).json().get("inflight")
                except Exception:  # pylint: disable=broad-except
                    sample["proxy"] = None
            self.samples.append(sample)
            self.stop.wait(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False


def hit_rates(before, after, names):
    out = {}
    for name in names:
        queries = after.get(name, {}).get("vllm:prefix_cache_queries", 0) - before.get(name, {}).get(
            "vllm:prefix_cache_queries", 0)
        hits = after.get(name, {}).get("vllm:prefix_cache_hits", 0) - before.get(name, {}).get(
            "vllm:prefix_cache_hits", 0)
        out[name] = {"queries": int(queries), "hits": int(hits),
                     "hit_rate": round(hits / queries, 4) if queries > 0 else None}
    return out


# ---------------------------------------------------------------- workloads


def words(rng, count):
    return " ".join(rng.choice(_load._WORDS) for dummy in range(max(1, int(count))))  # pylint: disable=protected-access


class Agent:
    """The multi-turn agent workload: conversation number ``c`` of an arm, turn by turn."""

    def __init__(self, args, words_per_token):
        self.args = args
        self.wpt = words_per_token

    def conversation(self, c):
        rng = random.Random("agent/%s/%d" % (self.args.seed, c))
        size = self.args.context_tokens * (0.5 + rng.random())
        thread = _load.email_thread(int(size * self.wpt), rng)
        turns = []
        for t in range(self.args.turns - 1):
            answer = "Noted. " + words(rng, self.args.answer_tokens * self.wpt)
            tool = "Tool result %d: %s" % (t + 1, words(rng, self.args.turn_tokens * self.wpt))
            turns.append((answer, tool))
        return thread, turns

    def messages(self, salt, c, turn):
        thread, turns = self.conversation(c)
        messages = [{"role": "system", "content": "[%s] %s" % (salt, AGENT_SYSTEM)},
                    {"role": "user", "content": "Here is the thread (conversation %d):\n\n%s" % (c, thread)}]
        for answer, tool in turns[:turn]:
            messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": tool}]
        return messages

    def request(self, salt, c, turn, max_tokens=None):
        body = {"model": self.args.model, "messages": self.messages(salt, c, turn),
                "max_tokens": self.args.answer_tokens if max_tokens is None else max_tokens, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
        headers = {}
        if self.args.key == "header":
            headers["X-Session-Id"] = "%s-conversation-%d" % (salt, c)
        elif self.args.key == "prompt_cache_key":
            body["prompt_cache_key"] = "%s-conversation-%d" % (salt, c)
        return body, headers


def run_agent(url, salt, agent, args, auth):
    """The agent workload; the records.

    Without ``--think``: ``--clients`` agents, each working its conversations in rotation,
    not one after another: a closed-loop client that sends its next turn the moment the
    last one ends finds the engine that just answered it one request lighter, so
    least_conn would send it there too and keep the history by accident; an agent's next
    turn waits for its tools while other conversations go on.

    With ``--think``: every conversation on its own, each follow-up ``--think`` seconds
    (0.5-1.5x) after its last answer, as agents whose tools run between turns. Even in
    rotation a fixed set of closed-loop clients sticks to engines under least_conn (and
    every conversation of a client with it); turns that come back after a think time find
    the load moved on, as many users' agents behind one proxy do. The delays are drawn
    from ``--seed`` and the conversation: the same in every arm."""
    records = []
    lock = threading.Lock()
    count = args.clients * args.per_client

    def send(session, c, turn):
        """One turn of conversation ``c``, recorded; whether it was answered."""
        body, headers = agent.request(salt, c, turn)
        record = _load.stream_chat(session, url, body, dict(auth, **headers), args.timeout)
        record.update(conversation=c, turn=turn)
        with lock:
            records.append(record)
        return record["ok"]

    def client(w):
        session = _load.make_session()
        open_ = list(range(w, count, args.clients))
        for turn in range(args.turns):
            for c in list(open_):
                if not send(session, c, turn):
                    open_.remove(c)
        session.close()

    def conversation(c):
        rng = random.Random("think/%s/%d" % (args.seed, c))
        session = _load.make_session()
        time.sleep(rng.uniform(0, 2 * args.think))  # spread the first turns over two think times
        for turn in range(args.turns):
            if turn:
                time.sleep(rng.uniform(0.5, 1.5) * args.think)
            if not send(session, c, turn):
                break
        session.close()

    target, n = (conversation, count) if args.think > 0 else (client, args.clients)
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return records


def salted(payload, salt):
    """The same request with the arm's salt at the start of its first message."""
    payload = json.loads(json.dumps(payload))
    first = payload["messages"][0]
    first["content"] = "[%s] %s" % (salt, first["content"])
    return payload


def run_mixed(url, salt, workload, args, auth, clients, skewed=False):
    """The key-less mixed workload (or, ``skewed``, one conversation family and short
    questions) in a closed loop for ``--duration`` seconds."""
    family = _load.email_thread(workload.long_words, random.Random("family/%s" % args.seed))
    sessions = [_load.make_session() for dummy in range(clients)]

    def send(index, worker):
        rng = random.Random("mix/%s/%d" % (args.seed, index))
        if skewed:
            profile = "family" if rng.random() < args.skew_share else "short"
        else:
            profile = "long" if rng.random() < args.long_share else "short"
        if profile == "family":
            # One family: the same system prompt and thread (one key), a new question each time.
            payload = workload.payload("long", index)
            question = _load._SHORT_QUESTIONS[index % len(_load._SHORT_QUESTIONS)]  # pylint: disable=protected-access
            payload["messages"] = payload["messages"][:1] + [
                {"role": "user", "content": family}, {"role": "assistant", "content": "I have read the thread."},
                {"role": "user", "content": "(%d) %s" % (index, question)}]
        else:
            payload = workload.payload(profile, index)
        record = _load.stream_chat(sessions[worker], url, salted(payload, salt), auth, args.timeout)
        record["profile"] = profile
        return record

    records = _load.run_closed_loop(send, clients, duration=args.duration, max_failures=args.max_failures)
    for session in sessions:
        session.close()
    return records


# ---------------------------------------------------------------- statistics


def balance_of(records, samples, names, wall, caps, proxy_samples=False):
    out = {}
    for name in names:
        mine = [s["engine"][name] for s in samples if name in s["engine"]]
        out[name] = {"requests": sum(1 for r in records if r["upstream"] == name),
                     "mean_in_flight": round(sum(mine) / len(mine), 2) if mine else None,
                     "peak_in_flight": max(mine) if mine else None,
                     "mean_in_flight_by_latency": round(sum(r["e2e"] for r in records if r["upstream"] == name) / wall, 2)
                     if wall else None}
    if proxy_samples:
        counts = [s["proxy"] for s in samples if s["proxy"]]
        for name in names:
            mine = [c.get(name, 0) for c in counts]
            out[name]["proxy_peak_in_flight"] = max(mine) if mine else None
    out["other"] = sum(1 for r in records if r["upstream"] not in names)
    return out


def bound_violations(samples, names, caps, factor):
    """Samples of the proxy's counts in which an engine was above its bound while another had room."""
    bad = []
    for sample in samples:
        counts = sample["proxy"]
        if not counts:
            continue
        loads = {n: max(0, int(counts.get(n, 0))) for n in names}
        total = sum(loads.values())
        # +1: two workers choosing in the same instant can pass a bound by one (README).
        factor_bound = math.ceil(factor * (total + 1) / len(names)) + 1
        # The factor applies only while the site is busy: more in flight than half its slots.
        busy = 2 * total > sum(caps[n] for n in names)
        for name in names:
            above_cap = loads[name] > caps[name]
            above_mean = busy and loads[name] > factor_bound
            room = any(loads[o] < min(caps[o], loads[name] - 1) for o in names if o != name)
            if (above_cap or above_mean) and room:
                bad.append({"t": round(sample["t"], 1), "engine": name, "counts": loads})
    return bad


def summarize(records, wall=None):
    summary = _load.summarize(records)
    if wall:
        summary["duration_s"] = round(wall, 3)
        ok = [r for r in records if r["ok"]]
        tokens = [r["completion_tokens"] for r in ok]
        summary["tokens_per_s"] = round(sum(tokens) / wall, 2) if ok and None not in tokens else None
        summary["requests_per_min"] = round(len(ok) * 60.0 / wall, 2)
    summary["spilled"] = sum(1 for r in records if (r.get("route") or "").endswith("+spill"))
    return summary


def ttft(records, follow_up):
    values = [r["ttft"] for r in records if r["ok"] and (r["turn"] > 0) == follow_up]
    return {"p50": _round(_load.percentile(values, 0.5)), "p95": _round(_load.percentile(values, 0.95)),
            "n": len(values)}


def _round(value, digits=4):
    return None if value is None else round(value, digits)


def ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def fmt(value, spec):
    return "-" if value is None else spec % value


# ---------------------------------------------------------------- main


def main():  # pylint: disable=too-many-locals,too-many-statements,too-many-branches
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", required=True, help="the deployed proxy (affinity), e.g. http://127.0.0.1:8080")
    parser.add_argument("--engine", action="append", required=True, metavar="NAME=URL")
    parser.add_argument("--cap", action="append", type=int, required=True, help="each engine's max_num_seqs")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default=os.environ.get("FF_API_KEY") or None)
    parser.add_argument("--api-key-file", default=None)
    parser.add_argument("--parts", default="agent,keyless,skewed")
    parser.add_argument("--clients", type=int, default=8, help="agent: agents (requests in flight) at once")
    parser.add_argument("--per-client", type=int, default=4, help="agent: conversations each agent works in rotation")
    parser.add_argument("--think", type=float, default=15.0,
                        help="agent: seconds (mean, 0.5-1.5x) before each follow-up, every conversation on its own; "
                             "0: each agent works its conversations in rotation, a closed loop")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--context-tokens", type=int, default=1200, help="agent: mean thread size (0.5-1.5x)")
    parser.add_argument("--turn-tokens", type=int, default=120, help="agent: tokens added by the user per turn")
    parser.add_argument("--answer-tokens", type=int, default=48, help="agent: tokens asked per turn")
    parser.add_argument("--key", choices=["prefix", "header", "prompt_cache_key"], default="prefix")
    parser.add_argument("--duration", type=float, default=60.0, help="keyless, skewed: seconds per arm")
    parser.add_argument("--long-share", type=float, default=0.3)
    parser.add_argument("--long-prompt-tokens", type=int, default=1500)
    parser.add_argument("--long-max-tokens", type=int, default=128)
    parser.add_argument("--short-max-tokens", type=int, default=64)
    parser.add_argument("--skew-share", type=float, default=0.8)
    parser.add_argument("--balance-factor", type=float, default=1.5, help="the proxy's nginx_proxy_affinity_balance_factor")
    parser.add_argument("--sample-interval", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=_load.DEFAULT_TIMEOUT)
    parser.add_argument("--max-failures", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nginx", default="/usr/sbin/nginx")
    parser.add_argument("--lc-port", type=int, default=18083)
    parser.add_argument("--rr-port", type=int, default=18084, help="unused round-robin server of the temporary nginx")
    args = parser.parse_args()
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            args.api_key = handle.read().strip() or None
    engines = []
    for item in args.engine:
        name, sep, url = item.partition("=")
        if not sep or not url.startswith("http"):
            parser.error("--engine takes NAME=URL, got %r" % item)
        engines.append((name, url.rstrip("/")))
    names = [n for n, dummy in engines]
    caps = args.cap * len(engines) if len(args.cap) == 1 else args.cap
    if len(caps) != len(engines) or min(caps) < 1:
        parser.error("--cap: once for all engines or once per --engine, each >= 1")
    caps = dict(zip(names, caps))
    parts = [p for p in args.parts.split(",") if p]
    if not parts or set(parts) - {"agent", "keyless", "skewed"}:
        parser.error("--parts: agent, keyless, skewed (comma-separated)")
    auth = _load.auth_headers(args.api_key)
    control = _load.make_session()
    card = None
    for name, base in engines:
        card = balance.wait_serving(control, base, args.model, auth, timeout=10)
    max_len = card.get("max_model_len")

    # The deployed proxy must run affinity: its answers name a route.
    probe = _load.stream_chat(control, args.proxy + "/v1/chat/completions",
                              {"model": args.model, "messages": [{"role": "user", "content": "Say OK."}],
                               "max_tokens": 1, "stream": True}, auth, args.timeout)
    if not probe["ok"] or not probe["route"]:
        raise SystemExit("the proxy at %s does not route by conversation (no X-Factory-Floor-Route in its answer: %s); "
                         "deploy it with nginx_proxy_balance: affinity" % (args.proxy, probe["error"] or "ok"))
    status_url = None
    if urlsplit(args.proxy).hostname in ("127.0.0.1", "localhost", "::1"):
        status_url = args.proxy + "/factory-floor/affinity"

    # Calibrate the words per token of the e-mail text against the engine's own count.
    rng = random.Random("calibrate/%s" % args.seed)
    sample_words = 600
    record = _load.stream_chat(control, engines[0][1] + "/v1/chat/completions",
                               {"model": args.model, "max_tokens": 1, "stream": True,
                                "stream_options": {"include_usage": True},
                                "messages": [{"role": "user", "content": _load.email_thread(sample_words, rng)}]},
                               auth, args.timeout)
    if not record["ok"] or not record["prompt_tokens"]:
        raise SystemExit("calibration request failed: %s" % record["error"])
    wpt = sample_words / float(record["prompt_tokens"])
    agent = Agent(args, wpt)
    if "agent" in parts:
        biggest = max(range(args.clients * args.per_client),
                      key=lambda c: len(agent.conversation(c)[0]))
        body, dummy = agent.request("calibrate", biggest, args.turns - 1, max_tokens=1)
        record = _load.stream_chat(control, engines[0][1] + "/v1/chat/completions",
                                   dict(body, stream_options={"include_usage": True}), auth, args.timeout)
        if not record["ok"]:
            raise SystemExit("the agent's longest turn failed on %s: %s (lower --context-tokens or --turns)"
                             % (engines[0][0], record["error"]))
        longest = record["prompt_tokens"]
        if max_len and longest + args.answer_tokens > max_len:
            raise SystemExit("the agent's longest turn has %d prompt tokens + %d asked > max_model_len %d"
                             % (longest, args.answer_tokens, max_len))
    workload = _load.Workload(args.model, args.short_max_tokens, args.long_prompt_tokens, args.long_max_tokens)
    workload.long_words = int(args.long_prompt_tokens * wpt)
    clients = sum(caps.values())
    result = {"engines": dict(engines), "caps": caps, "model": args.model, "parts": parts, "arms": list(ARMS),
              "words_per_token": round(wpt, 3), "balance_factor": args.balance_factor,
              "agent": None, "keyless": None, "skewed": None}
    progress("affinity benchmark: parts %s, arms A B B A (%s), %d arms in all; engines %s, caps %s"
             % (", ".join(parts), " ".join(ARMS), 4 * len(parts), ", ".join(names),
                ", ".join("%s %d" % nc for nc in caps.items())))

    lc_url = "http://127.0.0.1:%d" % args.lc_port
    backends = [(urlsplit(b).hostname, urlsplit(b).port or 80) for dummy, b in engines]
    number = 0
    total_arms = 4 * len(parts)
    run_salt = "%08x" % random.getrandbits(32)
    with balance.TemporaryNginx(args.nginx, backends, args.lc_port, args.rr_port):
        balance.wait_serving(control, lc_url, args.model, auth)
        for part in parts:
            runs = {"least_conn": [], "affinity": []}
            for i, arm in enumerate(ARMS):
                number += 1
                salt = "%s-%s-%d" % (run_salt, part, i)
                url = (args.proxy if arm == "affinity" else lc_url) + "/v1/chat/completions"
                progress("arm %d of %d: %s, %s (%d/4)" % (number, total_arms, part, arm, i + 1))
                before = {name: read_metrics(control, base, auth) for name, base in engines}
                started = time.time()
                with Sampler(engines, auth, args.sample_interval,
                             status_url if arm == "affinity" else None) as sampler:
                    if part == "agent":
                        records = run_agent(url, salt, agent, args, auth)
                    else:
                        records = run_mixed(url, salt, workload, args, auth, clients, skewed=part == "skewed")
                wall = time.time() - started
                after = {name: read_metrics(control, base, auth) for name, base in engines}
                balance.name_upstreams(records, engines)
                # The load bound is judged while clients still send: after the last request
                # started, the one engine still finishing long answers holds them alone.
                sending = started + (args.duration if part != "agent" else wall)
                runs[arm].append({"records": records, "samples": sampler.samples, "wall": wall,
                                  "sending": [x for x in sampler.samples if x["t"] < sending],
                                  "hits": hit_rates(before, after, names)})
                failed = sum(1 for r in records if not r["ok"])
                progress("  done: %d requests, %d failed, %.0f s" % (len(records), failed, wall))
            result[part] = report(part, runs, names, caps, args)
    print("RESULT " + json.dumps(result, sort_keys=True))


ROW = "%-11s %7s %8s %9s %9s %9s %9s %6s %6s  %s"


def report(part, runs, names, caps, args):
    """One workload's table and ratios; its data."""
    out = {}
    for arm, arm_runs in runs.items():
        records = [r for run in arm_runs for r in run["records"]]
        wall = sum(run["wall"] for run in arm_runs)
        samples = [s for run in arm_runs for s in run["samples"]]
        summary = summarize(records, wall)
        hits = {}
        for name in names:
            queries = sum(run["hits"][name]["queries"] for run in arm_runs)
            hit = sum(run["hits"][name]["hits"] for run in arm_runs)
            hits[name] = {"queries": queries, "hits": hit, "hit_rate": round(hit / queries, 4) if queries else None}
        summary["prefix_cache"] = hits
        summary["balance"] = balance_of(records, samples, names, wall, caps, proxy_samples=arm == "affinity")
        if part == "agent":
            summary["ttft_follow_up"] = ttft(records, True)
            summary["ttft_first_turn"] = ttft(records, False)
        if arm == "affinity":
            sending = [x for run in arm_runs for x in run["sending"]]
            summary["bound_violations"] = bound_violations(sending, names, caps, args.balance_factor)
        out[arm] = summary
    lc, af = out["least_conn"], out["affinity"]
    print("\n%s: %s" % (part, {
        "agent": ("%d conversations on their own, a follow-up ~%g s after each answer" % (args.clients * args.per_client, args.think)
                  if args.think > 0 else "%d agents x %d conversations in rotation" % (args.clients, args.per_client))
                 + " x %d turns, thread ~%d tokens, +%d per turn, %d asked per turn, key %s"
                 % (args.turns, args.context_tokens, args.turn_tokens, args.answer_tokens, args.key),
        "keyless": "mixed short/long (%d%% long, %d prompt tokens), %d clients, %g s per arm"
                   % (args.long_share * 100, args.long_prompt_tokens, sum(caps.values()), args.duration),
        "skewed": "%d%% of requests from one conversation family, %d clients, %g s per arm"
                  % (args.skew_share * 100, sum(caps.values()), args.duration)}[part]))
    print(ROW % ("ARM", "REQ_OK", "FAIL", "TOK/S", "REQ/MIN", "TTFT_P50", "TTFT_P95", "SPILL", "HIT%",
                 "PER ENGINE: requests, mean/peak in flight, prefix cache hit rate"))
    for arm, s in out.items():
        t = s["ttft_follow_up"] if part == "agent" else {"p50": s["ttft_p50"], "p95": s["ttft_p95"]}
        all_q = sum(h["queries"] for h in s["prefix_cache"].values())
        all_h = sum(h["hits"] for h in s["prefix_cache"].values())
        per_engine = "  ".join(
            "%s %d req %s/%s %s" % (n, s["balance"][n]["requests"], fmt(s["balance"][n]["mean_in_flight"], "%.1f"),
                                    fmt(s["balance"][n]["peak_in_flight"], "%.0f"),
                                    fmt(s["prefix_cache"][n]["hit_rate"] and 100 * s["prefix_cache"][n]["hit_rate"],
                                        "%.0f%%"))
            for n in names)
        print(ROW % (arm, s["requests_ok"], s["requests_failed"], fmt(s["tokens_per_s"], "%.1f"),
                     fmt(s["requests_per_min"], "%.1f"), fmt(t["p50"], "%.3f"), fmt(t["p95"], "%.3f"),
                     s["spilled"] if arm == "affinity" else "-", fmt(all_q and 100.0 * all_h / all_q, "%.0f"),
                     per_engine))
    ratios = {"tokens_per_s_affinity_vs_least_conn": ratio(af["tokens_per_s"], lc["tokens_per_s"]),
              "requests_per_min_affinity_vs_least_conn": ratio(af["requests_per_min"], lc["requests_per_min"])}
    if part == "agent":
        ratios["ttft_follow_up_p50_least_conn_vs_affinity"] = ratio(lc["ttft_follow_up"]["p50"], af["ttft_follow_up"]["p50"])
        ratios["ttft_follow_up_p95_least_conn_vs_affinity"] = ratio(lc["ttft_follow_up"]["p95"], af["ttft_follow_up"]["p95"])
        print("follow-up TTFT p50 least_conn / affinity: %s (target >= 3); p95: %s; tokens/s affinity / least_conn: %s "
              "(target >= 1); requests/min: %s" % (ratios["ttft_follow_up_p50_least_conn_vs_affinity"],
                                                    ratios["ttft_follow_up_p95_least_conn_vs_affinity"],
                                                    ratios["tokens_per_s_affinity_vs_least_conn"],
                                                    ratios["requests_per_min_affinity_vs_least_conn"]))
    elif part == "keyless":
        print("tokens/s affinity / least_conn: %s (target >= 0.97); requests/min: %s"
              % (ratios["tokens_per_s_affinity_vs_least_conn"], ratios["requests_per_min_affinity_vs_least_conn"]))
    else:
        ratios["bound_violations"] = len(af["bound_violations"])
        print("affinity samples with an engine above its bound while another had room: %d (target 0); proxy's peak "
              "in flight per engine %s (max_num_seqs %s); tokens/s affinity / least_conn: %s"
              % (ratios["bound_violations"],
                 {n: af["balance"][n].get("proxy_peak_in_flight") for n in names}, caps,
                 ratios["tokens_per_s_affinity_vs_least_conn"]))
    out["ratios"] = ratios
    for arm in ("least_conn", "affinity"):
        out[arm]["bound_violations"] = out[arm].get("bound_violations", [])[:20]
    return out


if __name__ == "__main__":
    try:
        main()
    except _load.LoadError as exc:
        raise SystemExit("affinity: %s" % exc) from None
