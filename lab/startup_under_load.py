#!/usr/bin/env python3
"""Start a lab replica again and again while the other lab host computes, and time each start.

The lab's start-up stall (README, "Known lab behaviour"): a vLLM process that
starts on one lab host while the other host's pinned worker computes could sit
runnable on that worker's core and get no CPU for minutes. This script is the
proof that the lab no longer does that: with the replicas topology deployed and
both engines serving, it

  1. restarts each host's replica QUIET times with nothing else running, and takes
     the median seconds from ``systemctl restart`` to ``/health`` 200 (the quiet
     start-up);
  2. then STARTS times, alternating hosts, keeps LOAD streamed chat completions in
     flight on the *other* host's engine and restarts this one, timing it the same way;
  3. prints one line per start and a summary, writes JSON (--output), and exits 1
     when a start under load took more than --max-ratio x the quiet start-up of
     its host, or did not finish within --timeout.

For a start that is slow it prints what each vLLM process on both hosts was doing
(state, CPU time, the core it last ran on, the cores it may run on): the stall's
signature was a process in state R whose allowed cores were the other host's
worker core. Runs only against the lab's own containers (podman exec), never any
other address. Bounded: QUIET x 2 + STARTS starts, each at most --timeout seconds.

    python3 lab/startup_under_load.py --starts 20 --output /tmp/startups.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

UNIT = "vllm-replica.service"


def podman(host, *argv, check=True, timeout=60):
    return subprocess.run(["podman", "exec", host, *argv], check=check, capture_output=True, text=True,
                          timeout=timeout)


def health(host, port):
    try:
        out = podman(host, "curl", "-s", "-o", "/dev/null", "-m", "3", "-w", "%{http_code}",
                     "http://127.0.0.1:%d/health" % port, check=False, timeout=10)
    except subprocess.TimeoutExpired:
        return "timeout"
    return out.stdout.strip() or "none"


def processes(host):
    """One line per vLLM process on ``host``: pid, name, state, CPU seconds, last core, allowed cores."""
    script = r"""
for d in /proc/[0-9]*; do
  c=$(tr '\0' ' ' < $d/cmdline 2>/dev/null)
  case "$c" in *vllm*|*VLLM*) ;; *) continue;; esac
  n=$(sed -n 's/^Name:\t//p' $d/status); s=$(sed -n 's/^State:\t//p' $d/status)
  a=$(sed -n 's/^Cpus_allowed_list:\t//p' $d/status)
  set -- $(cut -d' ' -f14,15,39 $d/stat)
  echo "${d#/proc/} $n state=$s cpu_s=$(( ($1 + $2) / 100 )) last_core=$3 allowed=$a"
