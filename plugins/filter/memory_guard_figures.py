# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: memory_guard_figures
short_description: The model's two figures for the memory guard, and where each comes from
version_added: 0.1.0
description:
  - Takes the registered result of C(factory_floor.llm.model_memory) (what it read from the model's files) and returns
    the weights (GiB) and the smallest KV cache (GiB) the share is computed with - the inventory's
    C(memory_guard_weights_gib) / C(memory_guard_min_kv_gib) when set (not null), else the result's - with their
    sources (the variable's name, else the result's own C(*_source), else C(unknown)).
  - A skipped or missing result gives null figures, which the role's preflight refuses.
  - Used by the C(factory_floor.llm.memory_guard) role.
options:
  _input:
    description: The C(factory_floor.llm.model_memory) result (C(weights_gib), C(weights_source), C(min_kv_gib),
      C(min_kv_source)); an empty dict when it did not run.
    type: dict
    required: true
  weights_gib:
    description: C(memory_guard_weights_gib), GiB, or null.
    type: float
  min_kv_gib:
    description: C(memory_guard_min_kv_gib), GiB, or null.
    type: float
"""

EXAMPLES = r"""
- name: The figures the share is computed with
  ansible.builtin.debug:
    msg: "{{ model_memory_result | factory_floor.llm.memory_guard_figures(memory_guard_weights_gib, memory_guard_min_kv_gib) }}"
  # weights_gib 48 in the inventory, 6.0 read -> {weights_gib: 48, weights_source: memory_guard_weights_gib,
  # min_kv_gib: 6.0, min_kv_source: "config.json in /m: ..."}
"""

RETURN = r"""
weights_gib:
  description: The model's weights, GiB (null when neither set nor read).
  type: float
weights_source:
  description: Where C(weights_gib) comes from.
  type: str
min_kv_gib:
  description: The KV cache one full-context request needs, GiB (null when neither set nor read).
  type: float
min_kv_source:
  description: Where C(min_kv_gib) comes from.
  type: str
"""

from collections.abc import Mapping

from ansible_collections.factory_floor.llm.plugins.module_utils._memory_guard_vars import figures


def memory_guard_figures(model, weights_gib=None, min_kv_gib=None):
    """Filter entry point."""
    return figures(dict(model) if isinstance(model, Mapping) else {}, weights_gib, min_kv_gib)


class FilterModule:
    """The memory guard's model figures."""

    def filters(self):
        return {"memory_guard_figures": memory_guard_figures}
