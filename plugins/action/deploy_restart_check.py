# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_restart_check: deploy.yml's preflight of the replicas that would restart.

On an engine host of the replicas whose configuration changed, asks its engine once whether it serves
(``factory_floor.llm.vllm_health`` on the host, at the site's endpoint ``_site_vllm_endpoint``); then refuses a key
the engine rejects and restarting the only replica while it serves, unless ``vllm_restart_force``. Reads the variables
the refusals need itself, as the task sees them. Which host is asked and which answers go on are
``plugins/module_utils/_deploy_restart.py``'s, the refusals ``_vllm_check``'s ``restart`` check; the documentation is
``plugins/modules/deploy_restart_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.module_utils import _deploy_restart as dr
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_check as vc
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

# It takes no option: what it decides on is the task's variables.
ARGUMENT_SPEC = {}
HEALTH = "factory_floor.llm.vllm_health"
_ABSENT = object()


class ActionModule(TaskVariablesAction):
    """Asks the engine on the host, decides on the controller; documented as factory_floor.llm.deploy_restart_check."""

    _supports_check_mode = True  # it reads only: the probe runs in check mode too
    _requires_connection = True  # the probe runs on the host

    def read_variables(self):
        """The restart check's variables by name (``_vllm_check.VARIABLES``); an undefined optional one is absent."""
        found = {}
        for name in vc.VARIABLES["restart"]:
            value = self.variable(name, _ABSENT)
            if value is _ABSENT and name not in vc.OPTIONAL:
                raise AnsibleActionFail("deploy_restart_check reads %s, which is not defined here" % name)
            if value is not _ABSENT:
                found[name] = value
        return found

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        variables = self.read_variables()
        serving = {}
        if dr.probes(variables):
            try:
                serving = self._execute_module(module_name=HEALTH, task_vars=task_vars,
                                               module_args=dr.probe_args(self.variable("_site_vllm_endpoint", {})))
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        result.update(changed=False, serving=serving)
        failure = dr.probe_failure(serving) if serving else None
        if failure:
            result.update(failed=True, msg=failure, errors=[])
            return result
        errors = vc.check("restart", variables, {"serving": serving})
        result["errors"] = errors
        if errors:
            result.update(failed=True, msg=vc.format_errors(errors))
        return result
