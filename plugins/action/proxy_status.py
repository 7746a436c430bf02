# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.proxy_status: what a proxy host's membership checker sees, read only, as the nginx_proxy role's
``status`` entry point notes it.

Reads the role's variables itself, as the task sees them (``_proxy_status.VARIABLES``), then runs, for real also in
check mode, ``factory_floor.llm.proxy_rotation`` (the checker's state) and ``systemctl show`` of the checker's unit and
nginx's on the host. What is noted is ``plugins/module_utils/_proxy_status.py``'s; the documentation is
``plugins/modules/proxy_status.py``.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_status as ps
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = {}
ROTATION = "factory_floor.llm.proxy_rotation"


class ActionModule(TaskVariablesAction):
    """Reads on the host; the documentation is the module factory_floor.llm.proxy_status's."""

    _requires_connection = True
    _supports_check_mode = True  # reads only, for real also in check mode

    def read(self, module, module_args, task_vars):
        """A read-only module run on the host, for real also in check mode."""
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            return self._execute_module(module_name=module, module_args=module_args, task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        variables = self.variables(ps.VARIABLES)
        try:
            rotation = self.read(ROTATION, ps.rotation_args(variables), task_vars)
            if rotation.get("failed"):
                result.update(failed=True, msg=rotation.get("msg"))
                return result
            shown = self.read("ansible.legacy.command", ps.units_args(variables), task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(ps.status(variables, rotation, shown), changed=False)
        return result
