"""Checks of the proxy's routing, run inside the container of tests/proxy_affinity/run.sh.

nginx (the nginx_proxy role's, on 127.0.0.1:8080), its membership checker and two
stand-in engines (standin.py: up-a on 127.0.0.1:18001, up-b on :18002, 4 requests at once
each by the inventory's vllm_max_num_seqs) run there. Every check sends real requests
through nginx and reads where each landed from X-Factory-Floor-Upstream (and, with
affinity, X-Factory-Floor-Route). Stdlib only.

  check.py affinity     nginx_proxy_balance: affinity (the default)
  check.py least_conn   nginx_proxy_balance: least_conn
  check.py lab_client   the proxy scenario's affinity_client.py and its assertions (affinity)
  check.py bench        benchmarks/affinity.py, small, on stand-ins modelling a prefix cache (affinity)

Prints one JSON document with what each check measured; exits 1 at the first check that
fails, naming it and what was seen.
"""

import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter

PROXY = ("127.0.0.1", 8080)
ENGINES = {"127.0.0.1:18001": "up-a", "127.0.0.1:18002": "up-b"}
PORTS = {"up-a": 18001, "up-b": 18002}
STATE = "/run/factory-floor/upstream.json"
MEMBERS = "/etc/nginx/factory-floor-members.json"
DRAIN = "/etc/factory-floor/drain"
CHECKER_CONFIG = "/etc/factory-floor/upstream.json"
# In every routing key and prompt this run sends: no log may contain it.
MARK = "affmark%08x" % random.getrandbits(32)
CAP = 4   # the stand-ins' vllm_max_num_seqs (inventory.yml)

with open(CHECKER_CONFIG, encoding="utf-8") as _handle:
    API_KEY = json.load(_handle)["api_key"]
RESULTS = {}


class CheckFailed(Exception):
    pass


def check(condition, message, *args):
    if not condition:
        raise CheckFailed(message % args if args else message)


# ------------------------------------------------------------------ requests


def send(path="/v1/chat/completions", body=None, headers=None, method="POST", port=PROXY[1], timeout=60):
    """One request through nginx; what came back. Never raises."""
    started = time.monotonic()
    record = {"t0": time.time(), "status": 0, "engine": None, "route": None, "upstream": None, "chunks": 0,
              "first": None, "last": None, "done": False, "error": None, "retry_after": None, "json": None}
    conn = http.client.HTTPConnection(PROXY[0], port, timeout=timeout)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        all_headers = {"Authorization": "Bearer %s" % API_KEY}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        conn.request(method, path, body=data, headers=all_headers)
        response = conn.getresponse()
        record["status"] = response.status
        record["upstream"] = response.getheader("X-Factory-Floor-Upstream")
        record["route"] = response.getheader("X-Factory-Floor-Route")
        record["retry_after"] = response.getheader("Retry-After")
        if record["upstream"]:
            # After a retry nginx lists every engine tried; the last one answered.
            record["engine"] = ENGINES.get(record["upstream"].split(",")[-1].strip())
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            while True:
                line = response.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    if line.strip() == b"data: [DONE]":
                        record["done"] = True
                        break
                    record["chunks"] += 1
                    now = time.monotonic() - started
                    record["first"] = now if record["first"] is None else record["first"]
                    record["last"] = now
        else:
            raw = response.read()
            try:
                record["json"] = json.loads(raw)
            except ValueError:
                record["json"] = None
    except (OSError, http.client.HTTPException) as exc:
        record["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        conn.close()
    record["t1"] = time.time()
    return record


def chat(messages, max_tokens=1, stream=False, **fields):
    body = {"model": "lab-chat", "messages": messages, "max_tokens": max_tokens, "stream": stream}
    body.update(fields)
    return body


def conversation(first, turn):
    """A conversation's messages at ``turn``: the same system prompt for every conversation,
    its own first question, then the turns so far."""
    messages = [{"role": "system", "content": "You are the e-mail agent. " + MARK},
                {"role": "user", "content": first}]
    for n in range(turn):
        messages += [{"role": "assistant", "content": "answer %d" % n}, {"role": "user", "content": "more %d" % n}]
    return messages


def keyed(kind, key, turn=0, stream=False, max_tokens=1):
    """A request whose routing key is ``key``, carried as ``kind``. The first user message
    changes every turn except for ``prefix``, so only the key can keep the turns together."""
    if kind == "prefix":
        return send(body=chat(conversation(key, turn), max_tokens, stream))
    messages = conversation("turn %d of %s %s" % (turn, MARK, random.random()), turn)
    if kind == "header":
        return send(body=chat(messages, max_tokens, stream), headers={"X-Session-Id": key})
    return send(body=chat(messages, max_tokens, stream, **{kind: key}))


def keyless(max_tokens=1, stream=False):
    """A request with no routing key: a text completion (no messages, no key fields)."""
    return send("/v1/completions", {"model": "lab-chat", "prompt": "Say hi. " + MARK, "max_tokens": max_tokens,
                                    "stream": stream})


def in_parallel(calls, stagger=0.0):
    """Run the callables at once (``stagger`` seconds apart); their results in order."""
    results = [None] * len(calls)

    def run(i):
        results[i] = calls[i]()

    threads = []
    for i in range(len(calls)):
        thread = threading.Thread(target=run, args=(i,))
        thread.start()
        threads.append(thread)
        time.sleep(stagger)
    for thread in threads:
        thread.join()
    return results


class Background:
    """Clients sending ``make()`` requests back to back until stopped; every record kept."""

    def __init__(self, make, clients=3):
        self.make = make
        self.records = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, args=(n,)) for n in range(clients)]

    def loop(self, n):
        i = n
        while not self.stopping.is_set():
            record = self.make(i)
            with self.lock:
                self.records.append(record)
            i += len(self.threads)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for thread in self.threads:
            thread.join()
        return False


