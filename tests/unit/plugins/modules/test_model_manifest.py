# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.model_manifest over a model directory made here."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import model_manifest


@pytest.fixture
def model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                                      "num_attention_heads": 4, "num_key_value_heads": 2,
                                                      "hidden_size": 64}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4096)
    return tmp_path


@pytest.mark.parametrize("check_mode", [False, True])
def test_lists_the_copy_and_changes_nothing(model, run_module, check_mode):
    before = sorted((p.name, p.stat().st_mtime_ns) for p in model.iterdir())
    code, result = run_module(model_manifest, {"path": str(model), "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False
    assert "model.safetensors" in json.dumps(result) and "config.json" in json.dumps(result)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in model.iterdir()) == before


def test_check_mode_reports_what_a_run_reports(model, run_module):
    _code, real = run_module(model_manifest, {"path": str(model)})
    _code, check = run_module(model_manifest, {"path": str(model), "_ansible_check_mode": True})
    assert real == check


def test_a_missing_directory_names_the_variable_to_set(tmp_path, run_module):
    code, result = run_module(model_manifest, {"path": str(tmp_path / "absent")})
    assert code == 1 and result["failed"] is True
    assert "vllm_model" in result["msg"] and str(tmp_path / "absent") in result["msg"]
