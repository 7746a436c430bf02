# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_service: start an engine's unit, restart it when it runs another configuration than the
one rendered, and check it then runs that one; or make systemd read a staged unit. Runs
``ansible.builtin.systemd_service`` and ``factory_floor.llm.vllm_engine_info`` on the host; the steps are
``plugins/module_utils/_engine_service.py``'s and the documentation ``plugins/modules/engine_service.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_service as es

ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    state=dict(type="str", default="started", choices=["started", "present"]),
    restart=dict(type="bool", default=True),
    plan=dict(type="dict", required=True),
    reload=dict(type="bool", default=False),
    argv=dict(type="list", elements="str", default=[]),
    fingerprint=dict(type="str", default=""),
)
SYSTEMD = "ansible.legacy.systemd_service"
INFO = "factory_floor.llm.vllm_engine_info"


class ActionModule(ActionBase):
    """Runs the steps; the documentation is the module factory_floor.llm.engine_service's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = (task_vars or {}).get("inventory_hostname", "")
        plan, unit, state = args["plan"], args["unit"], args["state"]
        done = {}
        result.update(changed=False, steps=done, checked=None, plan=plan,
                      note=es.note(state, plan, args["restart"], unit, host))
        try:
            for step, module_args in es.steps(state, unit, plan.get("restart_pending"), args["restart"],
                                              args["reload"]):
                done[step] = self._execute_module(module_name=SYSTEMD, module_args=module_args, task_vars=task_vars)
                result["changed"] = result["changed"] or bool(done[step].get("changed"))
                if done[step].get("failed"):
                    return dict(result, failed=True, msg=done[step].get("msg"))
            result["plan"] = es.plan_after(plan, done)
            if es.checks(state, self._task.check_mode, done):
                checked = self._execute_module(module_name=INFO, module_args={
                    "unit": unit, "argv": args["argv"], "fingerprint": args["fingerprint"], "require_match": True},
                    task_vars=task_vars)
                result["checked"] = checked
                if checked.get("failed"):
                    return dict(result, failed=True, msg=checked.get("msg"))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
