# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.model_memory on a synthetic model directory: config.json and files of known sizes."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import model_memory as module

GIB = 1024 ** 3
TINY = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "hidden_size": 128, "head_dim": 64, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}


def model_dir(tmp_path, config, files):
    """A model directory: config.json and files of the given sizes (sparse, so large ones cost nothing)."""
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name, size in files.items():
        with open(tmp_path / name, "wb") as handle:
            handle.truncate(size)
    return str(tmp_path)


def test_module_reads_a_synthetic_model_directory(tmp_path, run_module):
    path = model_dir(tmp_path, TINY, {"model-00001-of-00002.safetensors": GIB, "model-00002-of-00002.safetensors": GIB // 2,
                                      "pytorch_model.bin": 5 * GIB, "tokenizer.json": 1000})
    result = run_module(module, {"model_dir": path, "cpu": True}).result
    # safetensors win over the .bin; the tokenizer is not a weight.
    assert result["weights_gib"] == 1.5
    assert result["min_kv_gib"] == 0.01   # 4 MiB, rounded up
    assert result["changed"] is False


def test_module_takes_bin_files_when_there_are_no_safetensors(tmp_path, run_module):
    path = model_dir(tmp_path, TINY, {"pytorch_model-00001.bin": 3 * GIB, "training_args.bin": GIB})
    result = run_module(module, {"model_dir": path, "tensor_parallel_size": 2, "min_kv_gib": 1.0}).result
    assert result["weights_gib"] == 1.5
    assert result["min_kv_gib"] == 1.0


def test_module_keeps_the_inventory_values_without_reading_a_hub_name(run_module):
    result = run_module(module, {"model_dir": "Qwen/Qwen3-8B", "weights_gib": 16, "min_kv_gib": 4}).result
    assert (result["weights_gib"], result["min_kv_gib"]) == (16.0, 4.0)


@pytest.mark.parametrize("path, says", [("Qwen/Qwen3-8B", "not a path on the host"),
                                        ("/nonexistent/model", "no such directory")])
def test_module_fails_naming_the_variable_when_the_directory_cannot_be_read(path, says, run_module):
    code, result = run_module(module, {"model_dir": path, "weights_gib": 16})
    assert code == 1
    assert says in result["msg"]
    assert "memory_guard_min_kv_gib" in result["msg"] and "memory_guard_weights_gib" not in result["msg"]


def test_module_fails_on_a_directory_without_weights(tmp_path, run_module):
    path = model_dir(tmp_path, TINY, {"tokenizer.json": 10})
    code, result = run_module(module, {"model_dir": path})
    assert code == 1
    assert "no *.safetensors" in result["msg"] and "memory_guard_weights_gib" in result["msg"]


def test_check_mode_reads_in_full_and_changes_nothing(tmp_path, run_module):
    path = model_dir(tmp_path, TINY, {"model.safetensors": GIB})
    before = sorted(os.listdir(path))
    result = run_module(module, {"model_dir": path, "_ansible_check_mode": True}).result
    assert result["weights_gib"] == 1.0 and result["changed"] is False
    assert sorted(os.listdir(path)) == before