done
"""
    out = podman(host, "bash", "-c", script, check=False)
    return [line for line in out.stdout.splitlines() if line.strip()]


def chat_status(host, port, model, api_key):
    body = json.dumps({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]})
    argv = ["curl", "-s", "-o", "/dev/null", "-m", "60", "-w", "%{http_code}", "-H", "Content-Type: application/json"]
    if api_key:
        argv += ["-H", "@-"]
    out = subprocess.run(["podman", "exec", "-i", host, *argv, "-d", body, "http://127.0.0.1:%d/v1/chat/completions" % port],
                         capture_output=True, text=True, timeout=90, check=False,
                         input="Authorization: Bearer %s\n" % api_key if api_key else None)
    return out.stdout.strip() or "none"


def restart_and_time(host, port, timeout):
    # Many starts in a row pass the unit's restart budget (StartLimitBurst=): a start the
    # script asks for is not a crash loop.
    podman(host, "systemctl", "reset-failed", UNIT, check=False)
    started = time.monotonic()
    podman(host, "systemctl", "restart", UNIT, timeout=120)
    last = None
    while time.monotonic() - started < timeout:
        last = health(host, port)
        if last == "200":
            return round(time.monotonic() - started, 1), last
        time.sleep(1)
    return None, last


class Load:
    """LOAD streamed completions in flight at all times against ``host``'s engine, until stopped."""

    def __init__(self, host, port, model, api_key, streams, max_tokens):
        self.host, self.port, self.model, self.api_key = host, port, model, api_key
        self.streams, self.max_tokens = streams, max_tokens
        self.stop = threading.Event()
        self.done = 0
        self.threads = []

    def _one(self):
        body = json.dumps({"model": self.model, "stream": True, "max_tokens": self.max_tokens, "ignore_eos": True,
                           "messages": [{"role": "user", "content": "Write a long story about two machines."}]})
        argv = ["curl", "-s", "-N", "-m", "300", "-o", "/dev/null", "-H", "Content-Type: application/json"]
        if self.api_key:
            # Read from stdin inside the container, so the key is on no command line.
            argv += ["-H", "@-"]
        argv += ["-d", body, "http://127.0.0.1:%d/v1/chat/completions" % self.port]
        while not self.stop.is_set():
            subprocess.run(["podman", "exec", "-i", self.host, *argv], capture_output=True, text=True, timeout=320,
                           input="Authorization: Bearer %s\n" % self.api_key if self.api_key else None, check=False)
            self.done += 1

    def __enter__(self):
        for _ in range(self.streams):
            thread = threading.Thread(target=self._one, daemon=True)
            thread.start()
            self.threads.append(thread)
        time.sleep(5)  # the requests are in the engine before the other host starts
        return self

    def __exit__(self, *exc):
        self.stop.set()
        podman(self.host, "pkill", "-f", "curl -s -N", check=False)
        for thread in self.threads:
            thread.join(timeout=30)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", nargs=2, default=["spark-a", "spark-b"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="lab-chat")
    parser.add_argument("--quiet", type=int, default=2, help="quiet starts per host (default 2)")
    parser.add_argument("--starts", type=int, default=20, help="starts under load, alternating hosts (default 20)")
    parser.add_argument("--load", type=int, default=4, help="streams in flight on the other host (default 4)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-ratio", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one start may take (default 900)")
    parser.add_argument("--output", help="write the figures as JSON here")
    args = parser.parse_args(argv)
    api_key = os.environ.get("FF_API_KEY", "")

    for host in args.hosts:
        if health(host, args.port) != "200":
            sys.exit("%s: %s does not answer /health 200 on port %d: deploy the replicas topology first"
                     % (host, UNIT, args.port))
        # The load must be real work: with a key set on the site and none given, every
        # load request would be a 401 and the "starts under load" starts in quiet.
        status = chat_status(host, args.port, args.model, api_key)
        if status != "200":
            sys.exit("%s: a chat completion got %s, not 200: give the site's API key in FF_API_KEY "
                     "(inventory/lab/group_vars/gb10.yml, vllm_api_key)" % (host, status))

    quiet = {}
    for host in args.hosts:
        times = []
        for n in range(args.quiet):
            seconds, last = restart_and_time(host, args.port, args.timeout)
            if seconds is None:
                sys.exit("%s: quiet start %d did not reach /health 200 within %ss (last %s)" % (host, n + 1, args.timeout, last))
            times.append(seconds)
            print("quiet   %-8s start %d: %6.1f s" % (host, n + 1, seconds), flush=True)
        quiet[host] = statistics.median(times)

    rows = []
    for n in range(args.starts):
        host = args.hosts[n % 2]
        other = args.hosts[(n + 1) % 2]
        with Load(other, args.port, args.model, api_key, args.load, args.max_tokens) as load:
            seconds, last = restart_and_time(host, args.port, args.timeout)
            procs = None
            if seconds is None or seconds > args.max_ratio * quiet[host]:
                procs = {h: processes(h) for h in args.hosts}
        ratio = round(seconds / quiet[host], 2) if seconds is not None else None
        rows.append({"n": n + 1, "host": host, "loaded": other, "seconds": seconds, "ratio": ratio,
                     "load_requests_done": load.done, "last_health": last, "processes": procs})
        print("loaded  %-8s start %2d: %6s s (%sx quiet %.1f s) while %s served %d streams"
              % (host, n + 1, seconds, ratio, quiet[host], other, args.load), flush=True)
        for h, lines in (procs or {}).items():
            for line in lines:
                print("        %s: %s" % (h, line))

    slow = [r for r in rows if r["seconds"] is None or r["ratio"] > args.max_ratio]
    timed = [r["seconds"] for r in rows if r["seconds"] is not None]
    summary = {"quiet_median_s": quiet, "starts": len(rows), "slow": len(slow), "max_ratio_allowed": args.max_ratio,
               "loaded_max_s": max(timed) if timed else None,
               "loaded_median_s": statistics.median(timed) if timed else None,
               "worst_ratio": max((r["ratio"] for r in rows if r["ratio"] is not None), default=None)}
    print(json.dumps(summary))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump({"summary": summary, "starts": rows}, handle, indent=2)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
