# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.split_link: the vllm_split role's direct link, read on each host and judged on the controller.

``step: read`` runs ``factory_floor.llm.link_check`` on the host with the arguments ``_split_link.read_args`` takes
from the role's variables (as the task sees them); ``step: judge`` reads every split host's registered result from
``hostvars`` and returns ``_split_link.report``'s verdict, failing with its refusal. The documentation is
``plugins/modules/split_link.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _split_link as sl
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    step=dict(type="str", required=True, choices=["read", "judge"]),
    kind=dict(type="str", default="link", choices=list(sl.KINDS)),
)
LINK_CHECK = "factory_floor.llm.link_check"


class ActionModule(ActionBase):
    """Reads or judges; the documentation is the module factory_floor.llm.split_link's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def _variable(self, expression, local_variables=None):
        return plain(self._templar.resolve_variable_expression(expression, local_variables=local_variables))

    def read_variables(self, step, kind):
        """The variables ``step`` of ``kind`` reads, by name; each must be defined."""
        found = {}
        for variable in sl.VARIABLES[(step, kind)]:
            try:
                found[variable] = self._variable(variable)
            except AnsibleUndefinedVariable as error:
                raise AnsibleActionFail("split_link %s %s reads %s, which is not defined here: %s"
                                        % (step, kind, variable, error)) from error
        return found

    def registered(self, hosts, name):
        """Each of ``hosts``' result registered as ``name`` (``{}`` where it has none)."""
        found = {}
        for host in hosts:
            try:
                found[host] = self._variable("hostvars[host][name]", local_variables={"host": host, "name": name})
            except AnsibleUndefinedVariable:
                found[host] = {}
        return found

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        step, kind = args["step"], args["kind"]
        if (step, kind) not in sl.VARIABLES:
            raise AnsibleActionFail("split_link reads kind link or engine, not %s" % kind)
        variables = self.read_variables(step, kind)
        if step == "read":
            try:
                result.update(self._execute_module(module_name=LINK_CHECK, module_args=sl.read_args(kind, variables),
                                                   task_vars=task_vars))
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            if kind == "link" and not result.get("failed"):
                result["link"] = sl.link_fact(result)
            return result
        verdict = sl.report(kind, self.registered(sl.hosts(kind, variables), sl.REGISTERED[kind]),
                            **sl.settings(kind, variables))
        refusal = sl.refusal(kind, verdict)
        if refusal:
            return dict(result, failed=True, changed=False, msg=refusal)
        result.update(changed=False, report=verdict, say=sl.say(kind, verdict))
        return result
