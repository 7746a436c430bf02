# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's two model figures, from the model's own files when the inventory
gives none: the weights one rank loads, and the smallest KV cache vLLM starts with.

Pure logic on ``_kv_cache`` (vLLM's own arithmetic, the same as the kv_cache_plan module),
for the ``model_memory`` module (which reads the host's model directory) and the site check.

- weights: the summed size of the checkpoint's weight files (``*.safetensors``, only those
  ``model.safetensors.index.json`` names when it is there; ``*.bin``/``*.pt`` when there are
  no safetensors), divided by the ranks one copy is split over (tensor x pipeline parallel
  size; 1 for a replica). A checkpoint's size is what vLLM loads to within a few percent
  (it logs ``Model loading took ... GiB``); quantised checkpoints are loaded as stored.
- minimum KV cache: what one full-context request (``max_model_len`` tokens, by default
  the config's own, as vLLM derives it) takes on one rank in whole blocks of every KV
  cache group - the least vLLM starts with (it refuses to start below it). The
  kv_cache_plan module, given this pool, reports exactly one full-context request.
"""

from __future__ import annotations

import math

from ansible_collections.factory_floor.llm.plugins.module_utils import _kv_cache as kv

#: The two figures, each with the memory guard variable an inventory sets to replace it.
VARIABLES = {"weights_gib": "memory_guard_weights_gib", "min_kv_gib": "memory_guard_min_kv_gib"}


def _ceil_hundredths(n_bytes):
    """GiB rounded up to 0.01: a figure the guard reserves is never below what is needed."""
    return math.ceil(round(n_bytes / kv.GIB * 100, 6)) / 100.0


def _kv_dtype_name(kv_cache_dtype):
    # vLLM's fp8 variants the plan does not list (fp8_inc, fp8_ds_mla) are one byte too.
    name = kv_cache_dtype or "auto"
    if name not in kv.KV_CACHE_DTYPES and name.startswith("fp8"):
        return "fp8"
    return name


def weights_per_rank(checkpoint_bytes, ranks=1):
    """GiB one rank loads: the checkpoint's bytes over the ranks, rounded up to 0.01."""
    if ranks < 1:
        raise kv.KVPlanError("the ranks one copy is split over must be at least 1, got %s" % ranks)
    return _ceil_hundredths(int(math.ceil(checkpoint_bytes / float(ranks))))


def min_kv_bytes(config, max_model_len=None, kv_cache_dtype="auto", tensor_parallel_size=1, cpu=False,
                 block_size=None, max_num_batched_tokens=None, enable_prefix_caching=True):
    """``(bytes, max_model_len, lines)``: the KV cache one full-context request takes on one rank.

    Whole blocks of every KV cache group, as :func:`_kv_cache.kv_cache_capacity` allocates
    them (a pool of exactly this many bytes holds one request of ``max_model_len`` tokens).
    ``cpu``: vLLM's CPU build (block 128, no async scheduling), else CUDA's defaults.
    """
    text = kv.text_config(config)
    dtype_name, dtype_bytes, dtype_note = kv.kv_dtype(_kv_dtype_name(kv_cache_dtype), text)
    if max_model_len is None:
        max_model_len = kv.max_model_len_of(config)
        length_note = "max_model_len %s (config.json, as vLLM derives it)" % (
            "unknown" if max_model_len is None else "{:,}".format(max_model_len))
    else:
        length_note = "max_model_len {:,}".format(max_model_len)
    if max_model_len is None or max_model_len < 1:
        raise kv.KVPlanError("max_model_len is unknown: set vllm_max_model_len, or give the model a config.json "
                             "with max_position_embeddings")
    layout = kv.attention_layout(config, tensor_parallel_size)
    defaults = kv.engine_defaults(cpu, tensor_parallel_size, block_size, max_num_batched_tokens)
    model_bytes = kv._DTYPE_BYTES[kv.model_dtype(text)[0]]
    layers, note = kv.cache_layers(layout, dtype_bytes, None, model_bytes, enable_prefix_caching=enable_prefix_caching)
    in_flight = defaults["max_num_batched_tokens"] * defaults["batches_in_flight"]
    sized = kv.kv_cache_capacity(0, layers, defaults["block_size"], max_model_len, in_flight, defaults["kernel_block"])
    need = sized["bytes_per_block"] * sized["blocks_per_request"]
    lines = ["minimum KV cache: one full-context request (%s) on one rank (tensor_parallel_size %d, %s): %d blocks x "
             "%s B = %s B (KV dtype %s, %s%s)"
             % (length_note, tensor_parallel_size, "vLLM's CPU build" if cpu else "CUDA", sized["blocks_per_request"],
                "{:,}".format(sized["bytes_per_block"]), "{:,}".format(need), dtype_name, dtype_note,
                "; " + note if note else "")]
    return need, max_model_len, lines


def model_memory(config, checkpoint_bytes=None, checkpoint_files=None, model_dir="", tensor_parallel_size=1,
                 pipeline_parallel_size=1, max_model_len=None, kv_cache_dtype="auto", cpu=False, block_size=None,
                 max_num_batched_tokens=None, enable_prefix_caching=True, weights_gib=None, min_kv_gib=None):
    """The two figures and where each came from: a value given is kept, else it is read from the model.

    Returns ``{weights_gib, weights_source, min_kv_gib, min_kv_source, max_model_len, ranks, reasoning}``.
    ``config`` (``config.json``) is needed only for the minimum KV cache, ``checkpoint_bytes``
    only for the weights.
    """
    ranks = int(tensor_parallel_size) * int(pipeline_parallel_size)
    reasoning = []
    out = {"weights_gib": weights_gib, "weights_source": VARIABLES["weights_gib"] if weights_gib is not None else None,
           "min_kv_gib": min_kv_gib, "min_kv_source": VARIABLES["min_kv_gib"] if min_kv_gib is not None else None,
           "max_model_len": max_model_len, "ranks": ranks, "reasoning": reasoning}
    if weights_gib is None:
        if checkpoint_bytes is None:
            raise kv.KVPlanError("the checkpoint's size is unknown")
        out["weights_gib"] = weights_per_rank(checkpoint_bytes, ranks)
        files = list(checkpoint_files or [])
        out["weights_source"] = "%d checkpoint file(s) in %s%s" % (
            len(files), model_dir or "the model directory", " / %d ranks" % ranks if ranks > 1 else "")
        reasoning.append("weights: %s B in %s%s = %.2f GiB per rank"
                         % ("{:,}".format(checkpoint_bytes), ", ".join(files[:3]) + (" ..." if len(files) > 3 else ""),
                            " / %d ranks (tensor x pipeline parallel)" % ranks if ranks > 1 else "",
                            out["weights_gib"]))
    else:
        reasoning.append("weights: %.2f GiB (memory_guard_weights_gib, from the inventory)" % float(weights_gib))
    if min_kv_gib is None:
        if config is None:
            raise kv.KVPlanError("the model's config.json is unknown")
        need, length, lines = min_kv_bytes(config, max_model_len, kv_cache_dtype, int(tensor_parallel_size), cpu,
                                           block_size, max_num_batched_tokens, enable_prefix_caching)
        out["min_kv_gib"] = _ceil_hundredths(need)
        out["max_model_len"] = length
        out["min_kv_source"] = "config.json in %s: one full-context request of %s tokens" % (
            model_dir or "the model directory", "{:,}".format(length))
        reasoning.extend(lines)
        if int(pipeline_parallel_size) > 1:
            reasoning.append("pipeline_parallel_size %d: each rank holds about 1/%d of the layers; the minimum KV cache "
                             "counts them all (an upper bound)" % (int(pipeline_parallel_size), int(pipeline_parallel_size)))
    else:
        reasoning.append("minimum KV cache: %.2f GiB (memory_guard_min_kv_gib, from the inventory)" % float(min_kv_gib))
    return out


def unreadable(model_dir, missing, reason):
    """The message when the figures cannot be read from the host: which variable to set and where its number comes from.

    ``missing``: the figures the inventory does not give (keys of :data:`VARIABLES`).
    """
    where = {
        "weights_gib": "memory_guard_weights_gib (GiB one rank loads: the checkpoint's *.safetensors files' size, divided "
                       "by the tensor parallel size for the split; after a start vLLM logs it as 'Model loading took "
                       "... GiB')",
        "min_kv_gib": "memory_guard_min_kv_gib (GiB of KV cache the service needs at least: one full-context request, "
                      "which factory_floor.llm.kv_cache_plan gives from config.json; vLLM logs 'KV cache memory' "
                      "after a start)",
    }
    names = [key for key in ("weights_gib", "min_kv_gib") if key in missing]
    return ("the memory guard reads the model's figures from its files when the inventory does not set them, and "
            "cannot read %r here: %s. Set %s in the inventory (group_vars or host_vars), or point vllm_model "
            "(vllm_split_model for the split) at the model's directory on the host."
            % (model_dir, reason, " and ".join(where[key] for key in names)))
