#!/usr/bin/env python3
"""Start vLLM once per model and keep the KV cache size it prints, with the config that produced it.

Runs inside the lab image (its /opt/vllm), on loopback only, nothing downloaded:

    podman run --rm --shm-size 1g --network none --cpuset-cpus 1 \\
        -v "$PWD/lab:/lab:ro" -v "$PWD/tests/unit/plugins/module_utils/fixtures/kv_cache:/out" \\
        localhost/factory-floor-lab:latest nice -n 19 /opt/vllm/bin/python /lab/kv_measure.py /opt/models /out

Each run is ``vllm serve``'s API server on 127.0.0.1 with ``VLLM_CPU_KVCACHE_SPACE=1``
(1 GiB of KV cache) and ``--enforce-eager``; it is stopped as soon as vLLM has printed
``CPU KV cache size: N tokens, Maximum concurrency for M tokens per request: X.XXx``
(or has exited). The fixture ``<run>.json`` holds the model's config.json, the
arguments and environment, vLLM's version, the lines vLLM printed about the KV cache
(or the error that stopped it), and the parsed figure. tests/unit/plugins/module_utils/
test_kv_cache_vllm.py asserts that factory_floor.llm.kv_cache_plan computes that figure.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

# name: (model directory under the models root, extra vLLM arguments)
RUNS = {
    "tiny-random": ("tiny-random", []),
    "gemma3-sliding": ("kv/gemma3-sliding", []),
    "gemma3-sliding-len1024": ("kv/gemma3-sliding", ["--max-model-len", "1024"]),
    "gpt-oss-sliding": ("kv/gpt-oss-sliding", []),
    "mistral-sliding": ("kv/mistral-sliding", []),
    "qwen3-next-hybrid": ("kv/qwen3-next-hybrid", []),
    "nemotron-h-hybrid": ("kv/nemotron-h-hybrid", []),
}
ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TORCHDYNAMO_DISABLE": "1",
}
KV_LINE = re.compile(r"KV cache size: ([0-9,]+) tokens, Maximum concurrency for ([0-9,]+) tokens per request: "
                     r"([0-9.]+)x")
# Lines worth keeping next to the figure: how vLLM sized and grouped the cache, or why it stopped.
KEEP = re.compile(r"KV cache size|GiB for KV cache|KV cache layout|[Bb]lock size|padding layers|[Pp]adding mamba|"
                  r"page size|[Hh]ybrid KV cache|Chunked prefill is enabled|Model loading took|Error|"
                  r"SSM cache|mamba_ssm_cache_dtype|Mamba cache mode|attention block size|"
                  r"Unsupported|not supported|NotImplemented")


def keep(line):
    """A line for the fixture: one of KEEP, not vLLM's whole engine configuration nor the ulimit warning."""
    return bool(KEEP.search(line)) and len(line) < 600 and "ulimit" not in line
TIMEOUT = 900


def run(name, model_dir, extra, out_dir):
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
            "--host", "127.0.0.1", "--port", "8000", "--enforce-eager", "--dtype", "bfloat16"] + extra
    env = dict(os.environ, **ENV)
    started = time.monotonic()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, start_new_session=True)
    kept, tail, found = [], [], None
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = (tail + [line])[-40:]
            if keep(line):
                kept.append(line)
            match = KV_LINE.search(line)
            if match:
                found = match
                break
            if time.monotonic() - started > TIMEOUT:
                break
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    import vllm  # noqa: E402 (only inside the lab image)
    record = {
        "run": name,
        "model": os.path.basename(model_dir.rstrip("/")),
        "vllm_version": vllm.__version__,
        "args": args[3:],
        "env": ENV,
        "config": config,
        "seconds": round(time.monotonic() - started, 1),
        "log": kept,
    }
    if found:
        record.update(kv_cache_size_tokens=int(found.group(1).replace(",", "")),
                      max_model_len=int(found.group(2).replace(",", "")),
                      max_concurrency=float(found.group(3)))
    else:
        record.update(kv_cache_size_tokens=None, error_tail=tail[-15:])
    with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print("%s: %s (%.0f s)" % (name, record["kv_cache_size_tokens"] or "no KV figure: " + tail[-1], record["seconds"]),
          flush=True)


def main():
    models, out_dir = sys.argv[1], sys.argv[2]
    only = sys.argv[3:]
    for name, (model, extra) in RUNS.items():
        if only and name not in only:
            continue
        run(name, os.path.join(models, model), extra, out_dir)


if __name__ == "__main__":
    main()
