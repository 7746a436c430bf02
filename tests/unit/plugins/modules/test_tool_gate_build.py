# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.tool_gate_build against a model directory and a fake docker
(run_command). Which files count and the id are tests/unit/plugins/module_utils/test_tool_gate_build.py's."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_build as tb
from ansible_collections.factory_floor.llm.plugins.modules import tool_gate_build

A = "sha256:" + "a" * 64
IMAGE = "vllm/vllm-openai:v0.32.0"


@pytest.fixture
def engine(monkeypatch):
    """The fake engine's images; ``down`` makes it fail as a stopped daemon does."""
    fake = {"images": {IMAGE: {"Id": A, "Config": {"Env": ["VLLM_VERSION=0.32.0"]}}}, "down": False}

    def run_command(self, args, **kwargs):
        if fake["down"]:
            return 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
        found = fake["images"].get(args[3])
        if found is None:
            return 1, "[]\n", "Error response from daemon: No such image: %s" % args[3]
        return 0, json.dumps([found]), ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(tool_gate_build.os, "access", lambda path, mode: path == "/usr/bin/docker")
    return fake


@pytest.fixture
def model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x" * 8)
    return str(tmp_path)


def args(model, **more):
    return dict(model_path=model, small_files=["*.json"], weight_files=["*.safetensors"], host="spark-a", **more)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_build_with_its_image(engine, run_module, model, check_mode):
    code, result = run_module(tool_gate_build, dict(args(model, container_image=IMAGE), _ansible_check_mode=check_mode))
    assert code == 0 and result["changed"] is False
    parts = result["build"]["parts"]
    assert parts["image"] == {"id": A, "vllm_version": "0.32.0"}
    assert parts["weights"] == {"model.safetensors": 8}
    assert result["build"] == tb.build(tb.model_parts(model, ["*.json"], ["*.safetensors"]),
                                       {"id": A, "vllm_version": "0.32.0"})


def test_without_an_image_nothing_is_inspected(engine, run_module, model):
    engine["down"] = True
    assert "image" not in run_module(tool_gate_build, args(model)).result["build"]["parts"]


def test_a_model_directory_that_is_missing_is_refused(engine, run_module, tmp_path):
    code, result = run_module(tool_gate_build, args(str(tmp_path / "none")))
    assert code == 1 and result["msg"] == tb.not_a_directory(str(tmp_path / "none"), "spark-a")


def test_an_image_that_is_not_on_the_host_is_refused(engine, run_module, model):
    code, result = run_module(tool_gate_build, args(model, container_image="vllm/vllm-openai:v9"))
    assert code == 1 and result["msg"] == tb.image_missing("vllm/vllm-openai:v9", "spark-a", "/usr/bin/docker")


def test_a_stopped_daemon_is_named(engine, run_module, model):
    engine["down"] = True
    code, result = run_module(tool_gate_build, args(model, container_image=IMAGE))
    assert code == 1 and result["msg"].startswith("Could not inspect image %s: /usr/bin/docker image inspect" % IMAGE)
    assert result["msg"].endswith("Is the docker daemon running?")


def test_a_missing_engine_is_named(engine, run_module, model):
    code, result = run_module(tool_gate_build, args(model, container_image=IMAGE, container_engine="/usr/bin/podman"))
    assert code == 1 and result["msg"].startswith("The container engine /usr/bin/podman is not on this host")


def test_json_the_engine_did_not_print_is_named(engine, run_module, model, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kwargs: (0, "not json", ""))
    code, result = run_module(tool_gate_build, args(model, container_image=IMAGE))
    assert code == 1 and "image inspect %s printed something else than JSON" % IMAGE in result["msg"]
