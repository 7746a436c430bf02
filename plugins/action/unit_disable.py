# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.unit_disable: ``systemctl disable --now`` of a unit a role installed, its failed state cleared,
its leftovers removed. Runs ``stat``, ``systemd_service``, ``file`` and ``command`` on the host; the steps are
``plugins/module_utils/_unit_disable.py``'s and the documentation ``plugins/modules/unit_disable.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _unit_disable as ud

ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    remove=dict(type="list", elements="path", default=[]),
)


class ActionModule(ActionBase):
    """Runs the steps; the documentation is the module factory_floor.llm.unit_disable's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result.update(changed=False, present=False, removed=[])
        try:
            found = self._execute_module(module_name="ansible.legacy.stat",
                                         module_args={"path": ud.unit_file(args["unit"], args["unit_dir"])},
                                         task_vars=task_vars)
            if found.get("failed"):
                return dict(result, failed=True, msg=found.get("msg"))
            result["present"] = bool((found.get("stat") or {}).get("exists"))
            for module, module_args in ud.steps(result["present"], args["unit"], args["remove"],
                                                self._task.check_mode):
                step = self._execute_module(module_name=module, module_args=module_args, task_vars=task_vars)
                failed, changed = ud.counts(module, step)
                if failed:
                    return dict(result, failed=True, msg=step.get("msg"))
                result["changed"] = result["changed"] or changed
                if module == "ansible.legacy.file" and changed:
                    result["removed"].append(module_args["path"])
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
