#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_service
short_description: Start a vLLM engine's unit, restart it when it runs another configuration, and check it runs this one
version_added: 0.1.0
description:
  - "O(state=started): restarts the engine's unit when its plan says it runs another configuration than the one just
    rendered (O(plan) C(restart_pending), from the configuration fingerprint, not from what this run changed: a run
    that wrote a new unit and failed before the restart left the old process running, and the next run restarts it)
    and O(restart) allows it; then starts and enables it. After a restart or a start that changed something (not in
    check mode) it runs M(factory_floor.llm.vllm_engine_info) with C(require_match), failing unless the process runs
    O(argv) with O(fingerprint)."
  - "O(state=present): only makes systemd read the unit (C(systemctl daemon-reload)) when O(reload)."
  - "Every C(systemd_service) step reloads systemd when O(reload) (the unit changed in this run, or systemd's
    C(NeedDaemonReload), read by M(factory_floor.llm.engine_plan)): a restart without it runs the definition systemd
    loaded before."
  - "An engine left on its old configuration (O(restart=false)) is named in RV(note); the C(factory_floor.llm.vllm)
    role's C(service) prints it. The steps are C(plugins/module_utils/_engine_service.py)'s; the action plugin runs
    them on the host."
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
    description: The engine's systemd unit (C(vllm-replica.service), C(vllm-split.service); C(vllm_service_name)).
    type: str
    required: true
  state:
    description: V(started) runs the engine; V(present) only has systemd read the staged unit (C(vllm_service_state)).
    type: str
    choices: [started, present]
    default: started
  restart:
    description: Restart the engine when it runs another configuration (C(vllm_service_restart)); V(false) leaves it.
    type: bool
    default: true
  plan:
    description:
      - The engine's plan (C(vllm_service_plan), M(factory_floor.llm.engine_plan)'s RV(factory_floor.llm.engine_plan#module:plan)),
        read for C(restart_pending) (bool) and C(change) (text, what differs).
    type: dict
    required: true
  reload:
    description: Reload systemd with the first step (the unit changed in this run, or systemd's C(NeedDaemonReload)).
    type: bool
    default: false
  argv:
    description: The command line just rendered (M(factory_floor.llm.engine_plan)'s C(argv)), for the check.
    type: list
    elements: str
    default: []
  fingerprint:
    description: The configuration fingerprint just rendered (M(factory_floor.llm.engine_plan)'s), for the check; never shown.
    type: str
    default: ""
seealso:
  - module: factory_floor.llm.engine_plan
  - module: factory_floor.llm.vllm_engine_info
"""

EXAMPLES = r"""
- name: Start the engine, restart it when it runs another configuration, and check it runs the one just rendered
  factory_floor.llm.engine_service:
    unit: vllm-replica.service
    restart: true
    plan: "{{ vllm_service_plan }}"
    reload: "{{ __vllm_unit_file is changed or __vllm_plan.need_daemon_reload }}"
    argv: "{{ __vllm_argv }}"
    fingerprint: "{{ __vllm_plan.fingerprint }}"
  register: __vllm_service
"""

RETURN = r"""
plan:
  description: O(plan) after the steps; C(restart_pending) false once a restart ran (was predicted, in check mode).
  returned: always
  type: dict
  sample: {restart_pending: false, change: "--max-num-seqs 12 -> 10"}
note:
  description: The sentence naming an engine left on its old configuration (O(restart=false)); empty otherwise.
  returned: always
  type: str
  sample: >-
    vllm-replica.service on spark-a runs another configuration than the one just rendered (--max-num-seqs 12 -> 10);
    not restarted now (vllm_service_restart is false).
steps:
  description: Each C(systemd_service) step that ran (V(reload), V(restart), V(start)) and its result.
  returned: always
  type: dict
checked:
  description: M(factory_floor.llm.vllm_engine_info)'s result after a restart or a start; null when not checked.
  returned: always
  type: dict
"""
