# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A known load, and the ``/metrics`` texts vLLM would expose while serving it (issue 38's acceptance).

Nothing here ran vLLM: the lab was busy. The texts are written with ``prometheus_client``
(the library vLLM itself exports with) under vLLM 0.32's own metric names, labels
(``engine``, ``model_name``, ``finished_reason``) and bucket boundaries:

- ``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens``: vLLM's
  ``build_1_2_5_buckets(max_model_len)`` (vllm/v1/metrics/loggers.py), rebuilt below;
  the recorded fixtures (tests/unit/fixtures/metrics) carry no per-request histograms.
- ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds``: the
  boundaries read from the fixture ``vllm_a_t0`` (the same lists as loggers.py).

When vLLM records what, as the engine does: prompt tokens and prefix-cache queries/hits
when a request is scheduled (leaves the waiting queue), generated tokens, the finished
request, its lengths and its latencies when it finishes. ``num_requests_running`` and
``_waiting`` are the requests between those instants at the time of the scrape.
"""

from __future__ import annotations

import math
import os
import random
import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "metrics")
MODEL = "lab-chat"
MAX_MODEL_LEN = 262144


def build_1_2_5_buckets(max_value):
    """vLLM's length buckets: 1, 2, 5, 10, 20, 50, ... while <= ``max_value``."""
    buckets, exponent = [], 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10 ** exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


def fixture_buckets(metric, name="vllm_a_t0"):
    """The finite ``le`` boundaries of ``metric`` in a recorded fixture."""
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        text = handle.read()
    found = re.findall(r'^%s_bucket\{[^}]*le="([^"]+)"' % re.escape(metric), text, re.M)
    return [float(le) for le in found if le != "+Inf"]


LENGTH_BUCKETS = build_1_2_5_buckets(MAX_MODEL_LEN)


class Request:
    """One request of the known load; times in epoch seconds, lengths in tokens."""

    __slots__ = ("arrive", "start", "finish", "prompt", "output", "cached", "engine", "reason", "ttft")

    def __init__(self, arrive, start, finish, prompt, output, cached, engine, reason="stop"):
        self.arrive, self.start, self.finish = arrive, start, finish
        self.prompt, self.output, self.cached = prompt, output, cached
        self.engine, self.reason = engine, reason
        self.ttft = (start - arrive) + 0.05 + prompt / 20000.0


def prompt_length(rng):
    """Mixture: chat turns, documents, and a few long-context requests (tokens)."""
    pick = rng.random()
    if pick < 0.70:
        return int(rng.lognormvariate(math.log(1200), 0.6)) + 1
    if pick < 0.95:
        return rng.randint(5000, 20000)
    return rng.randint(40000, 150000)


def output_length(rng):
    return min(int(rng.lognormvariate(math.log(300), 0.8)) + 1, 8000)


def make_load(seed, start, segments, engines=("spark-a", "spark-b"), follow_up=0.5, queued=2.0):
    """Poisson arrivals from ``start``: ``segments`` is ``[(seconds, requests_per_s), ...]``.

    Requests go to the engines in turn. A share ``follow_up`` are later turns of a
    conversation: their prompt re-sends the previous turn's prompt and output (the part
    vLLM finds in its prefix cache, in whole 16-token blocks) plus a new message. Each request
    waits up to ``queued`` seconds in the engine's queue before it is scheduled.
    """
    rng = random.Random(seed)
    requests, t, last = [], start, {}
    for seconds, rate in segments:
        end = t + seconds
        while True:
            t += rng.expovariate(rate)
            if t >= end:
                t = end
                break
            engine = engines[len(requests) % len(engines)]
            prompt, cached = prompt_length(rng), 0
            if engine in last and rng.random() < follow_up:
                previous = last[engine]
                context = min(previous.prompt + previous.output, MAX_MODEL_LEN - 9000)
                prompt = context + int(rng.lognormvariate(math.log(200), 0.5)) + 1
                cached = context // 16 * 16
            output = output_length(rng)
            begin = t + rng.uniform(0.0, queued)  # queued (num_requests_waiting)
            request = Request(t, begin, begin + 1.0 + output / 40.0, prompt, output, cached, engine)
            requests.append(request)
            last[engine] = request
    return requests


