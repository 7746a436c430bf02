#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kv_cache_plan
short_description: Size a model's vLLM KV cache and advise replicas or split
version_added: 0.1.0
description:
  - Computes how many tokens of KV cache vLLM will have for a model on one host
    (O(tensor_parallel_size) 1, one copy per host) and split over hosts with tensor parallelism,
    how many full-context requests that is, and advises a topology by the rule from the operations
    report - run one copy per machine if the model and the cache you need fit on one; split only
    when they do not.
  - "The rules are vLLM 0.32.0's (C(vllm/v1/core/kv_cache_utils.py) C(get_kv_cache_groups),
    C(get_kv_cache_config_from_groups), C(get_max_concurrency_for_kv_cache_config); the spec classes of
    C(vllm/v1/kv_cache_interface.py); C(vllm/platforms/interface.py) C(_align_hybrid_block_size)). Bytes per token
    and layer: K and V x KV heads per rank x head_dim x dtype bytes; KV heads per rank = max(1,
    C(num_key_value_heads) // tensor parallel size); for MLA models (C(kv_lora_rank)) (C(kv_lora_rank) +
    C(qk_rope_head_dim)) x dtype bytes, without the factor 2 and not sharded."
  - "Layers are grouped as vLLM's hybrid KV cache manager groups them: one bucket per kind (full attention, each
    sliding window, chunked local attention, a recurrent state), cut into groups of equal size (the smallest
    bucket's, or the largest when under 1.5 x the smallest). A block holds one page (O(block_size) tokens) of every
    layer of the widest group; num_blocks = pool // (layers per group x page)."
  - "The figure is vLLM's own: int(num_blocks / blocks one request needs x O(max_model_len)) tokens (its
    C(KV cache size: N tokens, Maximum concurrency ...) line). A full-context request takes cdiv(max_model_len,
    block) blocks per full-attention group, cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1 per
    sliding-window group (in-flight tokens = O(max_num_batched_tokens) x batches in flight: 2 with async scheduling,
    vLLM's GPU default, 1 on CPU), and one block per recurrent-state group."
  - "Layer types supported: C(layer_types) (full, sliding, chunked, linear attention, Mamba),
    C(layers_block_type), C(hybrid_override_pattern) (Nemotron-H), C(full_attention_interval)
    (Qwen3-Next), C(attn_layer_period)/C(attn_layer_offset) (Jamba), C(sliding_window_pattern) (Gemma 3), and
    C(sliding_window) alone (Mistral: every layer). Recurrent states are sized for Qwen3-Next's gated delta net and
    Mamba-2 (Nemotron-H); vLLM then raises the attention block size until a page holds the state (a multiple of
    the kernel block) and pads the state to it. Other recurrent layers are left out and the figure is an upper
    bound (RV(reasoning) says so)."
  - Validated to the token against vLLM 0.32.0's CPU build on the lab's generated models (Gemma 3 style sliding
    window, Mistral sliding window, Qwen3-Next and Nemotron-H hybrids; see the collection's
    C(tests/unit/plugins/module_utils/fixtures/kv_cache)).
  - The KV pool per rank is O(kv_cache_space_gib) when given (vLLM on CPU, C(VLLM_CPU_KVCACHE_SPACE); vLLM's CPU
    defaults then apply - block 128, 2,048 x tensor parallel size batched tokens, one batch in flight), otherwise
    ceil(O(device_total_gib) x O(gpu_memory_utilization)) - O(weights_gib) / tensor parallel size -
    O(activation_gib) - O(cuda_graph_gib) - O(non_torch_gib), as vLLM computes it on a GPU (the same figures as
    M(factory_floor.llm.gpu_memory_utilization)).
  - The module only reads (C(config.json), the checkpoint's file sizes); it never changes anything.
  - "Its action plugin reads the site where the task does not say: with none of O(model_dir), O(model_config) and
    O(per_host_kv_tokens), O(model_dir) is the model an engine group serves (C(vllm_split_model), else
    C(vllm_model); a directory) and O(max_model_len) C(vllm_max_model_len); with a model, O(engine_hosts) is the
    number of hosts in C(site_engine_group) (C(gb10)); O(kv_cache_space_gib) is C(vllm_env.VLLM_CPU_KVCACHE_SPACE)
    where set (vLLM's CPU build sizes its pool by it, whatever the share), else O(gpu_memory_utilization)
    C(vllm_gpu_memory_utilization) where set; O(served_model_name) is
    C(vllm_served_model_name); O(kv_cache_dtype) C(vllm_kv_cache_dtype), O(max_num_batched_tokens)
    C(vllm_max_num_batched_tokens), O(tensor_parallel_size) C(vllm_split_tensor_parallel_size), O(device_total_gib),
    O(activation_gib), O(cuda_graph_gib) and O(non_torch_gib)
    the memory guard's C(memory_guard_*) of the same name, where set; and O(sweeps) are the concurrency sweeps saved on
    the controller in O(sweep_dir). RV(site_read) says what it read."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  model_dir:
    description:
      - Directory of the model on the target, as passed to vLLM. C(config.json) is read from it, and
        O(weights_gib) is measured from the checkpoint's file sizes when not given (the C(*.safetensors)
        files, only those named by C(model.safetensors.index.json) when present; else C(*.bin)/C(*.pt)).
      - Mutually exclusive with O(model_config).
    type: path
  model_config:
    description:
      - The model's C(config.json) as a dictionary, instead of reading O(model_dir).
    type: dict
  kv_cache_dtype:
    description:
      - vLLM's C(--kv-cache-dtype). V(auto) is the model's dtype (C(torch_dtype) in C(config.json);
        float32 checkpoints are served in 16 bit). V(fp8), V(fp8_e4m3) and V(fp8_e5m2) take 1 byte per
        element, V(bfloat16) and V(float16) 2.
      - Checkpoints whose quantisation config asks for an FP8 KV cache are not detected; pass V(fp8).
    type: str
    choices: [auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2]
    default: auto
  gpu_memory_utilization:
    description:
      - vLLM's C(--gpu-memory-utilization), a fraction 0-1 of O(device_total_gib), for example from
        M(factory_floor.llm.gpu_memory_utilization).
      - Required unless O(kv_cache_space_gib) or the token overrides are given.
    type: float
  device_total_gib:
    description:
      - Total device memory as CUDA reports it, in GiB. The default is what an NVIDIA GB10 reports.
    type: float
    default: 121.7
  weights_gib:
    description:
      - Memory of the model's weights (whole model, not per rank), in GiB.
      - Default - the summed size of the checkpoint files in O(model_dir).
    type: float
  activation_gib:
    description:
      - vLLM's peak activation per rank inside its share, in GiB (speculative-decoding (MTP) buffers included).
    type: float
    default: 2.0
  cuda_graph_gib:
    description:
      - CUDA graph memory per rank that vLLM 0.32 deducts from the KV cache, in GiB (its C(Estimated CUDA graph
        memory) line); V(0) with C(--enforce-eager). The default is a published GB10 start's figure.
    type: float
    default: 1.7
  non_torch_gib:
    description:
      - Non-torch memory per rank inside vLLM's share (NCCL buffers), in GiB; a margin by default.
    type: float
    default: 0.5
  max_num_batched_tokens:
    description:
      - vLLM's C(--max-num-batched-tokens), in tokens - pass the engines' C(vllm_max_num_batched_tokens). Sliding-window
        layers keep blocks for the tokens in flight.
      - Default - vLLM 0.32's for its OpenAI server - 8,192 on a GPU of at least 70 GiB, 2,048 x tensor parallel size
        on CPU (with O(kv_cache_space_gib)). On GB10 vLLM itself falls back to 2,048 (it cannot read the unified
        memory's size); the example inventories set C(vllm_max_num_batched_tokens) to 8,192, the plan's default.
    type: int
  mamba_ssm_cache_dtype:
    description:
      - vLLM's C(--mamba-ssm-cache-dtype) for models with a recurrent state. V(auto) is vLLM's - the model's dtype,
        for Nemotron-H the config's C(mamba_ssm_cache_dtype) or V(float32).
      - vLLM's CPU build on x86 with AVX512-BF16 uses V(float32) (it logs C(Reset SSM cache type to float32)); give
        it for such hosts.
    type: str
    choices: [auto, float32, bfloat16, float16]
    default: auto
  enable_prefix_caching:
    description:
      - vLLM's C(--enable-prefix-caching) (on by default in vLLM 0.32). With it a recurrent (Mamba, gated delta net)
        layer holds 2 blocks per request (C(mamba_cache_mode) C(align)), Mamba-2 layers one more for prefill
        checkpoints; without it, 1.
    type: bool
    default: true
  max_model_len:
    description:
      - vLLM's C(--max-model-len), in tokens; one full-context request is this many tokens.
      - Default - the smallest of C(max_position_embeddings) and the other length fields of C(config.json),
        as vLLM derives it.
    type: int
  tensor_parallel_size:
    description:
      - Tensor parallel size of the split topology (one rank per host, so also the number of hosts).
        One copy per host always uses 1.
    type: int
    default: 2
  engine_hosts:
    description:
      - The site's engine host count. With it (and a model config), RV(groupings) lists every way to cut that many
        hosts into engine groups whose sizes the model's heads split over, with each group's KV cache.
      - Default - the action plugin counts the hosts of C(site_engine_group) (C(gb10)) when the plan has a model
        config and no O(per_host_kv_tokens); otherwise no RV(groupings).
    type: int
  sweeps:
    description:
      - Saved concurrency sweeps (C(playbooks/tune-concurrency.yml)'s C(<tune_output_dir>/<host>.json), one dict
        each, C(source) naming where it was read), matched to RV(groupings) by the C(tensor_parallel_size) the sweep
        ran with - a group of that many hosts. A sweep saved without C(tensor_parallel_size) (before sweeps recorded
        it) or of another served model than O(served_model_name) is not used (RV(reasoning) says which and why).
      - Default - the action plugin reads every C(*.json) in O(sweep_dir) on the controller; none, RV(groupings)
        says C(not measured).
    type: list
    elements: dict
  served_model_name:
    description:
      - The served model name the sweeps must have measured (vLLM's C(--served-model-name)). Default - the action
        plugin reads C(vllm_served_model_name); unset, every sweep counts.
    type: str
  sweep_dir:
    description:
      - Read by the action plugin on the controller, never passed to the module - the directory of saved sweeps
        read into O(sweeps) when the task gives none.
      - Default - C(tune_output_dir) as the task sees it, else C(build/tune-concurrency) under the directory
        C(ansible-playbook) runs in (the sweep's own default).
    type: path
  need_tokens:
    description:
      - The KV cache you need, in tokens (all concurrent requests together).
      - Mutually exclusive with O(need_full_context_requests). Without either, one full-context request.
    type: int
  need_full_context_requests:
    description:
      - The KV cache you need, as a number of concurrent full-context requests (x O(max_model_len) tokens).
    type: float
  kv_cache_space_gib:
    description:
      - The KV pool per rank stated directly, in GiB, instead of computing it from
        O(gpu_memory_utilization). vLLM on CPU takes it from C(VLLM_CPU_KVCACHE_SPACE) (the lab does this).
    type: float
  block_size:
    description:
      - vLLM's C(--block-size), in tokens per block. vLLM allocates KV cache in whole blocks.
      - Default - vLLM 0.32's, 16 on CUDA and 128 on CPU (with O(kv_cache_space_gib)); hybrids with a recurrent
        state raise it (RV(block_size)).
    type: int
  per_host_kv_tokens:
    description:
      - What-if - the KV tokens each host holds with one copy per host (for example read from vLLM's
        C(KV cache size) log lines), instead of computing them. The smallest decides.
    type: list
    elements: int
  split_kv_tokens:
    description:
      - What-if - the KV tokens of the split topology, instead of computing them.
    type: int
notes:
  - "vLLM's own start-up log prints the figure this module predicts, for example
    C(KV cache size: 1,048,576 tokens); compare them after a start
    (M(factory_floor.llm.gpu_memory_utilization) reads it from the engine's log)."
  - Not modelled - speculative decoding's extra retained sliding-window tokens and state blocks, decode context
    parallelism, C(--num-gpu-blocks-override), KV connectors and layers whose pages vLLM pads to unequal sizes.
seealso:
  - module: factory_floor.llm.gpu_memory_utilization
"""

EXAMPLES = r"""
- name: Does one GB10 hold the model and two full-context requests?
  factory_floor.llm.kv_cache_plan:
    model_dir: /srv/models/current
    kv_cache_dtype: fp8
    gpu_memory_utilization: "{{ __vllm_memory.gpu_memory_utilization }}"
    activation_gib: 12.5
    max_model_len: 262144
    need_full_context_requests: 2
  register: __kv_plan

- name: Stop when neither topology holds the cache
  ansible.builtin.assert:
    that: __kv_plan.topology != 'none'
    fail_msg: "{{ __kv_plan.reasoning | join('\n') }}"

- name: The lab on vLLM-CPU, 1 GiB of KV space
  factory_floor.llm.kv_cache_plan:
    model_dir: /opt/models/SmolLM2-135M-Instruct
    kv_cache_space_gib: 1

- name: The site's groupings - model, host count, context and saved sweeps read from the inventory
  factory_floor.llm.kv_cache_plan:
    gpu_memory_utilization: "{{ __memory_guard_plan.gpu_memory_utilization }}"
  register: __kv_plan
  run_once: true

- name: One row per grouping
  ansible.builtin.debug:
    msg: "{{ __kv_plan.groupings_table }}"
  run_once: true

- name: What-if with the numbers from the logs
  factory_floor.llm.kv_cache_plan:
    per_host_kv_tokens: [760000, 1080000]
    split_kv_tokens: 3100000
    max_model_len: 262144
    need_full_context_requests: 2
"""

RETURN = r"""
topology:
  description:
    - V(replicas) when one host holds the KV tokens needed (run one copy per host), V(split) when only
      the split does, V(none) when neither does.
  returned: success
  type: str
  sample: replicas
need_tokens:
  description: The KV cache needed, in tokens.
  returned: success
  type: int
  sample: 524288
max_model_len:
  description: Tokens in one full-context request.
  returned: success
  type: int
  sample: 262144
kv_cache_dtype:
  description: The KV cache dtype used, with V(auto) resolved; null without a model config.
  returned: success
  type: str
  sample: fp8
dtype_bytes:
  description: Bytes per KV element; null without a model config.
  returned: success
  type: int
  sample: 1
block_size:
  description: Tokens per KV cache block with one copy per host (raised for hybrids with a recurrent state).
  returned: success
  type: int
  sample: 16
max_num_batched_tokens:
  description: vLLM's C(max_num_batched_tokens) the sliding windows were sized with, in tokens; null without a model config.
  returned: success
  type: int
  sample: 8192
bytes_per_token:
  description: KV cache bytes one token takes over all counted layers with one copy per host (tp=1); null without a model config.
  returned: success
  type: int
  sample: 12288
weights_gib:
  description: The whole model's weights used, in GiB; null when not needed.
  returned: success
  type: float
  sample: 71.0
weights_source:
  description: Where RV(weights_gib) came from - V(weights_gib), or the checkpoint files in O(model_dir).
  returned: success
  type: str
  sample: "weights_gib"
per_host:
  description: One copy per host (tensor parallel size 1).
  returned: success
  type: dict
  contains:
    kv_tokens:
      description: KV cache tokens of one copy (the smallest host when several are given), as vLLM logs it.
      type: int
      sample: 998416
    per_host_kv_tokens:
      description: KV cache tokens per host.
      type: list
      elements: int
      sample: [998416]
    kv_cache_gib:
      description: The KV pool, in GiB; null when the tokens were given.
      type: float
      sample: 11.43
    num_blocks:
      description: KV cache blocks; null when the tokens were given.
      type: int
      sample: 62401
    max_concurrency:
      description: Full-context requests the blocks hold, as vLLM logs it (C(Maximum concurrency)); null when given.
      type: float
      sample: 3.81
    block_size:
      description: Tokens per block on this side.
      type: int
      sample: 16
    max_num_batched_tokens:
      description: The C(max_num_batched_tokens) used on this side, in tokens.
      type: int
      sample: 8192
    groups:
      description:
        - vLLM's KV cache groups on this side - C(kind) (V(full), V(sliding:<window>), V(chunked:<size>), V(state)),
          C(layers), C(block_size) and C(blocks_per_request) (blocks a full-context request takes); null when given.
      type: list
      elements: dict
      sample: [{"kind": "full", "layers": 12, "block_size": 16, "blocks_per_request": 16384}]
    full_context_requests:
      description: RV(per_host.kv_tokens) / RV(max_model_len), rounded down to 0.01.
      type: float
      sample: 3.8
    source:
      description: V(gpu_memory_utilization), V(kv_cache_space_gib) or V(given).
      type: str
      sample: gpu_memory_utilization
    tensor_parallel_size:
      description: Always 1.
      type: int
      sample: 1
split:
  description:
    - The split topology (O(tensor_parallel_size) ranks, one per host), with the same keys as
      RV(per_host); sizes are per rank, tokens are the whole model's.
    - Null when neither a model config nor O(split_kv_tokens) is given.
  returned: success
  type: dict
  sample:
    kv_tokens: 4100448
    per_host_kv_tokens: [4100448]
    kv_cache_gib: 46.93
    num_blocks: 256278
    full_context_requests: 15.64
    source: gpu_memory_utilization
    tensor_parallel_size: 2
layout:
  description: What C(config.json) says about the KV cache; null without a model config.
  returned: success
  type: dict
  contains:
    mla:
      description: Multi-head latent attention (DeepSeek).
      type: bool
      sample: false
    num_layers:
      description: Decoder layers.
      type: int
      sample: 48
    kv_cache_layers:
      description: Layers with a per-token KV cache (counted).
      type: int
      sample: 12
    layer_counts:
      description: Counted layers by kind (V(full), V(sliding:<window>), V(chunked:<size>)).
      type: dict
      sample: {"full": 12}
    skipped_layers:
      description: Layers without a per-token KV cache (linear attention, Mamba, MLP-only).
      type: int
      sample: 36
    recurrent_layers:
      description: Of those, layers with a recurrent state (linear attention, Mamba), one block per request each.
      type: int
      sample: 36
    layer_types_source:
      description: The C(config.json) field the layer kinds came from.
      type: str
      sample: full_attention_interval=4
    num_kv_heads:
      description: KV heads in the whole model (1 for MLA).
      type: int
      sample: 2
    head_dim:
      description: Elements per KV head (the latent size for MLA).
      type: int
      sample: 256
reasoning:
  description: The computation, one line per step, with every number.
  returned: success
  type: list
  elements: str
  sample:
    - "need: 2 full-context request(s) x 262,144 = 524,288 tokens"
    - "one host holds 998,416 >= 524,288 tokens needed: run one copy per host (replicas)"
groupings:
  description:
    - With O(engine_hosts) - every grouping of that many hosts into engine groups of the sizes the model's attention
      and key/value heads split evenly over (vLLM's rule), most groups first. A group of one serves a replica, a
      larger group one model with tensor parallelism over its hosts.
    - Null without O(engine_hosts).
  returned: success
  type: list
  elements: dict
  contains:
    sizes:
      description: The hosts in each group, largest first.
      type: list
      elements: int
      sample: [2, 1, 1]
    groups:
      description: How many groups (the proxy's members).
      type: int
      sample: 3
    kv_tokens:
      description: Each group's KV cache, in tokens (the whole model's, over its ranks).
      type: list
      elements: int
      sample: [3100000, 998416, 998416]
    full_context_requests:
      description: Each group's KV tokens / RV(max_model_len), rounded down to 0.01.
      type: list
      elements: float
      sample: [11.82, 3.8, 3.8]
    total_full_context_requests:
      description: Their sum, the site's full-context requests at once.
      type: float
      sample: 19.42
    total_kv_tokens:
      description: The groups' KV tokens together, in tokens.
      type: int
      sample: 5096832
    starts:
      description: Every group holds one full-context request (vLLM refuses to start a group that does not).
      type: bool
      sample: true
    holds_need:
      description: Every group holds RV(need_tokens) on its own.
      type: bool
      sample: false
    verdict:
      description:
        - V(does not start) (RV(groupings[].starts) false), V(short of the need) (RV(groupings[].holds_need) false;
          a request runs inside one group) or V(fits).
      type: str
      sample: short of the need
    tokens_per_s:
      description:
        - Each group's output tokens per second, measured by the concurrency sweep of its size (O(sweeps)) at the
          recommended C(max_num_seqs) (the mix of profiles the sweep estimated there; without a recommendation, its
          best level without a failed request); null for a group whose size no sweep measured (not measured).
      type: list
      elements: float
      sample: [212.4, null, null]
    total_tokens_per_s:
      description: The groups' tokens/s together (the proxy spreads the load over them), in tokens/s; null unless every
        group's size was measured.
      type: float
      sample: null
    max_num_seqs:
      description: Each group's concurrent requests at the figure of RV(groupings[].tokens_per_s); null where not measured.
      type: list
      elements: int
      sample: [8, null, null]
    not_measured_sizes:
      description: The group sizes of this grouping no sweep measured, largest first.
      type: list
      elements: int
      sample: [1]
site_read:
  description:
    - The options the action plugin read from the site (the task gave none), with the values read; C(sweeps) the
      files of the sweeps read (null when the task gave O(sweeps)).
  returned: always
  type: dict
  sample: {"model_dir": "/opt/models/tiny-random", "max_model_len": 4096, "engine_hosts": 2,
           "kv_cache_space_gib": "1", "served_model_name": "lab-chat", "sweeps": ["/src/build/tune-concurrency/spark-a.json"]}
groupings_table:
  description:
    - RV(groupings) as a table for people, one row per grouping - KV tokens and full-context requests per group and
      in all, tokens/s per group and in all (C(not measured) where no sweep measured the size), the verdict - then a
      line saying what the columns count. Null without O(engine_hosts).
  returned: success
  type: list
  elements: str
  sample:
    - "grouping        groups  KV tokens per group  full-context per group  full-context in all  tok/s per group  tok/s in all  verdict"
    - "1+1 (replicas)  2       998,416 x2           3.80 x2                 7.60                 not measured x2  -             fits"
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._kv_cache import (
    KVPlanError,
    checkpoint_bytes,
    load_config,
    to_gib,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._kv_cache_plan import plan_kv_cache


def read_text(path):
    """Read a small text file (``config.json``, the safetensors index)."""
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def list_dir(path):
    return os.listdir(path)


def file_size(path):
    return os.path.getsize(path)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(
            model_dir=dict(type="path"),
            model_config=dict(type="dict"),
            kv_cache_dtype=dict(type="str", default="auto",
                                choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]),
            gpu_memory_utilization=dict(type="float"),
            device_total_gib=dict(type="float", default=121.7),
            weights_gib=dict(type="float"),
            activation_gib=dict(type="float", default=2.0),
            cuda_graph_gib=dict(type="float", default=1.7),
            non_torch_gib=dict(type="float", default=0.5),
            max_num_batched_tokens=dict(type="int", no_log=False),
            mamba_ssm_cache_dtype=dict(type="str", default="auto", choices=["auto", "float32", "bfloat16", "float16"]),
            enable_prefix_caching=dict(type="bool", default=True),
            max_model_len=dict(type="int"),
            tensor_parallel_size=dict(type="int", default=2),
            engine_hosts=dict(type="int"),
            need_tokens=dict(type="int", no_log=False),
            need_full_context_requests=dict(type="float"),
            kv_cache_space_gib=dict(type="float"),
            block_size=dict(type="int"),
            per_host_kv_tokens=dict(type="list", elements="int", no_log=False),
            split_kv_tokens=dict(type="int", no_log=False),
            sweeps=dict(type="list", elements="dict"),
            served_model_name=dict(type="str"),
            # Read by the action plugin (the directory of saved sweeps on the controller); never used here.
            sweep_dir=dict(type="path"),
        ),
        mutually_exclusive=[("model_dir", "model_config"), ("need_tokens", "need_full_context_requests")],
        supports_check_mode=True,
    )
    params = module.params
    model_dir = params["model_dir"]
    config = params["model_config"]
    weights_gib = params["weights_gib"]
    weights_source = "weights_gib" if weights_gib is not None else None

    try:
        if model_dir is not None:
            config = load_config(model_dir, read_text)
            needs_weights = params["kv_cache_space_gib"] is None and not (
                params["per_host_kv_tokens"] and params["split_kv_tokens"] is not None)
            if weights_gib is None and needs_weights:
                size, files = checkpoint_bytes(model_dir, list_dir, file_size, read_text)
                weights_gib = to_gib(size, 3)
                weights_source = "%d checkpoint file(s) in %s" % (len(files), model_dir)
        plan = plan_kv_cache(
            config=config,
            kv_cache_dtype=params["kv_cache_dtype"],
            gpu_memory_utilization=params["gpu_memory_utilization"],
            device_total_gib=params["device_total_gib"],
            weights_gib=weights_gib,
            activation_gib=params["activation_gib"],
            max_model_len=params["max_model_len"],
            tensor_parallel_size=params["tensor_parallel_size"],
            need_tokens=params["need_tokens"],
            need_full_context_requests=params["need_full_context_requests"],
            kv_cache_space_gib=params["kv_cache_space_gib"],
            block_size=params["block_size"],
            cuda_graph_gib=params["cuda_graph_gib"],
            non_torch_gib=params["non_torch_gib"],
            max_num_batched_tokens=params["max_num_batched_tokens"],
            mamba_ssm_cache_dtype=params["mamba_ssm_cache_dtype"],
            enable_prefix_caching=params["enable_prefix_caching"],
            per_host_kv_tokens=params["per_host_kv_tokens"],
            split_kv_tokens=params["split_kv_tokens"],
            weights_source=weights_source,
            engine_hosts=params["engine_hosts"],
            sweeps=params["sweeps"],
            served_model_name=params["served_model_name"],
        )
    except KVPlanError as exc:
        module.fail_json(msg="Planning the KV cache%s: %s" % (
            " of %s" % model_dir if model_dir else "", exc))

    module.exit_json(changed=False, weights_gib=weights_gib, weights_source=weights_source, **plan)


def main():
    run_module()


if __name__ == "__main__":
    main()
