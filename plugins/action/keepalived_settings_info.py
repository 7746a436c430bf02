# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.keepalived_settings_info: this proxy host's keepalived settings and what is seen on it, for the
group's decision (factory_floor.llm.keepalived_check).

Reads the keepalived role's variables itself, as the task sees them (``_keepalived_input.OBSERVE_VARIABLES``: the
inventory, the role's defaults and vars - another host's role defaults are not among what the controller reads of
it, so each host notes its own), runs ``factory_floor.llm.keepalived_info`` on the host and, when the interface
exists and ``keepalived_preflight_listen`` is above 0 s, ``factory_floor.llm.vrrp_info``. What is noted is
``_keepalived_input.settings``'; the documentation is ``plugins/modules/keepalived_settings_info.py``.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _keepalived_input as ki
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = {}
INFO = "factory_floor.llm.keepalived_info"
LISTEN = "factory_floor.llm.vrrp_info"


class ActionModule(TaskVariablesAction):
    """Reads on the host; the documentation is the module factory_floor.llm.keepalived_settings_info's."""

    _requires_connection = True
    _supports_check_mode = True  # reads only, for real also in check mode

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        variables = self.variables(ki.OBSERVE_VARIABLES)
        try:
            observed = self._execute_module(module_name=INFO, module_args=ki.info_args(variables), task_vars=task_vars)
            if observed.get("failed"):
                result.update(failed=True, msg=observed.get("msg"), observed=observed)
                return result
            heard = None
            listen = ki.listen_args(variables, observed)
            if listen is not None:
                heard = self._execute_module(module_name=LISTEN, module_args=listen, task_vars=task_vars)
                if heard.get("failed"):
                    result.update(failed=True, msg=heard.get("msg"), observed=observed, heard=heard)
                    return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(ki.settings(variables, observed, heard), changed=False)
        return result
