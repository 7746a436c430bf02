# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The procedure roles' checks: an action plugin that reads the variables it decides on itself, as the task sees
them (the inventory, the roles' defaults, an include's and a block's ``vars``, extra vars), on the controller."""

from __future__ import annotations

from ansible.errors import AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

_ABSENT = object()


class TaskVariablesAction(ActionBase):
    """Decides on the controller from the task's variables; nothing runs on the host."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def variable(self, expression, default=_ABSENT):
        """``expression`` (a variable, or a dotted path into one) templated as the task sees it; ``default`` when it
        is not defined (an undefined one without a default is an error, as it would be in a template)."""
        try:
            return plain(self._templar.resolve_variable_expression(expression))
        except AnsibleUndefinedVariable:
            if default is _ABSENT:
                raise
            return default

    def variables(self, names, **defaults):
        """``{name: value}`` of ``names`` (each read with its ``defaults`` entry, when it has one)."""
        return {name: self.variable(name, defaults[name]) if name in defaults else self.variable(name) for name in names}
