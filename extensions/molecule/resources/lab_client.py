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
  lab_client.py watch  --url URL --seconds 30 --interval 0.1 --out FILE
  lab_client.py outage --log FILE --event T
  lab_client.py early-headers --url URL --content-length 4194304

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
            long_prompt = bool(args.long_every) and i % args.long_every == 0
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
    # --ignore-eos (vLLM's sampling extension): exactly max_tokens tokens, a generation of a
    # known length however the model would have ended it.
    extra = {"ignore_eos": True} if args.ignore_eos else {}
    arrivals, done, text, finish, error, status, upstream = [], False, [], None, None, 0, None
    try:
        response = chat(session, args.url, args.model, args.prompt or "Count from one to fifty in words.",
                        args.max_tokens, stream=True, **extra)
        status, upstream = response.status_code, response.headers.get("X-Factory-Floor-Upstream")
        for line in response.iter_lines():
            if not line:
                continue
            if line == b"data: [DONE]":
                done = True
                break
            if line.startswith(b"data: "):
                arrivals.append(round(time.time() - started, 4))
                choices = json.loads(line[6:]).get("choices") or [{}]
                text.append(choices[0].get("delta", {}).get("content") or "")
                finish = choices[0].get("finish_reason") or finish
    except requests.RequestException as exc:
        error = str(exc)[:200]
    return {"status": status, "upstream": upstream, "started": started,
            "chunks": len(arrivals), "first": arrivals[0] if arrivals else None,
            "last": arrivals[-1] if arrivals else None, "arrivals": arrivals, "done": done, "text": "".join(text),
            "finish_reason": finish, "error": error}


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


def watch(args):
    """GET ``url`` every ``interval`` s for ``seconds`` s, each on a new connection (what a
    load balancer's health check or a fresh client sees); one JSON line per request to
    ``out``: {"t": start, "end": end, "status": HTTP status or 0 (no answer), "error": ...}."""
    deadline = time.time() + args.seconds
    count = 0
    with open(args.out, "a", encoding="utf-8") as out:
        while time.time() < deadline:
            started = time.time()
            record = {"t": started}
            try:
                response = requests.get(args.url, headers=HEADERS, timeout=args.timeout,
                                        proxies={"http": None, "https": None})
                record["status"] = response.status_code
            except requests.RequestException as exc:
                record.update(status=0, error=str(exc)[:120])
            record["end"] = time.time()
            out.write(json.dumps(record) + "\n")
            out.flush()
            count += 1
            time.sleep(max(0.0, args.interval - (time.time() - started)))
    return {"requests": count}


def outage(args):
    """What the requests of a log (watch's, or the probe client's JSON lines: "t", "status")
    saw around an event at epoch ``event``: how many failed (status other than 200) before
    and after it, and how many seconds after it the first 200 came that followed the last
    failure (``back_after``; 0 when nothing failed after the event)."""
    records = []
    with open(args.log, encoding="utf-8") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a torn last line
    records.sort(key=lambda r: r["t"])
    after = [r for r in records if r.get("end", r["t"]) >= args.event]
    failed = [r for r in after if r.get("status") != 200]
    last_failure = max((r.get("end", r["t"]) for r in failed), default=None)
    back = None
    if last_failure is None:
        back = 0.0
    else:
        oks = [r for r in after if r.get("status") == 200 and r["t"] >= last_failure]
        if oks:
            back = round(oks[0].get("end", oks[0]["t"]) - args.event, 3)
    by_status = {}
    for record in after:
        by_status[str(record.get("status"))] = by_status.get(str(record.get("status")), 0) + 1
    return {"requests": len(records), "requests_after": len(after), "by_status_after": by_status,
            "failed_before": sum(1 for r in records if r.get("end", r["t"]) < args.event and r.get("status") != 200),
            "failed_after": len(failed),
            "first_failure": round(failed[0]["t"] - args.event, 3) if failed else None,
            "last_failure": round(last_failure - args.event, 3) if last_failure is not None else None,
            "back_after": back, "ok_after_back": sum(1 for r in after if r.get("status") == 200
                                                     and (last_failure is None or r["t"] >= last_failure)),
            "failures": failed[:5]}


def early_headers(args):
    """Send a POST's headers announcing a large body (``content_length`` bytes) and no body;
    when does the server answer, and with what? A proxy that reads the body first answers
    nothing until its timeout; one that checks the key first answers 401 at once."""
    import socket
    from urllib.parse import urlsplit
    parts = urlsplit(args.url)
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=args.timeout)
    started = time.time()
    sock.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  "Content-Length: %d\r\n\r\n" % (parts.path or "/", parts.netloc, args.content_length)).encode())
    try:
        data = sock.recv(65536)
    except socket.timeout:
        data = b""
    seconds = round(time.time() - started, 3)
    sock.close()
    status_line = data.split(b"\r\n", 1)[0].decode("latin-1")
    status = int(status_line.split()[1]) if status_line.startswith("HTTP/") else 0
    return {"status": status, "seconds": seconds, "status_line": status_line}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["burst", "stream", "abort", "once", "watch", "outage", "early-headers"])
    parser.add_argument("--url", help="chat completions URL (watch: the URL to GET)")
    parser.add_argument("--model")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    # burst: every Nth request the long e-mail thread (0: none; the split's tiny test model tokenizes it past 4096)
    parser.add_argument("--long-every", type=int, default=3)
    parser.add_argument("--after-chunks", type=int, default=3)
    parser.add_argument("--prompt", default=None)
    parser.add_argument("--ignore-eos", action="store_true", help="stream: generate all --max-tokens")
    parser.add_argument("--api-key-file", default=None, help="file holding the API key")
    parser.add_argument("--seconds", type=float, default=30.0, help="watch: how long")
    parser.add_argument("--interval", type=float, default=0.1, help="watch: seconds between requests")
    parser.add_argument("--timeout", type=float, default=2.0, help="watch, early-headers: seconds per request")
    parser.add_argument("--out", default=None, help="watch: JSON-lines file to append to")
    parser.add_argument("--log", default=None, help="outage: JSON-lines file of requests")
    parser.add_argument("--event", type=float, default=None, help="outage: epoch seconds of the event")
    parser.add_argument("--content-length", type=int, default=4194304, help="early-headers: the announced body size")
    args = parser.parse_args()
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
        if key:
            HEADERS["Authorization"] = "Bearer %s" % key
    result = {"burst": burst, "stream": stream, "abort": abort, "once": once, "watch": watch, "outage": outage,
              "early-headers": early_headers}[args.command](args)
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
