# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.limit_check, with what it needs from the other hosts read on the controller.

The check itself is the module's (``plugins/module_utils/_limit.py``). The options the task
leaves out are read from its variables (``TASK_VARIABLES``, and ``engines``, ``proxies``,
``split_hosts`` the groups they name), and what a task would otherwise assemble from
``hostvars`` in Jinja this plugin reads itself: ``keepalived`` (two or more proxy hosts and the first one's ``keepalived_enabled``,
default true), ``addresses`` (the inventory hosts whose facts hold a default IPv4 address)
and, with ``gather_register``, ``gather_errors`` (why a host of an earlier gather could not
be read: every inventory host's result registered under that name). The module's
documentation is ``plugins/modules/limit_check.py``.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils import _limit
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction, plain


# Each option the task may leave out and the variable it is read from, as the task sees it; an undefined or empty one
# leaves the module's default (the site role's limit entry point sets site_limit_*, _site_limit_gathered is its var).
TASK_VARIABLES = dict(playbook="site_limit_playbook", hosts="ansible_play_hosts_all", limit="ansible_limit",
                      topology="topology", firewall="vllm_firewall", reader="site_limit_reader",
                      gathered="_site_limit_gathered", engine_group="site_engine_group",
                      proxy_group="site_proxy_group", playbook_dir="playbook_dir")


def task_args(args, variable):
    """``args`` with each option of ``TASK_VARIABLES`` the task leaves out read through ``variable(name)`` (None when
    not defined), then ``engines``, ``proxies`` and ``split_hosts``: the hosts of the groups ``engine_group``,
    ``proxy_group`` and ``vllm_split_group`` (default, the engine group) name."""
    args = dict(args)
    for option, name in TASK_VARIABLES.items():
        if args.get(option) is None:
            value = variable(name)
            if value is not None and value != "":
                args[option] = value
    groups = variable("groups") or {}
    engine_group = args.get("engine_group") or "gb10"
    named = dict(engines=engine_group, proxies=args.get("proxy_group") or "proxy",
                 split_hosts=variable("vllm_split_group") or engine_group)
    for option, group in named.items():
        if args.get(option) is None:
            args[option] = list(groups.get(group) or [])
    return args


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
        return inventory_args(task_args(args, self.variable_or_none), task_vars)
