# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The example inventories' GB10 settings against the published recipe of the model they serve.

A site copies inventory/example*: its weights figure (the memory plan) and its speculative
decoding must be the model's, not another model's. Each figure below names its source.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_config as mc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GIB = 2 ** 30

RECIPES = {
    "Qwen3-Next-80B-A3B-Instruct-NVFP4": {
        # NVIDIA's NVFP4 build of Qwen3-Next-80B-A3B on Hugging Face (nvidia/Qwen3-Next-80B-A3B-Thinking-NVFP4, the
        # same architecture and quantization): 50.8 GB in 11 safetensors shards, the MTP layer included.
        "checkpoint_bytes": 50.8e9,
        # vLLM's recipe (vllm-project/recipes, Qwen/Qwen3-Next.md, "Advanced Configuration with MTP"):
        # --speculative-config '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}'; "mtp" is the same method.
        "mtp_methods": ("qwen3_next_mtp", "mtp"),
        "num_speculative_tokens": 2,
        # The same recipe, "Function calling": --tool-call-parser hermes --enable-auto-tool-choice.
        "tool_call_parser": "hermes",
        # The hub's config.json: 48 layers, full attention every 4th, Gated DeltaNet in the others; one MTP layer.
        "config": {"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 4,
                   "num_attention_heads": 16, "num_nextn_predict_layers": 1},
    },
}


def _gb10(example):
    with open(os.path.join(ROOT, "inventory", example, "group_vars", "gb10.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("example", ["example", "example-single"])
def test_the_example_follows_its_models_recipe(example):
    gb10 = _gb10(example)
    recipe = RECIPES[os.path.basename(gb10["vllm_model"])]
    # The weights once loaded are the checkpoint's size (vLLM: "Model loading took ... GiB"), rounded up a little.
    checkpoint_gib = recipe["checkpoint_bytes"] / GIB
    assert checkpoint_gib <= gb10["memory_guard_weights_gib"] <= checkpoint_gib * 1.05
    assert gb10["vllm_speculative_config"]["method"] in recipe["mtp_methods"]
    assert gb10["vllm_speculative_config"]["num_speculative_tokens"] == recipe["num_speculative_tokens"]
    assert gb10["vllm_tool_call_parser"] == recipe["tool_call_parser"]
    # A hybrid model: MTP is not combined with prefix caching unless the operator confirmed it.
    model = mc.summary(recipe["config"])
    assert model["hybrid"] is True
    assert mc.engine_problems(model, gb10["vllm_speculative_config"], gb10.get("vllm_enable_prefix_caching", True),
                              gb10.get("vllm_allow_mtp_prefix_caching", False)) == []


@pytest.mark.parametrize("example", ["example", "example-single"])
def test_the_example_sets_what_the_gb10_recipes_set(example):
    gb10 = _gb10(example)
    assert gb10["vllm_max_num_batched_tokens"] == 8192          # vLLM's own default on GB10 is 2048
    assert gb10["vllm_load_format"] == "fastsafetensors"
    assert gb10["vllm_env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
