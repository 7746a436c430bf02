# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.keepalived_info, with ``settings_of``: the interface and the floating address of that host read
from ``hostvars`` on the controller (``_keepalived_input.host_settings``: what the keepalived role's preflight noted
there this run, else its inventory's, else the task's ``interface`` / ``virtual_ipaddress``), for a read delegated to
each proxy host in turn. The module then runs on the host as always; its documentation is the module's.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._keepalived_input import host_settings
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


def host_args(args, hostvars):
    """The module's arguments, ``interface`` and ``virtual_ipaddress`` those of the host ``args["settings_of"]``."""
    args = dict(args)
    host = args.pop("settings_of", None)
    if host:
        host_vars = hostvars[host] if host in hostvars else {}
        interface, address = host_settings(host_vars, args.get("interface") or "", args.get("virtual_ipaddress") or "")
        args["interface"], args["virtual_ipaddress"] = plain(interface), plain(address)
    return args


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.keepalived_info on the host; its documentation is the module's."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = host_args(self._task.args, (task_vars or {}).get("hostvars") or {})
        try:
            result.update(self._execute_module(module_name="factory_floor.llm.keepalived_info", module_args=args,
                                               task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        return result
