# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.daemon_service: start and enable a daemon's unit, and restart it when it does not run on its
files as they are on disk; or (``state: absent``) stop it and remove its files when the role installed it.

Runs ``factory_floor.llm.systemd_unit_info`` (read-only, also in check mode), ``ansible.builtin.systemd_service``,
``stat`` and ``file`` on the host; the rule is ``plugins/module_utils/_daemon_service.py``'s and the documentation
``plugins/modules/daemon_service.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _daemon_service as ds

ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    files=dict(type="list", elements="str", default=[]),
    changed=dict(type="bool", default=False),
    unit_changed=dict(type="bool", default=False),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    marker=dict(type="str"),
)
INFO = "factory_floor.llm.systemd_unit_info"
SYSTEMD = "ansible.legacy.systemd_service"


class ActionModule(ActionBase):
    """Runs the steps; the documentation is the module factory_floor.llm.daemon_service's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_info(self, args, task_vars):
        """systemd_unit_info run for real also in check mode: it only reads."""
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            return self._execute_module(module_name=INFO, module_args={"units": [args["unit"]], "files": args["files"]},
                                        task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode

    def remove(self, result, args, task_vars):
        """Stop it and remove its files, when its marker says the role installed it."""
        marker = args["marker"] or (args["files"] or [""])[0]
        found = self._execute_module(module_name="ansible.legacy.stat", module_args={"path": marker},
                                     task_vars=task_vars)
        result.update(changed=False, removed=[])
        for module, module_args in ds.removal(bool((found.get("stat") or {}).get("exists")), args["unit"],
                                              args["files"]):
            step = self._execute_module(module_name="ansible.legacy." + module, module_args=module_args,
                                        task_vars=task_vars)
            if step.get("failed"):
                result.update(failed=True, msg=step.get("msg"))
                return result
            if step.get("changed"):
                result["changed"] = True
            if module == "file":
                result["removed"].append(module_args["path"])
        return result

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        unit = args["unit"]
        try:
            if args["state"] == "absent":
                return self.remove(result, args, task_vars)
            info = self.read_info(args, task_vars)
            result.update(changed=False, info=info, started=None, restarted=None)
            if info.get("failed"):
                result.update(failed=True, msg=info.get("msg"))
                return result
            if not ds.starts(self._task.check_mode, args["unit_changed"]):
                return result
            started = self._execute_module(module_name=SYSTEMD, module_args=ds.start_args(unit, args["unit_changed"],
                                                                                          info), task_vars=task_vars)
            result.update(started=started, changed=bool(started.get("changed")))
            if started.get("failed"):
                result.update(failed=True, msg=started.get("msg"))
                return result
            if ds.restarts(started.get("changed"), info, args["changed"] or args["unit_changed"]):
                restarted = self._execute_module(module_name=SYSTEMD, module_args={"name": unit, "state": "restarted"},
                                                 task_vars=task_vars)
                result.update(restarted=restarted, changed=True if restarted.get("changed") else result["changed"])
                if restarted.get("failed"):
                    result.update(failed=True, msg=restarted.get("msg"))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
