# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One rank of a timed all-reduce over the split's link, run inside the image that will serve.

``factory_floor.llm.link_collective`` writes this file's source next to the container
(or the virtualenv) and runs it with the image's own Python, so the all-reduce uses the
image's torch, its NCCL (or the host's, mounted as the split's container gets it) and
the environment the split's ranks get (``NCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``,
``NCCL_IB_HCA``...). Standard library and torch only; nothing from Ansible.

    python3 probe.py --rank 0 --world-size 2 --master-addr 10.0.0.1 --master-port 29501 \
        --backend gloo --size-mib 64 --iterations 20 --timeout 120

The last line printed is ``FACTORY_FLOOR_COLLECTIVE=<json>``: ``ok``, ``backend``,
``rank``, ``bytes``, ``iterations``, ``seconds`` (the timed loop), ``init_seconds``
(until both ranks met), ``algbw_gb_s`` and ``busbw_gb_s`` (GB/s of 10^9 bytes, as
nccl-tests counts them: ``busbw = algbw x 2(n-1)/n``), ``torch``, ``nccl_version`` and
``error``. Exit status 0 only when the sums came back right.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time

MARKER = "FACTORY_FLOOR_COLLECTIVE="


def bus_bandwidth(algbw, world_size):
    """nccl-tests' bus bandwidth of an all-reduce: what each link carried."""
    return algbw * 2.0 * (world_size - 1) / world_size


def run(args, torch):
    """The all-reduce itself; ``torch`` is the module (a stand-in in tests)."""
    dist = torch.distributed
    started = time.monotonic()
    device = None
    if args.backend == "nccl":
        torch.cuda.set_device(0)
        device = torch.device("cuda", 0)
    dist.init_process_group(
        backend=args.backend, init_method="tcp://%s:%d" % (args.master_addr, args.master_port),
        rank=args.rank, world_size=args.world_size, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        numel = max(1, int(args.size_mib * 1024 * 1024 // 4))
        tensor = torch.ones(numel, dtype=torch.float32, device=device)
        # The first collective sets up the connections (NCCL's rings, Gloo's pairs): not timed.
        dist.all_reduce(tensor)
        dist.barrier()
        init_seconds = time.monotonic() - started
        if device is not None:
            torch.cuda.synchronize()
        loop_started = time.monotonic()
        for _iteration in range(args.iterations):
            dist.all_reduce(tensor)
        if device is not None:
            torch.cuda.synchronize()
        seconds = time.monotonic() - loop_started
        # Correctness: every rank contributes rank + 1, so the sum is n(n+1)/2 everywhere.
        tensor.fill_(float(args.rank + 1))
        dist.all_reduce(tensor)
        expected = args.world_size * (args.world_size + 1) / 2.0
        correct = float(tensor.min().item()) == expected and float(tensor.max().item()) == expected
        size = numel * 4
        algbw = size * args.iterations / seconds / 1e9 if seconds > 0 else 0.0
        nccl_version = ""
        if args.backend == "nccl":
            version = torch.cuda.nccl.version()
            nccl_version = ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)
        return {
            "ok": bool(correct), "backend": args.backend, "rank": args.rank, "world_size": args.world_size,
            "bytes": size, "iterations": args.iterations, "seconds": round(seconds, 6),
            "seconds_per_iteration": round(seconds / args.iterations, 6) if args.iterations else 0.0,
            "init_seconds": round(init_seconds, 3), "algbw_gb_s": round(algbw, 4),
            "busbw_gb_s": round(bus_bandwidth(algbw, args.world_size), 4),
            "torch": str(getattr(torch, "__version__", "")), "nccl_version": nccl_version,
            "error": "" if correct else "the all-reduce returned wrong sums (expected %s everywhere)" % expected,
        }
    finally:
        dist.destroy_process_group()


def parse_args(argv):
    parser = argparse.ArgumentParser(description="One rank of a timed all-reduce over the split's link.")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--size-mib", type=float, default=64)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=120)
    return parser.parse_args(argv)


def main(argv=None, torch=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if torch is None:
            import torch  # pylint: disable=import-outside-toplevel,redefined-outer-name
            import torch.distributed  # noqa: F401  pylint: disable=import-outside-toplevel
        result = run(args, torch)
    except Exception as exc:  # pylint: disable=broad-except
        result = {"ok": False, "backend": args.backend, "rank": args.rank,
                  "error": ("%s: %s" % (type(exc).__name__, exc)).strip()[:2000]}
    sys.stdout.write(MARKER + json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    raise SystemExit(main())
