# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool gate's build id (factory_floor.llm.tool_gate_build): what identifies a model build without reading its
weights' content. Pure logic, standard library only; runs on the engine host.

A build is its model directory's small files by checksum (config, tokenizer, chat templates), its weight files by
name and size, the tool-call parser, the chat template vLLM is given and, with the container runtime, the vLLM
image's ID and version. Its id is the SHA-256 of those parts as JSON with sorted keys - the same text as Ansible's
``to_json(sort_keys=true) | hash('sha256')``, so the ids (and the scores stored under them) stay what they were.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat


def is_directory(path):
    """Whether ``path`` is a directory itself (a symbolic link to one is not, as ``stat`` without ``follow`` sees)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def regular_files(directory, patterns):
    """``{name: lstat}`` of the regular files directly in ``directory`` (no hidden file, no symbolic link) whose name
    matches one of the glob ``patterns`` (any name without one), as ``ansible.builtin.find`` without ``recurse`` lists them."""
    found = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith(".") or (patterns and not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)):
            continue
        try:
            info = os.lstat(os.path.join(directory, name))
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found[name] = info
    return found


def template_checksum(path):
    """The SHA-256 of the chat template at ``path``, or "" when there is none (no path, no regular readable file)."""
    if not path:
        return ""
    try:
        info = os.lstat(path)
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode) or not os.access(path, os.R_OK):
        return ""
    return sha256_file(path)


def model_parts(model_path, small_patterns, weight_patterns, tool_call_parser="", chat_template_checksum=""):
    """The parts of a build that the model directory holds. ``model_path`` that is no absolute path (a Hugging Face
    id) has no files to read here."""
    files, weights = {}, {}
    if model_path.startswith("/"):
        for name in regular_files(model_path, small_patterns):
            files[name] = sha256_file(os.path.join(model_path, name))
        weights = {name: info.st_size for name, info in regular_files(model_path, weight_patterns).items()}
    return {"model_path": model_path, "files": files, "weights": weights, "tool_call_parser": tool_call_parser,
            "chat_template": chat_template_checksum}


def build(parts, image=None, build_id=""):
    """``{id, parts}``: ``image`` (the vLLM image's ``id`` and ``vllm_version``, container runtime only, so the venv
    runtime's ids stay) joins the parts; ``build_id``, when given, names the build instead of the digest."""
    if image is not None:
        parts = dict(parts, image={"id": image["id"], "vllm_version": image["vllm_version"]})
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()
    return {"id": build_id or digest, "parts": parts}


def not_a_directory(model_path, host):
    return ("tool_gate_model_path=%s is not a directory on %s; the gate identifies a build by the files in the model "
            "directory vLLM loads (--model)." % (model_path, host))


def image_missing(image, host, engine):
    return ("tool_gate_container_image=%s is not on %s (%s image inspect finds none); the gate identifies a build by "
            "the ID of the vLLM image that serves it." % (image, host, engine))
