#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: systemd_reload
short_description: Reload systemd when it has not loaded units as they are on disk, and start them; never a restart
version_added: 0.1.0
description:
  - "Asks M(factory_floor.llm.systemd_unit_info) (read-only, also in check mode) whether systemd has loaded O(units) as
    they are on disk (C(NeedDaemonReload)), then reloads systemd (C(systemctl daemon-reload),
    C(ansible.builtin.systemd_service)) when it has not, or when O(reload) says this run changed one of their files.
    With O(start), starts and enables each of O(units), the reload done with the first start."
  - "A drop-in's or a slice's settings (C(Restart=), C(After=), C(MemoryHigh=)) apply once systemd has read them, with
    no restart: a run that wrote them and stopped before it reloaded is caught by the next one, which writes nothing.
    What runs is never restarted (M(factory_floor.llm.daemon_service) restarts a daemon on changed files)."
  - "The C(factory_floor.llm.nginx_proxy) role (C(nginx.service) and its drop-in), the C(factory_floor.llm.keepalived)
    role (C(keepalived.service) and its drop-in) and the C(factory_floor.llm.memory_guard) role (the workloads' slice
    and drop-ins, the engines' start check) use it."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Reads for real; predicts the reload and the start as C(ansible.builtin.systemd_service) does.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  units:
    description: The units whose files a role wrote (C(nginx.service), a slice, a service with a drop-in).
    type: list
    elements: str
    required: true
  start:
    description: Also start and enable each of O(units) (C(state=started), C(enabled=true)).
    type: bool
    default: false
  reload:
    description: Reload systemd in any case - this run changed one of the units' files (what check mode, which writes nothing, predicts).
    type: bool
    default: false
seealso:
  - module: factory_floor.llm.systemd_unit_info
  - module: factory_floor.llm.daemon_service
"""

EXAMPLES = r"""
- name: Start and enable nginx, reloading systemd first when it has not read nginx's drop-in as it is on disk
  factory_floor.llm.systemd_reload:
    units: [nginx.service]
    start: true
    reload: "{{ __dropin is changed }}"

- name: Reload systemd when it has not loaded the slice and the drop-ins as they are on disk
  factory_floor.llm.systemd_reload:
    units: [workloads.slice, postgresql.service]
"""

RETURN = r"""
changed:
  description: The reload or a start changed something.
  returned: always
  type: bool
info:
  description: M(factory_floor.llm.systemd_unit_info)'s result for O(units) (C(need_daemon_reload), C(units)).
  returned: always
  type: dict
reloaded:
  description: systemd was reloaded (or, in check mode, would be).
  returned: always
  type: bool
steps:
  description: C(ansible.builtin.systemd_service)'s results, in order (the reload, or each start); empty when nothing was to do.
  returned: always
  type: list
  elements: dict
"""
