# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.model_upgrade_check, on the controller: the model upgrade's refusals and the replica it notes.

The ``model_upgrade`` role's tasks read the hosts (the ``vllm`` role's image check, ``vllm_health``,
``container_image_info``) and pass what they saw; this plugin reads the variables each check needs itself, as the
task sees them, and decides with ``plugins/module_utils/_model_upgrade.py``. The module's documentation is
``plugins/modules/model_upgrade_check.py``.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["request", "replica", "served"]),
    old_image=dict(type="dict", default={}),
    new_image=dict(type="dict", default={}),
    models=dict(type="dict", default={}),
    container=dict(type="dict", default={}),
    model=dict(type="str", default=""),
    image=dict(type="str", default=""),
    image_id=dict(type="str", default=""),
    after=dict(type="str", default="the restart"),
)

# What the checks read, with the default each takes where it is not defined.
READ = dict(model_upgrade_model="", model_upgrade_image="", model_upgrade_allow_outage=False, topology="",
            vllm_runtime="container", inventory_hostname="", playbook_dir=None, vllm_model="",
            vllm_tool_call_parser="", vllm_chat_template="", model_upgrade_tool_call_parser="",
            model_upgrade_chat_template="")


class ActionModule(TaskVariablesAction):
    """Runs the check on the controller; its documentation is the module factory_floor.llm.model_upgrade_check's."""

    _supports_check_mode = True  # it reads only

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = self.variable("inventory_hostname", "")
        errors = []
        if args["check"] == "request":
            v = self.variables(READ, **READ)
            groups = self.variable("groups", {})
            v["engines"] = groups.get(self.variable("site_engine_group", "gb10")) or []
            v["proxies"] = groups.get(self.variable("site_proxy_group", "proxy")) or []
            errors = mu.request_errors(v)
            result["replica"] = mu.settings(v)
        elif args["check"] == "replica":
            unit = self.variable("_site_topologies.replicas.unit")
            state = mu.replica(self.variable("model_upgrade_replica"), args["old_image"],
                               args["new_image"] or args["old_image"], args["models"],
                               self.variable("vllm_served_model_name", ""), unit)
            v = dict(inventory_hostname=host, vllm_model=self.variable("vllm_model", ""),
                     vllm_served_model_name=self.variable("vllm_served_model_name", ""),
                     url=self.variable("_site_vllm_endpoint.url", ""), playbook_dir=self.variable("playbook_dir", None))
            errors = mu.replica_errors(v, state, args["old_image"], args["models"], unit)
            result["replica"] = state
        else:
            build = {key: args[key] for key in ("model", "image", "image_id")}
            errors = mu.served_errors(host, build, args["models"], args["container"], args["after"])
        result.update(changed=False, errors=errors)
        if errors:
            result.update(failed=True, msg=errors[0])
        return result
