# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What vLLM measured about its own memory at start-up, read from its log.

Pure logic, standard library only. The lines are vLLM 0.32.0's own (the format
strings are quoted next to each pattern, with the file that logs them); a
journal line carries prefixes (``(Worker_TP0 pid=447) INFO 08-14 14:07:22
[gpu_worker.py:563] ...``), which the patterns ignore. vLLM rounds GiB to two
decimals (``format_gib``: ``round(bytes / 2**30, 2)``).

Only the last start in the text counts: figures are read from the last
``Model loading took`` line on (or from the whole text when there is none),
so a journal holding several starts reports the latest.
"""

from __future__ import annotations

import re

_NUM = r"(-?[0-9]+(?:\.[0-9]+)?)"
_INT = r"([0-9][0-9,]*)"

# v1/worker/gpu_model_runner.py: "Model loading took %s GiB memory and %.6f seconds"
MODEL_LOADING = re.compile(r"Model loading took " + _NUM + r" GiB memory and " + _NUM + r" seconds")
# v1/worker/gpu_worker.py: "Available KV cache memory: %s GiB"
AVAILABLE_KV = re.compile(r"Available KV cache memory: " + _NUM + r" GiB")
# v1/worker/gpu_worker.py (compile_or_warm_up_model): "Free memory on device (%s/%s GiB) on startup.
# Desired GPU memory utilization is (%s, %s GiB). Actual usage is %s GiB for consumed memory
# (weights + non-torch), %s GiB for peak activation, and %s GiB for CUDAGraph memory. ..."
STARTUP_USAGE = re.compile(
    r"Free memory on device \(" + _NUM + r"/" + _NUM + r" GiB\) on startup\. "
    r"Desired GPU memory utilization is \(" + _NUM + r", " + _NUM + r" GiB\)\. "
    r"Actual usage is " + _NUM + r" GiB for consumed memory \(weights \+ non-torch\), "
    + _NUM + r" GiB for peak activation, and " + _NUM + r" GiB for CUDAGraph memory")
# v1/worker/gpu_worker.py: "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), ..."
GRAPH_POOL = re.compile(r"CUDA graph pool memory: " + _NUM + r" GiB \(actual\), " + _NUM + r" GiB \(estimated\)")
# v1/worker/gpu_model_runner.py: "Estimated CUDA graph memory: %.2f GiB total"
GRAPH_ESTIMATE = re.compile(r"Estimated CUDA graph memory: " + _NUM + r" GiB total")
# v1/worker/cpu_worker.py: "Explicitly set (%s/%s) GiB for KV cache on node %d." or
# "Auto set (%s/%s) GiB for KV cache on node %d, with %s GiB requested memory for the worker.
# %s GiB memory was consumed by non-kv usages."
CPU_KV = re.compile(r"(Explicitly|Auto) set \(" + _NUM + r"/" + _NUM + r"\) GiB for KV cache on node ([0-9]+)")
CPU_NON_KV = re.compile(r"with " + _NUM + r" GiB requested memory for the worker\. " + _NUM
                        + r" GiB memory was consumed by non-kv usages")
# v1/core/kv_cache_utils.py (update_kv_cache_capacity): "%s KV cache size: %s tokens,
# Maximum concurrency for %s tokens per request: %.2fx" (%s is GPU, CPU, ... or "GPU + host")
KV_SIZE = re.compile(r"([A-Z]+(?: \+ host)?) KV cache size: " + _INT + r" tokens, Maximum concurrency for "
                     + _INT + r" tokens per request: " + _NUM + r"x")

#: Keys of :func:`parse_engine_log`'s result, each in GiB unless named otherwise.
FIGURES = ("weights_gib", "load_seconds", "kv_cache_gib", "free_at_start_gib", "device_total_gib",
           "gpu_memory_utilization", "requested_gib", "consumed_gib", "non_torch_gib",
           "peak_activation_logged_gib", "peak_activation_gib", "cuda_graph_gib", "cuda_graph_estimated_gib",
           "cpu_non_kv_gib", "kv_cache_tokens", "max_model_len", "max_concurrency", "kv_cache_device")


def _number(text):
    return float(text)


def _tokens(text):
    return int(text.replace(",", ""))


def parse_engine_log(text):
    """The figures vLLM logged about its memory at its last start.

    ``text`` is the engine's log (its journal). Returns ``{"figures": {...},
    "lines": [...]}``: every key of :data:`FIGURES` (None when not logged),
    and the log lines they came from. GiB figures are vLLM's own two-decimal
    values; ``non_torch_gib`` is ``consumed - weights`` (vLLM logs their sum).
    """
    lines = (text or "").splitlines()
    start = 0
    for index, line in enumerate(lines):
        if MODEL_LOADING.search(line):
            start = index
    figures = dict.fromkeys(FIGURES)
    used = []
    for line in lines[start:]:
        matched = True
        found = MODEL_LOADING.search(line)
        if found:
            figures["weights_gib"] = _number(found.group(1))
            figures["load_seconds"] = _number(found.group(2))
        elif AVAILABLE_KV.search(line):
            figures["kv_cache_gib"] = _number(AVAILABLE_KV.search(line).group(1))
        elif STARTUP_USAGE.search(line):
            values = [_number(v) for v in STARTUP_USAGE.search(line).groups()]
            (figures["free_at_start_gib"], figures["device_total_gib"], figures["gpu_memory_utilization"],
             figures["requested_gib"], figures["consumed_gib"], figures["peak_activation_logged_gib"],
             figures["cuda_graph_gib"]) = values
        elif GRAPH_POOL.search(line):
            found = GRAPH_POOL.search(line)
            figures["cuda_graph_gib"] = _number(found.group(1))
            figures["cuda_graph_estimated_gib"] = _number(found.group(2))
        elif GRAPH_ESTIMATE.search(line):
            figures["cuda_graph_estimated_gib"] = _number(GRAPH_ESTIMATE.search(line).group(1))
        elif CPU_KV.search(line):
            found = CPU_KV.search(line)
            figures["kv_cache_gib"] = _number(found.group(2))
            figures["device_total_gib"] = _number(found.group(3))
            non_kv = CPU_NON_KV.search(line)
            if non_kv:
                figures["requested_gib"] = _number(non_kv.group(1))
                figures["cpu_non_kv_gib"] = _number(non_kv.group(2))
        elif KV_SIZE.search(line):
            found = KV_SIZE.search(line)
            figures["kv_cache_device"] = found.group(1)
            figures["kv_cache_tokens"] = _tokens(found.group(2))
            figures["max_model_len"] = _tokens(found.group(3))
            figures["max_concurrency"] = _number(found.group(4))
        else:
            matched = False
        if matched:
            used.append(line.strip())
    if figures["consumed_gib"] is not None and figures["weights_gib"] is not None:
        figures["non_torch_gib"] = round(figures["consumed_gib"] - figures["weights_gib"], 2)
    if figures["peak_activation_logged_gib"] is not None:
        # vLLM 0.32 logs "peak activation" with the CUDA graph estimate it deducted added in
        # (gpu_worker.py: peak_activation_memory = transient peak + estimate; vLLM PR #57983).
        figures["peak_activation_gib"] = round(
            figures["peak_activation_logged_gib"] - (figures["cuda_graph_estimated_gib"] or 0.0), 2)
    return {"figures": figures, "lines": used}


#: Declared figure (gpu_memory_utilization module option) -> the measured figure it is compared with.
DECLARED_VS_MEASURED = (
    ("weights_gib", "weights_gib"),
    ("activation_gib", "peak_activation_gib"),
    ("cuda_graph_gib", "cuda_graph_estimated_gib"),
    ("non_torch_gib", "non_torch_gib"),
    ("kv_cache_gib", "kv_cache_gib"),
)


def compare(declared, figures):
    """Declared beside measured: ``[{"name", "declared_gib", "measured_gib", "difference_gib"}]``.

    ``declared`` maps the module's option names to GiB; ``difference_gib`` is
    measured - declared (positive: vLLM took more than was budgeted), None when
    either side is missing.
    """
    rows = []
    for name, key in DECLARED_VS_MEASURED:
        want = declared.get(name)
        got = figures.get(key)
        if got is None and key == "cuda_graph_estimated_gib":
            key, got = "cuda_graph_gib", figures.get("cuda_graph_gib")
        diff = None if want is None or got is None else round(got - want, 2)
        rows.append({"name": name, "declared_gib": want, "measured_gib": got, "measured_as": key,
                     "difference_gib": diff})
    return rows
