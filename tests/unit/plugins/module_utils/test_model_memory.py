# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's model figures from the model's files (issue 35): a first deploy needs no start log."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._kv_cache_plan import plan_kv_cache
from ansible_collections.factory_floor.llm.plugins.module_utils._model_memory import (
    min_kv_bytes,
    model_memory,
    unreadable,
    weights_per_rank,
)

GIB = 1024 ** 3
# 2 layers x 2 KV heads x head_dim 64, bf16 (the lab's tiny-random model).
TINY = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "hidden_size": 128, "head_dim": 64, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}
# A GB10-sized model: 48 layers, 8 KV heads of 128, 262,144 tokens.
BIG = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 64,
       "num_key_value_heads": 8, "hidden_size": 8192, "head_dim": 128, "max_position_embeddings": 262144,
       "torch_dtype": "bfloat16"}


def test_weights_are_the_checkpoint_size_divided_over_the_ranks_rounded_up():
    assert weights_per_rank(10 * GIB) == 10.0
    assert weights_per_rank(10 * GIB, 2) == 5.0
    # Never below what is loaded: 5.005 GiB per rank is 5.01.
    assert weights_per_rank(10 * GIB + GIB // 100, 2) == 5.01


def test_min_kv_holds_exactly_one_full_context_request_in_the_kv_cache_plan():
    # The plan given this pool reports one full-context request; one block less, none.
    need, length, lines = min_kv_bytes(TINY, cpu=True)
    assert length == 4096
    held = plan_kv_cache(TINY, kv_cache_space_gib=need / GIB, tensor_parallel_size=1)
    assert held["per_host"]["full_context_requests"] == 1.0
    short = plan_kv_cache(TINY, kv_cache_space_gib=(need - 1) / GIB, tensor_parallel_size=1)
    assert short["per_host"]["full_context_requests"] < 1.0
    # 2 layers x 2 (K, V) x 2 heads x 64 x 2 B = 1,024 B per token; 4,096 tokens = 4 MiB.
    assert need == 4096 * 1024
    assert "one full-context request" in lines[0]


@pytest.mark.parametrize("dtype, factor", [("auto", 2), ("fp8", 1), ("fp8_inc", 1)])
def test_min_kv_of_a_large_model_follows_the_kv_dtype_and_the_split(dtype, factor):
    need, _length, _lines = min_kv_bytes(BIG, kv_cache_dtype=dtype)
    # 48 layers x 2 x 8 heads x 128 x bytes x 262,144 tokens (whole blocks of 16).
    assert need == 48 * 2 * 8 * 128 * factor * 262144
    split, _length, _lines = min_kv_bytes(BIG, kv_cache_dtype=dtype, tensor_parallel_size=2)
    assert split == need // 2


def test_a_shorter_max_model_len_needs_less():
    full, _l, _x = min_kv_bytes(BIG, kv_cache_dtype="fp8")
    short, length, _x = min_kv_bytes(BIG, max_model_len=32768, kv_cache_dtype="fp8")
    assert length == 32768 and short * 8 == full


def test_values_the_inventory_sets_are_kept_and_nothing_is_read_for_them():
    out = model_memory(None, None, weights_gib=48.0, min_kv_gib=12.0)
    assert (out["weights_gib"], out["weights_source"]) == (48.0, "memory_guard_weights_gib")
    assert (out["min_kv_gib"], out["min_kv_source"]) == (12.0, "memory_guard_min_kv_gib")


def test_split_figures_are_per_rank():
    out = model_memory(BIG, 100 * GIB, ["a.safetensors", "b.safetensors"], model_dir="/m", tensor_parallel_size=2,
                       kv_cache_dtype="fp8")
    assert out["weights_gib"] == 50.0
    assert out["weights_source"] == "2 checkpoint file(s) in /m / 2 ranks"
    # 48 layers x 2 x 8 heads x 128 x 1 B x 262,144 tokens = 24 GiB of fp8 KV; half of it per rank.
    assert out["min_kv_gib"] == 12.0
    assert out["max_model_len"] == 262144


def test_the_message_names_the_variable_and_where_its_number_comes_from():
    msg = unreadable("Qwen/Qwen3-8B", ["weights_gib", "min_kv_gib"], "it is not a path on the host")
    assert "memory_guard_weights_gib" in msg and "memory_guard_min_kv_gib" in msg
    assert "Model loading took" in msg and "kv_cache_plan" in msg and "Qwen/Qwen3-8B" in msg
    assert "memory_guard_min_kv_gib" not in unreadable("x", ["weights_gib"], "no")
