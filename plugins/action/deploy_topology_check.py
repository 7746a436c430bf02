# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_topology_check: the topology_record module's read on the host, then deploy.yml's verdict.

The task's arguments are topology_record's (what it leaves out read from the task's variables, as topology_record's
own action reads them: ``plugin_utils/_topology_record_args.py``); this plugin runs that module on the host, reads the overrides
(``vllm_deploy_topology_change``, ``vllm_deploy_model_change``) as the task sees them, and applies
``plugins/module_utils/_deploy_topology.py``'s verdict. The documentation is ``plugins/modules/deploy_topology_check.py``.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils._deploy_topology import verdict
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._topology_record_args import record_args

OVERRIDES = ("vllm_deploy_topology_change", "vllm_deploy_model_change")


class ActionModule(TaskVariablesAction):
    """Runs factory_floor.llm.topology_record, then refuses or notes; documented as factory_floor.llm.deploy_topology_check."""

    _supports_check_mode = True
    _requires_connection = True  # topology_record reads the record on the host

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = record_args(self._task.args, self.variable)
        try:
            seen = self._execute_module(module_name="factory_floor.llm.topology_record", module_args=args,
                                        task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        result.update(seen)
        if seen.get("failed") or seen.get("unreachable"):
            return result
        topology_change, model_change = (boolean(self.variable(name, False), strict=False) for name in OVERRIDES)
        refusal, notes = verdict(seen, self.variable("inventory_hostname", ""), args.get("topology"),
                                 args.get("model"), topology_change, model_change)
        result["notes"] = notes
        if refusal:
            result.update(failed=True, msg=refusal)
            if notes:
                result["warnings"] = list(result.get("warnings") or []) + notes
        return result
