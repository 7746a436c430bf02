# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.kv_cache_plan``."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import kv_cache_plan as module

GIB = 1024 ** 3
SMOLLM2_135M = {
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "hidden_size": 576,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
QWEN3_NEXT_STYLE = {
    "num_hidden_layers": 48,
    "full_attention_interval": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "hidden_size": 2048,
    "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16",
}


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2_135M))
    # Sparse files: the sizes are what count, 0.25 GiB of "weights".
    with open(tmp_path / "model.safetensors", "wb") as handle:
        handle.truncate(GIB // 4)
    return str(tmp_path)


@pytest.mark.parametrize("check_mode", [False, True])
def test_lab_cpu_kv_space_from_model_dir(run_module, model_dir, check_mode):
    result = run_module(module, {"model_dir": model_dir, "kv_cache_space_gib": 1, "_ansible_check_mode": check_mode}).result
    assert result["changed"] is False
    assert result["per_host"]["kv_tokens"] == 46592
    assert result["bytes_per_token"] == 23040
    assert result["max_model_len"] == 8192
    assert result["kv_cache_dtype"] == "bfloat16"
    assert result["topology"] == "replicas"
    assert result["weights_gib"] is None  # not needed with kv_cache_space_gib


def test_weights_measured_from_checkpoint(run_module, model_dir):
    result = run_module(module, {"model_dir": model_dir, "gpu_memory_utilization": 0.5, "device_total_gib": 4,
                                 "activation_gib": 0.75, "cuda_graph_gib": 0, "non_torch_gib": 0}).result
    assert result["weights_gib"] == 0.25
    assert result["weights_source"] == "1 checkpoint file(s) in %s" % model_dir
    # ceil(4 x 0.5) - 0.25 - 0.75 - 0 (CUDA graphs) - 0 (non-torch) = 1 GiB of KV cache, as with
    # VLLM_CPU_KVCACHE_SPACE=1
    assert result["per_host"]["kv_cache_gib"] == 1.0
    assert result["per_host"]["kv_tokens"] == 46592
    assert any("weights from 1 checkpoint file(s)" in line for line in result["reasoning"])


@pytest.mark.parametrize("kv_cache_dtype, topology", [("bfloat16", "split"), ("fp8", "replicas")])
def test_seed_model_config(run_module, kv_cache_dtype, topology):
    result = run_module(module, {"model_config": QWEN3_NEXT_STYLE, "kv_cache_dtype": kv_cache_dtype,
                                 "gpu_memory_utilization": 0.78, "weights_gib": 71, "activation_gib": 12.5,
                                 "cuda_graph_gib": 0, "non_torch_gib": 0, "need_full_context_requests": 2}).result
    assert result["need_tokens"] == 524288
    assert result["topology"] == topology
    assert result["layout"]["kv_cache_layers"] == 12
    assert result["split"]["tensor_parallel_size"] == 2
    assert result["split"]["kv_tokens"] > 3000000


@pytest.mark.parametrize("per_host, topology", [([499110], "split"), ([760000, 1080000], "replicas")])
def test_what_if_with_the_reports_numbers(run_module, per_host, topology):
    result = run_module(module, {"per_host_kv_tokens": per_host, "split_kv_tokens": 3100000, "max_model_len": 262144,
                                 "need_full_context_requests": 2}).result
    assert result["topology"] == topology
    assert result["layout"] is None
    assert result["per_host"]["source"] == "given"


def test_neither_fits_says_so(run_module):
    result = run_module(module, {"per_host_kv_tokens": [100], "split_kv_tokens": 200, "max_model_len": 1000,
                                 "need_tokens": 300}).result
    assert result["topology"] == "none"
    assert result["reasoning"][-1] == "neither fits: one host holds 100, the split 200, need 300 tokens"


@pytest.mark.parametrize("args, match", [
    ({"model_dir": "/nonexistent/model"},
     "Planning the KV cache of /nonexistent/model: reading /nonexistent/model/config.json failed"),
    ({"model_config": SMOLLM2_135M}, "gpu_memory_utilization is not set"),
    ({"model_config": SMOLLM2_135M, "kv_cache_dtype": "int4"}, "value of kv_cache_dtype must be one of"),
    ({"model_config": SMOLLM2_135M, "need_tokens": 1, "need_full_context_requests": 1}, "mutually exclusive"),
])
def test_failures(run_module, args, match):
    result = run_module(module, args).result
    assert result["failed"] is True
    assert match in result["msg"]


def test_empty_model_dir_asks_for_weights(run_module, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2_135M))
    result = run_module(module, {"model_dir": str(tmp_path), "gpu_memory_utilization": 0.5}).result
    assert result["failed"] is True
    assert "holds no *.safetensors, *.bin or *.pt weight files; pass weights_gib" in result["msg"]


