# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.keepalived_info, with ``settings_of``: the interface and the floating address of that host read
from ``hostvars`` on the controller (``_keepalived_input.host_settings``: what the keepalived role's preflight noted
there this run, else its inventory's, else the task's ``interface`` / ``virtual_ipaddress``), for a read delegated to
each proxy host in turn. The module then runs on the host as always; its documentation is the module's.
"""

from __future__ import annotations


from ansible_collections.factory_floor.llm.plugins.module_utils._keepalived_input import host_settings
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction, plain


def host_args(args, hostvars):
    """The module's arguments, ``interface`` and ``virtual_ipaddress`` those of the host ``args["settings_of"]``."""
    args = dict(args)
    host = args.pop("settings_of", None)
    if host:
        host_vars = hostvars[host] if host in hostvars else {}
        interface, address = host_settings(host_vars, args.get("interface") or "", args.get("virtual_ipaddress") or "")
        args["interface"], args["virtual_ipaddress"] = plain(interface), plain(address)
    return args


class ActionModule(ModuleArgsAction):
    """Runs the module factory_floor.llm.keepalived_info on the host; its documentation is the module's."""

    module = "factory_floor.llm.keepalived_info"

    def module_args(self, args, task_vars):
        return host_args(args, task_vars.get("hostvars") or {})
