# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.limit_check, with what it needs from the other hosts read on the controller.

The check itself is the module's (``plugins/module_utils/_limit.py``). What a task would
otherwise assemble from ``hostvars`` in Jinja this plugin reads itself, when the task leaves
it out: ``keepalived`` (two or more proxy hosts and the first one's ``keepalived_enabled``,
default true), ``addresses`` (the inventory hosts whose facts hold a default IPv4 address)
and, with ``gather_register``, ``gather_errors`` (why a host of an earlier gather could not
be read: every inventory host's result registered under that name). The module's
documentation is ``plugins/modules/limit_check.py``.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils import _limit
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction, plain


def inventory_args(args, task_vars):
    """The module's arguments with ``keepalived``, ``addresses`` and ``gather_errors`` read from ``hostvars`` where
    ``args`` leaves them out."""
    args = dict(args)
    hostvars = task_vars.get("hostvars") or {}
    inventory = args.get("inventory")
    if inventory is None:
        inventory = list((task_vars.get("groups") or {}).get("all") or [])
    if args.get("keepalived") is None:
        proxies = list(args.get("proxies") or [])
        first = hostvars[proxies[0]] if proxies and proxies[0] in hostvars else {}
        args["keepalived"] = _limit.keepalived_runs(proxies, boolean(first.get("keepalived_enabled", True),
                                                                     strict=False))
    if args.get("addresses") is None:
        args["addresses"] = _limit.known_addresses(inventory, hostvars)
    register = args.pop("gather_register", None)
    if args.get("gather_errors") is None:
        args["gather_errors"] = plain(_limit.gather_errors(inventory, hostvars, register)) if register else {}
    return args


class ActionModule(ModuleArgsAction):
    """Runs the module factory_floor.llm.limit_check; its documentation is the module's."""

    module = "factory_floor.llm.limit_check"

    def module_args(self, args, task_vars):
        return inventory_args(args, task_vars)
