#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_manifest
short_description: A model directory's manifest - every file's name and size, the sha256 of its configuration, optionally of every shard
version_added: 0.1.0
description:
  - Lists the model directory O(path) on the host - every file's relative name and size in bytes, the sha256 of every
    file that is not a weight shard (C(config.json), C(model.safetensors.index.json), the tokenizer, the chat template)
    and, with O(checksum) C(all), of every shard too - and what its C(config.json) says of the model (its type, layers,
    whether it is hybrid, its MTP layers).
  - Compare the hosts' manifests on the controller with the C(factory_floor.llm.model_manifest_diff) filter. The
    C(vllm) role's C(model_check) entry point does that before anything stops, so that the split's two ranks, and the
    replicas behind one served name, load the same weights.
  - Hidden files and directories (a hub download's C(.cache/), C(.git)) are left out; they differ between copies of one model.
  - Changes nothing.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  path:
    description: The model directory (C(vllm_model), the split's C(vllm_split_model)).
    type: path
    required: true
  checksum:
    description:
      - C(metadata) hashes every file that is not a weight shard (C(*.safetensors), C(*.bin), C(*.pt), C(*.gguf)), up to
        256 MiB each - seconds; C(all) hashes the shards too - minutes for tens of GB (about 1 GB/s); C(none) lists names
        and sizes only.
    type: str
    choices: [metadata, all, none]
    default: metadata
"""

EXAMPLES = r"""
- name: List this host's copy of the model
  factory_floor.llm.model_manifest:
    path: /models/Qwen3-Next-80B-A3B-Instruct-NVFP4
  register: manifest

- name: Refuse copies that differ between the hosts
  ansible.builtin.fail:
    msg: "{{ diff.message }}"
  vars:
    diff: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'manifest'))) | factory_floor.llm.model_manifest_diff }}"
  when: not diff.ok
  run_once: true
"""

RETURN = r"""
path:
  description: O(path).
  returned: always
  type: str
files:
  description: Every file's relative name and size in bytes.
  returned: always
  type: dict
  sample: {config.json: 15500, model.safetensors.index.json: 118000, model-00001-of-00011.safetensors: 4998000000}
sha256:
  description: The sha256 of the files hashed (see O(checksum)), by name.
  returned: always
  type: dict
weights_bytes:
  description: The weight shards' total size, bytes.
  returned: always
  type: int
weights_files:
  description: How many weight shards.
  returned: always
  type: int
checksum:
  description: O(checksum).
  returned: always
  type: str
model:
  description:
    - From C(config.json) - C(model_type), C(architectures), C(layers), C(recurrent_layers) (Gated DeltaNet, Mamba...),
      C(hybrid) (some layers keep a recurrent state; null when the layers cannot be read), C(attention_heads), C(mtp_layers),
      C(vocab_size) (token ids the model knows, a count of tokens; null when the config names none).
  returned: always
  type: dict
  sample: {model_type: qwen3_next, layers: 48, recurrent_layers: 36, hybrid: true, attention_heads: 16, mtp_layers: 1,
           vocab_size: 151936}
summary:
  description: One line - files, weights in GiB, how many were hashed.
  returned: always
  type: str
filesystem:
  description:
    - The filesystem that holds O(path) (or would hold it), read with statvfs at its nearest existing directory -
      C(path) (that directory) and C(bytes_available) (free bytes for an unprivileged writer, C(f_bavail)).
    - Also returned when the module fails because O(path) is missing, so a copy's target can be judged before it exists.
    - Null when no directory above O(path) can be read.
  returned: always
  type: dict
  sample: {path: /models, bytes_available: 1844674407370}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_config as mc
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_manifest as mm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            checksum=dict(type="str", choices=list(mm.CHECKSUMS), default="metadata"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        filesystem = mm.filesystem(path)
    except OSError:
        filesystem = None
    try:
        manifest = mm.build(path, module.params["checksum"])
    except (mm.ManifestError, OSError) as exc:
        module.fail_json(msg="Could not list the model directory %s: %s. Copy the model there, or set the model's "
                             "path (vllm_model, vllm_split_model) to where it is." % (path, exc), filesystem=filesystem)
    model = mc.summary({})
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            model = mc.summary(json.load(handle))
    except (OSError, ValueError):
        pass
    module.exit_json(changed=False, model=model, summary=mm.describe(manifest), filesystem=filesystem, **manifest)


if __name__ == "__main__":
    main()
