# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: monitoring_alert_thresholds
short_description: The alert thresholds of the monitoring role's named settings, under the site's own dict
version_added: 0.1.0
description:
  - Returns C(VLLMQueueDeep) (C(monitoring_queue_waiting_max), requests waiting) and C(VLLMTimeToFirstTokenHigh)
    (C(monitoring_ttft_p95_seconds), seconds), then every entry of C(monitoring_alert_thresholds), which wins.
  - Used by the C(factory_floor.llm.monitoring) role, for the C(factory_floor.llm.alert_rules) filter.
options:
  _input:
    description: C(monitoring_queue_waiting_max), requests waiting.
    type: raw
    required: true
  ttft_p95_seconds:
    description: C(monitoring_ttft_p95_seconds), seconds.
    type: raw
    required: true
  alert_thresholds:
    description: C(monitoring_alert_thresholds), alert name to its threshold.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The thresholds
  ansible.builtin.debug:
    msg: "{{ 12 | factory_floor.llm.monitoring_alert_thresholds(10, {'VLLMKvCacheFull': 0.9}) }}"
  # {VLLMQueueDeep: 12, VLLMTimeToFirstTokenHigh: 10, VLLMKvCacheFull: 0.9}
"""

RETURN = r"""
_value:
  description: Alert name to its threshold (the unit of its expression).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._monitoring_inputs import thresholds


def monitoring_alert_thresholds(queue_waiting_max, ttft_p95_seconds, alert_thresholds):
    """Filter entry point."""
    try:
        return thresholds(queue_waiting_max, ttft_p95_seconds, alert_thresholds)
    except TypeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """The monitoring role's thresholds."""

    def filters(self):
        return {"monitoring_alert_thresholds": monitoring_alert_thresholds}
