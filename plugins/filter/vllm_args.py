# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vllm_args
short_description: Build vLLM's command-line arguments from settings named after its flags
version_added: 0.1.0
description:
  - Turns a dictionary of vLLM settings (keys are vLLM's flag names with underscores,
    for example C(max_num_seqs) for C(--max-num-seqs)) into the list of arguments for
    C(vllm serve). Used by the C(vllm_replica) and C(vllm_split) roles so both launch vLLM
    the same way.
  - C(None) values are left out (vLLM's default applies). C(speculative_config) is written
    as compact JSON. C(enable_prefix_caching) becomes C(--enable-prefix-caching) or
    C(--no-enable-prefix-caching). C(api_key) is never put on the command line (it would be
    readable in /proc); the roles pass it as C(VLLM_API_KEY) in a root-only environment file.
options:
  _input:
    description: vLLM settings, keyed by flag name with underscores.
    type: dict
    required: true
  extra_args:
    description: Arguments appended as given, for flags the collection does not name.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Arguments for one replica
  ansible.builtin.debug:
    msg: "{{ {'model': '/models/m', 'max_num_seqs': 12, 'kv_cache_dtype': 'fp8'} | factory_floor.llm.vllm_args }}"
  # -> ['/models/m', '--max-num-seqs', '12', '--kv-cache-dtype', 'fp8']
"""

RETURN = r"""
_value:
  description: The arguments, in a stable order (idempotent unit files).
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, build_args


def vllm_args(settings, extra_args=None):
    """Filter entry point."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("vllm_args expects a dict of vLLM settings, got %s" % type(settings).__name__)
    try:
        return build_args(settings, extra_args)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """vLLM filters."""

    def filters(self):
        return {"vllm_args": vllm_args}
