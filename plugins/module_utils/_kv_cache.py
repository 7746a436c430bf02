# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How many tokens of KV cache a model gets, and whether to run replicas or split.

Pure logic, standard library only: no Ansible imports. File reading is passed
in as callables.

The arithmetic is vLLM 0.32.0's (v1 engine: ``vllm/v1/core/kv_cache_utils.py``
``get_kv_cache_groups`` / ``get_kv_cache_config_from_groups`` /
``get_max_concurrency_for_kv_cache_config``, the spec classes of
``vllm/v1/kv_cache_interface.py``, the block-size alignment of hybrid models in
``vllm/platforms/interface.py`` ``_align_hybrid_block_size``):

* bytes per token per layer = 2 (K and V) x KV heads per rank x head_dim x
  dtype bytes; for MLA (DeepSeek: ``kv_lora_rank``) it is
  (``kv_lora_rank`` + ``qk_rope_head_dim``) x dtype bytes, without the 2 and
  not sharded by tensor parallelism (every rank keeps the whole latent).
  KV heads per rank = max(1, num_key_value_heads // tensor_parallel_size).
* a page is ``block_size`` tokens of one layer. Layers are grouped: all alike,
  one group; mixed (full and sliding-window attention, or attention and a
  recurrent state), one bucket per kind, cut into groups of equal size (the
  smallest bucket's size, or the largest when it is under 1.5 x the smallest).
  A block holds one page of every layer of the widest group:
  ``num_blocks = pool // (pages per group x page)``.
* vLLM reports ``int(num_blocks / blocks one request needs x max_model_len)``
  tokens ("KV cache size: N tokens, Maximum concurrency ..."), where a request
  at ``max_model_len`` takes from each group: ``cdiv(max_model_len, block)``
  blocks for full attention; ``cdiv(min(window - 1 + in-flight tokens,
  max_model_len), block) + 1`` for a sliding window, in-flight tokens being
  ``max_num_batched_tokens`` times the batches in flight (2 with async
  scheduling, vLLM's GPU default; 1 on CPU); ``cdiv(min(chunk + in-flight,
  max_model_len), block)`` for chunked local attention; one block for a
  recurrent (Mamba, gated delta net) state.
* hybrids with a recurrent state: the attention block size is raised until an
  attention page holds the state (a multiple of the kernel block,
  ``_align_hybrid_block_size``) and the state page is padded to it. State
  sizes are modelled for Qwen3-Next's gated delta net and Mamba-2 (Nemotron-H);
  other recurrent layers are left out, and the figure is then an upper bound.

Sizes are bytes (int) inside, GiB (float, 2**30 bytes) at the edges.
"""

from __future__ import annotations

import json
import math
import os

GIB = 1024 ** 3
GB10_DEVICE_TOTAL_GIB = 121.7
#: vLLM 0.32's default --block-size on CUDA; its CPU build uses 128 (platforms/cpu.py).
DEFAULT_BLOCK_SIZE = 16
CPU_BLOCK_SIZE = 128
#: Smallest kernel block of the attention backend (FlashAttention MultipleOf(16); CPU_ATTN MultipleOf(32)),
#: which hybrid block sizes are aligned to.
GPU_KERNEL_BLOCK = 16
CPU_KERNEL_BLOCK = 32
#: vLLM 0.32's default max_num_batched_tokens for its OpenAI server (engine/arg_utils.py get_batch_defaults):
#: 8192 on a GPU with >= 70 GiB (GB10's 121.7), 2048 x world size on CPU.
GPU_MAX_NUM_BATCHED_TOKENS = 8192
CPU_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_ACTIVATION_GIB = 2.0
DEFAULT_CUDA_GRAPH_GIB = 1.7
DEFAULT_NON_TORCH_GIB = 0.5
DEFAULT_SPLIT_TP = 2
MAMBA_SSM_CACHE_DTYPES = ("auto", "float32", "bfloat16", "float16")

KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
_DTYPE_BYTES = {
    "bfloat16": 2, "bf16": 2,
    "float16": 2, "fp16": 2, "half": 2,
    "float32": 4, "fp32": 4, "float": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}

# layer_types / layers_block_type values -> what the layer keeps per token.
_FULL = "full"
_SLIDING = "sliding"
_CHUNKED = "chunked"
_RECURRENT = "recurrent"   # a fixed-size state per request, no per-token KV
_NONE = "none"             # no attention at all (MLP / MoE layers in a pattern)
_LAYER_TYPE_NAMES = {
    "full_attention": _FULL, "attention": _FULL, "global": _FULL, "global_attention": _FULL,
    "hybrid": _FULL,
    "sliding_attention": _SLIDING, "sliding_window": _SLIDING, "sliding_window_attention": _SLIDING,
    "local": _SLIDING, "local_attention": _SLIDING,
    "chunked_attention": _CHUNKED,
    "linear_attention": _RECURRENT, "mamba": _RECURRENT, "mamba2": _RECURRENT, "ssm": _RECURRENT,
    "conv": _RECURRENT, "short_conv": _RECURRENT, "recurrent": _RECURRENT, "rwkv": _RECURRENT,
    "mlp": _NONE, "moe": _NONE,
}
_PATTERN_CHARS = {"*": _FULL, "M": _RECURRENT, "-": _NONE, "E": _NONE}
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "max_sequence_length", "max_seq_length", "seq_len")
_NOT_WEIGHTS = ("training_args", "optimizer", "scheduler", "scaler", "rng_state")


class KVPlanError(ValueError):
    """The inputs are unusable; the message says which and what to change."""


def to_bytes(gib):
    return int(round(float(gib) * GIB))


def to_gib(n_bytes, digits=2):
    return round(n_bytes / GIB, digits)


def _fmt_gib(n_bytes):
    return "%.2f" % (n_bytes / GIB)


def floor_hundredths(numerator, denominator):
    """``numerator / denominator`` rounded down to 0.01, computed exactly."""
    return (numerator * 100 // denominator) / 100.0 if denominator else 0.0


# ------------------------------------------------------------------- config


def load_config(model_dir, read_text):
    """``config.json`` of a Hugging Face model directory as a dict."""
    path = os.path.join(model_dir, "config.json")
    try:
        return json.loads(read_text(path))
    except OSError as exc:
        raise KVPlanError("reading %s failed: %s; pass model_config or check model_dir" % (path, exc)) from None
    except ValueError as exc:
        raise KVPlanError("%s is not valid JSON: %s" % (path, exc)) from None


def text_config(config):
    """The language model's part of a config (``text_config`` for multimodal models)."""
    inner = config.get("text_config")
    if isinstance(inner, dict) and "num_hidden_layers" not in config:
        merged = dict(inner)
        for key in ("torch_dtype", "dtype"):
            if merged.get(key) is None and config.get(key) is not None:
                merged[key] = config[key]
        return merged
    return config


def _int_field(config, *keys, **kwargs):
    for key in keys:
        value = config.get(key)
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                raise KVPlanError("config.json field %s: expected an integer, got %r" % (key, value)) from None
    if "default" in kwargs:
        return kwargs["default"]
    raise KVPlanError("config.json has none of %s; cannot size the KV cache" % ", ".join(keys))


def model_dtype(config):
    """The dtype vLLM's ``--dtype auto`` picks, with a note on where it came from."""
    value = config.get("torch_dtype") or config.get("dtype")
    if value is None:
        return "bfloat16", "config.json gives no torch_dtype; assuming bfloat16"
    name = str(value).replace("torch.", "")
    if name in ("float32", "float"):
        return "bfloat16", "config.json torch_dtype float32; vLLM serves float32 checkpoints in 16 bit"
    if name not in _DTYPE_BYTES:
        raise KVPlanError("config.json torch_dtype %r is not one of %s"
                          % (value, ", ".join(sorted(_DTYPE_BYTES))))
    return name, "config.json torch_dtype %s" % name


def kv_dtype(kv_cache_dtype, config):
    """``(dtype name, bytes per element, note)`` for vLLM's ``--kv-cache-dtype``."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise KVPlanError("kv_cache_dtype %r is not one of %s" % (kv_cache_dtype, ", ".join(KV_CACHE_DTYPES)))
    if kv_cache_dtype == "auto":
        if config is None:
            raise KVPlanError("kv_cache_dtype auto needs the model's config to know its dtype")
        name, note = model_dtype(config)
        return name, _DTYPE_BYTES[name], "auto = model dtype (%s)" % note
    return kv_cache_dtype, _DTYPE_BYTES[kv_cache_dtype], "kv_cache_dtype %s" % kv_cache_dtype


def layer_kinds(config):
    """What each decoder layer keeps: ``(kinds, source)``.

    Kinds are ``full``, ``sliding:<window>``, ``chunked:<size>`` (per-token KV
    cache) and ``recurrent`` / ``none`` (no per-token KV cache).
    """
    for key in ("layer_types", "layers_block_type", "hybrid_override_pattern"):
        if isinstance(config.get(key), (list, str)) and not any(
                config.get(k) is not None for k in ("num_hidden_layers", "n_layer", "num_layers")):
            # transformers 5 writes some hybrids (Nemotron-H) without num_hidden_layers: the pattern is the count.
            config = dict(config, num_hidden_layers=len(config[key]))
            break
    num_layers = _int_field(config, "num_hidden_layers", "n_layer", "num_layers")
    if isinstance(config.get("layer_types"), list):
        names, source = config["layer_types"], "layer_types"
        kinds = [_LAYER_TYPE_NAMES.get(str(name)) for name in names]
    elif isinstance(config.get("layers_block_type"), list):
        names, source = config["layers_block_type"], "layers_block_type"
        kinds = [_LAYER_TYPE_NAMES.get(str(name)) for name in names]
    elif isinstance(config.get("hybrid_override_pattern"), str):
        names, source = list(config["hybrid_override_pattern"]), "hybrid_override_pattern"
        kinds = [_PATTERN_CHARS.get(char) for char in names]
    elif config.get("full_attention_interval"):
        interval = int(config["full_attention_interval"])
        names, source = None, "full_attention_interval=%d" % interval
        kinds = [_FULL if (i + 1) % interval == 0 else _RECURRENT for i in range(num_layers)]
    elif config.get("attn_layer_period"):
        period = int(config["attn_layer_period"])
        offset = int(config.get("attn_layer_offset") or 0)
        names, source = None, "attn_layer_period=%d, attn_layer_offset=%d" % (period, offset)
        kinds = [_FULL if i % period == offset else _RECURRENT for i in range(num_layers)]
    elif config.get("sliding_window_pattern") and config.get("sliding_window"):
        pattern = int(config["sliding_window_pattern"])
        names, source = None, "sliding_window_pattern=%d" % pattern
        kinds = [_FULL if (i + 1) % pattern == 0 else _SLIDING for i in range(num_layers)]
    elif config.get("sliding_window") and config.get("use_sliding_window", True):
        # Mistral-style: one window on every layer (Qwen2 only with use_sliding_window).
        names, source = None, "sliding_window=%s on every layer" % config["sliding_window"]
        kinds = [_SLIDING] * num_layers
    else:
        return [_FULL] * num_layers, "num_hidden_layers=%d, all full attention" % num_layers
    if names is not None:
        unknown = sorted({str(n) for n, k in zip(names, kinds) if k is None})
        if unknown:
            raise KVPlanError("config.json %s has layer types this plan does not know: %s"
                              % (source, ", ".join(unknown)))
        if len(kinds) != num_layers:
            raise KVPlanError("config.json %s lists %d layers but num_hidden_layers is %d"
                              % (source, len(kinds), num_layers))
    window = config.get("sliding_window")
    chunk = config.get("attention_chunk_size")
    return [
        ("%s:%s" % (kind, window) if kind == _SLIDING else "%s:%s" % (kind, chunk) if kind == _CHUNKED else kind)
        for kind in kinds
    ], source


def attention_layout(config, tensor_parallel_size=1):
    """Per-rank shape of the KV cache of one layer, from ``config.json``.

    Returns a dict with ``mla``, ``num_layers``, ``layer_counts`` (per-token
    kinds only), ``skipped_layers``, ``num_kv_heads`` (total),
    ``num_kv_heads_per_rank``, ``head_dim``, ``factor`` (2 for K and V, 1 for
    MLA) and ``kinds_source``.
    """
    if tensor_parallel_size < 1:
        raise KVPlanError("tensor_parallel_size must be at least 1, got %s" % tensor_parallel_size)
    config = text_config(config)
    kinds, source = layer_kinds(config)
    counts = {}
    skipped = 0
    recurrent = 0
    for kind in kinds:
        if kind in (_RECURRENT, _NONE):
            skipped += 1
            recurrent += kind == _RECURRENT
        else:
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        raise KVPlanError("config.json (%s) has no attention layer with a per-token KV cache" % source)
    if config.get("kv_lora_rank"):
        head_dim = int(config["kv_lora_rank"]) + _int_field(config, "qk_rope_head_dim")
        layout = {"mla": True, "num_kv_heads": 1, "num_kv_heads_per_rank": 1, "head_dim": head_dim,
                  "factor": 1}
    else:
        heads = _int_field(config, "num_attention_heads", "n_head", "num_heads")
        if config.get("multi_query"):
            kv_heads = 1
        else:
            kv_heads = _int_field(config, "num_key_value_heads", "num_kv_heads", "n_head_kv",
                                  "multi_query_group_num", default=heads)
        head_dim = config.get("head_dim")
        if not head_dim:
            head_dim = _int_field(config, "hidden_size", "n_embd", "d_model") // heads
        layout = {"mla": False, "num_kv_heads": kv_heads,
                  "num_kv_heads_per_rank": max(1, kv_heads // tensor_parallel_size),
                  "head_dim": int(head_dim), "factor": 2}
    layout.update({
        "num_layers": len(kinds),
        "layer_counts": counts,
        "skipped_layers": skipped,
        "recurrent_layers": recurrent,
        "kinds_source": source,
        "tensor_parallel_size": tensor_parallel_size,
        "config": config,
    })
    return layout


def layer_bytes_per_token(layout, dtype_bytes):
    """Bytes one token takes in one layer on one rank."""
    return layout["factor"] * layout["num_kv_heads_per_rank"] * layout["head_dim"] * dtype_bytes


def _cdiv(a, b):
    return -(-a // b)


def recurrent_state_bytes(config, tensor_parallel_size=1, conv_dtype_bytes=2, ssm_dtype_bytes=None,
                          num_speculative_tokens=0):
    """``(bytes, kind, prefill checkpoint blocks)`` of one recurrent layer's state per request on one rank.

    None when the kind is not modelled. ``ssm_dtype_bytes`` None is vLLM's
    ``auto``: the conv state's dtype, except for Nemotron-H, whose
    ``mamba_ssm_cache_dtype`` is the config's or float32 (vLLM's
    ``NemotronHForCausalLMConfig``). Mamba-2 layers keep one more block per
    request for prefill checkpoints (``MambaMixer2.get_kv_cache_spec``).

    vLLM 0.32 ``MambaStateShapeCalculator``: gated delta net (Qwen3-Next:
    ``linear_*`` fields) keeps a conv state of ``(k_dim x k_heads x 2 + v_dim x
    v_heads) / tp x (conv_kernel - 1 + spec)`` and a state of ``v_heads / tp x
    v_dim x k_dim``; Mamba-2 (Nemotron-H: ``mamba_num_heads``) a conv state of
    ``(heads x head_dim + 2 x groups x state) / tp x (conv_kernel - 1 + spec)``
    and a state of ``heads / tp x head_dim x state``. The conv state is in the
    model's dtype, the state in ``mamba_ssm_cache_dtype``.
    """
    tp = tensor_parallel_size
    if config.get("linear_num_value_heads") and config.get("linear_value_head_dim"):
        nk, nv = int(config["linear_num_key_heads"]), int(config["linear_num_value_heads"])
        hk, hv = int(config["linear_key_head_dim"]), int(config["linear_value_head_dim"])
        kernel = int(config.get("linear_conv_kernel_dim") or 4)
        conv = (hk * nk * 2 + hv * nv) // tp * (kernel - 1 + num_speculative_tokens)
        state = nv // tp * hv * hk
        ssm = conv_dtype_bytes if ssm_dtype_bytes is None else ssm_dtype_bytes
        return conv * conv_dtype_bytes + state * ssm, "gated delta net", 0
    if config.get("mamba_num_heads") and config.get("mamba_head_dim"):
        heads, head_dim = int(config["mamba_num_heads"]), int(config["mamba_head_dim"])
        groups = int(config.get("n_groups") or 1)
        if groups % tp:
            groups += tp - groups  # vLLM extends the groups so that every head's group is on its rank
        size = int(config.get("ssm_state_size") or 128)
        kernel = int(config.get("conv_kernel") or 4)
        conv = (heads * head_dim + 2 * groups * size) // tp * (kernel - 1 + num_speculative_tokens)
        state = heads // tp * head_dim * size
        ssm = ssm_dtype_bytes
        if ssm is None:
            ssm = _DTYPE_BYTES.get(str(config.get("mamba_ssm_cache_dtype") or "float32"), 4)
        return conv * conv_dtype_bytes + state * ssm, "Mamba-2", 1
    return None


def kv_cache_capacity(pool, layers, block_size, max_model_len, in_flight_tokens, kernel_block=GPU_KERNEL_BLOCK):
    """KV cache tokens vLLM 0.32 reports for ``pool`` bytes on one rank.

    ``layers`` lists one dict per layer with a cache: ``{"kind": "full" |
    "sliding" | "chunked" | "state", "token_bytes": bytes per token (attention),
    "window": tokens (sliding window or chunk), "state_bytes": bytes (state),
    "blocks_per_request": blocks a request holds (state)}``.
    Returns ``{"num_blocks", "tokens", "max_concurrency", "block_size",
    "groups": [{"kind", "layers", "blocks_per_request"}], "bytes_per_block",
    "blocks_per_request"}``.
    """
    if block_size < 1:
        raise KVPlanError("block_size must be at least 1, got %s" % block_size)
    attention = [layer for layer in layers if layer["kind"] != "state"]
    states = [layer for layer in layers if layer["kind"] == "state"]
    padded_state = None
    if states and attention:
        # _align_hybrid_block_size: an attention page must hold the largest state.
        one_token = max(layer["token_bytes"] for layer in attention)
        state_page = max(layer["state_bytes"] for layer in states)
        align = max(kernel_block, block_size)
        needed = align * _cdiv(state_page, align * one_token)
        needed = kernel_block * _cdiv(needed, kernel_block)
        block_size = max(block_size, needed)
        padded_state = block_size * one_token
    specs = []
    for layer in layers:
        if layer["kind"] == "state":
            specs.append(("state", layer.get("blocks_per_request", 1), block_size,
                          padded_state or layer["state_bytes"]))
        else:
            specs.append((layer["kind"], layer.get("window"), block_size, block_size * layer["token_bytes"]))
    # unify_kv_cache_spec_page_size: smaller pages take a larger block size.
    largest = max(spec[3] for spec in specs)
    unified = []
    for kind, window, block, page in specs:
        if page != largest:
            if kind == "state" or largest % page:
                raise KVPlanError("layers with page sizes %d and %d bytes: vLLM pads such pages, which this plan "
                                  "does not model" % (page, largest))
            block, page = block * (largest // page), largest
        unified.append((kind, window, block, page))
    buckets = {}
    for spec in unified:
        buckets.setdefault(spec, []).append(spec)
    if len(buckets) == 1:
        group_size = len(unified)
    else:
        sizes = [len(members) for members in buckets.values()]
        group_size = min(sizes)
        if max(sizes) < group_size * 1.5:
            group_size = max(sizes)
    groups = []
    bytes_per_block = 0
    for (kind, window, block, page), members in buckets.items():
        count = len(members)
        num_groups = _cdiv(count, group_size)
        widest = _cdiv(count, num_groups)
        bytes_per_block = max(bytes_per_block, widest * page)
        if kind == "full":
            per_request = _cdiv(max_model_len, block)
        elif kind == "sliding":
            per_request = _cdiv(min(window - 1 + in_flight_tokens, max_model_len), block) + 1
        elif kind == "chunked":
            per_request = _cdiv(min(window + in_flight_tokens, max_model_len), block)
        else:
            per_request = window  # a state's blocks per request
        for index in range(num_groups):
            groups.append({"kind": kind if window is None or kind == "state" else "%s:%s" % (kind, window),
                           "layers": len(members[index::num_groups]), "block_size": block,
                           "blocks_per_request": per_request})
    num_blocks = max(pool, 0) // bytes_per_block
    per_request = sum(group["blocks_per_request"] for group in groups)
    concurrency = num_blocks / per_request
    return {
        "num_blocks": num_blocks,
        "tokens": int(concurrency * max_model_len),
        "max_concurrency": concurrency,
        "block_size": min(group["block_size"] for group in groups),
        "groups": groups,
        "group_size": group_size,
        "num_groups": len(groups),
        "bytes_per_block": bytes_per_block,
        "blocks_per_request": per_request,
    }


def kv_cache_tokens(kv_bytes, layer_bytes, layer_counts, block_size=DEFAULT_BLOCK_SIZE, max_model_len=None,
                    in_flight_tokens=GPU_MAX_NUM_BATCHED_TOKENS * 2):
    """Tokens vLLM reports for ``kv_bytes`` on one rank of attention layers of ``layer_bytes`` per token.

    ``layer_counts`` maps each kind (``full``, ``sliding:<window>``,
    ``chunked:<size>``) to its number of layers; see :func:`kv_cache_capacity`.
    """
    layers = []
    for kind, count in layer_counts.items():
        name, dummy_sep, window = kind.partition(":")
        for dummy in range(count):
            layers.append({"kind": name, "token_bytes": layer_bytes, "window": int(window) if window else None})
    if max_model_len is None:
        max_model_len = block_size
    return kv_cache_capacity(kv_bytes, layers, block_size, max_model_len, in_flight_tokens)


def max_model_len_of(config):
    """vLLM's default ``max_model_len``: the smallest length key in config.json."""
    config = text_config(config)
    lengths = [int(config[key]) for key in _MAX_LEN_KEYS if isinstance(config.get(key), int)]
    return min(lengths) if lengths else None


