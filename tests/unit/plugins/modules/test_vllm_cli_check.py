# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.vllm_cli_check against a fake build (its help and probe answers).

The help is the real ``vllm serve --help=all`` of vLLM CPU 0.32.0. The real build asked
for real (a virtualenv of it) is in the report of issue 34; here: asked once, cached,
and the refusals a site meets - an image whose vLLM lacks a rendered flag (NGC 25.12's
0.11.1 has no --shutdown-timeout), MTP with prefix caching on a hybrid model.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_cli as cli
from ansible_collections.factory_floor.llm.plugins.modules import vllm_cli_check

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(HERE, "module_utils", "fixtures", "vllm_cli", "vllm-0.32.0-cpu-serve-help-all.txt"),
          encoding="utf-8") as _handle:
    HELP = _handle.read()
IMAGE_ID = "sha256:" + "e" * 64
PROBE = {"vllm": "0.32.0", "torch": "2.13.0+cu130", "machine": "aarch64", "tool_parsers": ["hermes", "xlam"],
         "modules": {"fastsafetensors": True}, "nccl_library": "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"}


@pytest.fixture
def build(monkeypatch):
    """The fake build: answers `vllm serve --help=all` and the probe; records each question."""
    fake = {"help": HELP, "probe": PROBE, "asked": []}

    def run_with_timeout(argv, timeout, env=None):
        fake["asked"].append(argv)
        if "serve" in argv:
            return 0, fake["help"], "", False
        return 0, "startup noise\n" + cli.MARKER + json.dumps(fake["probe"]) + "\n", "", False

    monkeypatch.setattr(vllm_cli_check, "run_with_timeout", run_with_timeout)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: (0, json.dumps([{"Id": IMAGE_ID}]), ""))
    return fake


def _args(tmp_path, argv, **extra):
    args = {"runtime": "container", "image": "vllm-gb10:0.32.0", "cache_dir": str(tmp_path / "cache"), "argv": argv,
            "settings_keys": ["served_model_name", "shutdown_timeout", "enable_prefix_caching", "speculative_config"]}
    args.update(extra)
    return args


def test_the_build_is_asked_once_and_its_answer_cached(build, run_module, tmp_path):
    argv = ["/models/m", "--served-model-name", "qwen3-next", "--shutdown-timeout", "30"]
    code, first = run_module(vllm_cli_check, _args(tmp_path, argv))
    assert code == 0 and first["problems"] == [] and first["cached"] is False
    assert (first["version"], first["machine"], first["nccl_library"]) == ("0.32.0", "aarch64", PROBE["nccl_library"])
    assert first["cache_file"] == str(tmp_path / "cache" / ("e" * 64 + ".json"))
    # The help and the probe ran in the image, without network, never pulled.
    assert build["asked"][0][:5] == ["/usr/bin/docker", "run", "--rm", "--network=none", "--pull=never"]
    assert build["asked"][0][-3:] == ["vllm-gb10:0.32.0", "serve", "--help=all"]
    code, second = run_module(vllm_cli_check, _args(tmp_path, argv))
    assert code == 0 and second["cached"] is True and len(build["asked"]) == 2


def test_check_mode_asks_but_writes_no_cache(build, run_module, tmp_path):
    code, result = run_module(vllm_cli_check, dict(_args(tmp_path, ["/m"]), _ansible_check_mode=True))
    assert code == 0 and not os.path.exists(result["cache_file"])


def test_an_image_whose_vllm_lacks_a_rendered_flag(build, run_module, tmp_path):
    build["help"] = "\n".join(line for line in HELP.splitlines() if "--shutdown-timeout" not in line)
    build["probe"] = dict(PROBE, vllm="0.11.1")
    code, result = run_module(vllm_cli_check, _args(tmp_path, ["/m", "--shutdown-timeout", "30"]))
    assert code == 0
    assert result["problems"] == [
        "vLLM 0.11.1 in vllm-gb10:0.32.0 does not accept --shutdown-timeout (from vllm_shutdown_timeout): it is an older "
        "or another build than the roles render for; use an image whose vLLM has --shutdown-timeout, or leave the "
        "variable unset"]


def test_mtp_with_prefix_caching_on_the_hybrid_model_it_serves(build, run_module, tmp_path):
    model = tmp_path / "Qwen3-Next-80B-A3B-Instruct-NVFP4"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_next", "num_hidden_layers": 48,
                                                   "full_attention_interval": 4, "num_attention_heads": 16}))
    argv = [str(model), "--speculative-config", '{"method":"mtp","num_speculative_tokens":2}', "--enable-prefix-caching"]
    code, result = run_module(vllm_cli_check, _args(tmp_path, argv))
    assert code == 0 and result["model"]["hybrid"] is True
    assert len(result["problems"]) == 1 and "qwen3_next: 36 of 48 layers keep a recurrent state" in result["problems"][0]
    code, allowed = run_module(vllm_cli_check, _args(tmp_path, argv, allow_mtp_prefix_caching=True))
    assert allowed["problems"] == []
