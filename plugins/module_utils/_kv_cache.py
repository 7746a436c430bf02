# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How many tokens of KV cache a model gets, and whether to run replicas or split.

Pure logic, standard library only: no Ansible imports. File reading is passed
in as callables.

The arithmetic is vLLM's (v1 engine, ``vllm/v1/core/kv_cache_utils.py`` and
``vllm/v1/kv_cache_interface.py``):

* bytes per token per layer = 2 (K and V) x KV heads per rank x head_dim x
  dtype bytes; for MLA (DeepSeek: ``kv_lora_rank``) it is
  (``kv_lora_rank`` + ``qk_rope_head_dim``) x dtype bytes, without the 2 and
  not sharded by tensor parallelism (every rank keeps the whole latent).
* KV heads per rank = max(1, num_key_value_heads // tensor_parallel_size).
* a page is ``block_size`` tokens of one layer; vLLM allocates whole blocks:
  ``num_blocks = kv_bytes // page // layers`` and reports
  ``num_blocks x block_size`` tokens ("KV cache size: N tokens").
* models mixing full and sliding-window attention: vLLM's hybrid allocator
  puts layers into groups of equal size (the smallest type count, or the
  largest when it is under 1.5 x the smallest, padding the last group of a
  type), ``num_blocks = kv_bytes // page // group_size`` and reports
  ``num_blocks // groups x block_size`` tokens. That counts sliding-window
  layers like full ones, as vLLM's own log line does.
* layers with a recurrent state instead of a KV cache (linear attention,
  Mamba: ``layer_types``, ``layers_block_type``, ``hybrid_override_pattern``,
  ``full_attention_interval``, ``attn_layer_period``) hold no per-token cache
  and are not counted. Their fixed per-request state, and vLLM's enlarged
  block size for such models, are not modelled: for them the figure is the
  full-attention layers' capacity, an upper bound.

Sizes are bytes (int) inside, GiB (float, 2**30 bytes) at the edges.
"""

from __future__ import annotations

import json
import math
import os

GIB = 1024 ** 3
GB10_DEVICE_TOTAL_GIB = 121.7
DEFAULT_BLOCK_SIZE = 16
DEFAULT_ACTIVATION_GIB = 2.0
DEFAULT_SPLIT_TP = 2

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
    for kind in kinds:
        if kind in (_RECURRENT, _NONE):
            skipped += 1
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
        "kinds_source": source,
        "tensor_parallel_size": tensor_parallel_size,
    })
    return layout


def layer_bytes_per_token(layout, dtype_bytes):
    """Bytes one token takes in one layer on one rank."""
    return layout["factor"] * layout["num_kv_heads_per_rank"] * layout["head_dim"] * dtype_bytes


def kv_cache_tokens(kv_bytes, layer_bytes, layer_counts, block_size=DEFAULT_BLOCK_SIZE):
    """Tokens vLLM reports for ``kv_bytes`` of KV cache on one rank.

    ``layer_counts`` maps each per-token layer kind to its number of layers.
    Returns ``{"num_blocks", "tokens", "group_size", "num_groups"}``.
    """
    if block_size < 1:
        raise KVPlanError("block_size must be at least 1, got %s" % block_size)
    sizes = [count for count in layer_counts.values() if count]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    num_groups = sum(-(-count // group_size) for count in sizes)
    page = block_size * layer_bytes
    num_blocks = max(kv_bytes, 0) // page // group_size
    return {
        "num_blocks": num_blocks,
        "tokens": num_blocks // num_groups * block_size,
        "group_size": group_size,
        "num_groups": num_groups,
    }


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
                  tensor_parallel_size=1):
    """KV cache bytes on one rank, as vLLM computes it on a GPU.

    ``device_total x gpu_memory_utilization - weights / tp - activations``.
    """
    if gpu_memory_utilization is None or not 0 < gpu_memory_utilization <= 1:
        raise KVPlanError("gpu_memory_utilization must be a fraction in (0, 1], got %s" % gpu_memory_utilization)
    requested = int(to_bytes(device_total_gib) * gpu_memory_utilization)
    return requested - to_bytes(weights_gib) // tensor_parallel_size - to_bytes(activation_gib)


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


# --------------------------------------------------------------------- plan


def plan_kv_cache(config=None, kv_cache_dtype="auto", gpu_memory_utilization=None,
                  device_total_gib=GB10_DEVICE_TOTAL_GIB, weights_gib=None,
                  activation_gib=DEFAULT_ACTIVATION_GIB, max_model_len=None,
                  tensor_parallel_size=DEFAULT_SPLIT_TP, need_tokens=None, need_full_context_requests=None,
                  kv_cache_space_gib=None, block_size=DEFAULT_BLOCK_SIZE, per_host_kv_tokens=None,
                  split_kv_tokens=None, weights_source=None):
    """KV cache of one replica (tp=1) and of the split, and the advice.

    The pool per rank is ``kv_cache_space_gib`` when given (vLLM on CPU:
    ``VLLM_CPU_KVCACHE_SPACE``), else :func:`kv_pool_bytes`.
    ``per_host_kv_tokens`` / ``split_kv_tokens`` replace the computed token
    counts (what-if). Returns a dict; see the module's RETURN.
    """
    reasoning = []
    layout = split_layout = None
    dtype_name = dtype_bytes = None
    if config is not None:
        dtype_name, dtype_bytes, dtype_note = kv_dtype(kv_cache_dtype, text_config(config))
        layout = attention_layout(config, 1)
        split_layout = attention_layout(config, tensor_parallel_size)
        if max_model_len is None:
            max_model_len = max_model_len_of(config)
        reasoning.extend(_layout_lines(layout, split_layout, dtype_name, dtype_bytes, dtype_note))
    if max_model_len is None or max_model_len < 1:
        raise KVPlanError("max_model_len is unknown: give max_model_len (as passed to vLLM) or a config.json "
                          "with max_position_embeddings")
    if need_tokens is not None and need_full_context_requests is not None:
        raise KVPlanError("give need_tokens or need_full_context_requests, not both")
    if need_tokens is None:
        requests = 1 if need_full_context_requests is None else need_full_context_requests
        need_tokens = int(math.ceil(round(requests * max_model_len, 6)))
        need_line = "need: %s full-context request(s) x %s = %s tokens" % (
            requests, "{:,}".format(max_model_len), "{:,}".format(need_tokens))
        if need_full_context_requests is None:
            need_line += " (default: one full-context request, the least vLLM starts with)"
    else:
        need_line = "need: %s tokens" % "{:,}".format(need_tokens)

    per_host = _side("one host (tensor_parallel_size 1)", layout, 1, dtype_bytes, block_size, max_model_len,
                     kv_cache_space_gib, gpu_memory_utilization, device_total_gib, weights_gib,
                     activation_gib, per_host_kv_tokens, reasoning, weights_source)
    split = _side("split (tensor_parallel_size %d, one rank per host)" % tensor_parallel_size, split_layout,
                  tensor_parallel_size, dtype_bytes, block_size, max_model_len, kv_cache_space_gib,
                  gpu_memory_utilization, device_total_gib, weights_gib, activation_gib,
                  None if split_kv_tokens is None else [split_kv_tokens], reasoning, weights_source,
                  optional=True)
    reasoning.append(need_line)
    topology, reason = advise(per_host["per_host_kv_tokens"], split and split["kv_tokens"], need_tokens)
    reasoning.append(reason)

    result = {
        "topology": topology,
        "need_tokens": need_tokens,
        "max_model_len": max_model_len,
        "kv_cache_dtype": dtype_name,
        "dtype_bytes": dtype_bytes,
        "block_size": block_size,
        "bytes_per_token": None,
        "per_host": per_host,
        "split": split,
        "layout": None,
        "reasoning": reasoning,
    }
    if layout is not None:
        result["bytes_per_token"] = layer_bytes_per_token(layout, dtype_bytes) * sum(layout["layer_counts"].values())
        result["layout"] = {
            "mla": layout["mla"],
            "num_layers": layout["num_layers"],
            "kv_cache_layers": sum(layout["layer_counts"].values()),
            "layer_counts": layout["layer_counts"],
            "skipped_layers": layout["skipped_layers"],
            "layer_types_source": layout["kinds_source"],
            "num_kv_heads": layout["num_kv_heads"],
            "head_dim": layout["head_dim"],
        }
    return result


def _layout_lines(layout, split_layout, dtype_name, dtype_bytes, dtype_note):
    kv_layers = sum(layout["layer_counts"].values())
    lines = ["config.json: %d layers (%s): %d with a per-token KV cache (%s)%s"
             % (layout["num_layers"], layout["kinds_source"], kv_layers,
                ", ".join("%d %s" % (count, kind) for kind, count in sorted(layout["layer_counts"].items())),
                ", %d without (recurrent state or no attention; not counted)" % layout["skipped_layers"]
                if layout["skipped_layers"] else "")]
    lines.append("KV dtype: %s, %d byte(s) per element (%s)" % (dtype_name, dtype_bytes, dtype_note))
    for lay in (layout, split_layout):
        per_layer = layer_bytes_per_token(lay, dtype_bytes)
        if lay["mla"]:
            shape = "MLA latent %d (kv_lora_rank + qk_rope_head_dim, not sharded) x %d B" % (
                lay["head_dim"], dtype_bytes)
        else:
            shape = "2 (K, V) x %d KV heads x head_dim %d x %d B" % (
                lay["num_kv_heads_per_rank"], lay["head_dim"], dtype_bytes)
        lines.append("tp=%d: per token per layer %s = %s B; per token %d layers x %s B = %s B"
                     % (lay["tensor_parallel_size"], shape, "{:,}".format(per_layer), kv_layers,
                        "{:,}".format(per_layer), "{:,}".format(per_layer * kv_layers)))
    return lines


def _side(label, layout, tp, dtype_bytes, block_size, max_model_len, kv_cache_space_gib,
          gpu_memory_utilization, device_total_gib, weights_gib, activation_gib, override, reasoning,
          weights_source, optional=False):
    """Pool, blocks and tokens of one side (replica or split)."""
    if override is not None:
        tokens = [int(t) for t in override]
        if not tokens or min(tokens) < 0:
            raise KVPlanError("%s: token counts must be non-negative, got %r" % (label, override))
        reasoning.append("%s: %s tokens (given)" % (label, " / ".join("{:,}".format(t) for t in tokens)))
        smallest = min(tokens)
        return {
            "kv_tokens": smallest,
            "per_host_kv_tokens": tokens,
            "kv_cache_gib": None,
            "num_blocks": None,
            "full_context_requests": floor_hundredths(smallest, max_model_len),
            "source": "given",
            "tensor_parallel_size": tp,
        }
    if layout is None:
        if optional:
            reasoning.append("%s: unknown (no model config and no split_kv_tokens)" % label)
            return None
        raise KVPlanError("%s: give the model's config (model_dir or model_config) or per_host_kv_tokens" % label)
    if kv_cache_space_gib is not None:
        if kv_cache_space_gib <= 0:
            raise KVPlanError("kv_cache_space_gib must be positive, got %s" % kv_cache_space_gib)
        pool = to_bytes(kv_cache_space_gib)
        pool_line = "KV pool %s GiB per rank (kv_cache_space_gib, VLLM_CPU_KVCACHE_SPACE)" % _fmt_gib(pool)
        source = "kv_cache_space_gib"
    else:
        if gpu_memory_utilization is None:
            raise KVPlanError("%s: gpu_memory_utilization is not set; give it (for example from "
                              "factory_floor.llm.gpu_memory_utilization) or kv_cache_space_gib" % label)
        if weights_gib is None:
            raise KVPlanError("%s: weights_gib is unknown; give weights_gib, a model_dir with the checkpoint, "
                              "or kv_cache_space_gib" % label)
        pool = kv_pool_bytes(gpu_memory_utilization, device_total_gib, weights_gib, activation_gib, tp)
        pool_line = ("KV pool %.2f x %.2f GiB - weights %.2f%s - activations %.2f = %s GiB per rank"
                     % (gpu_memory_utilization, device_total_gib, weights_gib,
                        "/%d" % tp if tp > 1 else "", activation_gib, _fmt_gib(pool)))
        if weights_source:
            pool_line += " (weights from %s)" % weights_source
        source = "gpu_memory_utilization"
    layer_bytes = layer_bytes_per_token(layout, dtype_bytes)
    sized = kv_cache_tokens(pool, layer_bytes, layout["layer_counts"], block_size)
    tokens = sized["tokens"]
    groups = ""
    if sized["num_groups"] > 1:
        groups = " in %d groups of %d layers" % (sized["num_groups"], sized["group_size"])
    reasoning.append(
        "%s: %s -> %s // (%d tokens x %s B x %d layers) = %s blocks%s = %s tokens = %.2f full-context requests (%s)"
        % (label, pool_line, "{:,}".format(max(pool, 0)), block_size, "{:,}".format(layer_bytes),
           sized["group_size"], "{:,}".format(sized["num_blocks"]), groups, "{:,}".format(tokens),
           floor_hundredths(tokens, max_model_len), "{:,}".format(max_model_len)))
    return {
        "kv_tokens": tokens,
        "per_host_kv_tokens": [tokens],
        "kv_cache_gib": to_gib(pool),
        "num_blocks": sized["num_blocks"],
        "full_context_requests": floor_hundredths(tokens, max_model_len),
        "source": source,
        "tensor_parallel_size": tp,
    }