# ------------------------------------------------------------------ weights


def checkpoint_files(names, index=None):
    """The weight files vLLM loads from a directory listing.

    safetensors win over ``.bin``/``.pt``; with ``model.safetensors.index.json``
    (``index`` is its ``weight_map``) only the files it names count, as vLLM
    filters duplicates (e.g. a ``consolidated.safetensors`` next to shards).
    """
    names = set(names)
    safetensors = sorted(n for n in names if n.endswith(".safetensors"))
    if safetensors:
        if index:
            listed = sorted(set(index.values()) & names)
            if listed:
                return listed
        return safetensors
    return sorted(n for n in names if n.endswith((".bin", ".pt")) and not n.startswith(_NOT_WEIGHTS))


def checkpoint_bytes(model_dir, listdir=os.listdir, getsize=os.path.getsize, read_text=None):
    """``(bytes, files)``: the summed size of the weight files in ``model_dir``."""
    try:
        names = listdir(model_dir)
    except OSError as exc:
        raise KVPlanError("listing %s to measure the weights failed: %s; pass weights_gib"
                          % (model_dir, exc)) from None
    index = None
    if read_text is not None and "model.safetensors.index.json" in names:
        try:
            index = json.loads(read_text(os.path.join(model_dir, "model.safetensors.index.json"))).get("weight_map")
        except (OSError, ValueError, AttributeError):
            index = None
    files = checkpoint_files(names, index)
    if not files:
        raise KVPlanError("%s holds no *.safetensors, *.bin or *.pt weight files; pass weights_gib" % model_dir)
    return sum(getsize(os.path.join(model_dir, name)) for name in files), files


