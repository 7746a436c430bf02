# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV cache plan of one model on this hardware, replicas against split, with its
reasoning in lines for people. Pure logic on ``_kv_cache`` (vLLM's own arithmetic),
for the kv_cache_plan module.
"""

from __future__ import annotations

import math

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import split_sizes
from ansible_collections.factory_floor.llm.plugins.module_utils._kv_cache import (
    DEFAULT_ACTIVATION_GIB,
    DEFAULT_CUDA_GRAPH_GIB,
    DEFAULT_NON_TORCH_GIB,
    DEFAULT_SPLIT_TP,
    GB10_DEVICE_TOTAL_GIB,
    KVPlanError,
    MAMBA_SSM_CACHE_DTYPES,
    _DTYPE_BYTES,
    _fmt_gib,
    advise,
    attention_layout,
    cache_layers,
    engine_defaults,
    floor_hundredths,
    kv_cache_capacity,
    kv_dtype,
    kv_pool_bytes,
    layer_bytes_per_token,
    max_model_len_of,
    model_dtype,
    text_config,
    to_bytes,
    to_gib,
)


def plan_kv_cache(config=None, kv_cache_dtype="auto", gpu_memory_utilization=None,
                  device_total_gib=GB10_DEVICE_TOTAL_GIB, weights_gib=None,
                  activation_gib=DEFAULT_ACTIVATION_GIB, max_model_len=None,
                  tensor_parallel_size=DEFAULT_SPLIT_TP, need_tokens=None, need_full_context_requests=None,
                  kv_cache_space_gib=None, block_size=None, per_host_kv_tokens=None,
                  split_kv_tokens=None, weights_source=None, max_num_batched_tokens=None,
                  cuda_graph_gib=DEFAULT_CUDA_GRAPH_GIB, non_torch_gib=DEFAULT_NON_TORCH_GIB,
                  mamba_ssm_cache_dtype="auto", enable_prefix_caching=True, engine_hosts=None):
    """KV cache of one replica (tp=1) and of the split, and the advice.

    With ``engine_hosts`` (the site's engine host count) and a model config, also
    ``groupings``: every way to cut that many hosts into engine groups whose sizes the
    model's heads allow (:func:`plan_groupings`).

    The pool per rank is ``kv_cache_space_gib`` when given (vLLM on CPU:
    ``VLLM_CPU_KVCACHE_SPACE``, and then vLLM's CPU defaults apply, see
    :func:`engine_defaults`), else :func:`kv_pool_bytes`.
    ``per_host_kv_tokens`` / ``split_kv_tokens`` replace the computed token
    counts (what-if). Returns a dict; see the module's RETURN.
    """
    reasoning = []
    layout = split_layout = None
    dtype_name = dtype_bytes = None
    if block_size is not None and block_size < 1:
        raise KVPlanError("block_size must be at least 1, got %s" % block_size)
    if mamba_ssm_cache_dtype not in MAMBA_SSM_CACHE_DTYPES:
        raise KVPlanError("mamba_ssm_cache_dtype %r is not one of %s"
                          % (mamba_ssm_cache_dtype, ", ".join(MAMBA_SSM_CACHE_DTYPES)))
    engine = {"block_size": block_size, "max_num_batched_tokens": max_num_batched_tokens,
              "mamba_ssm_cache_dtype": mamba_ssm_cache_dtype, "cuda_graph_gib": cuda_graph_gib,
              "non_torch_gib": non_torch_gib, "enable_prefix_caching": enable_prefix_caching}
    if config is not None:
        dtype_name, dtype_bytes, dtype_note = kv_dtype(kv_cache_dtype, text_config(config))
        engine["model_dtype_bytes"] = _DTYPE_BYTES[model_dtype(text_config(config))[0]]
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

    per_host = _side("one host (tensor_parallel_size 1)", layout, 1, dtype_bytes, engine, max_model_len,
                     kv_cache_space_gib, gpu_memory_utilization, device_total_gib, weights_gib,
                     activation_gib, per_host_kv_tokens, reasoning, weights_source)
    split = _side("split (tensor_parallel_size %d, one rank per host)" % tensor_parallel_size, split_layout,
                  tensor_parallel_size, dtype_bytes, engine, max_model_len, kv_cache_space_gib,
                  gpu_memory_utilization, device_total_gib, weights_gib, activation_gib,
                  None if split_kv_tokens is None else [split_kv_tokens], reasoning, weights_source,
                  optional=True)
    reasoning.append(need_line)
    groupings = None
    if engine_hosts is not None:
        if engine_hosts < 1:
            raise KVPlanError("engine_hosts must be at least 1, got %s" % engine_hosts)
        if layout is None:
            raise KVPlanError("engine_hosts needs the model's config (model_dir or model_config): the group sizes "
                              "the model splits over come from its heads")

        def group_side(size):
            return _side("group of %d (tensor_parallel_size %d)" % (size, size), attention_layout(config, size), size,
                         dtype_bytes, engine, max_model_len, kv_cache_space_gib, gpu_memory_utilization,
                         device_total_gib, weights_gib, activation_gib, None, [], weights_source)

        heads = text_config(config)
        groupings = plan_groupings(engine_hosts, group_side, max_model_len, need_tokens,
                                   heads.get("num_attention_heads"), heads.get("num_key_value_heads"))
        reasoning.extend(groupings_lines(groupings, max_model_len))
    topology, reason = advise(per_host["per_host_kv_tokens"], split and split["kv_tokens"], need_tokens)
    reasoning.append(reason)

    result = {
        "topology": topology,
        "need_tokens": need_tokens,
        "max_model_len": max_model_len,
        "kv_cache_dtype": dtype_name,
        "dtype_bytes": dtype_bytes,
        "block_size": per_host.get("block_size") or block_size,
        "bytes_per_token": None,
        "max_num_batched_tokens": per_host.get("max_num_batched_tokens"),
        "per_host": per_host,
        "split": split,
        "layout": None,
        "reasoning": reasoning,
        "groupings": groupings,
    }
    if layout is not None:
        result["bytes_per_token"] = layer_bytes_per_token(layout, dtype_bytes) * sum(layout["layer_counts"].values())
        result["layout"] = {
            "mla": layout["mla"],
            "num_layers": layout["num_layers"],
            "kv_cache_layers": sum(layout["layer_counts"].values()),
            "layer_counts": layout["layer_counts"],
            "skipped_layers": layout["skipped_layers"],
            "recurrent_layers": layout["recurrent_layers"],
            "layer_types_source": layout["kinds_source"],
            "num_kv_heads": layout["num_kv_heads"],
            "head_dim": layout["head_dim"],
        }
    return result


def _partitions(total, sizes, largest=None):
    """Every multiset of ``sizes`` adding up to ``total``, largest part first."""
    if total == 0:
        yield []
        return
    for size in sorted(sizes, reverse=True):
        if size <= total and (largest is None or size <= largest):
            for rest in _partitions(total - size, sizes, size):
                yield [size] + rest


def plan_groupings(engine_hosts, side, max_model_len, need_tokens, num_attention_heads=None,
                   num_key_value_heads=None):
    """The KV cache of each grouping of ``engine_hosts`` hosts, most groups first.

    ``side(size)`` is one group's side (``_side``'s dict) at tensor_parallel_size ``size``.
    A grouping is a list of group sizes the model's heads allow (``_engine_groups.split_sizes``);
    per grouping: its groups' KV tokens and full-context requests, their sum, whether every
    group holds one full-context request (vLLM does not start otherwise) and the need.
    """
    allowed = split_sizes(num_attention_heads, num_key_value_heads, most=engine_hosts)
    sides = {size: side(size) for size in allowed}
    found = []
    for sizes in sorted(_partitions(engine_hosts, allowed), key=lambda p: (-len(p), p)):
        tokens = [sides[size]["kv_tokens"] for size in sizes]
        requests = [sides[size]["full_context_requests"] for size in sizes]
        found.append({
            "sizes": sizes,
            "groups": len(sizes),
            "kv_tokens": tokens,
            "full_context_requests": requests,
            "total_full_context_requests": round(sum(requests), 2),
            "starts": min(tokens) >= max_model_len,
            "holds_need": min(tokens) >= need_tokens,
        })
    return found


def groupings_lines(groupings, max_model_len):
    """One reasoning line per grouping."""
    lines = []
    for option in groupings:
        parts = []
        for size, tokens, requests in zip(option["sizes"], option["kv_tokens"], option["full_context_requests"]):
            if parts and parts[-1][0] == size:
                parts[-1][3] += 1
            else:
                parts.append([size, tokens, requests, 1])
        words = " + ".join("%s of %d: %s tokens (%.2f full-context)%s"
                           % ("group" if count == 1 else "%d groups" % count, size, "{:,}".format(tokens), requests,
                              "" if count == 1 else " each")
                           for size, tokens, requests, count in parts)
        verdict = ("does not start: a group holds less than one %s-token request" % "{:,}".format(max_model_len)
                   if not option["starts"] else "every group holds the need" if option["holds_need"]
                   else "a group holds less than the need")
        lines.append("grouping %s: %s; %.2f full-context requests in all; %s"
                     % ("+".join(str(s) for s in option["sizes"]), words, option["total_full_context_requests"],
                        verdict))
    return lines


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


def _side(label, layout, tp, dtype_bytes, engine, max_model_len, kv_cache_space_gib,
          gpu_memory_utilization, device_total_gib, weights_gib, activation_gib, override, reasoning,
          weights_source, optional=False):
    """Pool, groups, blocks and tokens of one side (replica or split)."""
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
            "max_concurrency": None,
            "groups": None,
            "full_context_requests": floor_hundredths(smallest, max_model_len),
            "source": "given",
            "tensor_parallel_size": tp,
        }
    if layout is None:
        if optional:
            reasoning.append("%s: unknown (no model config and no split_kv_tokens)" % label)
            return None
        raise KVPlanError("%s: give the model's config (model_dir or model_config) or per_host_kv_tokens" % label)
    cpu = kv_cache_space_gib is not None
    if cpu:
        if kv_cache_space_gib <= 0:
            raise KVPlanError("kv_cache_space_gib must be positive, got %s" % kv_cache_space_gib)
        # VLLM_CPU_KVCACHE_SPACE is whole GiB (platforms/cpu.py: int(...) x GiB).
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
        pool = kv_pool_bytes(gpu_memory_utilization, device_total_gib, weights_gib, activation_gib, tp,
                             engine["cuda_graph_gib"], engine["non_torch_gib"])
        pool_line = ("KV pool ceil(%.2f x %.2f) GiB - weights %.2f%s - activation %.2f - CUDA graphs %.2f - "
                     "non-torch %.2f = %s GiB per rank"
                     % (gpu_memory_utilization, device_total_gib, weights_gib, "/%d" % tp if tp > 1 else "",
                        activation_gib, engine["cuda_graph_gib"], engine["non_torch_gib"], _fmt_gib(pool)))
        if weights_source:
            pool_line += " (weights from %s)" % weights_source
        source = "gpu_memory_utilization"
    defaults = engine_defaults(cpu, tp, engine["block_size"], engine["max_num_batched_tokens"])
    in_flight = defaults["max_num_batched_tokens"] * defaults["batches_in_flight"]
    ssm = engine["mamba_ssm_cache_dtype"]
    model_bytes = engine.get("model_dtype_bytes") or dtype_bytes
    layers, note = cache_layers(layout, dtype_bytes, None if ssm == "auto" else _DTYPE_BYTES[ssm], model_bytes,
                                enable_prefix_caching=engine["enable_prefix_caching"])
    sized = kv_cache_capacity(pool, layers, defaults["block_size"], max_model_len, in_flight, defaults["kernel_block"])
    tokens = sized["tokens"]
    group_text = ", ".join("%s x %d layers (%d blocks/request)" % (g["kind"], g["layers"], g["blocks_per_request"])
                           for g in sized["groups"])
    reasoning.append(
        "%s: %s -> %s // %s B per block (block %d tokens; groups: %s) = %s blocks; a %s-token request takes %d "
        "blocks (sliding windows count %s in-flight tokens: max_num_batched_tokens %s x %d) -> %s blocks / %d x %s "
        "= %s tokens (max concurrency %.2f)%s"
        % (label, pool_line, "{:,}".format(max(pool, 0)), "{:,}".format(sized["bytes_per_block"]),
           sized["block_size"], group_text, "{:,}".format(sized["num_blocks"]), "{:,}".format(max_model_len),
           sized["blocks_per_request"], "{:,}".format(in_flight), "{:,}".format(defaults["max_num_batched_tokens"]),
           defaults["batches_in_flight"], "{:,}".format(sized["num_blocks"]), sized["blocks_per_request"],
           "{:,}".format(max_model_len), "{:,}".format(tokens), sized["max_concurrency"],
           "; " + note if note else ""))
    return {
        "kv_tokens": tokens,
        "per_host_kv_tokens": [tokens],
        "kv_cache_gib": to_gib(pool),
        "num_blocks": sized["num_blocks"],
        "max_concurrency": round(sized["max_concurrency"], 2),
        "block_size": sized["block_size"],
        "max_num_batched_tokens": defaults["max_num_batched_tokens"],
        "groups": sized["groups"],
        "full_context_requests": floor_hundredths(tokens, max_model_len),
        "source": source,
        "tensor_parallel_size": tp,
    }
