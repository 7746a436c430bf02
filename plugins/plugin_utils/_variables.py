# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Variables an action plugin reads from the task's (or another host's) variables, as plain data."""

from __future__ import annotations

from ansible.errors import AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

_ABSENT = object()


def plain(value):
    """``value`` with every list and dict item read (templated) now: Ansible hands containers over lazily, and a
    template in an item is rendered only when the item is read."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


class VariableReader:
    """An action plugin's reading of the task's variables (the inventory, the roles' defaults, an include's and a
    block's ``vars``, extra vars), as the task sees them."""

    def variable(self, expression, default=_ABSENT):
        """``expression`` (a variable, or a dotted path into one) templated as the task sees it; ``default`` when it
        is not defined (an undefined one without a default is an error, as it would be in a template)."""
        try:
            return plain(self._templar.resolve_variable_expression(expression))
        except AnsibleUndefinedVariable:
            if default is _ABSENT:
                raise
            return default

    def variable_or_none(self, expression):
        """``expression`` as the task sees it; None when it is not defined."""
        return self.variable(expression, None)


class ModuleArgsAction(VariableReader, ActionBase):
    """An action plugin that fills a module's arguments from the controller's variables, then runs the module on
    the host. A subclass names the module (``module``) and writes ``module_args(args, task_vars)``."""

    _supports_check_mode = True
    module = ""

    def module_args(self, args, task_vars):
        return args

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = self.module_args(dict(self._task.args), task_vars or {})
        try:
            result.update(self._execute_module(module_name=self.module, module_args=args, task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        return result
