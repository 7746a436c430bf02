# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.deploy_drain_check, on the controller: stop when an engine deploy.yml expects in a proxy's
rotation is drained by another holder. The decision and the message are ``plugins/module_utils/_deploy_rotation.py``'s;
the documentation is ``plugins/modules/deploy_drain_check.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._deploy_rotation import drained_other, refusal
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    drained=dict(type="dict", required=True),
    expected=dict(type="list", elements="str", required=True),
)


class ActionModule(ActionBase):
    """Decides on the controller; its documentation is the module factory_floor.llm.deploy_drain_check's."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        drained, expected = plain(args["drained"]), plain(args["expected"])
        message = refusal(drained, expected, task_vars.get("inventory_hostname", ""), bool(self._task.check_mode),
                          task_vars.get("playbook_dir"))
        result.update(changed=False, drained_other=dict(drained_other(drained, expected)))
        if message:
            result.update(failed=True, msg=message)
        return result
