# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""topology_record's arguments that a task leaves out, read from the task's variables: one rule for the two
actions that run the module (topology_record, deploy_topology_check), so the roles stop passing them."""

from __future__ import annotations

# Each option the task may leave out: the variable it is read from (as the task sees it) and the value where that
# variable is not defined (None: the module's own default).
READ = dict(
    topology=("topology", None),
    path=("_vllm_topology_record_file", None),
    inventory_sources=("ansible_inventory_sources", []),
    playbook_dir=("playbook_dir", ""),
)


def record_args(args, variable):
    """``args`` with each option of ``READ`` the task leaves out (or sets to null) read through ``variable(name,
    default)``; with ``registered`` and neither ``engine_hosts`` nor ``hosts``, ``engine_hosts`` is the engine group
    (``groups[site_engine_group]``, gb10 by default)."""
    args = dict(args)
    for option, (name, default) in READ.items():
        if args.get(option) is None:
            value = variable(name, default)
            if value is not None:
                args[option] = value
            else:
                args.pop(option, None)
    if args.get("registered") is not None and args.get("engine_hosts") is None and args.get("hosts") is None:
        args["engine_hosts"] = list(variable("groups", {}).get(variable("site_engine_group", "gb10")) or [])
    return args
