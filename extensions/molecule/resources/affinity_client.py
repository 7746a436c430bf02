#!/usr/bin/env python3
"""A client of the proxy's conversation affinity, run on the proxy host by the proxy scenario.

Sends chat completions whose routing key is carried one way or another and prints one
JSON document (or, for ``steady``, one JSON line per request) with, per request, the
HTTP status, the engine that answered (X-Factory-Floor-Upstream) and where the proxy
found the key (X-Factory-Floor-Route). The keys never appear in its output: each is
named by its kind and number.

  affinity_client.py place   --url URL --model M [--keys 4] [--turns 3]
      every key kind (header, prompt_cache_key, user, prefix), streamed and not:
      --keys conversations of --turns turns each, one after another
  affinity_client.py hot     --url URL --model M --n 16 --max-tokens 48
      --n streamed requests at once, all with one header key
  affinity_client.py keyless --url URL --model M --n 40 --concurrency 8
      text completions with no key
  affinity_client.py steady  --url URL --model M --keys 8 --out FILE
      --concurrency clients, header keys in turn, one JSON line per request, until SIGTERM
  affinity_client.py moves   --url URL --model M --out FILE --asked T --since T --undrain T --until T
                             --target ADDR [--target ADDR ...] [--gone ADDR ...] [--joins ADDR ...]
      judges a steady log around a drain of the engine(s) ADDR (host:port); an engine also given
      as --gone does not come back (a group move took it out): its keys may end on any other;
      an engine given as --joins becomes a member: any key may move to it

Every command takes --api-key-file FILE (the key vLLM wants, read from a file so that it
is on no command line) and --mark-file FILE: a random word put into every key and first
message is written there (root-only), so a test can grep the logs for it with grep -f
without putting it on a command line, which the journal would keep. Needs python3-requests.
"""

import argparse
import json
import os
import random
import signal
import sys
import threading
import time

import requests

HEADERS = {}
KINDS = ("header", "prompt_cache_key", "user", "prefix")
SYSTEM = "You are the e-mail agent of a small company. Answer in one short sentence."


