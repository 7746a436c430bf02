# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: serving_peers
short_description: The peers a replica's probe found serving
version_added: 0.1.0
description:
  - Takes the results of a looped health probe (C(factory_floor.llm.vllm_health) over the other replicas, C(item) the
    host) and returns the hosts whose C(status) is C(serving), in the loop's order; a result without a status (not
    run, unreachable) is not serving.
  - Used by the C(factory_floor.llm.rolling_restart) role (who carries the load while this replica restarts).
options:
  _input:
    description: The loop's C(results).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: The peers that carry the load
  ansible.builtin.debug:
    msg: "{{ peers.results | default([]) | factory_floor.llm.serving_peers }}"
  # [{item: spark-b, status: serving}, {item: spark-c, status: starting}, {item: spark-d, skipped: true}] -> [spark-b]
"""

RETURN = r"""
_value:
  description: The serving peers' C(item)s.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def serving_peers(results):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("serving_peers expects a loop's results (a list), got %r" % (results,))
    return [result["item"] for result in results if "status" in result and result["status"] == "serving"]


class FilterModule:
    """The peers serving."""

    def filters(self):
        return {"serving_peers": serving_peers}
