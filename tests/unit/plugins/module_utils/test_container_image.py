# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_container_image.py: image references, digests, inspect output."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _container_image as ci

A = "a" * 64
B = "b" * 64
C = "c" * 64


@pytest.mark.parametrize("ref, name, tag, digest", [
    ("vllm/vllm-openai:v0.32.0", "vllm/vllm-openai", "v0.32.0", ""),
    ("vllm/vllm-openai", "vllm/vllm-openai", "", ""),
    ("localhost/factory-floor-vllm-cpu:lab", "localhost/factory-floor-vllm-cpu", "lab", ""),
    # A registry's port is not a tag.
    ("registry.local:5000/vllm", "registry.local:5000/vllm", "", ""),
    ("registry.local:5000/vllm:0.32", "registry.local:5000/vllm", "0.32", ""),
    ("nvcr.io/nvidia/vllm:26.11-py3@sha256:" + C, "nvcr.io/nvidia/vllm", "26.11-py3", "sha256:" + C),
    ("vllm/vllm-openai@sha256:" + C.upper(), "vllm/vllm-openai", "", "sha256:" + C),
])
def test_parse_reference(ref, name, tag, digest):
    assert ci.parse_reference(ref) == {"name": name, "tag": tag, "digest": digest}


@pytest.mark.parametrize("ref", ["", "a b", "vllm@sha256:123", ":tag"])
def test_parse_reference_refuses(ref):
    with pytest.raises(ValueError):
        ci.parse_reference(ref)


@pytest.mark.parametrize("ref, digest, pinned", [
    ("vllm/vllm-openai:v0.32.0", "", True),
    ("vllm/vllm-openai:latest", "", False),
    ("vllm/vllm-openai", "", False),
    ("vllm/vllm-openai:latest", "sha256:" + A, True),
    ("vllm/vllm-openai@sha256:" + A, "", True),
])
def test_is_pinned(ref, digest, pinned):
    assert ci.is_pinned(ref, digest) is pinned


def test_normalize_digest():
    assert ci.normalize_digest(A) == "sha256:" + A          # podman prints IDs without sha256:
    assert ci.normalize_digest(" SHA256:" + A.upper()) == "sha256:" + A
    for bad in ("", "sha256:abc", "md5:" + A, A + "0"):
        with pytest.raises(ValueError):
            ci.normalize_digest(bad)


@pytest.mark.parametrize("stderr, absent", [
    ("Error response from daemon: No such image: vllm:x", True),     # docker
    ("Error: No such container: vllm-replica", True),                # docker
    ("Error: No such object: vllm-replica", True),                   # older docker
    ("Error: vllm:x: image not known", True),                        # podman
    ("Error: no such container vllm-replica", True),                 # podman
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", False),
    ("permission denied while trying to connect to the Docker daemon socket", False),
])
def test_is_absent_tells_a_missing_object_from_a_failing_engine(stderr, absent):
    assert ci.is_absent(stderr) is absent


def _docker_image(**overrides):
    image = {"Id": "sha256:" + A, "RepoTags": ["vllm/vllm-openai:v0.32.0"],
             "RepoDigests": ["vllm/vllm-openai@sha256:" + C], "Created": "2026-11-20T08:12:44.1Z",
             "Architecture": "arm64", "Variant": "v8", "Os": "linux",
             "Config": {"Labels": {"org.opencontainers.image.version": "22.04"},
                        "Env": ["PATH=/usr/local/bin:/usr/bin", "VLLM_VERSION=0.32.0"]}}
    image.update(overrides)
    return json.dumps([image])


def test_image_facts_from_docker():
    facts = ci.image_facts("vllm/vllm-openai:v0.32.0", _docker_image())
    assert facts == {"ref": "vllm/vllm-openai:v0.32.0", "present": True, "id": "sha256:" + A,
                     "repo_digests": ["vllm/vllm-openai@sha256:" + C], "repo_tags": ["vllm/vllm-openai:v0.32.0"],
                     "created": "2026-11-20T08:12:44.1Z", "vllm_version": "0.32.0",
                     "architecture": "arm64", "variant": "v8", "os": "linux"}


@pytest.mark.parametrize("image_architecture, host_machine, matches", [
    ("arm64", "aarch64", True),       # a GB10 build on a GB10 (DGX Spark) host
    ("amd64", "aarch64", False),      # an x86 build on GB10: "exec format error" at start
    ("arm64", "x86_64", False),       # the lab's foreign-architecture tag on the lab's x86 hosts
    ("amd64", "x86_64", True),
    ("", "aarch64", None),            # the image declares none: nothing to compare
])
def test_architecture_matches_names_the_host_as_images_do(image_architecture, host_machine, matches):
    assert ci.architecture_matches(image_architecture, host_machine) is matches


def test_the_host_is_named_as_images_name_it():
    assert ci.oci_architecture("aarch64") == "arm64"
    assert ci.oci_architecture("x86_64") == "amd64"


def test_image_facts_from_podman():
    # podman: a bare hex Id, labels also at the top level, no vLLM version declared.
    text = json.dumps([{"Id": B, "RepoTags": ["localhost/vllm-cpu:lab"], "RepoDigests": [], "Labels": {"x": "1"},
                        "Config": {"Env": ["PATH=/usr/bin"]}}])
    facts = ci.image_facts("localhost/vllm-cpu:lab", text)
    assert facts["id"] == "sha256:" + B and facts["vllm_version"] == "" and facts["repo_digests"] == []
    assert ci.image_facts("x:y", "[]") == ci.absent_image("x:y")
    with pytest.raises(ValueError):
        ci.image_facts("x:y", "not json")


@pytest.mark.parametrize("labels, env, version", [
    ({"org.opencontainers.image.version": "22.04"}, [], ""),          # Ubuntu's, not vLLM's
    ({"ai.vllm.version": "0.33.1"}, ["VLLM_VERSION=0.32.0"], "0.33.1"),  # labels first
    ({}, ["NVIDIA_VLLM_VERSION=0.19.0+nv26.04"], "0.19.0+nv26.04"),
    ({}, ["VLLM_VERSION="], ""),
])
def test_vllm_version(labels, env, version):
    assert ci.vllm_version({"Config": {"Labels": labels, "Env": env}}) == version


def test_digest_matches_the_id_or_a_repository_digest():
    facts = ci.image_facts("vllm/vllm-openai:v0.32.0", _docker_image())
    assert ci.digest_matches("sha256:" + A, facts) is True          # the ID (docker load keeps it)
    assert ci.digest_matches(C, facts) is True                      # the registry's digest
    assert ci.digest_matches("sha256:" + B, facts) is False
    assert ci.digest_matches("", facts) is None
    assert ci.digest_matches("sha256:" + A, ci.absent_image("x:y")) is None


def test_container_facts_from_docker_and_podman():
    docker = json.dumps([{"Image": "sha256:" + A, "Config": {"Image": "vllm/vllm-openai:v0.32.0"},
                          "State": {"Running": True, "Pid": 4242}}])
    assert ci.container_facts(docker) == {"exists": True, "running": True, "pid": 4242, "image_id": "sha256:" + A,
                                          "image": "vllm/vllm-openai:v0.32.0"}
    podman = json.dumps([{"Image": B, "ImageName": "localhost/vllm-cpu:lab", "Config": {"Image": "localhost/vllm-cpu:lab"},
                          "State": {"Running": False, "Pid": 0}}])
    assert ci.container_facts(podman) == {"exists": True, "running": False, "pid": 0, "image_id": "sha256:" + B,
                                          "image": "localhost/vllm-cpu:lab"}
    assert ci.container_facts("[]") == ci.absent_container()
