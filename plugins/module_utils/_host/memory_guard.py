# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's start check: may a vLLM engine start on this host now?

Run by systemd before the engine (``ExecStartPre=`` in a drop-in the
``memory_guard`` role installs on ``vllm-replica.service`` and
``vllm-split.service``), from the host programs' package (``PYTHONPATH=/usr/local/lib/factory-floor``)::

    python3 -m _host.memory_guard start-check --unit vllm-replica.service \\
        --need-gib 90.06 --floor-gib 2 --require-free --wait 120

``need`` is what the engine takes at start (GiB): on GB10, what vLLM asks for
(``ceil(device total x gpu_memory_utilization)``) plus what it holds outside
that share (CUDA context, its processes), as the ``gpu_memory_utilization``
module returns it (``start_need_gib``). vLLM 0.32 on unified memory compares
its request with ``MemAvailable``; CUDA allocations on GB10 do not always take
back page cache in time, so when ``MemAvailable`` is enough but ``MemFree`` is
not, the page cache is dropped first (``--require-free`` refuses when the drop
does not free enough, for builds that compare with free memory). When even
``MemAvailable`` cannot cover ``need`` plus a ``floor`` left for the host, starting would wedge the machine
(the kernel would swap or OOM-kill the databases): the check waits up to
``--wait`` seconds for memory to come back (the other topology's engine still
draining, a build finishing), then refuses with a journal line that names the
numbers, and exits non-zero so systemd does not start the engine.

The decision is a pure function (``_memory.start_decision``) of ``/proc/meminfo``;
reading files, dropping caches, sleeping and the clock are passed in, so the
loop (:func:`run_start_check`) is tested with plain tables.

Stdlib only, no Ansible imports.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# The decision is _memory's start_decision: the same function the gpu_memory_utilization
# module uses to pick the share, so a share it recommends is one this check lets start.
from .memory import (  # noqa: F401
    DROP_CACHES,
    GIB,
    REFUSE,
    START,
    MemoryPlanError,
    memory_facts,
    parse_meminfo,
    start_decision,
)

MEMINFO_PATH = "/proc/meminfo"
DROP_CACHES_PATH = "/proc/sys/vm/drop_caches"
#: Exit status of a refusal (anything but 0 stops systemd from starting the engine).
EXIT_REFUSED = 1
#: Seconds between two reads of /proc/meminfo while waiting.
POLL_INTERVAL = 2.0
#: Seconds before the page cache is dropped again while waiting.
DROP_INTERVAL = 15.0


def _gib(n_bytes):
    return "%.2f" % (n_bytes / GIB)


def read_facts(read_meminfo):
    """``memory_facts`` of ``read_meminfo()``; an unreadable file gives no numbers."""
    try:
        return memory_facts(parse_meminfo(read_meminfo()))
    except (OSError, MemoryPlanError):
        return {"free": None, "available": None}


def drop_page_cache(path=DROP_CACHES_PATH, sync=os.sync):
    """``sync; echo 3 > /proc/sys/vm/drop_caches``. Returns None, or why it failed."""
    try:
        sync()
        with open(path, "w", encoding="ascii") as handle:
            handle.write("3\n")
    except OSError as exc:
        return str(exc)
    return None


def run_start_check(read_meminfo, drop, log, need, floor, require_free=True, wait=0.0, unit="vLLM",
                    hint="", sleep=time.sleep, clock=time.monotonic, poll=POLL_INTERVAL,
                    drop_interval=DROP_INTERVAL):
    """Decide, drop the page cache when that helps, wait up to ``wait`` seconds; return the exit status.

    ``read_meminfo()`` returns ``/proc/meminfo``'s text; ``drop()`` drops the
    page cache and returns None or an error text; ``log(line)`` writes one
    journal line. Returns 0 (start) or :data:`EXIT_REFUSED`.
    """
    started = clock()
    deadline = started + max(wait, 0.0)
    last_drop = None
    drop_failed = False
    announced = False
    while True:
        facts = read_facts(read_meminfo)
        dropped = drop_failed or (last_drop is not None and clock() - last_drop < drop_interval)
        decision = start_decision(facts, need, floor, require_free=require_free, dropped=dropped)
        if decision["action"] == DROP_CACHES:
            log("memory guard: %s: %s" % (unit, decision["message"]))
            error = drop()
            last_drop = clock()
            if error is not None:
                drop_failed = True
                log("memory guard: %s: could not drop the page cache: %s" % (unit, error))
            facts = read_facts(read_meminfo)
            decision = start_decision(facts, need, floor, require_free=require_free, dropped=True)
        if decision["action"] == START:
            log("memory guard: %s may start: %s" % (unit, decision["message"]))
            return 0
        now = clock()
        if now >= deadline:
            waited = " after waiting %.0f s" % (now - started) if wait > 0 else ""
            log("memory guard: refusing to start %s%s: %s.%s" % (unit, waited, decision["message"], hint))
            return EXIT_REFUSED
        if not announced:
            log("memory guard: %s: not enough memory yet, waiting up to %.0f s for it: %s"
                % (unit, wait, decision["message"]))
            announced = True
        sleep(min(poll, max(deadline - now, 0.0)))


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m _host.memory_guard",
        description="Factory Floor memory guard: may a vLLM engine start on this host now?")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "start-check", help="drop the page cache when that lets the engine start; refuse when nothing would")
    check.add_argument("--need-gib", type=float, required=True,
                       help="GiB the engine takes at start: its share plus what it holds outside it "
                            "(the gpu_memory_utilization module's start_need_gib)")
    check.add_argument("--floor-gib", type=float, default=2.0,
                       help="GiB that must stay available to the rest of the host once the engine has its memory")
    check.add_argument("--require-free", action="store_true",
                       help="the engine needs its memory free, not only available (builds that compare with "
                            "cudaMemGetInfo's free memory; vLLM 0.32 on GB10 reads MemAvailable)")
    check.add_argument("--wait", type=float, default=0.0,
                       help="seconds to wait for memory to come back before refusing")
    check.add_argument("--unit", default="vLLM", help="the engine's unit, for the journal")
    check.add_argument("--slice", default="", help="the co-resident workloads' slice, named in a refusal")
    check.add_argument("--dry-run", action="store_true",
                       help="print the decision for the memory as it is now; drop nothing, wait for nothing")
    check.add_argument("--meminfo", default=MEMINFO_PATH, help=argparse.SUPPRESS)
    check.add_argument("--drop-caches-path", default=DROP_CACHES_PATH, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    need = int(round(args.need_gib * GIB))
    floor = int(round(args.floor_gib * GIB))
    if need < 0 or floor < 0:
        parser.error("--need-gib and --floor-gib must not be negative")

    def log(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    if args.dry_run:
        decision = start_decision(read_facts(lambda: _read(args.meminfo)), need, floor,
                                  require_free=args.require_free)
        log("memory guard (dry run): %s: %s: %s" % (args.unit, decision["action"], decision["message"]))
        return 0 if decision["action"] != REFUSE else EXIT_REFUSED

    hint = " Stop or shrink co-resident workloads"
    if args.slice:
        hint += " (systemctl status %s)" % args.slice
    hint += ", or give the engine a smaller share (gpu_memory_utilization, or KV cache space)."
    return run_start_check(
        lambda: _read(args.meminfo), lambda: drop_page_cache(args.drop_caches_path), log,
        need, floor, require_free=args.require_free, wait=args.wait, unit=args.unit, hint=hint)


if __name__ == "__main__":
    raise SystemExit(main())
