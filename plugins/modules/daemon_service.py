#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: daemon_service
short_description: Start a daemon's unit and restart it when it does not run on its files on disk; or remove it
version_added: 0.1.0
description:
  - "Asks M(factory_floor.llm.systemd_unit_info) (read-only, also in check mode) whether systemd has read O(unit) as it
    is on disk and whether its process started before one of O(files) changed, then starts and enables it with
    C(ansible.builtin.systemd_service), reloading systemd first when it has not read the unit (or O(unit_changed)),
    and restarts it when the start did not start it and it does not run on its files, or this run changed one of them
    (O(changed), O(unit_changed): what check mode, which writes nothing, predicts)."
  - "A run interrupted after it wrote the files and before the restart would otherwise leave the old process running
    on the old code or configuration: the next run, which changes no file, still restarts it."
  - "In check mode with O(unit_changed) nothing is started: the unit file was not written."
  - "With O(state=absent): when O(marker) exists (the role installed the daemon), stops and disables O(unit), removes
    O(files) and makes systemd forget the unit (C(daemon-reload)); without it nothing is touched - a daemon the role
    never installed is left alone."
  - "The C(factory_floor.llm.memory_guard) role's watch and the C(factory_floor.llm.keepalived) role's watch use it."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Predicts the start and the restart as C(ansible.builtin.systemd_service) does.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  unit:
    description: The daemon's systemd unit.
    type: str
    required: true
  files:
    description: Every file the daemon runs on - its unit file, its configuration, its code - absolute paths.
    type: list
    elements: str
    default: []
  changed:
    description: This run changed the daemon's code or configuration (the tasks that wrote them report changed).
    type: bool
    default: false
  unit_changed:
    description: This run changed the daemon's unit file.
    type: bool
    default: false
  state:
    description: V(present) runs it on its current files; V(absent) takes it out.
    type: str
    default: present
    choices: [present, absent]
  marker:
    description: With O(state=absent), the file whose presence says the role installed the daemon; default the first of O(files).
    type: str
seealso:
  - module: factory_floor.llm.systemd_unit_info
"""

EXAMPLES = r"""
- name: Start and enable the watch, restarted when it is not on its current code, configuration or unit
  factory_floor.llm.daemon_service:
    unit: factory-floor-memory-guard.service
    files: [/etc/systemd/system/factory-floor-memory-guard.service, /etc/factory-floor/memory-guard.json]
    changed: "{{ __config is changed }}"
    unit_changed: "{{ __unit_file is changed }}"

- name: Stop and remove the watch, when this role installed it
  factory_floor.llm.daemon_service:
    unit: factory-floor-memory-guard.service
    files: [/etc/systemd/system/factory-floor-memory-guard.service, /etc/factory-floor/memory-guard.json]
    state: absent
"""

RETURN = r"""
changed:
  description: The start or the restart changed something.
  returned: always
  type: bool
info:
  description: M(factory_floor.llm.systemd_unit_info)'s result for O(unit) (C(need_daemon_reload), C(restart), C(units)).
  returned: with O(state=present)
  type: dict
started:
  description: C(ansible.builtin.systemd_service)'s result of the start; null when nothing was started (check mode, a new unit).
  returned: with O(state=present)
  type: dict
restarted:
  description: C(ansible.builtin.systemd_service)'s result of the restart; null when it was not restarted.
  returned: with O(state=present)
  type: dict
removed:
  description: The files of O(files) removed (or, in check mode, to remove); empty when the marker is gone.
  returned: with O(state=absent)
  type: list
  elements: str
"""
