#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tool_gate_build
short_description: Identify the model build an engine host serves, without reading its weights' content
version_added: 0.1.0
description:
  - "The build id the C(factory_floor.llm.tool_gate) role stores scores under: the SHA-256 of the build's parts as JSON
    with sorted keys - the model directory's small files (O(small_files)) by their SHA-256, its weight files
    (O(weight_files)) by name and size in bytes, O(tool_call_parser), the SHA-256 of O(chat_template) and, with
    O(container_image), the vLLM image's ID and declared vLLM version (C(image inspect); nothing is pulled)."
  - Only the model directory's own regular files count (not its subdirectories, hidden files or symbolic links).
  - "Fails when O(model_path) is an absolute path that is no directory on the host, when O(container_image) is not on
    the host, or when the container engine is missing or cannot inspect images - each message naming the variable."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  model_path:
    description:
      - The model vLLM loads (C(--model); C(tool_gate_model_path), default C(vllm_model)). A value that is not an absolute
        path (a Hugging Face id) is a part as it is, with no files read.
    type: str
    required: true
  small_files:
    description: Glob patterns of the model directory's files identified by their content (C(_tool_gate_small_files)).
    type: list
    elements: str
    default: []
  weight_files:
    description: Glob patterns of the weight files, identified by name and size only (C(_tool_gate_weight_files)).
    type: list
    elements: str
    default: []
  tool_call_parser:
    description: vLLM's C(--tool-call-parser) for this build (C(tool_gate_tool_call_parser)).
    type: str
    default: ""
  chat_template:
    description: Path on the host of the chat template vLLM is given (C(tool_gate_chat_template)); empty for none.
    type: str
    default: ""
  container_image:
    description:
      - The vLLM image that serves the build (C(tool_gate_container_image)); empty with the venv runtime, whose ids
        then hold no image.
    type: str
    default: ""
  container_engine:
    description: Path of the container engine on the host (C(/usr/bin/) and C(tool_gate_container_engine)).
    type: path
    default: /usr/bin/docker
  build_id:
    description: A name for the build that replaces the digest as its id (C(tool_gate_build_id)); the parts stay.
    type: str
    default: ""
  host:
    description: The host's inventory name, for the messages.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Identify the model build and the vLLM image that serves it
  factory_floor.llm.tool_gate_build:
    model_path: /models/Qwen3-8B
    small_files: ["*.json", "*.jinja", "*.model", "*.tiktoken", "*.txt", "*.py"]
    weight_files: ["*.safetensors", "*.gguf", "*.bin", "*.pt", "*.pth"]
    tool_call_parser: hermes
    container_image: vllm/vllm-openai:v0.32.0
    container_engine: /usr/bin/docker
    host: "{{ inventory_hostname }}"
  register: __tool_gate_build
"""

RETURN = r"""
changed:
  description: Always false; the module only reads.
  returned: always
  type: bool
  sample: false
build:
  description: The build.
  returned: success
  type: dict
  contains:
    id:
      description: O(build_id), or the SHA-256 (hex) of RV(build.parts) as JSON with sorted keys.
      type: str
      sample: 5f0c1d3c9a0b7e0f6f4b8f5c0e2c8b1e5d6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e
    parts:
      description:
        - C(model_path); C(files) (name to SHA-256); C(weights) (name to size, bytes); C(tool_call_parser);
          C(chat_template) (its SHA-256, "" for none); with an image C(image) (C(id), C(vllm_version)).
      type: dict
      sample: {model_path: /models/Qwen3-8B, files: {config.json: 9c1e...}, weights: {model.safetensors: 16384},
               tool_call_parser: hermes, chat_template: ""}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _container_image as ci
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_build as tb


def inspect_image(module, engine, image, host):
    """The image's facts (``_container_image.image_facts``); fails when it is not on the host or cannot be read."""
    if not os.access(engine, os.X_OK):
        module.fail_json(msg="The container engine %s is not on this host (or not executable): install it, or name the "
                             "engine that runs the vLLM image (vllm_container_engine: docker or podman)." % engine)
    argv = [engine, "image", "inspect", image]
    rc, out, err = module.run_command(argv)
    if rc != 0 and not (ci.is_absent(err) or ci.is_absent(out)):
        module.fail_json(msg="Could not inspect image %s: %s failed (rc %s): %s. Is the %s daemon running?" % (
            image, " ".join(argv), rc, (err or out).strip()[:500], engine.rsplit("/", 1)[-1]))
    try:
        facts = ci.image_facts(image, out) if rc == 0 else ci.absent_image(image)
    except ValueError as exc:
        module.fail_json(msg="%s image inspect %s printed something else than JSON: %s" % (engine, image, exc))
    if not facts["present"]:
        module.fail_json(msg=tb.image_missing(image, host, engine))
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="str", required=True),
            small_files=dict(type="list", elements="str", default=[]),
            weight_files=dict(type="list", elements="str", default=[]),
            tool_call_parser=dict(type="str", default=""),
            chat_template=dict(type="str", default=""),
            container_image=dict(type="str", default=""),
            container_engine=dict(type="path", default="/usr/bin/docker"),
            build_id=dict(type="str", default=""),
            host=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = params["model_path"]
    if path.startswith("/") and not tb.is_directory(path):
        module.fail_json(msg=tb.not_a_directory(path, params["host"]))
    parts = tb.model_parts(path, params["small_files"], params["weight_files"], params["tool_call_parser"],
                           tb.template_checksum(params["chat_template"]))
    image = None
    if params["container_image"]:
        image = inspect_image(module, params["container_engine"], params["container_image"], params["host"])
    module.exit_json(changed=False, build=tb.build(parts, image, params["build_id"]))


if __name__ == "__main__":
    main()
