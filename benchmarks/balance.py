#!/usr/bin/env python3
"""Two replicas behind the proxy vs each alone, and least_conn vs round-robin (issue #10).

Run on the proxy host: with the health checkers it is the only host that may reach
the engines' own ports. Every arm sends the same mixed workload - short questions
and long e-mail-agent prompts (``--long-share`` of the requests), the same requests
in the same order (seeded) - in a closed loop, and measures what the clients see:
completion tokens/s from each answer's ``usage``, requests/min, TTFT and end-to-end
p95 (plugins/module_utils/_host/load.py, the code the concurrency sweep uses).

1. Capacity, at the tuned cap (``--cap``, clients per engine):
   each engine alone (cap clients, straight to it), then both through the deployed
   proxy (the sum of the caps in clients), and both straight at once (cap clients
   each: a perfect split, for reference). Ratio: proxy / (sum of each alone).
2. Balancing, least_conn vs round-robin on the mixed workload: the deployed proxy
   is least_conn and stays untouched. This script renders one temporary nginx on
   127.0.0.1 (``--lc-port``, ``--rr-port``) whose two server blocks copy the
   deployed proxy's directives (keepalive, unbuffered streams, timeouts, zone) and
   differ only in ``least_conn;``; both reach the engines from this host, as the
   proxy does. It is checked with ``nginx -t`` before it starts and stopped at the
   end (also on failure). Its upstreams are static: both engines must serve for
   the whole run. Arms run A B B A (least_conn, round-robin, round-robin,
   least_conn) so drift weighs on both alike. Ratio: least_conn / round-robin.

Prints tables and one JSON line (``RESULT {...}``). Not a pass/fail test.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
# The collection's host package (_host): installed next to this script by balance.yml; in the
# repository it is plugins/module_utils/_host.
sys.path[:0] = [HERE, os.path.join(HERE, "..", "plugins", "module_utils")]

from _host import load as _load  # noqa: E402  pylint: disable=wrong-import-position

NGINX_CONF = """\
# Temporary: benchmarks/balance.py, least_conn vs round-robin. Removed when it ends.
user www-data;
worker_processes auto;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;

events {{
    worker_connections 1024;
}}

