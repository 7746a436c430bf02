# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.container_image_info against a fake docker (run_command)."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.modules import container_image_info

A = "sha256:" + "a" * 64
C = "c" * 64


@pytest.fixture
def engine(monkeypatch):
    """What the fake engine has; records every argv it is run with."""
    image = {"Id": A, "RepoTags": ["vllm/vllm-openai:v0.32.0"], "RepoDigests": ["vllm/vllm-openai@sha256:" + C],
             "Config": {"Env": ["VLLM_VERSION=0.32.0"]}}
    fake = {"images": {"vllm/vllm-openai:v0.32.0": image},
            "containers": {"vllm-replica": {"Image": A, "Config": {"Image": "vllm/vllm-openai:v0.32.0"},
                                            "State": {"Running": True, "Pid": 4242}}},
            "calls": [], "down": False}

    def run_command(self, args, **kwargs):
        fake["calls"].append(list(args))
        if fake["down"]:
            return 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
        kind, name = args[1], args[3]
        found = fake["images" if kind == "image" else "containers"].get(name)
        if found is None:
            return 1, "[]\n", "Error response from daemon: No such %s: %s" % (kind, name)
        return 0, json.dumps([found]), ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    monkeypatch.setattr(container_image_info.os, "access", lambda path, mode: path in ("/usr/bin/docker", "/usr/bin/podman"))
    return fake


@pytest.mark.parametrize("check_mode", [False, True])
def test_image_and_containers(engine, run_module, check_mode):
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai:v0.32.0", "digest": C,
                                                     "containers": ["vllm-replica", "vllm-split"],
                                                     "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False and result["engine"] == "/usr/bin/docker"
    image = result["image"]
    assert (image["present"], image["id"], image["tag"], image["name"], image["pinned"]) == (
        True, A, "v0.32.0", "vllm/vllm-openai", True)
    assert image["vllm_version"] == "0.32.0"
    assert image["expected_digest"] == "sha256:" + C and image["digest_matches"] is True
    assert result["containers"] == {
        "vllm-replica": {"exists": True, "running": True, "pid": 4242, "image_id": A, "image": "vllm/vllm-openai:v0.32.0"},
        "vllm-split": {"exists": False, "running": False, "pid": 0, "image_id": "", "image": ""}}
    # Inspect only: nothing is pulled, started or removed.
    assert [call[1:3] for call in engine["calls"]] == [["image", "inspect"], ["container", "inspect"], ["container", "inspect"]]


def test_a_missing_image_is_reported_not_pulled(engine, run_module):
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai:latest", "engine": "/usr/bin/podman"})
    assert code == 0, result
    assert result["image"]["present"] is False and result["image"]["pinned"] is False
    assert result["image"]["digest_matches"] is None
    assert engine["calls"] == [["/usr/bin/podman", "image", "inspect", "vllm/vllm-openai:latest"]]


def test_digest_in_the_reference_is_expected(engine, run_module):
    engine["images"]["vllm/vllm-openai@sha256:" + C] = engine["images"]["vllm/vllm-openai:v0.32.0"]
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai@sha256:" + C})
    assert code == 0 and result["image"]["digest_matches"] is True and result["image"]["pinned"] is True
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai:v0.32.0", "digest": "b" * 64})
    assert code == 0 and result["image"]["digest_matches"] is False


def test_an_image_id_is_one_build(engine, run_module):
    engine["images"][A] = engine["images"]["vllm/vllm-openai:v0.32.0"]
    code, result = run_module(container_image_info, {"image": A})
    assert code == 0 and result["image"]["pinned"] is True and result["image"]["id"] == A


@pytest.mark.parametrize("args, words", [
    ({"image": "a b"}, "is not an image reference"),
    ({"image": "vllm:x", "digest": "sha256:12"}, "is not a sha256 digest"),
    ({"image": "vllm:x", "engine": "nerdctl"}, "The container engine /usr/bin/nerdctl is not on this host"),
])
def test_bad_input_fails_naming_it(engine, run_module, args, words):
    code, result = run_module(container_image_info, args)
    assert code == 1 and words in result["msg"]
    assert engine["calls"] == []


def test_a_failing_engine_is_not_a_missing_image(engine, run_module):
    engine["down"] = True
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai:v0.32.0"})
    assert code == 1
    assert result["msg"].startswith("Could not inspect image vllm/vllm-openai:v0.32.0: /usr/bin/docker image inspect")
    assert "Is the docker daemon running?" in result["msg"]


@pytest.mark.parametrize("image_architecture, machine, matches", [("arm64", "aarch64", True), ("amd64", "aarch64", False)])
def test_an_image_of_another_architecture_is_told(engine, run_module, monkeypatch, image_architecture, machine, matches):
    engine["images"]["vllm/vllm-openai:v0.32.0"]["Architecture"] = image_architecture
    monkeypatch.setattr(container_image_info.platform, "machine", lambda: machine)
    code, result = run_module(container_image_info, {"image": "vllm/vllm-openai:v0.32.0"})
    assert code == 0, result
    assert (result["image"]["architecture"], result["image"]["host_architecture"],
            result["image"]["architecture_matches"]) == (image_architecture, "arm64", matches)
