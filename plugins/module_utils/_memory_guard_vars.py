# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard role's derived values (roles/memory_guard/vars/main.yml). Pure logic.

Each function gives what one of the role's internal variables held as a Jinja expression,
value for value: the workloads placed inside memory_guard_slice, the command that reads the
engines' last start from the journal, the model directory the share is computed for, and
the model's two figures with where each comes from.
"""

from __future__ import annotations

import re
import shlex

# The lines of vLLM's start-up log factory_floor.llm.gpu_memory_utilization reads.
ENGINE_LOG_PATTERN = "Model loading took|KV cache memory|CUDA graph|Free memory on device|GiB for KV cache|KV cache size"


def _named(workloads, key):
    """The workloads that name ``key`` (a unit, a slice) with a non-empty value."""
    return [w for w in workloads if key in w and w[key]]


def slice_prefix(memory_guard_slice):
    """``a-b.slice`` -> ``a-b-``: the name start of a slice placed inside it (systemd places slices by name)."""
    return re.sub(r"\.slice$", "", str(memory_guard_slice)) + "-"


def inside(workloads, memory_guard_slice):
    """The workloads inside memory_guard_slice: every one with a unit, then those whose slice is named
    ``<memory_guard_slice stem>-*``."""
    prefix = slice_prefix(memory_guard_slice)
    return _named(workloads, "unit") + [w for w in _named(workloads, "slice") if str(w["slice"]).startswith(prefix)]


def _quote(value):
    """Ansible's ``quote`` filter: shell-quoted text, None as empty."""
    return shlex.quote("" if value is None else str(value))


def engine_log_command(units):
    """A shell command printing the start-up lines of the engine unit (of ``units``) started last."""
    return (
        "for u in %s; do"
        " t=$(systemctl show -p ExecMainStartTimestampMonotonic --value \"$u\" 2>/dev/null);"
        " i=$(systemctl show -p InvocationID --value \"$u\" 2>/dev/null);"
        " [ -n \"$i\" ] && [ \"${t:-0}\" != 0 ] && echo \"$t $i\"; done | sort -n | tail -n 1 |"
        " while read -r t i; do journalctl -q -o cat \"_SYSTEMD_INVOCATION_ID=$i\" |"
        " grep -E '%s' || true; done" % (" ".join(_quote(u) for u in units), ENGINE_LOG_PATTERN))


def model_dir(split, vllm_model, vllm_split_model):
    """The model the share is computed for: the split's (``vllm_split_model``, given already defaulted to
    ``vllm_model``) when the topology is the split, else ``vllm_model``."""
    return vllm_split_model if split else vllm_model


_MISSING = object()


def figures(model, weights_gib=None, min_kv_gib=None):
    """The model's two figures and their sources: the inventory's (``memory_guard_weights_gib``,
    ``memory_guard_min_kv_gib``) when set, else what factory_floor.llm.model_memory read (``model``, its
    registered result; skipped or absent reads as none and ``unknown``)."""
    model = model if isinstance(model, dict) else {}

    def read(key, default):
        value = model.get(key, _MISSING)
        return default if value is _MISSING else value

    return {
        "weights_gib": weights_gib if weights_gib is not None else read("weights_gib", None),
        "min_kv_gib": min_kv_gib if min_kv_gib is not None else read("min_kv_gib", None),
        "weights_source": "memory_guard_weights_gib" if weights_gib is not None else read("weights_source", "unknown"),
        "min_kv_source": "memory_guard_min_kv_gib" if min_kv_gib is not None else read("min_kv_source", "unknown"),
    }
