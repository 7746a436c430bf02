# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_cli_check: would the vLLM build that will serve accept what the inventory renders.

Reads the variables it needs itself, as the task sees them (``_engine_cli.VARIABLES``), then runs on the host
``factory_floor.llm.container_image_info`` (the container runtime: the image's ID and architecture; pulls nothing) and
``factory_floor.llm.vllm_cli_check`` (asks the build, cached per image ID); fails with ``_engine_cli.refusal``. The
documentation is ``plugins/modules/engine_cli_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_cli as ec
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

IMAGE_INFO = "factory_floor.llm.container_image_info"
CLI_CHECK = "factory_floor.llm.vllm_cli_check"


class ActionModule(ActionBase):
    """Runs the step; the documentation is the module factory_floor.llm.engine_cli_check's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_variables(self):
        """The variables the step reads, by name; an undefined OPTIONAL one is absent."""
        found = {}
        for variable in ec.VARIABLES:
            try:
                found[variable] = plain(self._templar.resolve_variable_expression(variable))
            except AnsibleUndefinedVariable as error:
                if variable not in ec.OPTIONAL:
                    raise AnsibleActionFail("engine_cli_check reads %s, which is not defined here: %s"
                                            % (variable, error)) from error
        return found

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        self.validate_argument_spec(argument_spec={})
        variables = self.read_variables()
        try:
            image_id = ""
            if variables["vllm_runtime"] == "container":
                image = self._execute_module(module_name=IMAGE_INFO, module_args=ec.image_args(variables),
                                             task_vars=task_vars)
                if image.get("failed"):
                    return dict(result, failed=True, msg=image.get("msg"))
                if not ec.askable(image):
                    return dict(result, changed=False, skipped=True,
                                skip_reason="the image is missing or of another architecture: the image check says so")
                image_id = (image.get("image") or {}).get("id") or ""
            try:
                args = ec.module_args(variables, image_id)
            except VllmArgsError as exc:
                return dict(result, failed=True, msg=str(exc))
            cli = self._execute_module(module_name=CLI_CHECK, module_args=args, task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        refused = "" if cli.get("failed") else ec.refusal(variables["inventory_hostname"], cli)
        if refused:
            return dict(result, failed=True, changed=False, msg=refused)
        result.update(cli)
        return result
