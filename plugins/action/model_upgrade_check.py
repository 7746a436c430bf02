# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.model_upgrade_check, on the controller: the model upgrade's refusals and the replica it notes.

The ``model_upgrade`` role's tasks pass the images the ``vllm`` role's image check saw; this plugin reads the
variables each check needs itself, as the task sees them, asks the replica what it serves (``vllm_health`` with
``probe: models``) and, for ``served``, reads its container (``container_image_info``) on the host when the task
does not pass them, and decides with ``plugins/module_utils/_model_upgrade.py``. The module's documentation is
``plugins/modules/model_upgrade_check.py``.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["request", "replica", "served", "serving"]),
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


HEALTH = "factory_floor.llm.vllm_health"
IMAGE_INFO = "factory_floor.llm.container_image_info"


class ActionModule(TaskVariablesAction):
    """Runs the check on the controller; its documentation is the module factory_floor.llm.model_upgrade_check's."""

    _supports_check_mode = True  # it reads only
    _requires_connection = True  # replica and served ask the host what it runs

    def served_models(self, task_vars, timeout, model=True):
        """vllm_health's ``probe: models`` on this host, at the site's endpoint (``_site_vllm_endpoint``: url,
        api_key and, with ``model``, the served name); its result as a registered one reads, failed or not."""
        endpoint = self.variable("_site_vllm_endpoint", {})
        args = {key: endpoint[key] for key in ("url", "api_key", "model")
                if isinstance(endpoint.get(key), str) and endpoint[key] and (model or key != "model")}
        args.update(probe="models", timeout=timeout)
        return self._execute_module(module_name=HEALTH, module_args=args, task_vars=task_vars)

    def container(self, task_vars, build):
        """container_image_info's result for the replica's container, and ``build``'s image when no ID is noted
        (a start with vllm_container_pull may just have pulled it); {} without an image (the venv runtime)."""
        if not (build["image_id"] or build["image"]):
            return {}
        args = {"engine": "/usr/bin/%s" % self.variable("vllm_container_engine", "docker"),
                "containers": [self.variable("_model_upgrade_container", mu.CONTAINER)]}
        if not build["image_id"]:
            args["image"] = build["image"]
        return self._execute_module(module_name=IMAGE_INFO, module_args=args, task_vars=task_vars)

    def served(self, args, task_vars):
        """``served``'s refusals, then the container it read (``{}`` when the task passes none and there is no
        image); a failed read fails the check with its own message."""
        build = {key: args[key] for key in ("model", "image", "image_id")}
        models = args["models"] or self.served_models(task_vars, 10, model=False)
        if args["models"]:
            container = args["container"]
        else:
            container = {} if models.get("failed") else self.container(task_vars, build)
        for seen in (models, container):
            if seen.get("failed"):
                return [seen.get("msg") or "%s: %s" % (HEALTH if seen is models else IMAGE_INFO, seen)], container
        return mu.served_errors(self.variable("inventory_hostname", ""), build, models, container,
                                args["after"]), container

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
            result.update(mu.settings(v))
        elif args["check"] == "replica":
            if not args["models"]:
                # Not a failure by itself: replica_errors names a replica that cannot be asked.
                try:
                    asked = self.served_models(task_vars, 0)
                finally:
                    self._remove_tmp_path(self._connection._shell.tmpdir)
                args["models"] = {key: value for key, value in asked.items() if key != "failed"}
            unit = self.variable("_site_topologies.replicas.unit")
            state = mu.replica(self.variable("model_upgrade_replica"), args["old_image"],
                               args["new_image"] or args["old_image"], args["models"],
                               self.variable("vllm_served_model_name", ""), unit)
            v = dict(inventory_hostname=host, vllm_model=self.variable("vllm_model", ""),
                     vllm_served_model_name=self.variable("vllm_served_model_name", ""),
                     url=self.variable("_site_vllm_endpoint.url", ""), playbook_dir=self.variable("playbook_dir", None))
            errors = mu.replica_errors(v, state, args["old_image"], args["models"], unit)
            result.update(state)
        elif args["check"] == "serving":
            try:
                asked = args["models"] or self.served_models(task_vars, 0)
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            result["model"] = mu.serving_model(asked, self.variable("vllm_served_model_name", ""))
        else:
            try:
                errors, result["container"] = self.served(args, task_vars)
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(changed=False, errors=errors)
        if errors:
            result.update(failed=True, msg=errors[0])
        return result
