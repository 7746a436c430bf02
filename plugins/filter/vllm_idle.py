# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vllm_idle
short_description: Whether a vLLM engine has no request left, from its own metrics
version_added: 0.1.0
description:
  - Takes a M(factory_floor.llm.vllm_metrics) result for one engine and returns true only when every engine answered
    (C(complete)) and its C(total) C(vllm:num_requests_running) and C(vllm:num_requests_waiting) are both numbers and 0
    (requests, as vLLM exports them). A metric that is missing or not a number is not idle.
  - Used by the C(factory_floor.llm.rolling_restart) role's C(leave) (a drained replica stops only when idle).
options:
  _input:
    description: The M(factory_floor.llm.vllm_metrics) result (C(complete), C(total)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Wait until the replica's in-flight requests have finished
  factory_floor.llm.vllm_metrics:
    engines: [{name: spark-a, url: "http://127.0.0.1:8000"}]
  register: inflight
  until: inflight | factory_floor.llm.vllm_idle
  retries: 300
  delay: 2
"""

RETURN = r"""
_value:
  description: True when the engine runs and queues no request.
  type: bool
"""

from numbers import Number


def vllm_idle(result):
    """Filter entry point."""
    result = result if isinstance(result, dict) else {}
    total = result.get("total") or {}
    counts = [total.get("num_requests_running"), total.get("num_requests_waiting")]
    return bool(result.get("complete")) and all(isinstance(count, Number) and count == 0 for count in counts)


class FilterModule:
    """A vLLM engine with no request left."""

    def filters(self):
        return {"vllm_idle": vllm_idle}
