"""vLLM command lines built from settings named after vLLM's flags."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, build_args


def test_gb10_replica_command_line():
    args = build_args({
        "model": "/models/qwen-nvfp4",
        "served_model_name": "qwen",
        "port": 8000,
        "max_model_len": 262144,
        "max_num_seqs": 12,
        "kv_cache_dtype": "fp8",
        "gpu_memory_utilization": 0.74,
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 4},
        "enable_auto_tool_choice": True,
        "tool_call_parser": "qwen3_coder",
        "enable_prefix_caching": True,
    })
    assert args[0] == "/models/qwen-nvfp4"
    pairs = dict(zip(args[1::2], args[2::2]))
    assert pairs["--max-num-seqs"] == "12"
    assert pairs["--kv-cache-dtype"] == "fp8"
    assert pairs["--gpu-memory-utilization"] == "0.74"
    assert json.loads(args[args.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 4}
    assert "--enable-auto-tool-choice" in args
    assert "--enable-prefix-caching" in args


@pytest.mark.parametrize("value, expected", [(True, "--enable-prefix-caching"), (False, "--no-enable-prefix-caching")])
def test_optional_boolean(value, expected):
    assert build_args({"model": "m", "enable_prefix_caching": value}) == ["m", expected]


def test_none_and_empty_are_left_to_vllm():
    assert build_args({"model": "m", "gpu_memory_utilization": None, "tool_call_parser": "",
                       "speculative_config": {}, "enable_prefix_caching": None}) == ["m"]


def test_split_head_and_worker():
    common = {"model": "m", "tensor_parallel_size": 2, "nnodes": 2, "master_addr": "10.0.0.1", "master_port": 29500}
    head = build_args(dict(common, node_rank=0, headless=False))
    worker = build_args(dict(common, node_rank=1, headless=True))
    assert "--headless" not in head and worker[-1] == "--headless"
    assert head[head.index("--node-rank") + 1] == "0"
    assert worker[worker.index("--node-rank") + 1] == "1"


def test_api_key_never_on_the_command_line():
    args = build_args({"model": "m", "api_key": "s3cret"})
    assert "s3cret" not in " ".join(args)


def test_extra_args_are_appended():
    assert build_args({"model": "m"}, ["--enforce-eager"]) == ["m", "--enforce-eager"]


@pytest.mark.parametrize("settings, message", [
    ({"model": "m", "max_num_seq": 12}, "unknown vLLM setting(s) max_num_seq"),
    ({"served_model_name": "x"}, "model is required"),
    ({"model": "m", "max_num_seqs": True}, "max_num_seqs must be a value"),
])
def test_bad_settings_say_what_to_change(settings, message):
    with pytest.raises(VllmArgsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_args(settings)
