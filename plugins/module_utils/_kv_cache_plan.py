# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV cache plan of one model on this hardware, replicas against split, with its
reasoning in lines for people. Pure logic on ``_kv_cache`` (vLLM's own arithmetic),
for the kv_cache_plan module.
"""

from __future__ import annotations

import math

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import partitions, split_sizes
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
                  mamba_ssm_cache_dtype="auto", enable_prefix_caching=True, engine_hosts=None, sweeps=None,
                  served_model_name=None):
    """KV cache of one replica (tp=1) and of the split, and the advice.

    With ``engine_hosts`` (the site's engine host count) and a model config, also
    ``groupings``: every way to cut that many hosts into engine groups whose sizes the
    model's heads allow (:func:`plan_groupings`), with each group's tokens/s where one of ``sweeps`` (saved
    concurrency sweeps, :func:`measured_by_size`) measured its size, and ``groupings_table``.

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
        measured, ignored = measured_by_size(sweeps, served_model_name)
        groupings = plan_groupings(engine_hosts, group_side, max_model_len, need_tokens,
                                   heads.get("num_attention_heads"), heads.get("num_key_value_heads"), measured)
        reasoning.extend(groupings_lines(groupings, max_model_len))
        reasoning.extend("tokens/s of a group of %d: %s tok/s at max_num_seqs %s (%s; sweep %s)"
                         % (size, figures["tokens_per_s"], figures["max_num_seqs"], figures["basis"], figures["source"])
                         for size, figures in sorted(measured.items()))
        reasoning.extend("sweep %s not used: %s" % (item["source"], item["reason"]) for item in ignored)
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
        "groupings_table": None if groupings is None else groupings_table(groupings, max_model_len, need_tokens),
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


def plan_groupings(engine_hosts, side, max_model_len, need_tokens, num_attention_heads=None,
                   num_key_value_heads=None, measured=None):
    """The KV cache of each grouping of ``engine_hosts`` hosts, most groups first.

    ``side(size)`` is one group's side (``_side``'s dict) at tensor_parallel_size ``size``.
    A grouping is a list of group sizes the model's heads allow (``_engine_groups.split_sizes``);
    per grouping: its groups' KV tokens and full-context requests, their sum, whether every
    group holds one full-context request (vLLM does not start otherwise) and the need, and its
    verdict (:func:`grouping_verdict`). ``measured`` is :func:`measured_by_size`'s ``{size: figures}``:
    each group's tokens/s and max_num_seqs where a sweep measured its size, None where none did.
    """
    allowed = split_sizes(num_attention_heads, num_key_value_heads, most=engine_hosts)
    sides = {size: side(size) for size in allowed}
    measured = measured or {}
    found = []
    for sizes in sorted(partitions(engine_hosts, allowed), key=lambda p: (-len(p), p)):
        tokens = [sides[size]["kv_tokens"] for size in sizes]
        requests = [sides[size]["full_context_requests"] for size in sizes]
        rates = [(measured.get(size) or {}).get("tokens_per_s") for size in sizes]
        option = {
            "sizes": sizes,
            "groups": len(sizes),
            "kv_tokens": tokens,
            "total_kv_tokens": sum(tokens),
            "full_context_requests": requests,
            "total_full_context_requests": round(sum(requests), 2),
            "starts": min(tokens) >= max_model_len,
            "holds_need": min(tokens) >= need_tokens,
            "tokens_per_s": rates,
            "total_tokens_per_s": round(sum(rates), 1) if None not in rates else None,
            "max_num_seqs": [(measured.get(size) or {}).get("max_num_seqs") for size in sizes],
            "not_measured_sizes": sorted({size for size, rate in zip(sizes, rates) if rate is None}, reverse=True),
        }
        option["verdict"] = grouping_verdict(option)
        found.append(option)
    return found


def grouping_verdict(option):
    """``does not start`` (a group holds less than one full-context request: vLLM refuses to start it),
    ``short of the need`` (a group holds less than the need on its own; a request runs inside one group)
    or ``fits``."""
    if not option["starts"]:
        return "does not start"
    if not option["holds_need"]:
        return "short of the need"
    return "fits"


def sweep_figures(saved, source=None):
    """What one saved concurrency sweep (``<tune_output_dir>/<host>.json``, ``_concurrency_sweep_check.report``'s
    ``saved``) says of its engine group: ``{tensor_parallel_size, tokens_per_s, max_num_seqs, basis, host, model,
    source}``, or None when it says nothing usable (saved before sweeps recorded their ``tensor_parallel_size``, or
    no level measured tokens/s).

    ``tokens_per_s`` is the output tokens per second (vLLM's serving benchmark's definition, the sweep's own) at the
    recommended ``max_num_seqs``: the mix of profiles the sweep estimated there, else the lowest of its profiles at
    that level. Without a recommendation (no level met the latency target), the best level without a failed request,
    and ``basis`` says so.
    """
    if not isinstance(saved, dict):
        return None
    try:
        size = int(saved.get("tensor_parallel_size"))
    except (TypeError, ValueError):
        return None
    if size < 1:
        return None
    levels = [level for level in saved.get("levels") or [] if isinstance(level, dict)
              and level.get("tokens_per_s") is not None]
    recommendation = saved.get("recommendation") or {}
    seqs = recommendation.get("max_num_seqs")
    mixed = (recommendation.get("mixed_tokens_per_s") or {}).get(str(seqs))
    at_seqs = [level["tokens_per_s"] for level in levels if seqs is not None and level.get("concurrency") == seqs]
    if seqs is not None and mixed is not None:
        rate, basis = mixed, "recommended max_num_seqs %s, mix of profiles" % seqs
    elif at_seqs:
        rate, basis = min(at_seqs), "recommended max_num_seqs %s" % seqs
    else:
        clean = [level for level in levels if not level.get("requests_failed")]
        if not clean:
            return None
        best = max(clean, key=lambda level: level["tokens_per_s"])
        rate, seqs = best["tokens_per_s"], best.get("concurrency")
        basis = "best level (%s x %s; no level met the latency target)" % (best.get("profile"), seqs)
    return {"tensor_parallel_size": size, "tokens_per_s": round(float(rate), 1), "max_num_seqs": seqs,
            "basis": basis, "host": saved.get("host"), "model": (saved.get("engine") or {}).get("model"),
            "source": source or saved.get("host")}


def measured_by_size(sweeps, served_model_name=None):
    """``{tensor_parallel_size: figures}`` from saved sweeps (:func:`sweep_figures`), and the sweeps left out.

    A sweep of another served model than ``served_model_name`` (when both are known) is left out. Several sweeps of
    one size (one per host, or a pair measured on each head): the lowest tokens/s, the figure every group of that
    size reaches (the hosts are the same hardware; the rest is noise). Returns ``(by_size, ignored)``, ``ignored``
    a list of ``{source, reason}``.
    """
    by_size, ignored = {}, []
    for saved in sweeps or []:
        source = saved.get("source") if isinstance(saved, dict) else None
        figures = sweep_figures(saved, source)
        if figures is None:
            ignored.append({"source": source or (saved.get("host") if isinstance(saved, dict) else None),
                            "reason": "no tensor_parallel_size (saved before sweeps recorded it: sweep again) or "
                                      "no tokens/s measured"})
            continue
        if served_model_name and figures["model"] and figures["model"] != served_model_name:
            ignored.append({"source": figures["source"], "reason": "measured %s, not %s" % (
                figures["model"], served_model_name)})
            continue
        size = figures["tensor_parallel_size"]
        if size not in by_size or figures["tokens_per_s"] < by_size[size]["tokens_per_s"]:
            by_size[size] = figures
    return by_size, ignored


def grouping_name(sizes):
    """The grouping as the site names it: ``replicas``, ``split``, else its sizes joined with ``+``."""
    if all(size == 1 for size in sizes):
        return "replicas"
    if len(sizes) == 1:
        return "split"
    return "+".join(str(size) for size in sizes)


def _per_group(sizes, values, form):
    """One cell for a value per group: equal neighbours of one size as ``value xN`` (``not measured`` for None, of any
    size), groups joined by `` + ``."""
    if all(value is None for value in values):
        return "not measured"
    runs = []
    for size, value in zip(sizes, values):
        key = (size, value) if value is not None else (None, None)
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    cells = []
    for (_size, value), count in runs:
        text = "not measured" if value is None else form(value)
        cells.append(text if count == 1 else "%s x%d" % (text, count))
    return " + ".join(cells)


def groupings_table(groupings, max_model_len, need_tokens):
    """The groupings as a table, one row per grouping, then a line saying what the columns count."""
    head = ("grouping", "groups", "KV tokens per group", "full-context per group", "full-context in all",
            "tok/s per group", "tok/s in all", "verdict")
    body = []
    for option in groupings:
        sizes = option["sizes"]
        name = "+".join(str(size) for size in sizes)
        named = grouping_name(sizes)
        body.append((name if named == name else "%s (%s)" % (name, named), str(option["groups"]),
                     _per_group(sizes, option["kv_tokens"], "{:,}".format),
                     _per_group(sizes, option["full_context_requests"], "{:.2f}".format),
                     "%.2f" % option["total_full_context_requests"],
                     _per_group(sizes, option.get("tokens_per_s") or [None] * len(sizes), "{:.1f}".format),
                     "-" if option.get("total_tokens_per_s") is None else "%.1f" % option["total_tokens_per_s"],
                     option.get("verdict") or grouping_verdict(option)))
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [head] + body]
    lines.append("full-context = KV tokens / max_model_len %s; need %s tokens per group; tok/s = output tokens/s "
                 "from the saved concurrency sweep of that group size, in all only when every "
                 "size was measured" % ("{:,}".format(max_model_len), "{:,}".format(need_tokens)))
    return lines


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
        rate = option.get("total_tokens_per_s")
        missing = sorted(set(option.get("not_measured_sizes") or option["sizes"]), reverse=True)
        lines.append("grouping %s: %s; %.2f full-context requests in all; %s; %s"
                     % ("+".join(str(s) for s in option["sizes"]), words, option["total_full_context_requests"],
                        "%.1f tokens/s in all (measured)" % rate if rate is not None else
                        "tokens/s not measured for groups of %s" % ", ".join(str(size) for size in missing),
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