http {{
    access_log off;
    sendfile on;
    tcp_nodelay on;
    # Everything this instance writes stays in its own directory.
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;

    upstream ff_balance_least_conn {{
        zone ff_balance_least_conn 64k;
        least_conn;
{servers}
        keepalive {keepalive};
    }}

    upstream ff_balance_round_robin {{
        zone ff_balance_round_robin 64k;
{servers}
        keepalive {keepalive};
    }}

    server {{
        listen 127.0.0.1:{lc_port};
{location_lc}
    }}

    server {{
        listen 127.0.0.1:{rr_port};
{location_rr}
    }}
}}
"""

LOCATION = """\
        client_max_body_size 64m;
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
            proxy_connect_timeout 2s;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries 0;
            add_header X-Factory-Floor-Upstream $upstream_addr always;
        }}"""


def render_nginx_conf(prefix, backends, lc_port, rr_port, keepalive=32):
    """The temporary nginx.conf: ``backends`` are (host, port); two upstreams differing only in least_conn."""
    servers = "\n".join("        server %s:%d max_fails=0;" % (host, port) for host, port in backends)
    return NGINX_CONF.format(prefix=prefix, servers=servers, keepalive=keepalive, lc_port=lc_port, rr_port=rr_port,
                             location_lc=LOCATION.format(upstream="ff_balance_least_conn"),
                             location_rr=LOCATION.format(upstream="ff_balance_round_robin"))


class TemporaryNginx:
    """The two-upstream nginx, validated with ``nginx -t``, as a child process; stopped on exit."""

    def __init__(self, nginx, backends, lc_port, rr_port):
        self.nginx = nginx
        self.prefix = tempfile.mkdtemp(prefix="ff-balance-")
        os.chmod(self.prefix, 0o755)  # nginx's workers (www-data) use the temp paths inside
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w", encoding="utf-8") as handle:
            handle.write(render_nginx_conf(self.prefix, backends, lc_port, rr_port))
        self.argv = [nginx, "-p", self.prefix, "-c", self.conf, "-e", os.path.join(self.prefix, "error.log")]
        self.process = None

    def __enter__(self):
        check = subprocess.run(self.argv + ["-t", "-q"], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            raise SystemExit("nginx -t refused the temporary config %s: %s" % (self.conf, check.stderr.strip()))
        self.process = subprocess.Popen(self.argv + ["-g", "daemon off;"])  # pylint: disable=consider-using-with
        return self

    def __exit__(self, *exc):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: lets streams finish
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.prefix, ignore_errors=True)
        return False


def wait_serving(session, base, model, headers, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _load.engine_model(session, base, model, headers, timeout=5)
        except _load.LoadError as exc:
            if time.monotonic() > deadline:
                raise SystemExit("%s did not serve %s within %.0f s: %s" % (base, model, timeout, exc)) from None
            time.sleep(0.5)


def mixed_profile(seed, long_share, index):
    return "long" if random.Random("mix/%s/%d" % (seed, index)).random() < long_share else "short"


# Arms run so far and in all, for the progress lines ("arm n of N: ..." on stderr, as
# benchmarks/affinity.py writes them; factory_floor.llm.command_progress prints them as they come).
ARM_COUNT = {"number": 0, "total": 0}


def run_arm(name, targets, workload, args):
    """One arm: ``targets`` is a list of (base URL, clients, label); all run at once on one request sequence."""
    ARM_COUNT["number"] += 1
    print("arm %d of %d: %s, %d clients, %g s" % (ARM_COUNT["number"], ARM_COUNT["total"], name,
                                                 sum(target[1] for target in targets), args.duration),
          file=sys.stderr, flush=True)
    started = time.time()
    sessions, bases, labels = [], [], []
    for base, clients, label in targets:
        for dummy in range(clients):
            sessions.append(_load.make_session())
            bases.append(base.rstrip("/") + "/v1/chat/completions")
            labels.append(label)

    def send(index, worker):
        profile = mixed_profile(args.seed, args.long_share, index)
        record = _load.stream_chat(sessions[worker], bases[worker], workload.payload(profile, index),
                                   _load.auth_headers(args.api_key), args.timeout)
        record["profile"] = profile
        record["upstream"] = record["upstream"] or labels[worker]
        return record

    records = _load.run_closed_loop(send, len(sessions), duration=args.duration, max_failures=args.max_failures)
    for session in sessions:
        session.close()
    print("  done: %d requests, %d failed, %.0f s" % (len(records), sum(1 for r in records if not r["ok"]),
                                                       time.time() - started), file=sys.stderr, flush=True)
    return records


def combine(runs):
    """Statistics over several runs of one arm: rates over the sum of their wall times."""
    summaries = [_load.summarize(r) for r in runs]
    records = [rec for r in runs for rec in r]
    out = _load.summarize(records)
    wall = sum(s["duration_s"] or 0 for s in summaries)
    out["duration_s"] = round(wall, 3)
    tokens = [s["completion_tokens"] for s in summaries]
    out["tokens_per_s"] = round(sum(tokens) / wall, 2) if wall and None not in tokens else None
    out["requests_per_min"] = round(out["requests_ok"] * 60.0 / wall, 2) if wall else None
    return out, wall


def spread(records, wall, names):
    """Per engine: requests, long requests, and mean requests in flight (sum of e2e / wall)."""
    out = {}
    for name in names:
        mine = [r for r in records if r["upstream"] == name]
        out[name] = {"requests": len(mine), "long": sum(1 for r in mine if r["profile"] == "long"),
                     "mean_in_flight": round(sum(r["e2e"] for r in mine) / wall, 2) if wall else None}
    other = [r for r in records if r["upstream"] not in names]
    if other:
        out["other"] = {"requests": len(other), "long": sum(1 for r in other if r["profile"] == "long"),
                        "mean_in_flight": None}
    return out


def name_upstreams(records, engines):
    """Map the proxy's X-Factory-Floor-Upstream (address:port) back to engine names."""
    by_address = {}
    for name, base in engines:
        parts = urlsplit(base)
        port = parts.port or 80
        try:
            for info in socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP):
                by_address["%s:%d" % (info[4][0], port)] = name
        except OSError:
            pass
        by_address["%s:%d" % (parts.hostname, port)] = name
    for record in records:
        record["upstream"] = by_address.get(record["upstream"], record["upstream"])


def ratio(a, b):
    return round(a / b, 4) if a is not None and b else None


def fmt(value, spec):
    return "-" if value is None else spec % value


ROW = "%-34s %7s %9s %8s %8s %8s %9s %5s  %s"


def row(name, clients, summary, split=""):
    f = fmt
    return ROW % (name, clients, f(summary["tokens_per_s"], "%.1f"), f(summary["requests_per_min"], "%.1f"),
                  f(summary["e2e_p50"], "%.2f"), f(summary["e2e_p95"], "%.2f"), f(summary["ttft_p95"], "%.3f"),
                  summary["requests_failed"], split)


