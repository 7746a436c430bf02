# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.systemd_reload: reload systemd when it has not loaded units as they are on disk, and (``start``)
start and enable them; never a restart.

Runs ``factory_floor.llm.systemd_unit_info`` (read-only, also in check mode) and ``ansible.builtin.systemd_service``
on the host; the rule is ``plugins/module_utils/_systemd_reload.py``'s and the documentation
``plugins/modules/systemd_reload.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _systemd_reload as sr

ARGUMENT_SPEC = dict(
    units=dict(type="list", elements="str", required=True),
    start=dict(type="bool", default=False),
    reload=dict(type="bool", default=False),
)
INFO = "factory_floor.llm.systemd_unit_info"
SYSTEMD = "ansible.legacy.systemd_service"


class ActionModule(ActionBase):
    """Runs the steps; the documentation is the module factory_floor.llm.systemd_reload's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_info(self, units, task_vars):
        """systemd_unit_info run for real also in check mode: it only reads."""
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            return self._execute_module(module_name=INFO, module_args={"units": units}, task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            info = self.read_info(args["units"], task_vars)
            result.update(changed=False, info=info, reloaded=False, steps=[])
            if info.get("failed"):
                result.update(failed=True, msg=info.get("msg"))
                return result
            for step in sr.steps(args["units"], args["start"], info, args["reload"]):
                done = self._execute_module(module_name=SYSTEMD, module_args=step, task_vars=task_vars)
                result["steps"].append(done)
                if step.get("daemon_reload"):
                    result["reloaded"] = True
                if done.get("changed"):
                    result["changed"] = True
                if done.get("failed"):
                    result.update(failed=True, msg=done.get("msg"))
                    return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