def conversation(first, turn):
    """One conversation's messages at ``turn``: a system prompt every conversation shares,
    its own first question, then the turns so far (the history grows)."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]
    for n in range(turn):
        messages += [{"role": "assistant", "content": "Noted, item %d." % n},
                     {"role": "user", "content": "And what about item %d?" % (n + 1)}]
    return messages


def send(session, url, body, headers=None, timeout=300):
    record = {"t": time.time(), "status": 0, "upstream": None, "route": None, "error": None, "done": None}
    try:
        response = session.post(url, json=body, headers=dict(HEADERS, **(headers or {})), timeout=timeout,
                                stream=bool(body.get("stream")))
        record["status"] = response.status_code
        record["upstream"] = response.headers.get("X-Factory-Floor-Upstream")
        record["route"] = response.headers.get("X-Factory-Floor-Route")
        if body.get("stream"):
            record["done"] = False
            for line in response.iter_lines():
                if line == b"data: [DONE]":
                    record["done"] = True
                    break
        else:
            dummy = response.content
        if response.status_code != 200:
            record["error"] = response.text[:200]
    except requests.RequestException as exc:
        record["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:200])
    record["end"] = time.time()
    return record


def keyed_request(args, kind, key, turn, stream, max_tokens):
    """A request whose routing key is ``key``, carried as ``kind``. Except for ``prefix``,
    the first question changes every turn, so only the key can keep the turns together."""
    if kind == "prefix":
        messages = conversation("%s: please list the open invoices." % key, turn)
    else:
        messages = conversation("%s turn %d: what is open today? (%s)" % (args.mark, turn, random.random()), turn)
    body = {"model": args.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": stream, "ignore_eos": True}
    headers = None
    if kind == "header":
        headers = {"X-Session-Id": key}
    elif kind != "prefix":
        body[kind] = key
    return body, headers


def session():
    out = requests.Session()
    out.trust_env = False
    return out


def place(args):
    """Each kind, streamed and not: ``keys`` conversations of ``turns`` turns. The verdicts:
    ``failed`` (not 200, or a stream without [DONE]), ``wrong_route`` (the proxy found the key
    elsewhere than where it was put), ``split`` (a conversation answered by two engines),
    ``engines`` (conversations per engine)."""
    s = session()
    out = {"conversations": {}, "failed": [], "wrong_route": [], "split": [], "engines": {}}
    for kind in KINDS:
        for stream in (False, True):
            name = kind + (" streamed" if stream else "")
            for k in range(args.keys):
                key = "%s-%s-%d" % (args.mark, kind, k)
                label = "%s key %d" % (name, k)
                records = []
                for turn in range(args.turns):
                    body, headers = keyed_request(args, kind, key, turn, stream, args.max_tokens)
                    records.append(send(s, args.url, body, headers))
                out["conversations"][label] = [r["upstream"] for r in records]
                out["failed"] += ["%s: %s %s" % (label, r["status"], r["error"]) for r in records
                                  if r["status"] != 200 or r["done"] is False]
                out["wrong_route"] += ["%s: %s" % (label, r["route"]) for r in records if r["route"] != kind]
                engines = sorted({str(r["upstream"]) for r in records})
                if len(engines) != 1:
                    out["split"].append("%s: %s" % (label, engines))
                out["engines"][engines[0]] = out["engines"].get(engines[0], 0) + 1
    return out


def hot(args):
    key = "%s-hot" % args.mark
    records = [None] * args.n

    def one(i):
        body, headers = keyed_request(args, "header", key, 0, True, args.max_tokens)
        records[i] = send(session(), args.url, body, headers)

    threads = []
    for i in range(args.n):
        threads.append(threading.Thread(target=one, args=(i,)))
        threads[-1].start()
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    ordered = sorted(records, key=lambda r: r["t"])
    home = ordered[0]["upstream"]
    return {"n": args.n, "home": home,
            "failed": ["%s %s" % (r["status"], r["error"]) for r in ordered if r["status"] != 200 or not r["done"]],
            "by_upstream": dict(_count(r["upstream"] for r in ordered)),
            "spilled": sum(1 for r in ordered if (r["route"] or "").endswith("+spill")),
            # Requests answered away from the key's engine without being marked as spilled.
            "unmarked_away": sum(1 for r in ordered if r["upstream"] != home and r["route"] != "header+spill"),
            "order": ["%s %s" % (r["upstream"], r["route"]) for r in ordered]}


def _count(values):
    out = {}
    for value in values:
        out[str(value)] = out.get(str(value), 0) + 1
    return out


def keyless(args):
    url = args.url.replace("/chat/completions", "/completions")
    index = iter(range(args.n))
    lock = threading.Lock()
    records = []

    def worker():
        s = session()
        while True:
            with lock:
                i = next(index, None)
            if i is None:
                return
            body = {"model": args.model, "prompt": "Write one line about the number %d." % i,
                    "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
            record = send(s, url, body)
            with lock:
                records.append(record)

    threads = [threading.Thread(target=worker) for dummy in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    by_upstream, by_route, by_status = {}, {}, {}
    for r in records:
        by_status[str(r["status"])] = by_status.get(str(r["status"]), 0) + 1
        by_upstream[str(r["upstream"])] = by_upstream.get(str(r["upstream"]), 0) + 1
        by_route[str(r["route"])] = by_route.get(str(r["route"]), 0) + 1
    return {"by_status": by_status, "by_upstream": by_upstream, "by_route": by_route}


def steady(args):
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *dummy: stop.set())
    lock = threading.Lock()
    counter = [0]

    def worker():
        s = session()
        while not stop.is_set():
            with lock:
                n = counter[0]
                counter[0] += 1
            k = n % args.keys
            body, headers = keyed_request(args, "header", "%s-steady-%d" % (args.mark, k), n // args.keys % 4,
                                          bool(n % 2), args.max_tokens)
            record = send(s, args.url, body, headers)
            record["key"] = k
            with lock, open(args.out, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
            stop.wait(args.interval)

    threads = [threading.Thread(target=worker) for dummy in range(args.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return None


def moves(args):
    """Judge a ``steady`` log around a drain: ``--asked`` (the drain asked for: each key's
    engine is the one it had before), ``--since`` (the drain applied), ``--undrain`` (the
    engine's return asked for), ``--until`` (the engine back in rotation), ``--target`` (the
    drained engines' addresses, one or more) and ``--gone`` (those of them that do not come back:
    after ``--until`` their keys are anywhere but there; every other key is where it was before).
    Requests started within ``--margin`` seconds after ``--since`` and ``--until`` are left out
    (nginx's reload). For a group move, whose drain happens at a moment inside it the client does
    not know, ``--since`` = ``--undrain`` = ``--until`` and the window judged is ``--asked`` to ``--until``
    (``moved_in_window``, ``stayed_wrong``)."""
    targets = set(args.target or [])
    gone = set(args.gone or [])
    joins = set(args.joins or [])
    with open(args.out, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    before = [r for r in records if r["t"] < (args.asked or args.since)]
    during = [r for r in records if args.since + args.margin <= r["t"] < (args.undrain or args.until)]
    after = [r for r in records if r["t"] >= args.until + args.margin]
    window = [r for r in records if (args.asked or args.since) <= r["t"] < args.until]

    def homes(rs):
        out = {}
        for r in rs:
            out.setdefault(r["key"], set()).add(r["upstream"])
        return out

    home = {k: v.pop() for k, v in homes(before).items() if len(v) == 1}
    moved = sorted(k for k, h in home.items() if h in targets)
    # While drained: the targets' keys all elsewhere, every other key where it was.
    during_wrong = [r for r in during if r["upstream"] in targets
                    or (r["key"] not in moved and r["upstream"] != home.get(r["key"]))]
    # Back: every key on the engine it had before the drain; a gone engine's keys anywhere but there.
    # An engine that joins (--joins) takes its share of every engine's keys: a key found there is not misplaced.
    after_wrong = [r for r in after if r["upstream"] not in joins
                   and (r["upstream"] in gone if home.get(r["key"]) in gone else r["upstream"] != home.get(r["key"]))]
    return {"requests": len(records), "before": len(before), "during": len(during), "after": len(after),
            "failed": ["%s %s" % (r["status"], r.get("error")) for r in records
                       if r["status"] != 200 or r.get("done") is False],
            "conversations": len(home), "conversations_unstable_before": sorted(set(homes(before)) - set(home)),
            "conversations_of_target": moved,
            "conversations_stayed": sorted(k for k, h in home.items() if h not in targets),
            # From --asked to --until (a whole group move, the drain's moment inside it unknown): the targets'
            # conversations answered elsewhere at least once, and the others' answered anywhere but at home.
            "moved_in_window": sorted({r["key"] for r in window if r["key"] in moved and r["upstream"] not in targets}),
            "stayed_wrong": sorted({r["key"] for r in window if home.get(r["key"]) not in targets | {None}
                                    and r["upstream"] != home[r["key"]] and r["upstream"] not in joins}),
            "during_wrong": sorted({r["key"] for r in during_wrong}),
            "after_wrong": sorted({r["key"] for r in after_wrong}),
            # The first few misplaced requests: seconds after --since / --until, conversation, engine.
            "misplaced": ["%+.2f s conversation %d on %s" % (r["t"] - args.since, r["key"], r["upstream"])
                          for r in during_wrong[:3]]
                         + ["%+.2f s conversation %d on %s (back)" % (r["t"] - args.until, r["key"], r["upstream"])
                            for r in after_wrong[:3]],
            "window_s": {"asked_to_applied": round(args.since - (args.asked or args.since), 2),
                         "drained": round((args.undrain or args.until) - args.since, 2),
                         "undrain_to_back": round(args.until - (args.undrain or args.until), 2)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["place", "hot", "keyless", "steady", "moves"])
    parser.add_argument("--url", required=True, help="chat completions URL of the proxy")
    parser.add_argument("--model", required=True)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--asked", type=float, default=0.0)
    parser.add_argument("--since", type=float, default=0.0)
    parser.add_argument("--undrain", type=float, default=0.0)
    parser.add_argument("--until", type=float, default=0.0)
    parser.add_argument("--target", action="append", default=None, help="moves: a drained engine (repeat for more)")
    parser.add_argument("--gone", action="append", default=None, help="moves: a drained engine that does not come back")
    parser.add_argument("--joins", action="append", default=None, help="moves: an engine that becomes a member")
    parser.add_argument("--margin", type=float, default=1.0)
    parser.add_argument("--mark-file", default=None)
    parser.add_argument("--api-key-file", default=None)
    args = parser.parse_args()
    args.mark = "affmark%08x" % random.getrandbits(32)
    if args.mark_file:
        with open(args.mark_file, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(args.mark + "\n")
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
        if key:
            HEADERS["Authorization"] = "Bearer %s" % key
    if args.command in ("steady", "moves") and not args.out:
        parser.error("%s needs --out" % args.command)
    result = {"place": place, "hot": hot, "keyless": keyless, "steady": steady, "moves": moves}[args.command](args)
    if result is not None:
        json.dump(result, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")


if __name__ == "__main__":
    main()
