# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.kv_cache_plan with the site read where the task does not say.

On the controller it fills the module's options the task leaves out from the variables as the task sees them
(:func:`site_args`): the model an engine group serves, its context, the engine hosts' count, the KV pool settings and
the served model name; and it reads the concurrency sweeps saved on the controller (:func:`read_sweeps`). The module
then runs on the host (the model's ``config.json`` and checkpoint are there). Its documentation is the module's.
"""

from __future__ import annotations

import glob
import json
import os

from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction

# Read by this plugin only, never passed to the module.
PLUGIN_OPTIONS = ("sweep_dir",)
DEFAULT_SWEEP_DIR = os.path.join("build", "tune-concurrency")
# Options read where the task gives none and the variable is set: what the engines run with, and the memory guard's
# figures for the rest of the device (the memory plan's own).
ENGINE_SETTINGS = dict(
    kv_cache_dtype="vllm_kv_cache_dtype", max_num_batched_tokens="vllm_max_num_batched_tokens",
    tensor_parallel_size="vllm_split_tensor_parallel_size",
    device_total_gib="memory_guard_device_total_gib", activation_gib="memory_guard_activation_gib",
    cuda_graph_gib="memory_guard_cuda_graph_gib", non_torch_gib="memory_guard_non_torch_gib",
)


def site_args(args, variable, sweeps=None):
    """``args`` with what the task leaves out read through ``variable(expression)`` (None when not defined).

    The site's plan - with none of ``model_dir``, ``model_config`` and ``per_host_kv_tokens`` - takes ``model_dir``
    from the model an engine group serves (``vllm_split_model``, else ``vllm_model``; a directory, not a hub name)
    and ``max_model_len`` from ``vllm_max_model_len``. With a model, ``engine_hosts`` is the count of
    ``groups[site_engine_group]``. ``kv_cache_space_gib`` (``vllm_env.VLLM_CPU_KVCACHE_SPACE``: vLLM's CPU build),
    else ``gpu_memory_utilization`` (``vllm_gpu_memory_utilization``), and ``served_model_name``
    (``vllm_served_model_name``) where defined, and ``ENGINE_SETTINGS``; ``sweeps`` (saved sweeps) where the task
    gives none.
    """
    args = {key: value for key, value in args.items() if key not in PLUGIN_OPTIONS}

    def fill(option, value):
        if args.get(option) is None and value not in (None, ""):
            args[option] = value

    what_if = args.get("per_host_kv_tokens") is not None
    if not what_if and args.get("model_dir") is None and args.get("model_config") is None:
        model = variable("vllm_split_model") or variable("vllm_model")
        if isinstance(model, str) and model.startswith("/"):
            args["model_dir"] = model
            fill("max_model_len", variable("vllm_max_model_len"))
    if not what_if and (args.get("model_dir") is not None or args.get("model_config") is not None):
        hosts = (variable("groups") or {}).get(variable("site_engine_group") or "gb10") or []
        fill("engine_hosts", len(hosts) or None)
    # vLLM's CPU build sizes its pool by VLLM_CPU_KVCACHE_SPACE, whatever share the memory guard computed.
    fill("kv_cache_space_gib", (variable("vllm_env") or {}).get("VLLM_CPU_KVCACHE_SPACE"))
    if args.get("kv_cache_space_gib") is None:
        fill("gpu_memory_utilization", variable("vllm_gpu_memory_utilization"))
    fill("served_model_name", variable("vllm_served_model_name"))
    for option, name in ENGINE_SETTINGS.items():
        fill(option, variable(name))
    if args.get("sweeps") is None and sweeps:
        args["sweeps"] = sweeps
    return args


def read_sweeps(directory):
    """Every saved sweep (``*.json``, a JSON object each) in ``directory`` on the controller, sorted by file name, each
    with ``source`` its path; [] when there is none. A file that is not a JSON object is left out."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(saved, dict):
            found.append(dict(saved, source=path))
    return found


class ActionModule(ModuleArgsAction):
    """Runs the module factory_floor.llm.kv_cache_plan; its documentation is the module's."""

    module = "factory_floor.llm.kv_cache_plan"

    def module_args(self, args, task_vars):
        directory = (args.get("sweep_dir") or self.variable_or_none("tune_output_dir")
                     or os.path.join(os.getcwd(), DEFAULT_SWEEP_DIR))
        sweeps = read_sweeps(os.path.expanduser(str(directory))) if args.get("sweeps") is None else None
        filled = site_args(args, self.variable_or_none, sweeps)
        self._site_read = {key: value for key, value in filled.items() if key not in args and key != "sweeps"}
        self._site_read["sweeps"] = [saved["source"] for saved in sweeps or []] if "sweeps" not in args else None
        return filled

    def run(self, tmp=None, task_vars=None):
        self._site_read = {}
        result = super().run(tmp, task_vars)
        result["site_read"] = self._site_read
        return result
