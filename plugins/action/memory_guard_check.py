# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.memory_guard_check: the memory guard's preflight refusals, and this host's share.

The action plugin reads the variables a check needs itself, as the task sees them
(``_memory_guard_check.VARIABLES``: inventory, the role's defaults and vars, the registered
model figures), and what it observes on the host itself, read-only also in check mode: ``outside`` where each
workload service runs (``systemctl show``), ``stale``, ``installed`` and ``files`` the role's drop-ins (``find``), ``compute``
and ``share`` the engines' journal, then ``factory_floor.llm.gpu_memory_utilization``, ``share`` a second time at a
share the inventory pins, ``status`` the watch's unit (``systemctl show``) and its status file (``slurp``).
``preflight`` runs nothing on the host. The decisions are
``plugins/module_utils/_memory_guard_check.py``'s; the documentation is
``plugins/modules/memory_guard_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=list(mg.CHECKS)),
    engine_log=dict(type="str"),
    where=dict(type="dict"),
    found=dict(type="dict"),
    files=dict(type="str", choices=list(mg.FILES)),
    plan=dict(type="dict"),
)
SHARE = "factory_floor.llm.gpu_memory_utilization"


class ActionModule(ActionBase):
    """Runs the check; its documentation is the module factory_floor.llm.memory_guard_check's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def read_variables(self, name):
        """The variables the check ``name`` reads, by name; an undefined OPTIONAL one is absent."""
        found = {}
        for variable in mg.VARIABLES[name]:
            try:
                found[variable] = plain(self._templar.resolve_variable_expression(variable))
            except AnsibleUndefinedVariable as error:
                if variable not in mg.OPTIONAL:
                    raise AnsibleActionFail("memory_guard_check %s reads %s, which is not defined here: %s"
                                            % (name, variable, error)) from error
        return found

    def share(self, module_args, task_vars):
        return self._execute_module(module_name=SHARE, module_args=module_args, task_vars=task_vars)

    def observe(self, module, module_args, task_vars):
        """A read-only module run on the host, for real also in check mode."""
        check_mode = self._task.check_mode
        self._task.check_mode = False
        try:
            return self._execute_module(module_name="ansible.legacy." + module, module_args=module_args,
                                        task_vars=task_vars)
        finally:
            self._task.check_mode = check_mode

    def observations(self, name, args, variables, task_vars):
        """What the check ``name`` reads on the host, where the task does not give it: ``where``, ``found``,
        ``engine_log`` (empty when the journal cannot be read: no engine has run here)."""
        seen = []
        if name == "outside" and args["where"] is None:
            seen = [dict(self.observe("command", module_args, task_vars), item=item)
                    for item, module_args in mg.where_args(variables)]
            args["where"] = {"results": seen}
        if (name in ("stale", "installed") or name == "files" and args["files"] == "workloads") and args["found"] is None:
            args["found"] = self.observe("find", mg.find_args(variables, name), task_vars)
            seen = [args["found"]]
        if name in ("compute", "share") and args["engine_log"] is None:
            args["engine_log"] = self.observe("command", mg.engine_log_args(variables), task_vars).get("stdout") or ""
        failed = [found for found in seen if found.get("failed")]
        if failed:
            raise AnsibleActionFail("memory_guard_check %s could not read the host: %s" % (name, failed[0].get("msg")))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        name = args["check"]
        variables = self.read_variables(name)
        try:
            return self.decide(result, name, args, variables, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def decide(self, result, name, args, variables, task_vars):
        """The check ``name``'s result, after what it reads on the host."""
        if name == "status":
            reads = {what: self.observe(module, mg.status_args(variables)[what], task_vars)
                     for what, module in (("unit", "command"), ("watch", "slurp"))}
            result.update(changed=False, **mg.status(variables, reads["unit"], reads["watch"], args["plan"]))
            return result
        self.observations(name, args, variables, task_vars)
        if name == "files":
            if not args["files"]:
                raise AnsibleActionFail("memory_guard_check files needs files: %s" % " or ".join(mg.FILES))
            result.update(changed=False, **mg.files(variables, args["files"], args["found"]))
            return result
        if name == "installed":
            result.update(changed=False, paths=mg.installed(variables, args["found"]))
            return result
        if name == "outside":
            result.update(changed=False, **mg.outside(variables, args["where"]))
            return result
        if name == "stale":
            result.update(changed=False, paths=mg.stale(variables, args["found"]))
            return result
        if name == "preflight":
            errors = mg.preflight(variables)
            result.update(changed=False, errors=errors)
            if errors:
                result.update(failed=True, msg=mg.format_errors(errors))
            return result
        plan = self.share(mg.module_args(variables, args["engine_log"]), task_vars)
        result.update(plan)
        if name == "share" and not plan.get("failed"):
            pinned_plan = None
            pin = mg.pinned(variables)
            if pin is not None and not mg.plan_refusal(variables["inventory_hostname"], plan):
                pinned_plan = self.share(mg.module_args(variables, gpu_memory_utilization=pin), task_vars)
            result["share"] = mg.share(variables, plan, pinned_plan)
        return result
