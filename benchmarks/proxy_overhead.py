#!/usr/bin/env python3
"""What the proxy adds: latency and streaming time-to-first-token, proxy vs direct.

Run on the proxy host (the only host, with the health checkers, that may reach
an engine's own port). Requests to the proxy and straight to one engine are
interleaved one by one in the same run, so both see the same engine and load.

- added latency: GET /v1/models (vLLM answers it without touching the model, so
  the difference is the proxy hop itself), p50 and p99 of each path;
- streaming TTFT: time to the first server-sent event of a chat completion.

Prints a table and one JSON line (``RESULT {...}``). Goals (issue #4): added
p50 <= 1 ms, TTFT delta <= 5 ms.
"""

import argparse
import json
import statistics
import time

import requests


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def time_get(session, url):
    started = time.perf_counter()
    response = session.get(url, timeout=30)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


def time_first_chunk(session, url, model):
    started = time.perf_counter()
    with session.post(url, json={"model": model, "stream": True, "max_tokens": 4, "temperature": 0,
                                 "messages": [{"role": "user", "content": "Say hello."}]},
                      stream=True, timeout=120) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith(b"data: "):
                first = time.perf_counter() - started
                break
        for dummy in response.iter_lines():
            pass
    return first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", required=True, help="proxy base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--direct", required=True, help="one engine's base URL, e.g. http://spark-a:8000")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n", type=int, default=400, help="GET pairs")
    parser.add_argument("--streams", type=int, default=40, help="streamed completion pairs")
    parser.add_argument("--api-key-file", default=None,
                        help="file holding the engines' API key (vLLM's --api-key), sent to both paths")
    args = parser.parse_args()

    session = requests.Session()
    session.trust_env = False
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            api_key = handle.read().strip()
        if api_key:
            session.headers["Authorization"] = "Bearer %s" % api_key
    paths = {"proxy": args.proxy.rstrip("/"), "direct": args.direct.rstrip("/")}
    for base in paths.values():  # warm up connections and caches
        for dummy in range(10):
            time_get(session, base + "/v1/models")
    lat = {"proxy": [], "direct": []}
    for i in range(args.n):
        order = ("proxy", "direct") if i % 2 == 0 else ("direct", "proxy")
        for name in order:
            lat[name].append(time_get(session, paths[name] + "/v1/models") * 1000)
    ttft = {"proxy": [], "direct": []}
    for i in range(args.streams):
        order = ("proxy", "direct") if i % 2 == 0 else ("direct", "proxy")
        for name in order:
            ttft[name].append(time_first_chunk(session, paths[name] + "/v1/chat/completions", args.model) * 1000)

    result = {
        "latency_ms": {k: {"p50": round(percentile(v, 0.5), 3), "p99": round(percentile(v, 0.99), 3)} for k, v in lat.items()},
        "ttft_ms": {k: {"p50": round(percentile(v, 0.5), 3), "mean": round(statistics.mean(v), 3)} for k, v in ttft.items()},
    }
    result["added_latency_ms"] = {q: round(result["latency_ms"]["proxy"][q] - result["latency_ms"]["direct"][q], 3)
                                  for q in ("p50", "p99")}
    result["ttft_delta_ms"] = round(result["ttft_ms"]["proxy"]["p50"] - result["ttft_ms"]["direct"]["p50"], 3)
    result["ttft_ratio"] = round(result["ttft_ms"]["proxy"]["p50"] / result["ttft_ms"]["direct"]["p50"], 4)
    result["latency_ratio_p50"] = round(result["latency_ms"]["proxy"]["p50"] / result["latency_ms"]["direct"]["p50"], 4)
    print("%-28s %10s %10s %10s" % ("", "direct", "proxy", "added"))
    for q in ("p50", "p99"):
        print("%-28s %10.3f %10.3f %10.3f" % ("GET /v1/models %s (ms)" % q, result["latency_ms"]["direct"][q],
                                             result["latency_ms"]["proxy"][q], result["added_latency_ms"][q]))
    print("%-28s %10.3f %10.3f %10.3f" % ("stream TTFT p50 (ms)", result["ttft_ms"]["direct"]["p50"],
                                         result["ttft_ms"]["proxy"]["p50"], result["ttft_delta_ms"]))
    print("ratios proxy/direct: latency p50 %.3f, TTFT p50 %.3f" % (result["latency_ratio_p50"], result["ttft_ratio"]))
    print("goals: added p50 <= 1 ms: %s; TTFT delta <= 5 ms: %s" % (
        result["added_latency_ms"]["p50"] <= 1.0, result["ttft_delta_ms"] <= 5.0))
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