# ------------------------------------------------------------------ the host


def read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def wait_for(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return time.time()
        check(time.monotonic() < deadline, "waited %.0f s for %s; checker state: %s", timeout, what,
              json.dumps(read_json(STATE), sort_keys=True))
        time.sleep(0.1)


def in_rotation(*names):
    return wait_for("%s in rotation" % (names,), lambda: sorted(read_json(STATE).get("in_rotation", [])) == sorted(names))


def balancer_members(*names):
    """When the balancer routes by these members: the checker's state file is written once
    `systemctl reload` returned, before nginx has read its new configuration, so waiting for
    the state alone leaves a window in which new requests still go by the old members. Every
    worker, old or new, reads the members of the newest load at its next request, and so does
    /factory-floor/affinity: a request started after this time goes by them."""
    def now():
        record = send("/factory-floor/affinity", method="GET")
        return record["status"] == 200 and sorted(m["name"] for m in record["json"]["members"]) == sorted(names)
    return wait_for("the balancer's members %s" % (names,), now)


def inflight():
    record = send("/factory-floor/affinity", method="GET")
    check(record["status"] == 200, "/factory-floor/affinity answered %s", record["status"])
    return record["json"]["inflight"]


def stats(name):
    conn = http.client.HTTPConnection("127.0.0.1", PORTS[name], timeout=5)
    conn.request("GET", "/stats")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    return doc


def reset_stats():
    for name, port in PORTS.items():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/stats/reset", body=b"")
        conn.getresponse().read()
        conn.close()
        check(stats(name)["inflight"] == 0, "%s still runs requests", name)


def systemctl(*args):
    subprocess.run(["systemctl"] + list(args), check=True, capture_output=True, timeout=120)


def start_standin(name):
    subprocess.run(["systemd-run", "--quiet", "--unit=standin-%s" % name, "/usr/bin/python3",
                    "/opt/affinity-check/standin.py", "--name", name, "--port", str(PORTS[name]),
                    "--api-key", API_KEY], check=True, capture_output=True, timeout=30)


def failures(records):
    return [{k: r[k] for k in ("status", "error", "upstream", "route")} for r in records
            if r["status"] != 200 or (r["chunks"] and not r["done"])]


# ------------------------------------------------------------ affinity checks

PLACEMENT = {}   # header key -> engine, from keys_stick()
KINDS = ("header", "prompt_cache_key", "user", "prefix")


def keys_stick():
    """Each key kind, streamed and not: 12 keys x 3 turns; every turn on its key's engine."""
    out = {}
    for kind in KINDS:
        for stream in (False, True):
            placement = {}
            for k in range(12):
                key = "%s-%s-%d" % (MARK, kind, k)
                records = [keyed(kind, key, turn, stream, max_tokens=3) for turn in range(3)]
                bad = [r for r in records if r["status"] != 200 or r["route"] != kind or (stream and not r["done"])]
                check(not bad, "%s%s: %s", kind, " streamed" if stream else "", failures(bad) or bad[:1])
                engines = {r["engine"] for r in records}
                check(len(engines) == 1, "%s key %d: turns went to %s", kind, k, sorted(engines))
                placement[key] = engines.pop()
            check(len(set(placement.values())) == 2, "%s: 12 keys all on %s", kind, set(placement.values()))
            out[kind + (" streamed" if stream else "")] = dict(Counter(placement.values()))
            if kind == "header" and not stream:
                PLACEMENT.update(placement)
    # First found wins: header, then prompt_cache_key, then user, then the prefix.
    both = chat(conversation("q", 0), prompt_cache_key=MARK + "-pck", user=MARK + "-user")
    routes = [send(body=both, headers={"X-Session-Id": MARK + "-h"})["route"], send(body=both)["route"],
              send(body=chat(conversation("q", 0), user=MARK + "-user"))["route"],
              send(body=chat(conversation("q", 0)))["route"]]
    check(routes == list(KINDS), "precedence: routes %s", routes)
    out["precedence"] = routes
    return out


def streams_unbuffered():
    record = keyed("header", MARK + "-stream", stream=True, max_tokens=60)
    check(record["status"] == 200 and record["done"] and record["chunks"] == 60, "stream: %s", record)
    check(record["first"] < 0.35 and record["last"] - record["first"] > 0.4,
          "chunks held back: first at %.2f s, last at %.2f s", record["first"], record["last"])
    return {"chunks": record["chunks"], "first_s": round(record["first"], 3), "last_s": round(record["last"], 3)}


def keyless_balance():
    """No key: the engine with the fewest requests in flight; ties take turns."""
    sequential = Counter(keyless()["engine"] for dummy in range(10))
    check(sorted(sequential.values()) == [5, 5], "10 key-less requests one after another: %s", sequential)
    reset_stats()
    records = in_parallel([lambda: keyless(max_tokens=60) for dummy in range(8)], stagger=0.02)
    check(not failures(records), "key-less burst: %s", failures(records))
    burst = Counter(r["engine"] for r in records)
    routes = Counter(r["route"] for r in records)
    peaks = {n: stats(n)["peak"] for n in PORTS}
    check(sorted(burst.values()) == [4, 4] and routes == {"least_conn": 8}, "8 at once: %s %s", burst, routes)
    check(sorted(peaks.values()) == [4, 4], "8 at once: peaks in flight %s", peaks)
    return {"sequential": dict(sequential), "burst_of_8": dict(burst), "peak_in_flight": peaks}


def bound_spills():
    """12 requests at once with one key: its engine takes them up to its bound, then the other."""
    key = MARK + "-hot"
    home = keyed("header", key)["engine"]
    other = [n for n in PORTS if n != home][0]
    reset_stats()
    records = in_parallel([lambda: keyed("header", key, max_tokens=150) for dummy in range(12)], stagger=0.03)
    check(not failures(records), "hot key: %s", failures(records))
    order = [(r["engine"], r["route"]) for r in sorted(records, key=lambda r: r["t0"])]
    spilled = sum(1 for dummy, route in order if route == "header+spill")
    placed = Counter(engine for engine, dummy in order)
    peaks = {n: stats(n)["peak"] for n in PORTS}
    # Up to half the site's slots (2 x max_num_seqs 4) in flight only max_num_seqs bounds
    # an engine: home takes four while the other has none; the fifth spills.
    check(order[:CAP] == [(home, "header")] * CAP, "the first %d should stay home: %s", CAP, order[:CAP + 1])
    check(order[CAP] == (other, "header+spill"), "request %d should spill (max_num_seqs): %s", CAP + 1, order[:CAP + 1])
    check(all(route == "header+spill" for engine, route in order if engine == other),
          "a request on the other engine not marked as spilled: %s", order)
    check(abs(placed[home] - placed[other]) <= 1 and spilled >= 5, "12 at once: %s, %d spilled", placed, spilled)
    return {"home": home, "placed": dict(placed), "spilled": spilled, "peak_in_flight": peaks,
            "order": ["%s%s" % (e, " (spill)" if r.endswith("+spill") else "") for e, r in order]}


def first_turn_home():
    """A prefix-keyed first turn goes home with its engine busy, below its bound, as its later turns do."""
    key = MARK + "-first"
    home = keyed("prefix", key)["engine"]
    busy = [None]
    thread = threading.Thread(target=lambda: busy.__setitem__(0, keyed("prefix", key, 1, True, max_tokens=200)))
    thread.start()
    time.sleep(0.4)
    first, later = keyed("prefix", key), keyed("prefix", key, 2)
    thread.join()
    check(busy[0]["status"] == 200 and busy[0]["engine"] == home, "the busy turn: %s", busy[0])
    check(busy[0]["last"] and busy[0]["last"] > 0.8, "the busy turn ended too soon to overlap: %s", busy[0])
    check((first["engine"], first["route"]) == (home, "prefix"),
          "a first turn with its engine busy: %s %s", first["engine"], first["route"])
    check((later["engine"], later["route"]) == (home, "prefix"),
          "a later turn with its engine busy: %s %s", later["engine"], later["route"])
    return {"home": home, "first_turn": [first["engine"], first["route"]], "later_turn": [later["engine"], later["route"]]}


def moves(records, since, until=None):
    """Of the requests started in [since, until): key -> engines."""
    out = {}
    for r in records:
        if r["t0"] >= since and (until is None or r["t0"] < until):
            out.setdefault(r["key"], set()).add(r["engine"])
    return out


def steady_on_keys():
    keys = sorted(PLACEMENT)

    def make(i):
        key = keys[i % len(keys)]
        record = keyed("header", key, turn=i % 4, stream=bool(i % 2), max_tokens=20)
        record["key"] = key
        return record
    return make


def drain_moves_only_its_keys():
    """Drain one engine under load: its keys go to the other, the other's stay, nothing fails;
    undrained, every key is back on its engine (rendezvous hashing is a function of the members)."""
    target = PLACEMENT[sorted(PLACEMENT)[0]]
    other = [n for n in PORTS if n != target][0]
    with Background(steady_on_keys()) as load:
        time.sleep(2)
        open(os.path.join(DRAIN, target), "w").close()
        wait_for("%s drained" % target, lambda: read_json(STATE).get("drained") == [target])
        drained = balancer_members(other)
        time.sleep(3)
        # The window ends when the return is asked for: the balancer takes the engine back
        # later (the checker's next pass and a reload), so no request started before then
        # may go to it; the status poll that sees it back answers later still.
        undrained = time.time()
        os.unlink(os.path.join(DRAIN, target))
        in_rotation(*PORTS)
        back = balancer_members(*PORTS)
        time.sleep(3)
    records = load.records
    check(not failures(records), "drain: %d failed of %d: %s", len(failures(records)), len(records),
          failures(records)[:3])
    during = moves(records, drained, undrained)
    after = moves(records, back)
    check(during and all(engines == {other} for engines in during.values()),
          "while %s was drained: %s", target, {k: sorted(v) for k, v in during.items()})
    stayed = [k for k in PLACEMENT if PLACEMENT[k] == other]
    check(all(moves(records, 0).get(k, {other}) == {other} for k in stayed),
          "keys of %s moved while %s was drained", other, target)
    check(after and all(engines == {PLACEMENT[k]} for k, engines in after.items()),
          "after %s came back: %s", target, {k: sorted(v) for k, v in after.items()})
    return {"drained": target, "requests": len(records), "failed": 0, "keys_moved": len(PLACEMENT) - len(stayed),
            "keys_stayed": len(stayed)}


def gone_retries_elsewhere():
    """An engine that stops (port closed) before the checker notices: requests nginx could
    not send there are retried on the other engine; none fails; back when it serves."""
    target = PLACEMENT[sorted(PLACEMENT)[0]]
    other = [n for n in PORTS if n != target][0]
    with Background(steady_on_keys()) as load:
        time.sleep(2)
        stopped = time.time()
        systemctl("stop", "standin-%s" % target)
        wait_for("%s out" % target, lambda: target not in read_json(STATE).get("members", [target]))
        out = balancer_members(other)
        time.sleep(2)
        restarted = time.time()
        start_standin(target)
        in_rotation(*PORTS)
        back = balancer_members(*PORTS)
        time.sleep(3)
    records = load.records
    check(not failures(records), "engine gone: %d failed of %d: %s", len(failures(records)), len(records),
          failures(records)[:3])
    retried = [r for r in records if r["upstream"] and "," in r["upstream"]]
    during = moves(records, out, restarted)
    check(during and all(engines == {other} for engines in during.values()),
          "while %s was out: %s", target, {k: sorted(v) for k, v in during.items()})
    after = moves(records, back)
    check(after and all(engines == {PLACEMENT[k]} for k, engines in after.items()),
          "after %s came back: %s", target, {k: sorted(v) for k, v in after.items()})
    return {"stopped": target, "requests": len(records), "failed": 0,
            "retried_on_the_other": len(retried), "after_stop": len([r for r in records if r["t0"] >= stopped])}


def counts_survive_reload():
    records = []
    thread = threading.Thread(target=lambda: records.extend(
        in_parallel([lambda: keyless(max_tokens=300, stream=True) for dummy in range(6)], stagger=0.02)))
    thread.start()
    time.sleep(1)
    before = sum(inflight().values())
    systemctl("reload", "nginx.service")
    time.sleep(0.5)
    after_reload = sum(inflight().values())
    thread.join()
    time.sleep(0.2)
    settled = inflight()
    check(not failures(records), "streams across a reload: %s", failures(records))
    check(before == 6 and after_reload == 6 and sum(settled.values()) == 0,
          "in flight before reload %s, after %s, when done %s", before, after_reload, settled)
    return {"in_flight_before_reload": before, "after_reload": after_reload, "when_done": settled}


def large_bodies():
    """Bodies above client_body_buffer_size (64k here) are not read: routed without a body key."""
    small = chat(conversation(MARK + "x" * 40000, 0))
    large = chat(conversation(MARK + "x" * 100000, 0))
    out = {}
    for name, body, headers, route in (("40 kB", small, None, "prefix"), ("100 kB", large, None, "large_body"),
                                       ("100 kB with header", large, {"X-Session-Id": MARK + "-big"}, "header")):
        record = send(body=body, headers=headers)
        size = len(json.dumps(body))
        check(record["status"] == 200 and record["route"] == route and record["json"]["received_bytes"] == size,
              "%s body: status %s route %s received %s of %d", name, record["status"], record["route"],
              (record["json"] or {}).get("received_bytes"), size)
        out[name] = record["route"]
    return out


def none_serving_is_503():
    for name in PORTS:
        open(os.path.join(DRAIN, name), "w").close()
    wait_for("every engine drained", lambda: sorted(read_json(STATE).get("drained", [])) == sorted(PORTS))
    # The state file is written once `systemctl reload` returned, which is when nginx
    # was told to reload: give the new workers a moment to take over.
    time.sleep(1)
    records = [keyed("header", MARK + "-none"), keyed("prefix", MARK + "-none"), keyless()]
    for name in PORTS:
        os.unlink(os.path.join(DRAIN, name))
    in_rotation(*PORTS)
    check(all(r["status"] == 503 and r["retry_after"] for r in records), "nothing serving: %s",
          [(r["status"], r["retry_after"]) for r in records])
    return {"statuses": [r["status"] for r in records], "retry_after": records[0]["retry_after"]}


def only_v1():
    statuses = {path: send(path, method="GET")["status"] for path in ("/tokenize", "/metrics", "/health")}
    check(set(statuses.values()) == {404}, "paths outside /v1/: %s", statuses)
    return statuses


def key_never_logged():
    """The keys (and the prompts: every one carried the mark) are in no log and no file nginx or
    the checker wrote."""
    places = ["/var/log/nginx", "/run/factory-floor", "/etc/factory-floor", "/etc/nginx"]
    found = subprocess.run(["grep", "-rl", MARK] + places, capture_output=True, text=True, check=False).stdout.split()
    journal = subprocess.run(["journalctl", "--no-pager", "-q"], capture_output=True, text=True, check=False).stdout
    check(not found and MARK not in journal, "the mark %s is in %s%s", MARK, found, " and the journal" if MARK in journal else "")
    lines = sum(1 for dummy in open("/var/log/nginx/access.log", encoding="utf-8"))
    return {"access_log_lines": lines, "files_with_a_key": 0, "journal": "clean"}


def settled_counts():
    time.sleep(0.3)
    counts = inflight()
    check(set(counts) <= set(PORTS) and not any(counts.values()), "requests still counted in flight: %s", counts)
    return counts


def affinity():
    in_rotation(*PORTS)
    members = read_json(MEMBERS)
    check([(m["name"], m["host"], m["port"], m.get("max_num_seqs")) for m in members["members"]]
          == [("up-a", "127.0.0.1", 18001, CAP), ("up-b", "127.0.0.1", 18002, CAP)], "member list: %s", members)
    RESULTS["members"] = members
    for step in (keys_stick, streams_unbuffered, keyless_balance, bound_spills, first_turn_home,
                 drain_moves_only_its_keys,
                 gone_retries_elsewhere, counts_survive_reload, large_bodies, none_serving_is_503, only_v1,
                 settled_counts, key_never_logged):
        RESULTS[step.__name__] = step()
        RESULTS[step.__name__ + "_ok"] = True


# ---------------------------------------------------------- least_conn checks


def least_conn():
    in_rotation(*PORTS)
    with open("/etc/nginx/nginx.conf", encoding="utf-8") as handle:
        conf = handle.read()
    check("lua" not in conf.lower() and "least_conn;" in conf, "nginx.conf still has Lua, or no least_conn")
    check(not os.path.exists(MEMBERS), "%s left behind", MEMBERS)
    check("members_file" not in read_json(CHECKER_CONFIG), "the checker still exports members")
    RESULTS["no_lua"] = True
    reset_stats()
    records = in_parallel([lambda: keyed("header", MARK + "-lc", max_tokens=60) for dummy in range(8)], stagger=0.02)
    check(not failures(records) and all(r["route"] is None for r in records), "least_conn: %s", failures(records))
    spread = Counter(r["engine"] for r in records)
    check(sorted(spread.values()) == [4, 4], "one key, 8 at once, least_conn: %s", spread)
    RESULTS["one_key_8_at_once"] = dict(spread)
    RESULTS["streams_unbuffered"] = streams_unbuffered_lc()
    RESULTS["only_v1"] = only_v1()
    RESULTS["affinity_status_path"] = send("/factory-floor/affinity", method="GET")["status"]
    check(RESULTS["affinity_status_path"] == 404, "/factory-floor/affinity without affinity: %s",
          RESULTS["affinity_status_path"])


def streams_unbuffered_lc():
    record = keyless(max_tokens=60, stream=True)
    check(record["status"] == 200 and record["done"] and record["first"] < 0.35, "stream: %s", record)
    return {"chunks": record["chunks"], "first_s": round(record["first"], 3), "last_s": round(record["last"], 3)}


# ------------------------------------------- the proxy scenario's client, here


CLIENT = "/opt/affinity-check/affinity_client.py"


def key_file():
    """The API key in a root-only file, for the clients' --api-key-file."""
    with open("/run/affinity-check.key", "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(API_KEY)
    return "/run/affinity-check.key"


def client(*args):
    key_file()
    argv = [sys.executable, CLIENT, args[0], "--url", "http://127.0.0.1:8080/v1/chat/completions", "--model",
            "lab-chat", "--api-key-file", "/run/affinity-check.key"] + list(args[1:])
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    check(done.returncode == 0, "%s: %s", args[0], done.stderr[-500:])
    return json.loads(done.stdout) if done.stdout.strip() else None


def lab_client():
    """What extensions/molecule/proxy/verify.yml asserts, with its client, against the stand-ins."""
    in_rotation(*PORTS)
    placed = client("place", "--keys", "4", "--turns", "3", "--mark-file", "/run/affinity-check.mark")
    check(placed["failed"] == [] and placed["wrong_route"] == [] and placed["split"] == []
          and len(placed["engines"]) == 2, "place: %s", placed)
    RESULTS["place"] = placed["engines"]
    hot = client("hot", "--n", "16", "--max-tokens", "48")
    check(hot["failed"] == [] and len(hot["by_upstream"]) == 2 and hot["spilled"] >= 1 and hot["unmarked_away"] == 0
          and {o.split()[0] for o in hot["order"][:3]} == {hot["home"]}, "hot: %s", hot)
    RESULTS["hot"] = {k: hot[k] for k in ("by_upstream", "spilled")}
    keyless_ = client("keyless", "--n", "40", "--concurrency", "8", "--max-tokens", "16")
    check(keyless_["by_status"] == {"200": 40} and keyless_["by_route"] == {"least_conn": 40}
          and min(keyless_["by_upstream"].values()) >= 12, "keyless: %s", keyless_)
    RESULTS["keyless"] = keyless_["by_upstream"]
    log = "/run/affinity-check-steady.jsonl"
    if os.path.exists(log):
        os.unlink(log)
    steady = subprocess.Popen([sys.executable, CLIENT, "steady", "--url", "http://127.0.0.1:8080/v1/chat/completions",
                               "--model", "lab-chat", "--api-key-file", "/run/affinity-check.key", "--keys", "8",
                               "--concurrency", "2", "--max-tokens", "8", "--out", log])
    time.sleep(3)
    with open(log, encoding="utf-8") as handle:
        first = [json.loads(line) for line in handle][:40]
    target = [r for r in first if r["key"] == 0][0]["upstream"]
    name = ENGINES[target]
    asked = time.time()
    open(os.path.join(DRAIN, name), "w").close()
    wait_for("%s drained" % name, lambda: read_json(STATE).get("drained") == [name])
    drained = time.time()
    time.sleep(3)
    undrain = time.time()
    os.unlink(os.path.join(DRAIN, name))
    in_rotation(*PORTS)
    back = time.time()
    time.sleep(3)
    steady.terminate()
    steady.wait(timeout=30)
    moves = client("moves", "--out", log, "--asked", str(asked), "--since", str(drained), "--undrain", str(undrain),
                   "--until", str(back), "--target", target)
    check(moves["failed"] == [] and moves["conversations"] == 8 and moves["conversations_of_target"] and moves["during"] > 0
          and moves["after"] > 0 and moves["during_wrong"] == [] and moves["after_wrong"] == [], "moves: %s", moves)
    RESULTS["moves"] = moves
    found = subprocess.run("grep -rlF -f /run/affinity-check.mark /var/log/nginx /run/factory-floor /etc/nginx; "
                           "journalctl --no-pager -o export | grep -a -c -F -f /run/affinity-check.mark",
                           shell=True, capture_output=True, text=True, check=False).stdout.split()
    check(found == ["0"], "the mark is in: %s", found)


def bench():
    """benchmarks/affinity.py, small, against stand-ins that model a prefix cache."""
    key_file()
    done = subprocess.run([sys.executable, "/opt/affinity-check/bench/affinity.py", "--proxy=http://127.0.0.1:8080",
                           "--engine=up-a=http://127.0.0.1:18001", "--engine=up-b=http://127.0.0.1:18002",
                           "--cap=%d" % CAP, "--model=lab-chat", "--api-key-file=/run/affinity-check.key",
                           "--clients=4", "--per-client=2", "--think=0", "--turns=4", "--context-tokens=1500",
                           "--turn-tokens=100", "--answer-tokens=20", "--duration=15", "--long-prompt-tokens=1200",
                           "--long-max-tokens=20", "--short-max-tokens=10"],
                          capture_output=True, text=True, check=False, timeout=1800)
    sys.stderr.write(done.stdout)
    check(done.returncode == 0, "affinity.py failed: %s", done.stderr[-2000:])
    result = json.loads([line for line in done.stdout.splitlines() if line.startswith("RESULT ")][0][7:])
    RESULTS["ratios"] = {part: result[part]["ratios"] for part in result["parts"]}
    RESULTS["agent_ttft_follow_up"] = {arm: result["agent"][arm]["ttft_follow_up"] for arm in ("least_conn", "affinity")}
    RESULTS["agent_prefix_cache"] = {arm: result["agent"][arm]["prefix_cache"] for arm in ("least_conn", "affinity")}


def main():
    phase = sys.argv[1] if len(sys.argv) > 1 else "affinity"
    RESULTS["phase"] = phase
    try:
        {"affinity": affinity, "least_conn": least_conn, "lab_client": lab_client, "bench": bench}[phase]()
    except CheckFailed as exc:
        RESULTS["failed"] = str(exc)
        print(json.dumps(RESULTS, indent=1, sort_keys=True, default=sorted))
        return 1
    print(json.dumps(RESULTS, indent=1, sort_keys=True, default=sorted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
