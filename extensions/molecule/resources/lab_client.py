#!/usr/bin/env python3
"""A client of the model, run on a lab host by the molecule scenarios.

It does what a user's program does (chat completions through the proxy, or
straight at an engine) and prints one JSON document with what it saw, so the
scenario's verify step asserts on behaviour: statuses, which engine answered,
when streamed chunks arrived.

  lab_client.py burst  --url URL --model M --n 100 --concurrency 4
  lab_client.py stream --url URL --model M --max-tokens 64
  lab_client.py abort  --url URL --model M --after-chunks 3
  lab_client.py once   --url URL --model M

Every command takes --api-key-file FILE: the key vLLM wants (sent as a Bearer
token), read from a file so that it is on no command line.
Needs python3-requests (in the lab image). Talks only to the URL it is given.
"""

import argparse
import json
import sys
import threading
import time

import requests

SHORT = "Name a colour."
LONG = ("You are an e-mail assistant. Summarise the thread below in two sentences.\n" +
        "\n".join("From: person%d@example.com\nSubject: budget line %d\nPlease review the figures for "
                  "quarter %d and confirm the totals before Friday." % (i, i, i % 4 + 1) for i in range(40)))


# Authorization header of every request (--api-key-file); empty without a key.
HEADERS = {}


def chat(session, url, model, prompt, max_tokens, stream=False, timeout=300, **extra):
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    body.update(extra)
    return session.post(url, json=body, headers=HEADERS, timeout=timeout, stream=stream)


def burst(args):
    """``n`` requests, mixed short/long prompts, ``concurrency`` at a time."""
    results = []
    lock = threading.Lock()
    index = iter(range(args.n))

    def worker():
        session = requests.Session()
        session.trust_env = False
        while True:
            with lock:
                i = next(index, None)
            if i is None:
                return
            long_prompt = i % 3 == 0
            # Each request its own conversation (numbered at the end, so vLLM's prefix cache
            # still shares the long thread): independent clients, which a proxy routing by
            # conversation (nginx_proxy's affinity) spreads like least_conn would.
            prompt = "%s (request %d)" % (LONG if long_prompt else SHORT, i)
            started = time.time()
            record = {"i": i, "t": started, "long": long_prompt}
            try:
                response = chat(session, args.url, args.model, prompt, args.max_tokens)
                record.update(status=response.status_code,
                              upstream=response.headers.get("X-Factory-Floor-Upstream"),
                              retry_after=response.headers.get("Retry-After"))
                if response.status_code == 200:
                    record["tokens"] = response.json()["usage"]["completion_tokens"]
                else:
                    record["body"] = response.text[:200]
            except requests.RequestException as exc:
                record.update(status=0, error=str(exc)[:200])
            record["latency"] = round(time.time() - started, 3)
            with lock:
                results.append(record)

    threads = [threading.Thread(target=worker) for dummy in range(args.concurrency)]
    began = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.time() - began
    by_status, by_upstream = {}, {}
    for record in results:
        by_status[str(record["status"])] = by_status.get(str(record["status"]), 0) + 1
        if record["status"] == 200:
            by_upstream[record["upstream"]] = by_upstream.get(record["upstream"], 0) + 1
    return {"n": len(results), "by_status": by_status, "by_upstream": by_upstream,
            # completion tokens the server reported in each answer's usage, summed
            "tokens": sum(r.get("tokens", 0) for r in results), "seconds": round(seconds, 3),
            "failures": [r for r in results if r["status"] != 200][:5]}


def stream(args):
    """One streamed completion: when each chunk arrived."""
    session = requests.Session()
    session.trust_env = False
    started = time.time()
    response = chat(session, args.url, args.model, args.prompt or "Count from one to fifty in words.",
                    args.max_tokens, stream=True)
    arrivals, done, text = [], False, []
    for line in response.iter_lines():
        if not line:
            continue
        if line == b"data: [DONE]":
            done = True
            break
        if line.startswith(b"data: "):
            arrivals.append(round(time.time() - started, 4))
            delta = json.loads(line[6:])["choices"][0].get("delta", {})
            text.append(delta.get("content") or "")
    return {"status": response.status_code, "upstream": response.headers.get("X-Factory-Floor-Upstream"),
            "chunks": len(arrivals), "first": arrivals[0] if arrivals else None,
            "last": arrivals[-1] if arrivals else None, "arrivals": arrivals, "done": done, "text": "".join(text)}


def abort(args):
    """Start a long streamed completion, read a few chunks, then hang up."""
    session = requests.Session()
    session.trust_env = False
    # ignore_eos (vLLM's sampling extension): the engine would generate all max_tokens
    # unless the hang-up stops it, so "no request running" soon after proves it did.
    response = chat(session, args.url, args.model, "Write a very long story about a lighthouse.",
                    args.max_tokens, stream=True, ignore_eos=True)
    seen = 0
    for line in response.iter_lines():
        if line.startswith(b"data: "):
            seen += 1
            if seen >= args.after_chunks:
                break
    upstream = response.headers.get("X-Factory-Floor-Upstream")
    response.close()
    session.close()
    return {"status": response.status_code, "chunks_read": seen, "upstream": upstream, "closed_at": time.time()}


def once(args):
    """One request; status, headers of interest and the answer."""
    session = requests.Session()
    session.trust_env = False
    started = time.time()
    try:
        response = chat(session, args.url, args.model, args.prompt or SHORT, args.max_tokens)
    except requests.RequestException as exc:
        return {"status": 0, "error": str(exc)[:200], "latency": round(time.time() - started, 3)}
    out = {"status": response.status_code, "upstream": response.headers.get("X-Factory-Floor-Upstream"),
           "retry_after": response.headers.get("Retry-After"), "latency": round(time.time() - started, 3)}
    if response.status_code == 200:
        out["content"] = response.json()["choices"][0]["message"]["content"]
    else:
        out["body"] = response.text[:300]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["burst", "stream", "abort", "once"])
    parser.add_argument("--url", required=True, help="chat completions URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--after-chunks", type=int, default=3)
    parser.add_argument("--prompt", default=None)
    parser.add_argument("--api-key-file", default=None, help="file holding the API key")
    args = parser.parse_args()
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
        if key:
            HEADERS["Authorization"] = "Bearer %s" % key
    result = {"burst": burst, "stream": stream, "abort": abort, "once": once}[args.command](args)
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
