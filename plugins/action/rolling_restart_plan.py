# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.rolling_restart_plan: whether this replica restarts now for its new configuration, who carries
the load meanwhile, and the refusal when nobody does.

Reads the host's last measured start-up (``ansible.builtin.slurp`` on the host, read-only, also in check mode), and
on the controller the variables the rule needs, as the task sees them: the engine and proxy groups, every proxy
host's ``nginx_proxy_rotation`` (``hostvars``), ``vllm_service_plan.change``, ``vllm_restart_force`` and
``playbook_dir``. The rule and the sentences are ``plugins/module_utils/_restart_plan.py``'s; the documentation is
``plugins/modules/rolling_restart_plan.py``.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import restart_inputs
from ansible_collections.factory_floor.llm.plugins.module_utils._restart_plan import restart_plan
from ansible_collections.factory_floor.llm.plugins.module_utils._rolling_restart import STARTUP_FILE, read_startup
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    status=dict(type="str", required=True),
    peers=dict(type="list", elements="dict", default=[]),
    startup_file=dict(type="path", default=STARTUP_FILE),
)


class ActionModule(TaskVariablesAction):
    """Reads the start-up on the host, decides on the controller; documented as factory_floor.llm.rolling_restart_plan."""

    _supports_check_mode = True  # it reads only; under --check the sentences say what a real run would do
    _requires_connection = True  # the start-up file is on the host

    def startup(self, path, task_vars):
        """The host's last measured start-ups ({} when it has none)."""
        try:
            slurped = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": path},
                                           task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        return read_startup(slurped)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        groups = self.variable("groups", {})
        engines = groups.get(self.variable("site_engine_group", "gb10")) or []
        proxies = groups.get(self.variable("site_proxy_group", "proxy")) or []
        rotations = plain(restart_inputs(task_vars.get("hostvars") or {}, proxies))["rotations"]
        plan = restart_plan(self.variable("inventory_hostname"), list(engines), args["status"], plain(args["peers"]),
                            rotations, self.startup(args["startup_file"], task_vars),
                            str(self.variable("vllm_service_plan.change")),
                            boolean(self.variable("vllm_restart_force", False), strict=False),
                            bool(self._task.check_mode), self.variable("playbook_dir", None))
        result.update(changed=False, **plan)
        if plan["refusal"]:
            result.update(failed=True, msg=plan["refusal"])
        return result
