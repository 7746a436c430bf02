# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_model_config.py: MTP with prefix caching on a hybrid model.

The configs are the fixtures of the KV cache tests: real config.json files of small models
that vLLM 0.32.0 served (a Qwen3-Next and a Nemotron-H hybrid, a plain Llama).
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_config as mc

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "kv_cache")


def _config(name):
    with open(os.path.join(HERE, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)["config"]


QWEN3_NEXT = mc.summary(_config("qwen3-next-hybrid"))
NEMOTRON_H = mc.summary(_config("nemotron-h-hybrid"))
LLAMA = mc.summary(_config("tiny-random"))
MTP = {"method": "mtp", "num_speculative_tokens": 2}


def test_hybrid_models_are_told_from_plain_ones():
    assert (QWEN3_NEXT["model_type"], QWEN3_NEXT["hybrid"], QWEN3_NEXT["recurrent_layers"], QWEN3_NEXT["layers"]) == (
        "qwen3_next", True, 3, 4)
    assert NEMOTRON_H["hybrid"] is True
    assert LLAMA["hybrid"] is False and LLAMA["recurrent_layers"] == 0
    # Qwen3-Next as its hub config.json has it: no layer_types, every fourth layer full attention.
    hub = mc.summary({"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 4,
                      "num_attention_heads": 16, "num_nextn_predict_layers": 1})
    assert (hub["hybrid"], hub["recurrent_layers"], hub["mtp_layers"]) == (True, 36, 1)
    assert mc.summary({"layer_types": ["warp_drive"], "num_hidden_layers": 1})["hybrid"] is None


def test_the_vocabulary_is_read_where_the_config_keeps_it():
    # The workload replay draws its prompts' token ids below it.
    assert LLAMA["vocab_size"] == 367
    assert mc.summary({"text_config": {"vocab_size": 262208}, "vocab_size": 5})["vocab_size"] == 262208
    assert mc.summary({"vocab_size": 151936})["vocab_size"] == 151936
    assert mc.summary({})["vocab_size"] is None
    assert mc.summary({"vocab_size": "many"})["vocab_size"] is None


@pytest.mark.parametrize("model, speculative, prefix, allow, refused", [
    pytest.param(QWEN3_NEXT, MTP, True, False, True, id="hybrid, MTP, prefix caching on: refused"),
    pytest.param(QWEN3_NEXT, MTP, None, False, True, id="hybrid, MTP, vLLM's default (on): refused"),
    pytest.param(NEMOTRON_H, {"method": "nemotron_h_mtp"}, True, False, True, id="a model-specific MTP method: refused"),
    pytest.param(QWEN3_NEXT, {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}, True, False, True,
                 id="the recipe's method name: refused"),
    pytest.param(QWEN3_NEXT, MTP, True, True, False, id="confirmed (vllm_allow_mtp_prefix_caching)"),
    pytest.param(QWEN3_NEXT, MTP, False, False, False, id="prefix caching off: fine"),
    pytest.param(QWEN3_NEXT, {"method": "ngram"}, True, False, False, id="no MTP: fine"),
    pytest.param(QWEN3_NEXT, {}, True, False, False, id="no speculative decoding: fine"),
    pytest.param(LLAMA, MTP, True, False, False, id="not hybrid: fine"),
])
def test_mtp_with_prefix_caching_on_a_hybrid_model(model, speculative, prefix, allow, refused):
    problems = mc.engine_problems(model, speculative, prefix, allow)
    assert bool(problems) is refused
    if refused:
        assert "vllm_enable_prefix_caching: false" in problems[0] and "vllm_allow_mtp_prefix_caching: true" in problems[0]
        assert "43559" in problems[0]
