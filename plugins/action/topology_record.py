# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.topology_record, and with ``engine_hosts`` each host's registered result read on the controller.

With ``engine_hosts`` and ``registered`` instead of ``hosts``, this plugin reads the result each
of those engine hosts registered under that name (``hostvars``; ``{}`` where there is none, as a
host that did not run the read) and passes them as ``hosts``: the module compares them. The
module's documentation is the module's.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import per_host
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.topology_record; its documentation is the module's."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = dict(self._task.args)
        engine_hosts = args.pop("engine_hosts", None)
        registered = args.pop("registered", None)
        if (engine_hosts is None) != (registered is None):
            raise AnsibleActionFail("topology_record takes engine_hosts and registered together")
        if engine_hosts is not None:
            if args.get("hosts") is not None:
                raise AnsibleActionFail("topology_record takes engine_hosts or hosts, not both")
            args["hosts"] = plain(per_host((task_vars or {}).get("hostvars") or {}, engine_hosts, registered))
        result.update(self._execute_module(module_name="factory_floor.llm.topology_record", module_args=args,
                                           task_vars=task_vars))
        return result
