# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.vllm_role_check, on the controller: the engine service roles' own preflight refusals.

The task names a check. This plugin reads the variables that check needs itself, as the task sees them
(``_vllm_role_check.VARIABLES``), and for ``split`` the model's ``config.json`` on the host (``slurp``, in check mode
too; a read that fails is not checked) unless the task passes it; the decision is
``plugins/module_utils/_vllm_role_check.py``'s. The module's documentation is ``plugins/modules/vllm_role_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_role_check as rc
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=list(rc.CHECKS)),
    model_config=dict(type="dict"),
)


class ActionModule(ActionBase):
    """Runs the check on the controller; its documentation is the module factory_floor.llm.vllm_role_check's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_variables(self, name):
        """The variables the check ``name`` reads, by name; an undefined OPTIONAL one is absent."""
        found = {}
        for variable in rc.VARIABLES[name]:
            try:
                found[variable] = plain(self._templar.resolve_variable_expression(variable))
            except AnsibleUndefinedVariable as error:
                if variable not in rc.OPTIONAL:
                    raise AnsibleActionFail("vllm_role_check %s reads %s, which is not defined here: %s"
                                            % (name, variable, error)) from error
        return found

    def read_model_config(self, variables, task_vars):
        """The split model's ``config.json`` as ``slurp`` read it on the host ({} when it is not a path)."""
        read = rc.model_config_read(variables)
        if read is None:
            return {}
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            return self._execute_module(module_name="ansible.legacy.slurp", module_args=read, task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        observed = {key: value for key, value in args.items() if key != "check" and value is not None}
        variables = self.read_variables(args["check"])
        if args["check"] == "split" and "model_config" not in observed:
            observed["model_config"] = self.read_model_config(variables, task_vars)
        errors = rc.check(args["check"], variables, observed)
        result.update(changed=False, errors=errors)
        if errors:
            result.update(failed=True, msg=rc.format_errors(errors))
        return result
