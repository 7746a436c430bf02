# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.switch_report with the probe client's host clock measured against the controller's.

The report compares the probe client's records (the clock of the host the module runs on,
the proxy host) with the switch's events (the controller's clock). Unless the task gives
``clock_offset``, this plugin first runs the module with ``read_clock``, between two readings
of the controller's clock: the host's clock minus the midpoint is the offset, true to within
half that round trip (``clock_offset_bound``). Then it runs the module for the report with
both. The module's documentation is the module's.

With ``engine_hosts`` instead of ``hosts``, the plugin reads what each of those engine hosts
noted during the run itself: its ``maintenance_window_host`` fact, from ``hostvars``
(``_switch_report.noted_hosts``).
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_report import noted_hosts
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


def measured_offset(sent, host_time, received):
    """(offset, bound): seconds the host's clock is ahead of the controller's, and how far off that may be.

    The host read its clock at some controller time between ``sent`` and ``received``: the
    true offset lies within ``host_time - received`` .. ``host_time - sent``.
    """
    return round(float(host_time) - (sent + received) / 2.0, 3), round((received - sent) / 2.0, 3)


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.switch_report; its documentation is the module's."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = dict(self._task.args)
        engine_hosts = args.pop("engine_hosts", None)
        if engine_hosts is not None and args.get("hosts"):
            raise AnsibleActionFail("switch_report takes engine_hosts or hosts, not both")
        if engine_hosts is not None:
            args["hosts"] = plain(noted_hosts(engine_hosts, (task_vars or {}).get("hostvars") or {}))
        try:
            if args.get("clock_offset") is None and not args.get("read_clock"):
                sent = time.time()
                clock = self._execute_module(module_args=dict(args, read_clock=True), task_vars=task_vars)
                received = time.time()
                if clock.get("failed") or clock.get("host_time") is None:
                    result.update(clock)
                    return result
                args["clock_offset"], args["clock_offset_bound"] = measured_offset(sent, clock["host_time"], received)
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
