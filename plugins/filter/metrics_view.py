# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: metrics_view
short_description: The model-wide metrics view's lines - what was read, from which topology, then the table
version_added: 0.1.0
description:
  - The first line says the topology read and where it came from, how many engines were counted of how many listed,
    those that could not be read and those that restarted between the two reads; then the table of
    M(factory_floor.llm.vllm_metrics).
  - Used by the C(factory_floor.llm.site_view) role's C(metrics) entry point (C(metrics.yml)).
options:
  _input:
    description: The M(factory_floor.llm.vllm_metrics) module's result.
    type: dict
    required: true
  source:
    description: Where the topology came from - M(factory_floor.llm.serving_engines)'s RV(factory_floor.llm.serving_engines#module:topology_source).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Print the model-wide view
  ansible.builtin.debug:
    msg: "{{ metrics | factory_floor.llm.metrics_view(serving.topology_source) }}"
"""

RETURN = r"""
_value:
  description: The lines to print, the summary first.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._serving_engines import view


def metrics_view(metrics, source):
    """Filter entry point."""
    if not isinstance(metrics, dict):
        raise AnsibleFilterError("metrics_view expects the vllm_metrics result (a dict), got %s" % type(metrics).__name__)
    return view(metrics, source)


class FilterModule:
    """The metrics view's lines."""

    def filters(self):
        return {"metrics_view": metrics_view}
