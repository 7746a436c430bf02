# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.proxy_check, on the controller: the nginx_proxy role's preflight refusals.

The task gives nothing: this plugin reads the role's variables itself, as the task sees them
(``nginx_proxy_<name>`` for each name of ``_proxy_check.SETTINGS``, the port ``site_proxy_port``, ``site_engine_group``,
``site_engine_port``, ``inventory_hostname``), the engine group from ``groups`` and each backend's
address and port from ``hostvars``; the decision is ``plugins/module_utils/_proxy_check.py``'s.
Nothing runs on the host, and the API keys it checks stay in this process (no message shows one).
The module's documentation is ``plugins/modules/proxy_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_check as pc
from ansible_collections.factory_floor.llm.plugins.module_utils._proxy_view import backend_endpoints
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


class ActionModule(ActionBase):
    """Runs the check on the controller; its documentation is the module factory_floor.llm.proxy_check's."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def _variable(self, expression):
        return plain(self._templar.resolve_variable_expression(expression))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        if self._task.args:
            raise AnsibleActionFail("proxy_check takes no arguments: it reads the nginx_proxy role's variables")
        task_vars = task_vars or {}
        group = self._variable("site_engine_group")
        groups = task_vars.get("groups") or {}
        engines = list(groups[group]) if group in groups else None
        settings = {}
        for name in pc.SETTINGS:
            try:
                settings[name] = self._variable(pc.VARIABLES.get(name, "nginx_proxy_" + name))
            except AnsibleError:
                if engines:
                    raise
                # Its default reads the engine group, which the inventory lacks: the layout refusal says so.
        endpoints = []
        if not pc.not_lists(settings):  # the endpoints of a string would be its letters'
            endpoints = plain(backend_endpoints(settings["backends"], task_vars.get("hostvars") or {},
                                                self._variable("site_engine_port")))
        errors = pc.check(settings, host=self._variable("inventory_hostname"), engine_group=group, engines=engines,
                          endpoints=endpoints)
        result.update(changed=False, errors=errors)
        if errors:
            result.update(failed=True, msg=errors[0]["message"])
        return result