# --------------------------------------------------------------------- pool


def kv_pool_bytes(gpu_memory_utilization, device_total_gib, weights_gib, activation_gib,
                  tensor_parallel_size=1, cuda_graph_gib=0.0, non_torch_gib=0.0):
    """KV cache bytes on one rank, as vLLM 0.32 computes it on a GPU.

    ``ceil(device_total x gpu_memory_utilization)`` (``request_memory``) minus
    weights / tp, peak activation, CUDA graph memory and non-torch memory
    (``determine_available_memory``) - the same figures as the
    ``gpu_memory_utilization`` module's KV cache.
    """
    if gpu_memory_utilization is None or not 0 < gpu_memory_utilization <= 1:
        raise KVPlanError("gpu_memory_utilization must be a fraction in (0, 1], got %s" % gpu_memory_utilization)
    requested = int(math.ceil(to_bytes(device_total_gib) * gpu_memory_utilization))
    return (requested - to_bytes(weights_gib) // tensor_parallel_size - to_bytes(activation_gib)
            - to_bytes(cuda_graph_gib) - to_bytes(non_torch_gib))


def engine_defaults(cpu, tensor_parallel_size=1, block_size=None, max_num_batched_tokens=None):
    """vLLM 0.32's block size, batch budget and in-flight tokens on CPU or on a GB10 GPU.

    ``cpu``: vLLM's CPU build (block 128, 2,048 x world size batched tokens, no async
    scheduling); otherwise CUDA (block 16, 8,192 for a >= 70 GiB device, async
    scheduling: two batches in flight).
    """
    if cpu:
        return {"block_size": block_size or CPU_BLOCK_SIZE,
                "max_num_batched_tokens": max_num_batched_tokens or CPU_MAX_NUM_BATCHED_TOKENS * tensor_parallel_size,
                "batches_in_flight": 1, "kernel_block": CPU_KERNEL_BLOCK}
    return {"block_size": block_size or DEFAULT_BLOCK_SIZE,
            "max_num_batched_tokens": max_num_batched_tokens or GPU_MAX_NUM_BATCHED_TOKENS,
            "batches_in_flight": 2, "kernel_block": GPU_KERNEL_BLOCK}