def fmt_split(spread_):
    return "  ".join("%s %d req (%d long) %s in flight" % (n, s["requests"], s["long"], fmt(s["mean_in_flight"], "%.1f"))
                     for n, s in spread_.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", required=True, help="the deployed proxy's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--engine", action="append", required=True, metavar="NAME=URL",
                        help="an engine's own base URL, e.g. spark-a=http://spark-a:8000 (twice)")
    parser.add_argument("--cap", action="append", type=int, required=True,
                        help="clients per engine: its tuned max_num_seqs (once for all, or once per --engine)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default=os.environ.get("FF_API_KEY") or None)
    parser.add_argument("--api-key-file", default=None, help="file holding the API key (wins over --api-key)")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds per arm during which requests start")
    parser.add_argument("--long-share", type=float, default=0.3, help="fraction 0-1 of long (e-mail agent) requests")
    parser.add_argument("--long-prompt-tokens", type=int, default=_load.DEFAULT_LONG_PROMPT_TOKENS)
    parser.add_argument("--long-max-tokens", type=int, default=_load.DEFAULT_LONG_MAX_TOKENS)
    parser.add_argument("--short-max-tokens", type=int, default=_load.DEFAULT_SHORT_MAX_TOKENS)
    parser.add_argument("--timeout", type=float, default=_load.DEFAULT_TIMEOUT)
    parser.add_argument("--max-failures", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", default="capacity,balancing", help="capacity, balancing or both (comma-separated)")
    parser.add_argument("--nginx", default="/usr/sbin/nginx")
    parser.add_argument("--lc-port", type=int, default=18081)
    parser.add_argument("--rr-port", type=int, default=18082)
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
    if len(engines) != 2:
        parser.error("give exactly two --engine")
    caps = args.cap * len(engines) if len(args.cap) == 1 else args.cap
    if len(caps) != len(engines) or min(caps) < 1:
        parser.error("--cap: once for all engines or once per --engine, each >= 1")
    parts = set(args.parts.split(","))
    if not parts or parts - {"capacity", "balancing"}:
        parser.error("--parts: capacity, balancing or both")

    print("balance benchmark: parts %s, %d arms of %g s; engines %s, caps %s; calibrating the long profile first"
          % (", ".join(sorted(parts)), 4 * len(parts), args.duration, ", ".join(n for n, dummy in engines),
             ", ".join(str(c) for c in caps)), file=sys.stderr, flush=True)
    control = _load.make_session()
    names = [n for n, dummy in engines]
    card = None
    for name, base in engines:
        card = wait_serving(control, base, args.model, _load.auth_headers(args.api_key), timeout=10)
    workload = _load.Workload(args.model, args.short_max_tokens, args.long_prompt_tokens, args.long_max_tokens)
    max_len = card.get("max_model_len")
    if max_len and args.long_prompt_tokens + args.long_max_tokens > max_len:
        raise SystemExit("--long-prompt-tokens %d + --long-max-tokens %d exceed the engines' max_model_len %d"
                         % (args.long_prompt_tokens, args.long_max_tokens, max_len))
    measured = _load.calibrate(workload, lambda p: _load.stream_chat(control, engines[0][1] + "/v1/chat/completions", p,
                                                                     _load.auth_headers(args.api_key), args.timeout))
    for name, base in engines:  # warm up both
        _load.stream_chat(control, base + "/v1/chat/completions", workload.payload("long", 3 * 10 ** 6),
                          _load.auth_headers(args.api_key), args.timeout)
    total = sum(caps)
    ARM_COUNT["total"] = 4 * len(parts)
    result = {"engines": dict(engines), "caps": dict(zip(names, caps)), "duration_s": args.duration,
              "long_share": args.long_share, "long_prompt_tokens": measured, "model": args.model}
    print("mixed workload: %d%% long (%d prompt tokens, %d generated), short (%d generated); %g s per arm; caps %s"
          % (args.long_share * 100, measured, args.long_max_tokens, args.short_max_tokens, args.duration,
             ", ".join("%s %d" % nc for nc in zip(names, caps))))

    if "capacity" in parts:
        arms = {}
        for (name, base), cap in zip(engines, caps):
            arms[name + " alone"] = run_arm(name + " alone", [(base, cap, name)], workload, args)
        arms["both via proxy"] = run_arm("both via proxy", [(args.proxy, total, "proxy")], workload, args)
        name_upstreams(arms["both via proxy"], engines)
        arms["both direct (perfect split)"] = run_arm("both direct", [(b, c, n) for (n, b), c in zip(engines, caps)],
                                                      workload, args)
        summaries = {k: _load.summarize(v) for k, v in arms.items()}
        alone_tps = [summaries[n + " alone"]["tokens_per_s"] for n in names]
        alone_rpm = [summaries[n + " alone"]["requests_per_min"] for n in names]
        sum_tps = sum(alone_tps) if None not in alone_tps else None
        sum_rpm = sum(alone_rpm) if None not in alone_rpm else None
        print("\n1. capacity: two replicas behind the proxy vs the sum of each alone")
        print(ROW % ("ARM", "CLIENTS", "TOK/S", "REQ/MIN", "E2E_P50", "E2E_P95", "TTFT_P95", "FAIL", "SPLIT"))
        clients = dict(zip([n + " alone" for n in names], caps))
        for key, records in arms.items():
            split = fmt_split(spread(records, summaries[key]["duration_s"], names)) if "both" in key else ""
            print(row(key, clients.get(key, total), summaries[key], split))
        print(ROW % ("sum of each alone", total, fmt(sum_tps, "%.1f"), fmt(sum_rpm, "%.1f"), "", "", "", "", ""))
        capacity = {
            "arms": {k: dict(v, spread=spread(arms[k], v["duration_s"], names)) for k, v in summaries.items()},
            "sum_alone_tokens_per_s": sum_tps, "sum_alone_requests_per_min": sum_rpm,
            "ratio_proxy_vs_sum_alone_tokens": ratio(summaries["both via proxy"]["tokens_per_s"], sum_tps),
            "ratio_proxy_vs_sum_alone_requests": ratio(summaries["both via proxy"]["requests_per_min"], sum_rpm),
            "ratio_proxy_vs_perfect_split_tokens": ratio(summaries["both via proxy"]["tokens_per_s"],
                                                         summaries["both direct (perfect split)"]["tokens_per_s"]),
        }
        result["capacity"] = capacity
        print("ratio proxy / sum of each alone: tokens/s %s, requests/min %s; proxy / perfect split: tokens/s %s"
              % (capacity["ratio_proxy_vs_sum_alone_tokens"], capacity["ratio_proxy_vs_sum_alone_requests"],
                 capacity["ratio_proxy_vs_perfect_split_tokens"]))

    if "balancing" in parts:
        backends = [(urlsplit(b).hostname, urlsplit(b).port or 80) for dummy, b in engines]
        lc = "http://127.0.0.1:%d" % args.lc_port
        rr = "http://127.0.0.1:%d" % args.rr_port
        runs = {"least_conn": [], "round-robin": []}
        with TemporaryNginx(args.nginx, backends, args.lc_port, args.rr_port):
            wait_serving(control, lc, args.model, _load.auth_headers(args.api_key))
            wait_serving(control, rr, args.model, _load.auth_headers(args.api_key))
            for number, arm in enumerate(("least_conn", "round-robin", "round-robin", "least_conn")):
                records = run_arm("%s (%d/4)" % (arm, number + 1), [(lc if arm == "least_conn" else rr, total, arm)],
                                  workload, args)
                name_upstreams(records, engines)
                runs[arm].append(records)
        print("\n2. balancing: least_conn vs round-robin, %d clients, temporary nginx on 127.0.0.1:%d and :%d "
              "(same directives, only least_conn differs), arms A B B A" % (total, args.lc_port, args.rr_port))
        print(ROW % ("ARM", "CLIENTS", "TOK/S", "REQ/MIN", "E2E_P50", "E2E_P95", "TTFT_P95", "FAIL", "SPLIT"))
        balancing = {}
        for arm, arm_runs in runs.items():
            summary, wall = combine(arm_runs)
            summary["spread"] = spread([r for run in arm_runs for r in run], wall, names)
            balancing[arm] = summary
            print(row(arm, total, summary, fmt_split(summary["spread"])))
        lc_s, rr_s = balancing["least_conn"], balancing["round-robin"]
        balancing["ratio_least_conn_vs_round_robin_tokens"] = ratio(lc_s["tokens_per_s"], rr_s["tokens_per_s"])
        balancing["ratio_least_conn_vs_round_robin_requests"] = ratio(lc_s["requests_per_min"], rr_s["requests_per_min"])
        balancing["ratio_least_conn_vs_round_robin_e2e_p95"] = ratio(lc_s["e2e_p95"], rr_s["e2e_p95"])
        result["balancing"] = balancing
        print("ratio least_conn / round-robin: tokens/s %s, requests/min %s (above 1: least_conn better), "
              "e2e p95 %s (below 1: least_conn better)"
              % (balancing["ratio_least_conn_vs_round_robin_tokens"],
                 balancing["ratio_least_conn_vs_round_robin_requests"],
                 balancing["ratio_least_conn_vs_round_robin_e2e_p95"]))
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    try:
        main()
    except _load.LoadError as exc:
        raise SystemExit("balance: %s" % exc) from None
