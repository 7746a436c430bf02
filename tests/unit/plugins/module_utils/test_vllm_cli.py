# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_vllm_cli.py: a vLLM build's flags against what the roles render.

The fixture is the real ``vllm serve --help=all`` of the lab's vLLM CPU build 0.32.0
(fixtures/vllm_cli/); an older build is the same help without ``--shutdown-timeout``,
as NGC 25.12's vLLM 0.11.1 has none.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_args as va
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_cli as cli

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "vllm_cli", "vllm-0.32.0-cpu-serve-help-all.txt"), encoding="utf-8") as _h:
    HELP = _h.read()
FLAGS = cli.parse_help(HELP)
INFO = {"flags": FLAGS, "version": "0.32.0+cpu", "tool_parsers": [], "modules": {"fastsafetensors": False}}
# What an image of vLLM 0.11.1 prints: no --shutdown-timeout.
OLD = dict(INFO, version="0.11.1", flags=cli.parse_help(
    "\n".join(line for line in HELP.splitlines() if "--shutdown-timeout" not in line)))

# The lab's split rank 1, as the roles render it (plus what a GB10 site adds).
SETTINGS = {"model": "/opt/models/tiny-random", "served_model_name": "lab-chat", "host": "0.0.0.0", "port": 8000,
            "tensor_parallel_size": 2, "nnodes": 2, "node_rank": 1, "master_addr": "10.89.8.10", "master_port": 29500,
            "dtype": "float32", "max_model_len": 4096, "max_num_seqs": 12, "max_num_batched_tokens": 8192,
            "kv_cache_dtype": "auto", "tool_call_parser": "xlam", "enable_auto_tool_choice": True,
            "enable_prefix_caching": True, "shutdown_timeout": 30, "headless": True,
            "speculative_config": {"method": "mtp", "num_speculative_tokens": 2}, "load_format": "fastsafetensors"}
ARGV = va.build_args(SETTINGS, ["--enforce-eager"])


def test_the_help_is_read_with_every_spelling_and_the_choices():
    assert FLAGS["--shutdown-timeout"] == {"choices": None, "value": True, "open": False}
    assert FLAGS["--headless"]["value"] is False
    assert "--no-enable-prefix-caching" in FLAGS and "--device-memory-utilization" in FLAGS and "-tp" in FLAGS
    assert "fp8" in FLAGS["--kv-cache-dtype"]["choices"] and FLAGS["--kv-cache-dtype"]["open"] is False
    # The parser list ends "or name registered in --tool-parser-plugin": open to plugins.
    assert "hermes" in FLAGS["--tool-call-parser"]["choices"] and FLAGS["--tool-call-parser"]["open"] is True
    assert "--help" not in FLAGS


def test_the_build_accepts_everything_the_roles_render():
    assert cli.problems(ARGV, dict(INFO, modules={"fastsafetensors": True}), SETTINGS, "xlam", "fastsafetensors") == []


def test_flags_used_pairs_values():
    used = dict(cli.flags_used(["/m", "--max-num-seqs", "12", "--headless", "--x=y", "--enforce-eager"], FLAGS))
    assert used == {"--max-num-seqs": "12", "--headless": None, "--x": "y", "--enforce-eager": None}


@pytest.mark.parametrize("argv, info, parser, load_format, expected", [
    pytest.param(ARGV, OLD, "", "", "vLLM 0.11.1 in vllm-gb10:old does not accept --shutdown-timeout "
                 "(from vllm_shutdown_timeout)", id="a flag the build lacks"),
    pytest.param(ARGV + ["--bogus"], INFO, "", "", "does not accept --bogus (from vllm_extra_args)",
                 id="an extra flag the build lacks"),
    pytest.param(va.build_args(dict(SETTINGS, kv_cache_dtype="fp8_e9")), INFO, "", "",
                 "refuses --kv-cache-dtype fp8_e9 (from vllm_kv_cache_dtype): its choices are auto, bfloat16",
                 id="a value outside the choices"),
    pytest.param(va.build_args(dict(SETTINGS, dtype="fp4")), INFO, "", "",
                 "refuses --dtype fp4 (from vllm_split_dtype)", id="a split value outside the choices"),
    pytest.param(ARGV, INFO, "qwen9_xml", "", "has no tool-call parser qwen9_xml (vllm_tool_call_parser)",
                 id="an unknown tool-call parser"),
    pytest.param(ARGV, INFO, "", "fastsafetensors", "has no fastsafetensors package, which vllm_load_format: "
                 "fastsafetensors needs", id="fastsafetensors without the package"),
    pytest.param(ARGV, dict(INFO, flags={}, help_error="rc 2: unrecognized arguments: --help=all"), "", "",
                 "the flags vLLM 0.32.0+cpu in vllm-gb10:old accepts could not be read (rc 2", id="no help"),
])
def test_each_refusal_names_the_flag_the_variable_and_the_version(argv, info, parser, load_format, expected):
    found = cli.problems(argv, info, SETTINGS, parser, load_format, image="vllm-gb10:old")
    assert any(expected in sentence for sentence in found), found


def test_the_split_flags_name_their_variables():
    assert cli.variable_of("--master-port", SETTINGS) == "vllm_split_master_port"
    assert cli.variable_of("--no-enable-prefix-caching", SETTINGS) == "vllm_enable_prefix_caching"
    assert cli.variable_of("--max-num-batched-tokens", SETTINGS) == "vllm_max_num_batched_tokens"


def test_engine_settings_from_the_rendered_arguments():
    assert cli.engine_settings(ARGV) == ({"method": "mtp", "num_speculative_tokens": 2}, True)
    assert cli.engine_settings(["/m", "--no-enable-prefix-caching"]) == ({}, False)
    assert cli.engine_settings(["/m"]) == ({}, None)


def test_the_probe_and_the_cache_record():
    probe = {"vllm": "0.32.0+cpu", "torch": "2.13.0+cpu", "machine": "x86_64", "tool_parsers": ["xlam"],
             "modules": {"fastsafetensors": False}, "nccl_library": ""}
    assert cli.parse_probe("noise\n" + cli.MARKER + json.dumps(probe)) == probe
    assert cli.parse_probe("no marker") is None
    record = cli.cache_record(HELP, probe)
    assert record["version"] == "0.32.0+cpu" and record["flags"] == FLAGS and record["cache_version"] == cli.CACHE_VERSION
    # The probe runs in the build's own Python: standard library first, nothing of Ansible.
    assert "ansible" not in cli.PROBE and cli.MARKER in cli.PROBE