def cache_layers(layout, dtype_bytes, ssm_dtype_bytes=None, model_dtype_bytes=None, num_speculative_tokens=0,
                 enable_prefix_caching=True):
    """The per-layer list :func:`kv_cache_capacity` takes, and a note on what is not modelled.

    A recurrent state holds 1 + speculative blocks per request, or, with prefix
    caching (vLLM's default, which sets ``mamba_cache_mode`` ``align``), 2 +
    speculative + prefill checkpoint blocks (``MambaSpec.max_memory_usage_bytes``).
    """
    token_bytes = layer_bytes_per_token(layout, dtype_bytes)
    layers = []
    for kind, count in sorted(layout["layer_counts"].items()):
        name, dummy_sep, window = kind.partition(":")
        layers.extend({"kind": name, "token_bytes": token_bytes, "window": int(window) if window else None}
                      for dummy in range(count))
    note = None
    if layout.get("recurrent_layers"):
        conv_bytes = model_dtype_bytes or dtype_bytes
        state = recurrent_state_bytes(layout["config"], layout["tensor_parallel_size"], conv_bytes,
                                      ssm_dtype_bytes, num_speculative_tokens)
        if state is None:
            note = ("%d recurrent layer(s) of a kind this plan does not size: left out, the figure is an upper bound"
                    % layout["recurrent_layers"])
        else:
            blocks = (2 + num_speculative_tokens + state[2]) if enable_prefix_caching else 1 + num_speculative_tokens
            layers.extend({"kind": "state", "state_bytes": state[0], "blocks_per_request": blocks}
                          for dummy in range(layout["recurrent_layers"]))
            note = "%d %s layer(s), %s B of state each per request, %d block(s) per request%s" % (
                layout["recurrent_layers"], state[1], "{:,}".format(state[0]), blocks,
                " (prefix caching: mamba_cache_mode align)" if enable_prefix_caching else "")
    return layers, note


# ------------------------------------------------------------------- advice


def advise(per_host_tokens, split_tokens, need_tokens):
    """The report's rule: one copy per machine if the model and the cache you
    need fit on one; split only when they do not.

    ``per_host_tokens`` lists each replica's KV tokens (the smallest decides);
    ``split_tokens`` is the split's KV tokens or None when unknown.
    Returns ``(topology, reason)`` with topology ``replicas``, ``split`` or ``none``.
    """
    smallest = min(per_host_tokens)
    if smallest >= need_tokens:
        return "replicas", "one host holds %s >= %s tokens needed: run one copy per host (replicas)" % (
            "{:,}".format(smallest), "{:,}".format(need_tokens))
    if split_tokens is not None and split_tokens >= need_tokens:
        return "split", "one host holds %s < %s tokens needed, the split holds %s: split" % (
            "{:,}".format(smallest), "{:,}".format(need_tokens), "{:,}".format(split_tokens))
    return "none", "neither fits: one host holds %s, the split %s, need %s tokens" % (
        "{:,}".format(smallest), "unknown" if split_tokens is None else "{:,}".format(split_tokens),
        "{:,}".format(need_tokens))
