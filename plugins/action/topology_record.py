# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.topology_record, with what the task leaves out read from its variables, and with ``registered``
each engine host's registered result read on the controller.

``topology``, ``path``, ``inventory_sources`` and ``playbook_dir`` the task leaves out are read from the task's
variables (``plugin_utils/_topology_record_args.py``). With ``registered`` instead of ``hosts``, this plugin reads
the result each engine host (``engine_hosts``, by default the engine group) registered under that name
(``hostvars``; ``{}`` where there is none, as a host that did not run the read) and passes them as ``hosts``: the
module compares them. The module's documentation is the module's.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import per_host
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._topology_record_args import record_args
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


class ActionModule(TaskVariablesAction):
    """Runs the module factory_floor.llm.topology_record; its documentation is the module's."""

    _supports_check_mode = True
    _requires_connection = True  # the module reads the record on the host

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = record_args(self._task.args, self.variable)
        engine_hosts = args.pop("engine_hosts", None)
        registered = args.pop("registered", None)
        if engine_hosts is not None and registered is None:
            raise AnsibleActionFail("topology_record takes engine_hosts and registered together")
        if registered is not None:
            if args.get("hosts") is not None:
                raise AnsibleActionFail("topology_record takes registered (with engine_hosts) or hosts, not both")
            args["hosts"] = plain(per_host((task_vars or {}).get("hostvars") or {}, engine_hosts, registered))
        try:
            result.update(self._execute_module(module_name="factory_floor.llm.topology_record", module_args=args,
                                               task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        return result
