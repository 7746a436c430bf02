#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: systemd_unit_info
short_description: Whether systemd has loaded units as they are on disk, and whether their processes run the files on disk
version_added: 0.1.0
description:
  - Reads each unit in O(units) with C(systemctl show) (C(ActiveState), C(MainPID), C(NeedDaemonReload),
    C(ExecMainStartTimestampMonotonic)) and the modification time of each file in O(files).
  - RV(need_daemon_reload) says whether C(systemctl daemon-reload) must run before any of them is started or
    restarted; without it, systemd runs the definition it loaded before, whatever the file on disk says.
  - RV(restart) names the units that run (C(ActiveState) active or reloading) and are not on the files on disk
    now - systemd has not loaded the unit file as it is (C(NeedDaemonReload=yes)), or a file of O(files) was modified
    after the unit's main process started (for a C(Type=oneshot) unit with C(RemainAfterExit=), after its last
    run). The collection restarts its daemons and oneshot units by this rule, whatever run wrote the files, so a
    run that wrote them and was interrupted before the restart is caught by the next one.
  - Read-only; the caller reloads and restarts (C(ansible.builtin.systemd_service)).
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  units:
    description: The units to read (C(vllm-watchdog-replica.service), C(keepalived.service), ...).
    type: list
    elements: str
    required: true
  files:
    description:
      - The files the processes of O(units) were started from - their code, configuration and unit file - on the host.
        Compared with each unit's main process start; a file that does not exist is left out.
    type: list
    elements: path
    default: []
  systemctl:
    description: The C(systemctl) to ask.
    type: path
    default: /usr/bin/systemctl
notes:
  - A unit's main process start is C(ExecMainStartTimestampMonotonic) placed on the host's wall clock of the moment of
    the check (wall clock now minus the monotonic seconds since the start), then compared with each file's
    modification time (C(st_mtime), wall clock). A step of the wall clock after a file was written and before the
    check (by more than the time between the process's start and that write) can hide a change; a suspended host
    sees its starts late by the time it was suspended.
author:
  - Factory Floor maintainers (@factory-floor)
"""

EXAMPLES = r"""
- name: Read whether the watchdog runs on the files just written
  factory_floor.llm.systemd_unit_info:
    units: [vllm-watchdog-replica.service]
    files:
      - /etc/systemd/system/vllm-watchdog-replica.service
      - /etc/factory-floor/vllm-watchdog-replica.json
      - /usr/local/lib/factory-floor/_host/watchdog.py
  register: watchdog_unit

- name: Start it, reloading systemd first when it has not loaded the unit on disk
  ansible.builtin.systemd_service:
    name: vllm-watchdog-replica.service
    state: "{{ 'restarted' if watchdog_unit.restart else 'started' }}"
    daemon_reload: "{{ watchdog_unit.need_daemon_reload }}"
"""

RETURN = r"""
need_daemon_reload:
  description: C(NeedDaemonReload=yes) for at least one of O(units) - run C(systemctl daemon-reload) before starting or restarting it.
  returned: always
  type: bool
  sample: true
restart:
  description: The units of O(units) that run and are not on the files on disk now (see RV(units)); restart them, after the reload.
  returned: always
  type: list
  elements: str
  sample: [vllm-watchdog-replica.service]
units:
  description: Per unit of O(units), what was read and decided.
  returned: always
  type: dict
  sample:
    vllm-watchdog-replica.service:
      active_state: active
      sub_state: running
      main_pid: 4242
      need_daemon_reload: false
      started: 1767225600.25
      files_changed: [/etc/factory-floor/vllm-watchdog-replica.json]
      reasons: [/etc/factory-floor/vllm-watchdog-replica.json was modified 312 s after its main process started]
  contains:
    active_state:
      description: C(ActiveState).
      type: str
    sub_state:
      description: C(SubState).
      type: str
    main_pid:
      description: C(MainPID); 0 when none.
      type: int
    need_daemon_reload:
      description: C(NeedDaemonReload=yes).
      type: bool
    started:
      description: When its main process started, in seconds since the epoch (host wall clock); null when it never ran.
      type: float
    files_changed:
      description: The files of O(files) modified after that start.
      type: list
      elements: str
    reasons:
      description: Why it is to be restarted, one sentence each; empty when it is not (it runs on the files on disk, or it does not run).
      type: list
      elements: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._host import systemd


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type="list", elements="str", required=True),
            files=dict(type="list", elements="path", default=[]),
            systemctl=dict(type="path", default="/usr/bin/systemctl"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    mtimes = {path: _mtime(path) for path in params["files"]}
    units = {}
    for unit in params["units"]:
        try:
            state = systemd.show(unit, module.run_command, params["systemctl"],
                                 properties=("LoadState", "ActiveState", "SubState", "MainPID", "NeedDaemonReload",
                                             "ExecMainStartTimestampMonotonic"))
        except systemd.UnitStateError as exc:
            module.fail_json(msg="Could not read whether systemd runs %s as it is on disk: %s" % (unit, exc))
        now_wall, now_monotonic = time.time(), time.monotonic()
        units[unit] = {
            "active_state": state.active_state or "",
            "sub_state": state.sub_state or "",
            "main_pid": state.main_pid or 0,
            "need_daemon_reload": state.need_daemon_reload,
            "started": systemd.started_wallclock(state.main_started, now_wall, now_monotonic),
            "files_changed": systemd.files_changed_since_start(state, mtimes, now_wall, now_monotonic),
            "reasons": systemd.restart_reasons(state, mtimes, now_wall, now_monotonic),
        }
    module.exit_json(
        changed=False,
        need_daemon_reload=any(info["need_daemon_reload"] for info in units.values()),
        restart=[unit for unit, info in units.items() if info["reasons"]],
        units=units,
    )


if __name__ == "__main__":
    main()
