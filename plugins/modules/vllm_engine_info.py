#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_engine_info
short_description: What a running vLLM engine was started with, against what would be started now
version_added: 0.1.0
description:
  - Reads the engine unit's main process (C(systemctl show MainPID)) and its C(/proc/PID/cmdline) and C(/proc/PID/environ),
    and compares them with the command line the C(vllm) role renders now (O(argv)) and its configuration fingerprint
    (O(fingerprint), the C(FACTORY_FLOOR_CONFIG) variable of the engine's environment).
  - The environment holds the engine's API key; it is read here and never returned, only whether the fingerprint
    matches.
  - Also returns whether systemd has loaded the unit as it is on disk (RV(need_daemon_reload)); a restart without
    C(systemctl daemon-reload) runs the definition systemd loaded before, not the file the role rendered.
  - With O(require_match), it fails unless the process runs O(argv) with O(fingerprint) - the C(vllm) role's check
    right after it (re)started an engine.
  - Read-only. Replaces the role's reading of C(/proc) in Jinja.
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  unit:
    description: The engine's systemd unit (C(vllm-replica.service), C(vllm-split.service)).
    type: str
    required: true
  argv:
    description: The command line the unit would run now (the C(vllm) role's rendered argv).
    type: list
    elements: str
    default: []
  fingerprint:
    description:
      - The configuration fingerprint the unit would start with now; unset, RV(config_differs) is false.
      - Derived from the API key and the environment, so never shown (C(no_log)), like the key itself.
    type: str
  require_match:
    description:
      - Fail unless the unit's main process runs O(argv) (its C(vllm serve) arguments) with O(fingerprint), reading it
        again for up to O(settle) seconds (right after a start the process may still be replacing the one systemd
        forked). A unit without a main process passes (a start that failed is for the health wait to report).
      - The failure says what differs and why (C(NeedDaemonReload), or something else setting the command line).
    type: bool
    default: false
  settle:
    description: Seconds O(require_match) reads again before it fails.
    type: float
    default: 10
  proc:
    description: Where C(/proc) is (tests).
    type: path
    default: /proc
  systemctl:
    description: The C(systemctl) to ask.
    type: path
    default: /usr/bin/systemctl
author:
  - Factory Floor maintainers (@factory-floor)
"""

EXAMPLES = r"""
- name: Compare the running replica with its rendered configuration
  factory_floor.llm.vllm_engine_info:
    unit: vllm-replica.service
    argv: "{{ __vllm_argv }}"
    fingerprint: "{{ __vllm_digest }}"
  register: engine
"""

RETURN = r"""
running:
  description: The unit has a main process.
  returned: always
  type: bool
main_pid:
  description: Its main process (0 when none).
  returned: always
  type: int
need_daemon_reload:
  description:
    - systemd's C(NeedDaemonReload) of the unit - its file or a drop-in on disk is not what systemd loaded; a start or
      restart runs the loaded (older) definition until C(systemctl daemon-reload).
  returned: always
  type: bool
config_differs:
  description: It runs, and was started with another configuration fingerprint than O(fingerprint).
  returned: always
  type: bool
args_now:
  description: vLLM's arguments after C(serve) of the running process, the model first, then one C(--flag value) item per flag.
  returned: always
  type: list
  elements: str
args_new:
  description: The same of O(argv).
  returned: always
  type: list
  elements: str
args_removed:
  description: Items of RV(args_now) that are not in RV(args_new).
  returned: always
  type: list
  elements: str
args_added:
  description: Items of RV(args_new) that are not in RV(args_now).
  returned: always
  type: list
  elements: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_info import (
    compare, not_rendered_message, runs_rendered, split_nul)
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import UnitStateError, show


def _read_nul(path):
    try:
        with open(path, "rb") as handle:
            return split_nul(handle.read())
    except OSError:
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            argv=dict(type="list", elements="str", default=[]),
            # Derived from the API key: never shown (a guess of the key could be checked against it).
            fingerprint=dict(type="str", no_log=True),
            require_match=dict(type="bool", default=False),
            settle=dict(type="float", default=10.0),
            proc=dict(type="path", default="/proc"),
            systemctl=dict(type="path", default="/usr/bin/systemctl"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    deadline = time.monotonic() + params["settle"]
    while True:
        state, pid, result = _read(module, params)
        if not params["require_match"] or runs_rendered(result) or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if params["require_match"] and not runs_rendered(result):
        module.fail_json(msg=not_rendered_message(params["unit"], result, state.need_daemon_reload),
                         main_pid=pid, need_daemon_reload=state.need_daemon_reload, **result)
    module.exit_json(changed=False, main_pid=pid, need_daemon_reload=state.need_daemon_reload, **result)


def _read(module, params):
    """(unit state, main PID or 0, compare() of its /proc against the rendered argv and fingerprint)."""
    try:
        state = show(params["unit"], module.run_command, params["systemctl"],
                     properties=("ActiveState", "MainPID", "NeedDaemonReload"))
    except UnitStateError as exc:
        module.fail_json(msg="Could not read the main process of %s: %s" % (params["unit"], exc))
    pid = state.main_pid or 0
    cmdline = environ = None
    if pid:
        cmdline = _read_nul(os.path.join(params["proc"], str(pid), "cmdline"))
        environ = _read_nul(os.path.join(params["proc"], str(pid), "environ"))
    return state, pid if cmdline is not None else 0, compare(cmdline, environ, params["argv"], params["fingerprint"])


if __name__ == "__main__":
    main()
