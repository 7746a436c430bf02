# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.maintenance_lock, with ``path_of``: the lock file of that host, read from ``hostvars`` on the
controller (``_maintenance_window.lock_path``: the one the host noted as ``maintenance_window_lock_path``, else the
task's ``path``), for a lock taken or released on each host in turn (delegate_to). The module then runs on the host
as always; its documentation is the module's.
"""

from __future__ import annotations


from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import lock_path
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction, plain


def lock_args(args, hostvars):
    """The module's arguments, ``path`` the lock file of the host ``args["path_of"]``."""
    args = dict(args)
    host = args.pop("path_of", None)
    if host:
        args["path"] = plain(lock_path(hostvars[host] if host in hostvars else {}, args.get("path")))
        if args["path"] is None:
            del args["path"]  # the module's default
    return args


class ActionModule(ModuleArgsAction):
    """Runs the module factory_floor.llm.maintenance_lock on the host; its documentation is the module's."""

    module = "factory_floor.llm.maintenance_lock"

    def module_args(self, args, task_vars):
        return lock_args(args, task_vars.get("hostvars") or {})
