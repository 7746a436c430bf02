# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A client that keeps asking the model through the proxy and records every answer.

The switch playbooks run it on the proxy host for the whole switch (as a
transient systemd unit) so the report can say what a client saw: how long the
model was away, and every 502/503 with its time. One JSON line per request:
``{"t": start, "end": end, "status": 200, "latency": s, "upstream": "...", "proxy": "...", "error": null}``
(``status`` 0 = no HTTP answer at all; ``upstream`` the engine nginx used, ``proxy`` the proxy
host that answered, from nginx's ``X-Factory-Floor-Proxy``: with a floating address in front
of several proxies it says which one held the address).

Stdlib + requests (through ``vllm_client``); no Ansible imports: installed on hosts in the
host programs' package and run as ``python3 -m _host.probe_client``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
import threading
import time

from . import vllm_client

requests = vllm_client.requests


def _closed_before_answer(exc):
    """True when the server closed the connection without sending a byte of answer.

    That is a kept-alive connection the server closed as it was reused (nginx
    closes idle client connections when it reloads). Every common HTTP client
    resends on a new connection then (the OpenAI SDK retries connection errors);
    the request never reached an engine, since nginx answers whatever it forwarded.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, http.client.RemoteDisconnected):
            return True
        for arg in getattr(exc, "args", ()):
            if isinstance(arg, BaseException) and _closed_before_answer(arg):
                return True
        reason = getattr(exc, "reason", None)
        # An ssl error's reason is a word (CERTIFICATE_VERIFY_FAILED), urllib3's an exception.
        exc = exc.__cause__ or exc.__context__ or (reason if isinstance(reason, BaseException) else None)
    return False


def one_request(session, url, payload, headers, timeout, retry_connection_errors=False):
    """Send one chat completion; return the record for it.

    A kept-alive connection the server closed before answering is resent once on a
    new connection, as HTTP clients do; the record says so (``retried``). With
    ``retry_connection_errors``, any connection error (refused, reset, closed; not a
    read timeout) is resent once too, as a client that retries once on a connection
    error does (the OpenAI SDK retries them): a connection to a proxy host that went
    away, say. ``retried`` then holds the first error, so a report can count both what
    such a client saw and what one that never retries would have seen.
    """
    # Wall time for the record people read; the latency on the monotonic clock (a step of
    # the wall clock mid-request changes no duration).
    record = {"t": time.time(), "status": 0, "upstream": None, "proxy": None, "error": None}
    started = time.monotonic()
    # No environment proxies: the client measures our proxy, not whatever another one answers.
    try:
        try:
            response = session.post(url, json=payload, headers=headers, timeout=timeout, proxies=vllm_client.no_proxies())
        except requests.exceptions.ConnectionError as exc:
            if not (retry_connection_errors or _closed_before_answer(exc)):
                raise
            record["retried"] = "%s: %s" % (type(exc).__name__, exc)
            session.close()
            response = session.post(url, json=payload, headers=headers, timeout=timeout, proxies=vllm_client.no_proxies())
        record["status"] = response.status_code
        record["upstream"] = response.headers.get("X-Factory-Floor-Upstream")
        record["proxy"] = response.headers.get("X-Factory-Floor-Proxy")
        if response.status_code != 200:
            record["error"] = response.text[:200]
    except Exception as exc:  # every failure is data for the report
        # A request refused before it was sent is named, never quoted (requests' text holds the header).
        words = vllm_client.config_error(exc)
        record["error"] = "%s: %s" % (type(exc).__name__, words if words is not None else exc)
    record["end"] = time.time()
    record["latency"] = round(time.monotonic() - started, 4)
    return record


def run(url, model, out, interval=0.5, concurrency=1, timeout=60.0, api_key=None, duration=None,
        max_tokens=1, stop=None, retry_connection_errors=False, ca_file=None):
    """Loop until ``stop`` is set (or ``duration`` seconds passed), appending records to ``out``.

    ``ca_file``: for an ``https`` URL (the proxy with TLS), the CA file its certificate is
    verified with; None, requests' own trust store. The certificate is always verified.
    """
    stop = stop or threading.Event()
    lock = threading.Lock()
    headers = vllm_client.headers(api_key, accept=None)
    # On the monotonic clock: a step of the host's wall clock neither ends the run early nor
    # lets it run on for as long as the step.
    deadline = time.monotonic() + duration if duration is not None else None
    sent = [0]

    def payload():
        # Each request its own conversation (numbered), as from many independent clients:
        # a proxy that routes by conversation (nginx_proxy's affinity) spreads them as
        # least_conn would, instead of keeping one "Say OK." conversation on one engine.
        with lock:
            sent[0] += 1
            number = sent[0]
        return {"model": model, "messages": [{"role": "user", "content": "Say OK. (request %d)" % number}],
                "max_tokens": max_tokens, "temperature": 0}

    def worker():
        session = vllm_client.session()
        if ca_file:
            session.verify = ca_file
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            record = one_request(session, url, payload(), headers, timeout, retry_connection_errors)
            with lock, open(out, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
            stop.wait(interval)

    threads = [threading.Thread(target=worker, daemon=True) for dummy in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Ask the model through the proxy, record every answer.")
    parser.add_argument("--url", required=True, help="chat completions URL of the proxy")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--out", required=True, help="JSON-lines file to append to")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between requests per worker")
    parser.add_argument("--concurrency", type=int, default=1, help="parallel workers")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--api-key-file", default=None, help="file holding the API key")
    parser.add_argument("--ca-file", default=None, help="CA file to verify an https proxy's certificate with")
    parser.add_argument("--retry-connection-errors", action="store_true",
                        help="resend once on a new connection after any connection error (the record keeps the first)")
    args = parser.parse_args(argv)
    if requests is None:
        sys.stderr.write("python3-requests is required\n")
        return 2
    api_key = None
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as handle:
            # A file's own line end is not the key's; anything else is, and is checked below.
            api_key = handle.read().rstrip("\n") or None
    problem = vllm_client.api_key_problem(api_key)
    if problem is not None:
        sys.stderr.write("the key in %s %s\n" % (args.api_key_file, problem))
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *args: stop.set())
    signal.signal(signal.SIGINT, lambda *args: stop.set())
    run(args.url, args.model, args.out, args.interval, args.concurrency, args.timeout, api_key,
        args.duration, stop=stop, retry_connection_errors=args.retry_connection_errors, ca_file=args.ca_file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
