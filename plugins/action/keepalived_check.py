# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.keepalived_check, with the group's input read from ``hostvars`` on the controller.

The decision is the module's (``_host/keepalived.py``'s ``check``). What a task would otherwise
assemble in Jinja this plugin reads itself, when the task leaves it out: ``hosts`` - the play's
hosts in ``group``, each with what it noted as ``settings_fact`` - ``auth_pass`` - each one's
``auth_pass_fact``, which goes on as the module's no_log option, as before - and ``reserved`` -
every inventory host's own default IPv4 address, from its facts
(``plugins/module_utils/_keepalived_input.py``). The module's documentation is the module's.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.module_utils import _keepalived_input as ki
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import ModuleArgsAction, plain


def group_args(args, task_vars):
    """The module's arguments, with ``hosts``, ``auth_pass`` and ``reserved`` read from ``task_vars`` where ``args``
    leaves them out (``settings_fact``, ``auth_pass_fact``: the facts each host noted them as)."""
    args = dict(args)
    settings_fact = args.pop("settings_fact", None)
    auth_pass_fact = args.pop("auth_pass_fact", None)
    hostvars = task_vars.get("hostvars") or {}
    groups = task_vars.get("groups") or {}
    if args.get("hosts") is None:
        if not settings_fact:
            raise AnsibleActionFail("keepalived_check needs hosts, or settings_fact to read them from each host")
        hosts = ki.group_hosts(task_vars.get("ansible_play_hosts") or [], groups.get(args.get("group") or "proxy"))
        args["hosts"] = plain(ki.noted(hosts, hostvars, settings_fact))
        if auth_pass_fact and args.get("auth_pass") is None:
            args["auth_pass"] = plain(ki.noted(hosts, hostvars, auth_pass_fact))
    if args.get("reserved") is None:
        args["reserved"] = plain(ki.reserved_addresses(groups.get("all") or [], hostvars))
    return args


class ActionModule(ModuleArgsAction):
    """Runs the module factory_floor.llm.keepalived_check; its documentation is the module's."""

    module = "factory_floor.llm.keepalived_check"

    def module_args(self, args, task_vars):
        return group_args(args, task_vars)
