# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: memory_guard_model_dir
short_description: The model directory the memory guard computes the share for
version_added: 0.1.0
description:
  - Takes whether the topology the share is computed for is the split and returns the split's model when it is, else
    the replicas' model (C(vllm_model)).
  - Used by the C(factory_floor.llm.memory_guard) role.
options:
  _input:
    description: Whether that topology is the split.
    type: bool
    required: true
  vllm_model:
    description: The replicas' model (C(vllm_model)).
    type: str
    required: true
  vllm_split_model:
    description: The split's model (C(vllm_split_model), which defaults to C(vllm_model)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The model the share is for
  ansible.builtin.debug:
    msg: "{{ (topology == 'split') | factory_floor.llm.memory_guard_model_dir('/m/a', '/m/b') }}"
  # split -> /m/b, replicas -> /m/a
"""

RETURN = r"""
_value:
  description: The model directory.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._memory_guard_vars import model_dir


def memory_guard_model_dir(split, vllm_model, vllm_split_model):
    """Filter entry point."""
    if not isinstance(split, bool):
        raise AnsibleFilterError("memory_guard_model_dir expects whether the topology is the split (a bool), got %r" % (split,))
    return model_dir(split, vllm_model, vllm_split_model)


class FilterModule:
    """The memory guard's model."""

    def filters(self):
        return {"memory_guard_model_dir": memory_guard_model_dir}
