# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.serving_engines, on the controller: which engines serve the model now, each on its own address.

The task passes the registered ``systemctl is-active`` reads; this plugin reads the engine group, the inventory's
``topology`` and each engine host's address variables from ``hostvars`` itself. The decision is
``plugins/module_utils/_serving_engines.py``'s; the documentation is ``plugins/modules/serving_engines.py``.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _serving_engines as se
from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import metrics_engines
from ansible_collections.factory_floor.llm.plugins.module_utils._running_topology import units_of
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    units=dict(type="list", elements="raw", default=[]),
    topology=dict(type="str"),
)


class ActionModule(TaskVariablesAction):
    """Decides on the controller; its documentation is the module factory_floor.llm.serving_engines's."""

    _supports_check_mode = True  # it reads only

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hostvars = task_vars.get("hostvars") or {}
        engines = list((self.variable("groups", None) or {}).get(self.variable("site_engine_group", "gb10")) or [])
        inventory = self.variable("topology", None)
        result["changed"] = False
        try:
            topology, source = se.topology(units_of(plain(args["units"])), args["topology"], inventory)
            listed = metrics_engines(hostvars, engines, topology)
            result.update(topology=topology, topology_source=source, engines=listed, targets=se.targets(listed))
        except (ValueError, VllmArgsError) as error:
            result.update(failed=True, msg=str(error))
        return result
