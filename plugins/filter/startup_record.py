# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: startup_record
short_description: A host's start-up file with this run's measured start-ups added
version_added: 0.1.0
description:
  - Takes the C(slurp) result of the host's start-up file (JSON, seconds by name - C(replicas), C(split),
    C(replicas_gate), C(split_gate)) and returns its start-ups with this run's added, which replace those of the same
    name. A result without content (no file yet, not read) starts from none.
  - Used by the C(record_startup) entry point of the C(factory_floor.llm.maintenance_window) role, which writes it with
    C(to_json).
options:
  _input:
    description: The C(slurp) result; an empty dict when it did not run.
    type: dict
    required: true
  record:
    description: This run's measured start-ups, seconds by name (C(maintenance_window_startup_record)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Record the measured start-up
  ansible.builtin.copy:
    content: "{{ startup_file | factory_floor.llm.startup_record({'split': 131.0}) | to_json }}"
    dest: /var/lib/factory-floor/startup.json
    mode: "0644"
  # file {"replicas": 48.5, "split": 140.0} -> {"replicas": 48.5, "split": 131.0}
"""

RETURN = r"""
_value:
  description: Seconds by name.
  type: dict
  sample: {replicas: 48.5, split: 131.0}
"""

import base64
import json
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def startup_record(slurped, record):
    """Filter entry point."""
    if not isinstance(record, Mapping):
        raise AnsibleFilterError("startup_record expects this run's start-ups (a dict), got %r" % (record,))
    content = slurped["content"] if isinstance(slurped, Mapping) and "content" in slurped else "e30="
    saved = json.loads(base64.b64decode(content).decode("utf-8"))
    if not isinstance(saved, Mapping):
        raise AnsibleFilterError("startup_record expects the start-up file to hold a dict, got %r" % (saved,))
    merged = dict(saved)
    merged.update(record)
    return merged


class FilterModule:
    """A host's start-ups with this run's."""

    def filters(self):
        return {"startup_record": startup_record}
