# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.topology_record_write: write the host's topology record when it changes. Reads the
``vllm_topology_record_*`` variables itself, as the task sees them (``by`` and ``run``, where they are not defined,
from the maintenance window's ``maintenance_window_run``); runs ``file`` (the state directory) and the
``copy`` action on the host. The rule and the content are ``plugins/module_utils/_topology_record_write.py``'s and the
documentation ``plugins/modules/topology_record_write.py``."""

from __future__ import annotations

import os

from ansible.plugins.filter.core import to_json

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record_write as trw
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    record=dict(type="dict", required=True),
)
PREFIX = "vllm_topology_record_"


class ActionModule(TaskVariablesAction):
    """Decides on the controller and writes on the host; the documentation is the module's."""

    _supports_check_mode = True  # file and copy predict the write, in check mode
    _requires_connection = True

    def values(self):
        """vllm_topology_record_<field> (and _always) as the task sees them, by field; the optional ones default."""
        # Who and which run: the maintenance window's (maintenance_window_run) where the caller sets neither.
        run = self.variable("maintenance_window_run", {})
        run = run if isinstance(run, dict) else {}
        defaults = dict(trw.OPTIONAL, by=run.get("by") or "", run=run.get("id") or "")
        found = self.variables([PREFIX + name for name in trw.FIELDS + trw.GROUP_FIELDS + ("always",)],
                               **{PREFIX + name: default for name, default in defaults.items()})
        return {name[len(PREFIX):]: value for name, value in found.items()}

    def copy(self, args, task_vars):
        """The copy action, as ansible.builtin.template hands its result over."""
        task = self._task.copy()
        task.args = args
        action = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy", task=task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        return action.run(task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        values = self.values()
        result.update(changed=False, written=trw.writes(args["record"], values["always"], values["model"]))
        if not result["written"]:
            return result
        try:
            made = self._execute_module(module_name="ansible.legacy.file", module_args={
                "path": os.path.dirname(args["path"]), "state": "directory", "owner": "root", "group": "root",
                "mode": "0755"}, task_vars=task_vars)
            if made.get("failed"):
                return dict(result, failed=True, msg=made.get("msg"))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        copied = self.copy({"content": to_json(trw.content(values)), "dest": args["path"], "owner": "root",
                            "group": "root", "mode": "0644"}, task_vars)
        result.update(copied, written=True, changed=bool(made.get("changed") or copied.get("changed")))
        return result
