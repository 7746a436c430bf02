# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The procedure roles' checks: an action plugin that reads the variables it decides on itself, as the task sees
them (the inventory, the roles' defaults, an include's and a block's ``vars``, extra vars), on the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import VariableReader


class TaskVariablesAction(VariableReader, ActionBase):
    """Decides on the controller from the task's variables; nothing runs on the host."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def variables(self, names, **defaults):
        """``{name: value}`` of ``names`` (each read with its ``defaults`` entry, when it has one)."""
        return {name: self.variable(name, defaults[name]) if name in defaults else self.variable(name) for name in names}
