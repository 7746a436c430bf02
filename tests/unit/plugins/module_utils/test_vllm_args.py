"""vLLM command lines built from settings named after vLLM's flags."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, build_args, engine_probe_url, probe_host, probe_url


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


def test_split_dtype_only_when_set():
    # vllm_split_dtype: null leaves vLLM's auto (no flag); a dtype is passed as --dtype.
    assert build_args({"model": "m", "dtype": None}) == ["m"]
    assert build_args({"model": "m", "tensor_parallel_size": 2, "dtype": "float32"}) == [
        "m", "--tensor-parallel-size", "2", "--dtype", "float32"]


def test_api_key_never_on_the_command_line():
    args = build_args({"model": "m", "api_key": "s3cret"})
    assert "s3cret" not in " ".join(args)


def test_extra_args_are_appended():
    assert build_args({"model": "m"}, ["--enforce-eager"]) == ["m", "--enforce-eager"]


@pytest.mark.parametrize("extra", ["--enforce-eager", {"--enforce-eager": None}])
def test_extra_args_that_are_no_list_are_refused_not_split_into_characters(extra):
    # Ansible's type: list check passes a string (it splits it for the check only).
    with pytest.raises(VllmArgsError, match=r"vllm_extra_args\) must be a list, one item per argument"):
        build_args({"model": "m"}, extra)


@pytest.mark.parametrize("settings, message", [
    ({"model": "m", "max_num_seq": 12}, "unknown vLLM setting(s) max_num_seq"),
    ({"served_model_name": "x"}, "model is required"),
    ({"model": "m", "max_num_seqs": True}, "max_num_seqs must be a value"),
])
def test_bad_settings_say_what_to_change(settings, message):
    with pytest.raises(VllmArgsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_args(settings)


# --- where the engine's own host reaches it (vllm_probe_host / vllm_listen_host) ---------------


@pytest.mark.parametrize("listen_host, expected", [
    pytest.param("0.0.0.0", "127.0.0.1", id="every-ipv4-address"),
    pytest.param("", "127.0.0.1", id="empty-vllm-default"),
    pytest.param(None, "127.0.0.1", id="unset-role-default"),
    pytest.param("::", "::1", id="every-ipv6-address"),
    pytest.param("[::]", "::1", id="every-ipv6-address-bracketed"),
    pytest.param("10.0.0.5", "10.0.0.5", id="specific-address-answers-only-there"),
    pytest.param(" 10.0.0.5 ", "10.0.0.5", id="whitespace"),
    pytest.param("127.0.0.1", "127.0.0.1", id="loopback-only"),
    pytest.param("fd00::5", "fd00::5", id="specific-ipv6"),
    pytest.param("spark-1.lan", "spark-1.lan", id="a-name"),
])
def test_probe_host_follows_the_listen_host(listen_host, expected):
    assert probe_host(listen_host) == expected


@pytest.mark.parametrize("override", ["192.0.2.7", "[192.0.2.7]"])
def test_probe_host_override_wins(override):
    assert probe_host("0.0.0.0", override) == "192.0.2.7"
    assert probe_host("10.0.0.5", override) == "192.0.2.7"


@pytest.mark.parametrize("override", [None, "", "  "])
def test_empty_override_derives(override):
    assert probe_host("10.0.0.5", override) == "10.0.0.5"


@pytest.mark.parametrize("listen_host, port, expected", [
    ("0.0.0.0", 8000, "http://127.0.0.1:8000"),
    ("10.0.0.5", "8001", "http://10.0.0.5:8001"),
    ("::", 8000, "http://[::1]:8000"),
    ("fd00::5", 8000, "http://[fd00::5]:8000"),
    (None, None, "http://127.0.0.1:8000"),
])
def test_probe_url(listen_host, port, expected):
    assert probe_url(listen_host, port) == expected


@pytest.mark.parametrize("port", ["eighty", 0, 70000])
def test_probe_url_refuses_a_bad_port(port):
    with pytest.raises(VllmArgsError, match="vllm_port"):
        probe_url("0.0.0.0", port)


def test_engine_probe_url_reads_the_host_variables_with_the_role_defaults():
    assert engine_probe_url({}) == "http://127.0.0.1:8000"
    assert engine_probe_url({"vllm_listen_host": "10.0.0.5", "vllm_port": 8002}) == "http://10.0.0.5:8002"
    assert engine_probe_url({"vllm_listen_host": "10.0.0.5", "vllm_probe_host": "10.0.1.5"}) == "http://10.0.1.5:8000"