def _fixture(run):
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "kv_cache", run + ".json")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def test_hybrid_as_vllm_cpu_printed_it(run_module):
    record = _fixture("qwen3-next-hybrid")
    args = {"model_config": record["config"], "kv_cache_space_gib": 1, "mamba_ssm_cache_dtype": "float32"}
    result = run_module(module, args).result
    assert result["per_host"]["kv_tokens"] == record["kv_cache_size_tokens"] == 3050402
    assert result["block_size"] == 256
    assert result["max_num_batched_tokens"] == 2048
    assert result["layout"]["recurrent_layers"] == 3
    assert [g["blocks_per_request"] for g in result["per_host"]["groups"]] == [16, 2, 2, 2]
    # Without prefix caching a state holds one block per request: more requests fit.
    without = run_module(module, dict(args, enable_prefix_caching=False)).result
    assert without["per_host"]["kv_tokens"] > result["per_host"]["kv_tokens"]


def test_sliding_window_with_gpu_defaults(run_module):
    record = _fixture("gpt-oss-sliding")
    result = run_module(module, {"model_config": record["config"], "gpu_memory_utilization": 0.5,
                                 "device_total_gib": 4, "weights_gib": 0.5, "activation_gib": 0.5,
                                 "cuda_graph_gib": 0, "non_torch_gib": 0}).result
    # GPU: block 16, 8,192 batched tokens x 2 in flight cover the 4,096-token context, so the window
    # saves nothing at this length: every group takes 256 + 1 or 256 blocks.
    assert result["block_size"] == 16
    assert result["max_num_batched_tokens"] == 8192
    assert [g["blocks_per_request"] for g in result["per_host"]["groups"]] == [256, 257]


def test_groupings_of_the_sites_hosts(run_module, model_dir):
    result = run_module(module, {"model_dir": model_dir, "kv_cache_space_gib": 1, "engine_hosts": 4}).result
    # SmolLM2-135M: 9 heads, 3 KV heads -> groups of 1 and 3 only.
    assert [o["sizes"] for o in result["groupings"]] == [[1, 1, 1, 1], [3, 1]]
    assert result["groupings"][1]["kv_tokens"][1] == result["per_host"]["kv_tokens"]
    assert not result.get("failed")


def test_groupings_with_a_saved_sweep_of_one_host(run_module, model_dir):
    saved = {"host": "spark-a", "engine": {"model": "lab-chat"}, "tensor_parallel_size": 1, "source": "/b/spark-a.json",
             "levels": [{"profile": "short", "concurrency": 4, "tokens_per_s": 96.4, "requests_failed": 0}],
             "recommendation": {"max_num_seqs": 4, "mixed_tokens_per_s": {}}}
    result = run_module(module, {"model_dir": model_dir, "kv_cache_space_gib": 1, "engine_hosts": 4,
                                 "sweeps": [saved], "served_model_name": "lab-chat"}).result
    replicas, three = result["groupings"]
    assert replicas["tokens_per_s"] == [96.4] * 4 and replicas["total_tokens_per_s"] == 385.6
    assert three["tokens_per_s"] == [None, 96.4] and three["not_measured_sizes"] == [3]
    assert replicas["verdict"] == "fits" and len(result["groupings_table"]) == 4
    assert "tokens/s of a group of 1: 96.4 tok/s at max_num_seqs 4 (recommended max_num_seqs 4; sweep /b/spark-a.json)" \
        in result["reasoning"]
