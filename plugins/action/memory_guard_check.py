# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.memory_guard_check: the memory guard's preflight refusals, and this host's share.

The action plugin reads the variables a check needs itself, as the task sees them
(``_memory_guard_check.VARIABLES``: inventory, the role's defaults and vars, the registered
model figures). ``preflight``, ``outside`` and ``stale`` run nothing on the host; ``compute`` and ``share`` run
``factory_floor.llm.gpu_memory_utilization`` there (read-only, also in check mode), ``share`` a
second time at a share the inventory pins. The decisions are
``plugins/module_utils/_memory_guard_check.py``'s; the documentation is
``plugins/modules/memory_guard_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=list(mg.CHECKS)),
    engine_log=dict(type="str", default=""),
    where=dict(type="dict"),
    found=dict(type="dict"),
)
SHARE = "factory_floor.llm.gpu_memory_utilization"


class ActionModule(ActionBase):
    """Runs the check; its documentation is the module factory_floor.llm.memory_guard_check's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_variables(self, name):
        """The variables the check ``name`` reads, by name; an undefined OPTIONAL one is absent."""
        found = {}
        for variable in mg.VARIABLES[name]:
            try:
                found[variable] = plain(self._templar.resolve_variable_expression(variable))
            except AnsibleUndefinedVariable as error:
                if variable not in mg.OPTIONAL:
                    raise AnsibleActionFail("memory_guard_check %s reads %s, which is not defined here: %s"
                                            % (name, variable, error)) from error
        return found

    def share(self, module_args, task_vars):
        return self._execute_module(module_name=SHARE, module_args=module_args, task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        name = args["check"]
        variables = self.read_variables(name)
        if name == "outside":
            result.update(changed=False, **mg.outside(variables, args["where"]))
            return result
        if name == "stale":
            result.update(changed=False, paths=mg.stale(variables, args["found"]))
            return result
        if name == "preflight":
            errors = mg.preflight(variables)
            result.update(changed=False, errors=errors)
            if errors:
                result.update(failed=True, msg=mg.format_errors(errors))
            return result
        try:
            plan = self.share(mg.module_args(variables, args["engine_log"]), task_vars)
            result.update(plan)
            if name == "share" and not plan.get("failed"):
                pinned_plan = None
                pin = mg.pinned(variables)
                if pin is not None and not mg.plan_refusal(variables["inventory_hostname"], plan):
                    pinned_plan = self.share(mg.module_args(variables, gpu_memory_utilization=pin), task_vars)
                result["share"] = mg.share(variables, plan, pinned_plan)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
