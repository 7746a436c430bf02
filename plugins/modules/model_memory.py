#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_memory
short_description: The weights one rank loads and the smallest KV cache vLLM starts with, read from the model's files
version_added: 0.1.0
description:
  - Reads the model directory O(model_dir) on the host and returns the memory guard's two model figures, in GiB, where
    they are not given - so that a first deploy needs no vLLM start log.
  - "RV(weights_gib): the summed size of the checkpoint's weight files (C(*.safetensors), only those
    C(model.safetensors.index.json) names when it is there; else C(*.bin)/C(*.pt)), divided by the ranks one copy is split
    over (O(tensor_parallel_size) x O(pipeline_parallel_size); 1 for a replica), rounded up to 0.01 GiB."
  - "RV(min_kv_gib): the KV cache one full-context request (O(max_model_len) tokens) takes on one rank, in whole blocks of
    every KV cache group, as M(factory_floor.llm.kv_cache_plan) computes it from C(config.json) (vLLM 0.32's arithmetic);
    the least vLLM starts with. Rounded up to 0.01 GiB."
  - A figure given (O(weights_gib), O(min_kv_gib) - the inventory's) is returned as it is, and nothing is read for it.
  - Fails, naming the variables to set and where their numbers come from, when the directory cannot be read (a model
    hub name rather than a path, a directory missing on this host).
  - Changes nothing.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  model_dir:
    description: The model's directory on the host, as vLLM is given it (C(vllm_model); the split's C(vllm_split_model)).
    type: str
    required: true
  weights_gib:
    description: The weights one rank loads, in GiB, when the inventory sets it (C(memory_guard_weights_gib)); kept.
    type: float
  min_kv_gib:
    description: The smallest KV cache, in GiB, when the inventory sets it (C(memory_guard_min_kv_gib)); kept.
    type: float
  tensor_parallel_size:
    description: Ranks one copy's tensors are split over (C(vllm_split_tensor_parallel_size) for the split; 1 for a replica).
    type: int
    default: 1
  pipeline_parallel_size:
    description: Pipeline stages (C(vllm_split_pipeline_parallel_size)); the weights are divided by them too.
    type: int
    default: 1
  max_model_len:
    description:
      - vLLM's C(--max-model-len), in tokens (C(vllm_max_model_len)).
      - Default - the smallest length field of C(config.json), as vLLM derives it (the kv_cache_plan module's default).
    type: int
  kv_cache_dtype:
    description: vLLM's C(--kv-cache-dtype) (C(vllm_kv_cache_dtype)); V(auto) is the model's dtype, the C(fp8) kinds 1 byte.
    type: str
    default: auto
  cpu:
    description: vLLM's CPU build (its block of 128 tokens, one batch in flight) rather than CUDA's defaults.
    type: bool
    default: false
  max_num_batched_tokens:
    description: vLLM's C(--max-num-batched-tokens), in tokens; sliding-window layers keep blocks for the tokens in flight.
    type: int
  enable_prefix_caching:
    description: vLLM's C(--enable-prefix-caching) (recurrent layers keep more blocks with it).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: The split's figures per rank, from the model's files
  factory_floor.llm.model_memory:
    model_dir: /srv/models/Qwen3-Next-80B-A3B-Instruct-NVFP4
    tensor_parallel_size: 2
    max_model_len: 262144
    kv_cache_dtype: fp8
  register: figures
"""

RETURN = r"""
weights_gib:
  description: The weights one rank loads, in GiB.
  returned: success
  type: float
  sample: 23.67
weights_source:
  description: Where RV(weights_gib) came from - V(memory_guard_weights_gib), or the checkpoint files in O(model_dir).
  returned: success
  type: str
  sample: 11 checkpoint file(s) in /srv/models/Qwen3-Next-80B-A3B-Instruct-NVFP4 / 2 ranks
min_kv_gib:
  description: The smallest KV cache vLLM starts with on one rank, in GiB.
  returned: success
  type: float
  sample: 3.01
min_kv_source:
  description: Where RV(min_kv_gib) came from - V(memory_guard_min_kv_gib), or C(config.json) and the request length.
  returned: success
  type: str
max_model_len:
  description: Tokens of the full-context request RV(min_kv_gib) holds; null when RV(min_kv_gib) was given.
  returned: success
  type: int
ranks:
  description: O(tensor_parallel_size) x O(pipeline_parallel_size).
  returned: success
  type: int
reasoning:
  description: How each figure was found, one line each.
  returned: success
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _kv_cache as kv
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_memory as mmem


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_dir=dict(type="str", required=True),
            weights_gib=dict(type="float"),
            min_kv_gib=dict(type="float"),
            tensor_parallel_size=dict(type="int", default=1),
            pipeline_parallel_size=dict(type="int", default=1),
            max_model_len=dict(type="int"),
            kv_cache_dtype=dict(type="str", default="auto"),
            cpu=dict(type="bool", default=False),
            max_num_batched_tokens=dict(type="int", no_log=False),
            enable_prefix_caching=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    model_dir = params["model_dir"]
    missing = [key for key in mmem.VARIABLES if params[key] is None]
    config = size = files = None
    if missing:
        if not model_dir.startswith("/"):
            module.fail_json(msg=mmem.unreadable(model_dir, missing, "it is not a path on the host (a model hub name?)"))
        if not os.path.isdir(model_dir):
            module.fail_json(msg=mmem.unreadable(model_dir, missing, "no such directory on this host"))
        try:
            if "weights_gib" in missing:
                size, files = kv.checkpoint_bytes(model_dir, os.listdir, os.path.getsize, read_text)
            if "min_kv_gib" in missing:
                config = kv.load_config(model_dir, read_text)
        except (kv.KVPlanError, OSError) as exc:
            module.fail_json(msg=mmem.unreadable(model_dir, missing, str(exc)))
    try:
        result = mmem.model_memory(
            config, size, files, model_dir=model_dir, tensor_parallel_size=params["tensor_parallel_size"],
            pipeline_parallel_size=params["pipeline_parallel_size"], max_model_len=params["max_model_len"],
            kv_cache_dtype=params["kv_cache_dtype"], cpu=params["cpu"],
            max_num_batched_tokens=params["max_num_batched_tokens"],
            enable_prefix_caching=params["enable_prefix_caching"], weights_gib=params["weights_gib"],
            min_kv_gib=params["min_kv_gib"])
    except (kv.KVPlanError, TypeError, ValueError) as exc:
        module.fail_json(msg=mmem.unreadable(model_dir, missing, str(exc)))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
