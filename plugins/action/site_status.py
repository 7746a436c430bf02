# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.site_status, and with ``engine_hosts`` what each host's status entry point read, from ``hostvars``.

With ``engine_hosts`` (and ``proxy_hosts``) instead of ``engines`` and ``proxies``, this plugin
reads on the controller what the roles' ``status`` entry points set on each host (``vllm_status``,
``nginx_proxy_status``, the first proxy host's ``keepalived_status``), and, where the task does not
give them, the inventory's ``topology`` and ``vllm_split_head`` as the first engine host's variables
say (``_host_inputs.site_status_inputs``). The module's documentation is the module's.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import site_status_inputs
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.site_status; its documentation is the module's."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        args = dict(self._task.args)
        engine_hosts = args.pop("engine_hosts", None)
        proxy_hosts = args.pop("proxy_hosts", None)
        if engine_hosts is None and proxy_hosts is not None:
            raise AnsibleActionFail("site_status takes proxy_hosts only with engine_hosts")
        if engine_hosts is not None:
            both = [name for name in ("engines", "proxies") if args.get(name) is not None]
            if both:
                raise AnsibleActionFail("site_status takes engine_hosts and proxy_hosts or engines and proxies, "
                                        "not both (%s given)" % ", ".join(both))
            read = plain(site_status_inputs((task_vars or {}).get("hostvars") or {}, engine_hosts, proxy_hosts or []))
            args = dict(read, **{key: value for key, value in args.items() if value is not None})
        result.update(self._execute_module(module_name="factory_floor.llm.site_status", module_args=args,
                                           task_vars=task_vars))
        return result
