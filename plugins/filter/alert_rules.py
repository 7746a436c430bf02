# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: alert_rules
short_description: The collection's alert rules with a site's windows and thresholds
version_added: 0.1.0
description:
  - Takes the parsed rules file C(extras/prometheus/factory-floor-alerts.yml) and returns a copy in which the named
    alerts have the site's own C(for:) window and threshold, without the rule groups the site does not need.
  - An alert's threshold is the number its expression ends with, after its last comparison
    (C(vllm:num_requests_waiting > 12)); an alert whose expression ends otherwise takes none.
  - Every setting is checked before anything is returned; a wrong one fails naming the variable (C(monitoring_alert_for),
    C(monitoring_alert_thresholds), C(monitoring_skip_groups)), the alert and what to write (the closest alert name for
    a misspelled one).
  - Used by the C(factory_floor.llm.monitoring) role.
options:
  _input:
    description: The rules file, parsed (C(lookup('file', ...) | from_yaml)).
    type: dict
    required: true
  durations:
    description: Alert name to its C(for:) window, a Prometheus duration (C(30s), C(5m), C(1h30m)).
    type: dict
    default: {}
  thresholds:
    description: Alert name to the number its expression ends with (the unit of the expression - seconds, requests, fraction).
    type: dict
    default: {}
  skip_groups:
    description: Names of rule groups to leave out.
    type: list
    elements: str
    default: []
  named:
    description:
      - Variable name to its value, for the role's named duration settings (C(monitoring_out_of_rotation_for)) - each
        must be a Prometheus duration, checked first and refused naming the variable.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The rules with a 1 minute window for an engine out of rotation and a 5 s TTFT p95 threshold
  ansible.builtin.copy:
    content: >-
      {{ lookup('ansible.builtin.file', 'extras/prometheus/factory-floor-alerts.yml') | from_yaml
         | factory_floor.llm.alert_rules(durations={'FactoryFloorEngineOutOfRotation': '1m'},
                                         thresholds={'VLLMTimeToFirstTokenHigh': 5},
                                         skip_groups=['factory-floor-floating-address'])
         | to_nice_yaml(width=1000) }}
    dest: /etc/prometheus/rules/factory-floor.yml
    mode: "0644"
    validate: promtool check rules %s
"""

RETURN = r"""
_value:
  description: The rules file with the settings applied, as a dict (C(groups), each C(name) and C(rules)).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._alert_rules import RuleSettingError, apply


def _plain(value):
    """Ansible's mappings and sequences as plain dicts and lists (the module_util takes those)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def alert_rules(rules, durations=None, thresholds=None, skip_groups=None, named=None):
    """Filter entry point."""
    if not isinstance(rules, Mapping):
        raise AnsibleFilterError("alert_rules expects the parsed rules file (a dict), got %s" % type(rules).__name__)
    try:
        return apply(_plain(rules), _plain(durations), _plain(thresholds), _plain(skip_groups), _plain(named))
    except RuleSettingError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """The collection's alert rules with a site's settings."""

    def filters(self):
        return {"alert_rules": alert_rules}
