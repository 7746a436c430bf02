# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long the floating address was away, and what clients lost, around one event.

Two records feed it, both JSON lines written on a client host during the event (a
restart of the machine that holds the address, nginx stopped there, ...):

* the address probe (``probe`` below, ``python3 failover.py probe``): ``GET
  /healthz`` on the floating address every ``interval`` seconds, each on a new
  connection with a short timeout, recording which proxy host answered (nginx's
  ``X-Factory-Floor-Proxy``). It measures the address itself, unaffected by
  requests that hang;
* the steady client (the collection's ``python3 -m _host.probe_client``, with ``--retry-connection-errors``):
  chat completions, each record with its status, the proxy host, and ``retried``
  when its first try hit a connection error.

``summarize`` returns the figures: when the holder last answered, when another host
first did (the failover time, from the event), how many probes of the address went
unanswered meanwhile, the longest time without an answered chat completion, and the
failed requests - each one either in flight when the address moved (started before
the other host answered) or not; with the retry counted as a client that retries once
sees it and as one that never retries would have.

Stdlib only; runs on the client host as a plain file (benchmarks/failover.yml and the vip scenario
copy it there), and on the controller for ``table``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import threading
import time
from urllib.parse import urlsplit

PROXY_HEADER = "X-Factory-Floor-Proxy"


def probe_once(host, port, path="/healthz", timeout=0.5, clock=time.time):
    """One GET on a new connection: ``{"t", "end", "status", "proxy", "error"}`` (status 0: no answer)."""
    record = {"t": clock(), "status": 0, "proxy": None, "error": None}
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        record["status"] = response.status
        record["proxy"] = response.getheader(PROXY_HEADER)
    except Exception as exc:  # every failure is data
        record["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        connection.close()
    record["end"] = clock()
    return record


def probe(url, out, interval=0.05, timeout=0.5, duration=None, stop=None):
    """Probe ``url`` (``http://ADDRESS:PORT/healthz``) until ``stop`` is set or ``duration`` passed."""
    parts = urlsplit(url)
    stop = stop or threading.Event()
    # Durations and the deadline on the monotonic clock; the records keep wall time (people
    # read them, and compare them with the other host's).
    deadline = time.monotonic() + duration if duration is not None else None
    with open(out, "a", encoding="utf-8") as handle:
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            began = time.monotonic()
            record = probe_once(parts.hostname, parts.port or 80, parts.path or "/healthz", timeout)
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            stop.wait(max(0.0, interval - (time.monotonic() - began)))


def read_lines(path):
    """JSON-lines records; a line cut short by the writer's end is skipped."""
    out = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _first_try_failed(record):
    """The first try failed: a client that never retries would have seen a failure.

    ``retried`` after nginx closed a kept-alive connection (RemoteDisconnected) is not
    one: every HTTP client resends that, the request never reached a proxy."""
    if record.get("status") != 200:
        return True
    retried = record.get("retried") or ""
    return bool(retried) and "RemoteDisconnected" not in retried and "Remote end closed" not in retried


def summarize(health, chat, event, holder, window=60.0):
    """The figures around one event at UNIX time ``event``; ``holder`` the proxy host that held
    the address before it (None: the address should not move). Times are seconds from ``event``.

    Returns a dict:
      last_from_holder     last probe answered by the holder (from the event; null if none after it)
      first_from_other     first probe answered by another host (the failover time; null if none)
      moved_to             that host
      unanswered_probes    probes between the event and first_from_other with no answer (or not 200)
      health_probes        probes of the address after the event
      health_proxies_after proxy hosts that answered the address after the event
      longest_unanswered   the longest time the address gave no answer, around the event
      chat_requests        chat completions started within the window
      failed               failed ones (status not 200) - what a client retrying once on a connection error saw
      failed_without_retry failed at the first try - what a client that never retries saw
      failed_in_flight     failed ones started before the address answered from the other host
      failed_after_move    failed ones started after it (none, when only in-flight requests are lost)
      longest_without_answer_s  longest time between two answered chat completions, around the event
      proxies_after        proxy hosts that answered chat completions after the move (or the event)
      failures             the failed records (start relative to the event, status, error)
    """
    start, end = event - 5.0, event + window
    health = sorted((r for r in health if start <= r.get("t", 0) <= end), key=lambda r: r["t"])
    chat = sorted((r for r in chat if start <= r.get("t", 0) <= end), key=lambda r: r["t"])

    def ok(record):
        return record.get("status") == 200

    after = [r for r in health if r["t"] >= event]
    from_other = [r for r in after if ok(r) and holder is not None and r.get("proxy") not in (holder, None)]
    first_other = min(from_other, key=lambda r: r["end"]) if from_other else None
    moved_at = first_other["end"] if first_other else None
    from_holder = [r for r in after if ok(r) and r.get("proxy") == holder and (moved_at is None or r["end"] <= moved_at)]
    last_holder = max(from_holder, key=lambda r: r["end"]) if from_holder else None
    until = moved_at if moved_at is not None else end
    unanswered = [r for r in after if not ok(r) and r["t"] <= until]

    answered = sorted(r["end"] for r in health if ok(r))
    if health and not ok(health[-1]):
        # Still no answer at the last probe: that time counts as unanswered too.
        answered.append(health[-1]["end"])
    longest_unanswered = max((b - a for a, b in zip(answered, answered[1:]) if b >= event and a <= until), default=0.0)

    split = moved_at if moved_at is not None else event
    failed = [r for r in chat if not ok(r)]
    chat_ends = sorted(r["end"] for r in chat if ok(r))
    longest_chat = max((b - a for a, b in zip(chat_ends, chat_ends[1:]) if b >= event), default=0.0)

    def rel(value):
        return None if value is None else round(value - event, 3)

    return {
        "holder": holder,
        "last_from_holder": rel(last_holder["end"]) if last_holder else None,
        "first_from_other": rel(moved_at),
        "moved_to": first_other.get("proxy") if first_other else None,
        "unanswered_probes": len(unanswered),
        "health_probes": len(after),
        "health_proxies_after": sorted({r.get("proxy") for r in after if ok(r) and r.get("proxy")}),
        "longest_unanswered": round(longest_unanswered, 3),
        "chat_requests": len(chat),
        "failed": len(failed),
        "failed_without_retry": len([r for r in chat if _first_try_failed(r)]),
        "failed_in_flight": len([r for r in failed if r["t"] < split]),
        "failed_after_move": len([r for r in failed if r["t"] >= split]),
        "longest_without_answer_s": round(longest_chat, 3),
        "proxies_after": sorted({r.get("proxy") for r in chat if ok(r) and r["t"] >= split and r.get("proxy")}),
        "failures": [{"t": rel(r["t"]), "end": rel(r.get("end")), "status": r.get("status"),
                      "error": (r.get("error") or "")[:160], "retried": (r.get("retried") or "")[:160]}
                     for r in chat if _first_try_failed(r)],
    }


def _stats(values):
    values = sorted(v for v in values if isinstance(v, (int, float)))
    if not values:
        return "n/a"
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0
    return "min %.2f, median %.2f, max %.2f" % (values[0], median, values[-1])


def table(results):
    """Lines of a table, one per event (summarize's dicts, with event, holder_before, restarted,
    rejoined_s), then the failover time and the failures over all of them."""
    lines = ["#   event           holder -> new holder   failover s  holder last s  unanswered  failed (in flight / "
             "after move / first try)  no chat answer s  rejoined s"]
    for index, result in enumerate(results, 1):
        lines.append("%-3d %-15s %-22s %10s  %13s  %10s  %31s  %16s  %10s" % (
            index, result.get("event", ""),
            "%s -> %s" % (result.get("holder_before") or result.get("holder") or "?", result.get("moved_to") or "-"),
            _fmt(result.get("first_from_other")), _fmt(result.get("last_from_holder")),
            result.get("unanswered_probes", ""),
            "%s (%s / %s / %s)" % (result.get("failed", ""), result.get("failed_in_flight", ""),
                                   result.get("failed_after_move", ""), result.get("failed_without_retry", "")),
            _fmt(result.get("longest_without_answer_s")), _fmt(result.get("rejoined_s"))))
    moves = [r.get("first_from_other") for r in results]
    lines.append("failover time (s, from the event until another proxy host answered the address): %s over %d"
                 % (_stats(moves), len([m for m in moves if isinstance(m, (int, float))])))
    lines.append("longest time the address gave no answer (s): %s" % _stats([r.get("longest_unanswered") for r in results]))
    lines.append("failed requests: %d in all, %d in flight when the address moved, %d after it; %d at the first try "
                 "(a client that never retries)" % (
                     sum(r.get("failed", 0) for r in results), sum(r.get("failed_in_flight", 0) for r in results),
                     sum(r.get("failed_after_move", 0) for r in results),
                     sum(r.get("failed_without_retry", 0) for r in results)))
    return lines


def _fmt(value):
    return "%.2f" % value if isinstance(value, (int, float)) else "-"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Probe a floating address, or summarize a failover.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("probe", help="GET the address's /healthz every interval seconds, on new connections")
    run.add_argument("--url", required=True, help="http://ADDRESS:PORT/healthz")
    run.add_argument("--out", required=True, help="JSON-lines file to append to")
    run.add_argument("--interval", type=float, default=0.05, help="seconds between probes")
    run.add_argument("--timeout", type=float, default=0.5, help="seconds one probe may take")
    run.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    summary = sub.add_parser("summary", help="print the figures around one event as JSON")
    summary.add_argument("--health", required=True, help="the address probe's records")
    summary.add_argument("--chat", required=True, help="the steady client's records (python3 -m _host.probe_client)")
    summary.add_argument("--event", required=True, type=float, help="UNIX time of the event")
    summary.add_argument("--holder", default=None, help="the proxy host that held the address before it")
    summary.add_argument("--window", type=float, default=60.0, help="seconds after the event to look at")
    tab = sub.add_parser("table", help="print a table of several summaries (a JSON list)")
    tab.add_argument("--results", required=True, help="JSON file: a list of summaries")
    args = parser.parse_args(argv)
    if args.command == "table":
        with open(args.results, encoding="utf-8") as handle:
            sys.stdout.write("\n".join(table(json.load(handle))) + "\n")
        return 0
    if args.command == "probe":
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *a: stop.set())
        signal.signal(signal.SIGINT, lambda *a: stop.set())
        probe(args.url, args.out, args.interval, args.timeout, args.duration, stop)
        return 0
    result = summarize(read_lines(args.health), read_lines(args.chat), args.event, args.holder or None, args.window)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
