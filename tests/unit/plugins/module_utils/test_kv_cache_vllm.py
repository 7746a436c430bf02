# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The KV plan equals, to the token, what vLLM 0.32.0 printed for the lab's generated models.

Each fixture in ``fixtures/kv_cache/`` is one start of vLLM's CPU build in the lab image
(``lab/kv_measure.py``; the models come from ``lab/prepare_models.py``): the model's
``config.json``, the arguments and environment vLLM ran with, the lines it printed about
its KV cache, and its ``CPU KV cache size: N tokens`` figure. Full attention (tiny-random),
sliding-window layers (Gemma 3 style 5:1, gpt-oss alternating, Mistral on every layer) and
hybrids with a recurrent state (Qwen3-Next's gated delta net, Nemotron-H's Mamba-2).
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._kv_cache_plan import plan_kv_cache

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "kv_cache")
RUNS = sorted(name[:-5] for name in os.listdir(FIXTURES) if name.endswith(".json"))


def load(run):
    with open(os.path.join(FIXTURES, run + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def arg(record, flag):
    args = record["args"]
    return args[args.index(flag) + 1] if flag in args else None


def ssm_cache_dtype(record):
    """What vLLM used for the recurrent state, as it printed it.

    Its CPU build on an x86 host with AVX512-BF16 resets ``auto`` to float32 ("Reset SSM
    cache type to float32 for accelerated GDN mamba backend"): a property of the host, so
    the plan is told, as an operator would tell it.
    """
    if any("Reset SSM cache type to float32" in line for line in record["log"]):
        return "float32"
    return "auto"


def test_every_generated_model_was_measured():
    assert set(RUNS) >= {"tiny-random", "gemma3-sliding", "gemma3-sliding-len1024", "gpt-oss-sliding",
                         "mistral-sliding", "qwen3-next-hybrid", "nemotron-h-hybrid"}


@pytest.mark.parametrize("run", RUNS)
def test_plan_equals_vllms_printed_kv_cache_size(run):
    record = load(run)
    assert record["vllm_version"].startswith("0.32.0"), record["vllm_version"]
    assert record["kv_cache_size_tokens"], "vLLM printed no KV cache size: %s" % record.get("error_tail")
    max_model_len = arg(record, "--max-model-len")
    plan = plan_kv_cache(record["config"], kv_cache_space_gib=float(record["env"]["VLLM_CPU_KVCACHE_SPACE"]),
                         max_model_len=int(max_model_len) if max_model_len else None,
                         mamba_ssm_cache_dtype=ssm_cache_dtype(record))
    assert plan["max_model_len"] == record["max_model_len"]
    assert plan["per_host"]["kv_tokens"] == record["kv_cache_size_tokens"], plan["reasoning"]
    assert plan["per_host"]["max_concurrency"] == record["max_concurrency"]


def test_sliding_window_layers_are_no_longer_counted_like_full_ones():
    record = load("gemma3-sliding")
    plan = plan_kv_cache(record["config"], kv_cache_space_gib=1)
    # 5 sliding + 1 full layer, 256 B per token and layer: counted like full layers, a GiB
    # would hold 2**30 // (6 x 256) = 699,050 tokens; vLLM holds 1,100,145.
    assert plan["per_host"]["kv_tokens"] == 1100145
    assert [g["kind"] for g in plan["per_host"]["groups"]] == ["full"] + ["sliding:128"] * 5


def test_hybrid_block_size_is_raised_as_vllm_printed():
    record = load("qwen3-next-hybrid")
    plan = plan_kv_cache(record["config"], kv_cache_space_gib=1, mamba_ssm_cache_dtype=ssm_cache_dtype(record))
    assert any("Setting attention block size to %d tokens" % plan["per_host"]["block_size"] in line
               for line in record["log"])
