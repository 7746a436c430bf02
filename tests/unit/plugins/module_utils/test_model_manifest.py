# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_model_manifest.py and the model_manifest_diff filter."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.filter.model_manifest_diff import model_manifest_diff
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_manifest as mm


def _model(root, shard=b"w" * 1000, config=b'{"model_type": "qwen3_next"}', extra=None):
    os.makedirs(root, exist_ok=True)
    files = {"config.json": config, "model.safetensors.index.json": b'{"weight_map": {}}',
             "model-00001-of-00002.safetensors": shard, "model-00002-of-00002.safetensors": b"v" * 10,
             "tokenizer.json": b"{}", ".cache/huggingface/download/x.lock": b"lock " + root.encode()}
    files.update(extra or {})
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    return root


def test_the_manifest_lists_sizes_and_hashes_what_is_not_a_shard(tmp_path):
    manifest = mm.build(_model(str(tmp_path / "m")))
    assert manifest["files"]["model-00001-of-00002.safetensors"] == 1000
    assert ".cache/huggingface/download/x.lock" not in manifest["files"]       # differs between copies by nature
    assert sorted(manifest["sha256"]) == ["config.json", "model.safetensors.index.json", "tokenizer.json"]
    assert manifest["sha256"]["config.json"] == hashlib.sha256(b'{"model_type": "qwen3_next"}').hexdigest()
    assert (manifest["weights_bytes"], manifest["weights_files"]) == (1010, 2)
    assert len(mm.build(str(tmp_path / "m"), checksum="all")["sha256"]) == 5
    assert mm.build(str(tmp_path / "m"), checksum="none")["sha256"] == {}
    with pytest.raises(mm.ManifestError):
        mm.build(str(tmp_path / "absent"))


def test_the_same_model_on_both_hosts(tmp_path):
    a, b = mm.build(_model(str(tmp_path / "a"))), mm.build(_model(str(tmp_path / "b")))
    assert mm.compare({"spark-a": a, "spark-b": b}) == []
    assert model_manifest_diff({"spark-a": a, "spark-b": b})["ok"]


@pytest.mark.parametrize("b_changes, what", [
    pytest.param({"shard": b"w" * 999}, "model-00001-of-00002.safetensors differs: spark-a 1,000 bytes; spark-b 999 bytes",
                 id="a shard copied half-way"),
    pytest.param({"config": b'{"model_type": "qwen3_nexx"}'}, "config.json differs: spark-a sha256 ",
                 id="another config"),
    pytest.param({"extra": {"chat_template.jinja": b"{{ x }}"}}, "chat_template.jinja differs: spark-a missing; spark-b 7 bytes",
                 id="a file on one host only"),
])
def test_each_difference_names_the_file_and_each_hosts_copy(tmp_path, b_changes, what):
    a = mm.build(_model(str(tmp_path / "a")))
    b = mm.build(_model(str(tmp_path / "b"), **b_changes))
    problems = mm.compare({"spark-a": a, "spark-b": b})
    assert any(what in p["what"] and p["host"] == "spark-a and spark-b" and "rsync" in p["fix"] for p in problems), problems


def test_a_shard_with_other_bytes_is_found_only_when_shards_are_hashed(tmp_path):
    a = _model(str(tmp_path / "a"), shard=b"w" * 1000)
    b = _model(str(tmp_path / "b"), shard=b"x" * 1000)
    assert mm.compare({"spark-a": mm.build(a), "spark-b": mm.build(b)}) == []
    found = mm.compare({"spark-a": mm.build(a, "all"), "spark-b": mm.build(b, "all")})
    assert found and "model-00001-of-00002.safetensors differs" in found[0]["what"]


def test_a_host_that_could_not_list_it_is_named_and_a_skipped_one_left_out(tmp_path):
    a = mm.build(_model(str(tmp_path / "a")))
    diff = model_manifest_diff({"spark-a": a, "spark-b": {"failed": True, "msg": "Could not list /models/x"}})
    assert not diff["ok"] and diff["problems"][0]["host"] == "spark-b"
    assert "Could not list /models/x" in diff["problems"][0]["what"]
    assert diff["message"].startswith("The hosts do not hold the same model. Nothing was changed.\n- spark-b: ")
    assert model_manifest_diff({"spark-a": a, "spark-b": {"skipped": True}})["ok"]


def test_the_filesystem_of_a_path_not_there_yet_is_read_at_its_nearest_directory(tmp_path):
    import os
    found = mm.filesystem(str(tmp_path / "models" / "not-yet"))
    assert found["path"] == str(tmp_path)
    stats = os.statvfs(str(tmp_path))
    assert abs(found["bytes_available"] - stats.f_bavail * stats.f_frsize) < 64 * 1024 * 1024  # other writers meanwhile


def test_the_filesystem_reading_is_statvfs_of_that_directory():
    seen = []

    class Stats:
        f_bavail, f_frsize = 10, 4096

    def statvfs(path):
        seen.append(path)
        return Stats()

    found = mm.filesystem("/models/new/copy", exists=lambda p: p in ("/models", "/"), statvfs=statvfs)
    assert found == {"path": "/models", "bytes_available": 40960} and seen == ["/models"]


def test_by_path_compares_each_model_directory_on_its_own(tmp_path):
    # A group move: the pair lists the split's model, the replica its own; each directory is compared on its own.
    small, big = mm.build(_model(str(tmp_path / "small"))), mm.build(_model(str(tmp_path / "big")))
    big_changed = mm.build(_model(str(tmp_path / "big2")))
    small, big, big_changed = (dict(small, path="/m/small"), dict(big, path="/m/big"), dict(big_changed, path="/m/big"))
    assert model_manifest_diff({"spark-a": big, "spark-b": big, "spark-c": small}, by_path=True)["ok"]
    assert model_manifest_diff({"spark-a": big, "spark-b": big_changed, "spark-c": small}, by_path=True)["ok"] is \
        model_manifest_diff({"spark-a": big, "spark-b": big_changed}, by_path=True)["ok"]
    failed = model_manifest_diff({"spark-a": big, "spark-c": small, "spark-b": {"failed": True, "msg": "no such dir"}},
                                 by_path=True)
    assert not failed["ok"] and "spark-b" in failed["message"]
