# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build vLLM's command line from settings named after vLLM's own flags.

One place turns role variables into ``vllm serve`` arguments, for a replica and
for each rank of a split, so both topologies launch vLLM the same way.
Pure logic: no Ansible imports, unit-tested in tests/unit.
"""

from __future__ import annotations

import json

# Settings passed as ``--flag value``, in this order. Key = vLLM's flag with
# dashes turned into underscores (``max_num_seqs`` -> ``--max-num-seqs``).
VALUE_FLAGS = (
    "served_model_name",
    "host",
    "port",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "max_model_len",
    "max_num_seqs",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "tool_call_parser",
    "chat_template",
    "shutdown_timeout",
)
# Settings that are JSON objects on the command line.
JSON_FLAGS = ("speculative_config",)
# Booleans vLLM declares with BooleanOptionalAction (``--x`` / ``--no-x``).
OPTIONAL_BOOL_FLAGS = ("enable_prefix_caching",)
# Booleans that are plain switches (present or absent).
SWITCH_FLAGS = ("enable_auto_tool_choice", "headless")
# Never put on the command line (it is world-readable in /proc): vLLM reads
# VLLM_API_KEY from the environment instead.
SECRET_SETTINGS = ("api_key",)


class VllmArgsError(ValueError):
    """A setting that vLLM would reject, with what to change."""


def flag(name):
    """``max_num_seqs`` -> ``--max-num-seqs``."""
    return "--" + name.replace("_", "-")


def build_args(settings, extra_args=None):
    """Return ``vllm serve``'s arguments (after ``serve``) for ``settings``.

    The model comes first, as the positional argument ``vllm serve`` expects
    (its ``--model`` option is deprecated).

    ``settings`` maps vLLM flag names (underscored) to values; ``None`` and
    missing keys are left to vLLM's defaults. ``extra_args`` are appended as
    given. Raises VllmArgsError for an unknown key, so a typo in an inventory
    fails loudly instead of being ignored.
    """
    known = {"model"} | set(VALUE_FLAGS) | set(JSON_FLAGS) | set(OPTIONAL_BOOL_FLAGS) | set(SWITCH_FLAGS) | set(SECRET_SETTINGS)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise VllmArgsError(
            "unknown vLLM setting(s) %s; known: %s; pass other flags through extra args"
            % (", ".join(unknown), ", ".join(sorted(known))))
    if not settings.get("model"):
        raise VllmArgsError("model is required (the model directory or name vllm serve loads)")
    args = [str(settings["model"])]
    for key in VALUE_FLAGS:
        value = settings.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            raise VllmArgsError("%s must be a value, not a boolean" % key)
        args += [flag(key), str(value)]
    for key in JSON_FLAGS:
        value = settings.get(key)
        if value:
            args += [flag(key), json.dumps(value, sort_keys=True, separators=(",", ":"))]
    for key in OPTIONAL_BOOL_FLAGS:
        value = settings.get(key)
        if value is None:
            continue
        args.append(flag(key) if value else "--no-" + key.replace("_", "-"))
    for key in SWITCH_FLAGS:
        if settings.get(key):
            args.append(flag(key))
    args += [str(a) for a in (extra_args or [])]
    return args