class Engine:
    """One vLLM engine's registry, fed with the load's events in time order."""

    def __init__(self, name, started):
        self.name = name
        self.registry = registry = CollectorRegistry()
        labels = ["model_name", "engine"]

        def per_engine(metric):
            return metric.labels(MODEL, "0")

        Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
              registry=registry).set(started)
        self.running = per_engine(Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                                        labels, registry=registry))
        self.waiting = per_engine(Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                                        labels, registry=registry))
        self.queries = per_engine(Counter("vllm:prefix_cache_queries", "Prefix cache queries.", labels, registry=registry))
        self.hits = per_engine(Counter("vllm:prefix_cache_hits", "Prefix cache hits.", labels, registry=registry))
        self.prompt_tokens = per_engine(Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                                                registry=registry))
        self.generation_tokens = per_engine(Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                                                    labels, registry=registry))
        success = Counter("vllm:request_success", "Count of successfully processed requests.",
                          labels + ["finished_reason"], registry=registry)
        self.success = {reason: success.labels(MODEL, "0", reason) for reason in ("stop", "length", "abort", "error")}
        self.prompt_hist = per_engine(Histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                                                labels, buckets=LENGTH_BUCKETS, registry=registry))
        self.output_hist = per_engine(Histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                                labels, buckets=LENGTH_BUCKETS, registry=registry))
        self.ttft = per_engine(Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                         labels, buckets=fixture_buckets("vllm:time_to_first_token_seconds"),
                                         registry=registry))
        self.e2e = per_engine(Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                                        labels, buckets=fixture_buckets("vllm:e2e_request_latency_seconds"),
                                        registry=registry))
        self.inflight = {"waiting": set(), "running": set()}

    def text(self):
        self.running.set(len(self.inflight["running"]))
        self.waiting.set(len(self.inflight["waiting"]))
        return generate_latest(self.registry).decode()


class Site:
    """Replays a load's events into one ``Engine`` per engine name; ``text(name, t)`` is its /metrics at ``t``.

    ``restarts`` ``{name: time}`` restarts an engine at ``time``: a new registry (counters from
    zero, a new ``process_start_time_seconds``) and the requests in flight then are lost.
    """

    def __init__(self, requests, started, restarts=None):
        self.engines = {}
        self.started = started
        events = []
        for index, request in enumerate(requests):
            events += [(request.arrive, 0, index), (request.start, 1, index), (request.finish, 2, index)]
        for name, when in (restarts or {}).items():
            events.append((when, -1, name))
        self.events = sorted(events, key=lambda e: (e[0], e[1] if e[1] != -1 else 3, str(e[2])))
        self.requests = requests
        self.lost = set()
        self.position = 0
        self.now = None

    def engine(self, name):
        if name not in self.engines:
            self.engines[name] = Engine(name, self.started)
        return self.engines[name]

    def advance(self, until):
        while self.position < len(self.events) and self.events[self.position][0] <= until:
            when, kind, ref = self.events[self.position]
            self.position += 1
            if kind == -1:
                old = self.engine(ref)
                self.lost |= old.inflight["waiting"] | old.inflight["running"]
                self.engines[ref] = Engine(ref, when)
                continue
            request = self.requests[ref]
            if ref in self.lost:
                continue
            engine = self.engine(request.engine)
            if kind == 0:
                engine.inflight["waiting"].add(ref)
            elif kind == 1:
                engine.inflight["waiting"].discard(ref)
                engine.inflight["running"].add(ref)
                engine.prompt_tokens.inc(request.prompt)
                engine.queries.inc(request.prompt)
                engine.hits.inc(request.cached)
            else:
                engine.inflight["running"].discard(ref)
                engine.generation_tokens.inc(request.output)
                engine.success[request.reason].inc()
                engine.prompt_hist.observe(request.prompt)
                engine.output_hist.observe(request.output)
                engine.ttft.observe(request.ttft)
                engine.e2e.observe(request.finish - request.arrive)
        self.now = until

    def text(self, name, when):
        self.advance(when)
        return self.engine(name).text()


class FakeTime:
    """``sleep``/``clock``/``wall`` for ``_workload_profile.sample``: sleeping moves time, reading costs nothing."""

    def __init__(self, wall):
        self.wall_time = wall

    def sleep(self, seconds):
        self.wall_time += seconds

    def clock(self):
        return self.wall_time

    def wall(self):
        return self.wall_time


def truth(requests, begin, end, thresholds=(), lost=frozenset()):
    """What the load did in ``(begin, end]``: the figures a profile must read back."""
    kept = [r for i, r in enumerate(requests) if i not in lost]
    arrived = [r for r in kept if begin < r.arrive <= end]
    finished = [r for r in kept if begin < r.finish <= end]
    started = [r for r in kept if begin < r.start <= end]
    seconds = end - begin
    return {
        "arrived": len(arrived),
        "arrival_rate": len(arrived) / seconds,
        "finished": len(finished),
        "prompts": sorted(r.prompt for r in finished),
        "outputs": sorted(r.output for r in finished),
        "prompt_tokens_per_s": sum(r.prompt for r in started) / seconds,
        "generation_tokens_per_s": sum(r.output for r in finished) / seconds,
        "hit_fraction": sum(r.cached for r in started) / sum(r.prompt for r in started),
        "long": {t: sum(1 for r in finished if r.prompt + r.output > t) / len(finished) for t in thresholds},
    }


def inflight_at(requests, when, engines=None, lost=frozenset()):
    """Requests arrived and not finished at ``when`` (what running + waiting shows)."""
    return sum(1 for i, r in enumerate(requests)
               if i not in lost and r.arrive <= when < r.finish and (engines is None or r.engine in engines))
