# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool gate's build id (``_tool_gate_build``): which files count, the id as the role's Jinja computed it
(``to_json(sort_keys=true) | hash('sha256')``: stored scores stay under their ids), and the refusals' words."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible.plugins.filter.core import get_hash, to_json

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_build as tb

SMALL = ["*.json", "*.jinja", "*.model", "*.tiktoken", "*.txt", "*.py"]
WEIGHTS = ["*.safetensors", "*.gguf", "*.bin", "*.pt", "*.pth"]


@pytest.fixture
def model(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (tmp_path / "tokenizer.model").write_bytes(b"\x00tok")
    (tmp_path / "README.txt").write_text("é\n", encoding="utf-8")
    (tmp_path / "model-00001.safetensors").write_bytes(b"x" * 100)
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "config.json")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.json").write_text("{}")
    (tmp_path / "notes.md").write_text("not a pattern")
    return tmp_path


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_only_the_directorys_own_regular_files_that_match_count(model):
    parts = tb.model_parts(str(model), SMALL, WEIGHTS, "hermes", "")
    assert parts == {"model_path": str(model), "tool_call_parser": "hermes", "chat_template": "",
                     "files": {"config.json": sha(b'{"architectures": ["Qwen3ForCausalLM"]}'),
                               "tokenizer.model": sha(b"\x00tok"), "README.txt": sha("é\n".encode("utf-8"))},
                     "weights": {"model-00001.safetensors": 100}}


def test_a_model_that_is_no_path_has_no_files_read():
    assert tb.model_parts("Qwen/Qwen3-8B", SMALL, WEIGHTS) == {
        "model_path": "Qwen/Qwen3-8B", "files": {}, "weights": {}, "tool_call_parser": "", "chat_template": ""}


@pytest.mark.parametrize("image", [None, {"id": "sha256:" + "a" * 64, "vllm_version": "0.32.0", "present": True}])
def test_the_id_is_the_one_the_roles_jinja_computed(model, image):
    parts = tb.model_parts(str(model), SMALL, WEIGHTS, "hermes", sha(b"{{ messages }}"))
    built = tb.build(parts, image)
    expected_parts = dict(parts, image={"id": image["id"], "vllm_version": image["vllm_version"]}) if image else parts
    assert built["parts"] == expected_parts
    assert built["id"] == get_hash(to_json(expected_parts, sort_keys=True), "sha256")


def test_a_named_build_keeps_its_parts():
    built = tb.build({"model_path": "m"}, build_id="release-7")
    assert built == {"id": "release-7", "parts": {"model_path": "m"}}


def test_the_chat_template_counts_by_content_when_it_is_a_readable_file(tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages }}")
    (tmp_path / "link.jinja").symlink_to(template)
    assert tb.template_checksum(str(template)) == sha(b"{{ messages }}")
    assert tb.template_checksum("") == ""
    assert tb.template_checksum(str(tmp_path / "none.jinja")) == ""
    assert tb.template_checksum(str(tmp_path / "link.jinja")) == ""


def test_a_directory_is_one_itself(model):
    os.symlink(str(model), str(model) + "-link")
    assert tb.is_directory(str(model))
    assert not tb.is_directory(str(model) + "-link")
    assert not tb.is_directory(str(model / "config.json"))
    assert not tb.is_directory(str(model / "none"))


def test_the_refusals_name_the_variable():
    assert tb.not_a_directory("/models/none", "spark-a") == (
        "tool_gate_model_path=/models/none is not a directory on spark-a; the gate identifies a build by the files in "
        "the model directory vLLM loads (--model).")
    assert tb.image_missing("vllm/vllm-openai:v0.32.0", "spark-a", "/usr/bin/docker") == (
        "tool_gate_container_image=vllm/vllm-openai:v0.32.0 is not on spark-a (/usr/bin/docker image inspect finds "
        "none); the gate identifies a build by the ID of the vLLM image that serves it.")
