#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: unit_disable
short_description: Stop and disable a unit a role installed, clear its failed state and remove what it leaves behind
version_added: 0.1.0
description:
  - "C(systemctl disable --now), not only a stop: an operations layer that restarts enabled units would otherwise bring
    back what the other topology replaced (an engine, a watchdog). Looks for the unit's file in O(unit_dir) first; a
    unit whose file is not there (never installed on this host) is left alone."
  - "Then removes O(remove) (always: a leftover of an earlier run goes too) and clears the unit's failed state
    (C(systemctl reset-failed); a unit that failed - a candidate that could not start and was rolled back - stays
    C(failed) after the stop otherwise). Check mode predicts the stop and the removals and clears nothing."
  - The C(factory_floor.llm.vllm) role's C(service) (state V(disabled)) and the C(factory_floor.llm.vllm_watchdog)
    role's other topology's watchdog use it.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  unit:
    description: The unit (C(vllm-split.service)).
    type: str
    required: true
  unit_dir:
    description: Where the role writes the unit's file.
    type: path
    default: /etc/systemd/system
  remove:
    description: Files that go with the unit (its last verdict in node_exporter's textfile directory).
    type: list
    elements: path
    default: []
seealso:
  - module: factory_floor.llm.daemon_service
"""

EXAMPLES = r"""
- name: Disable --now the split's engine (the replicas run)
  factory_floor.llm.unit_disable:
    unit: vllm-split.service

- name: Disable --now the other topology's watchdog, and its last verdict with it
  factory_floor.llm.unit_disable:
    unit: vllm-split-watchdog.service
    remove: [/var/lib/node_exporter/textfile/factory_floor_watchdog_vllm-split.prom]
"""

RETURN = r"""
present:
  description: The unit's file was there (the unit was stopped and disabled).
  returned: always
  type: bool
  sample: true
removed:
  description: The files of O(remove) that were there and were removed (would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/node_exporter/textfile/factory_floor_watchdog_vllm-split.prom]
"""
