# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_plan: the engine's command line, environment and fingerprint, composed on the controller,
against what the host runs. Its documentation is plugins/modules/engine_plan.py.

Composing here keeps the environment and the API keys on the controller: a module given them as ``no_log`` options
would mask every occurrence of their values in its own result (an environment value ``1`` in ``--max-num-seqs 12``).
Options the task leaves out are the vllm role's variables (``_engine_plan.ROLE_VARIABLES``), read as the task sees
them. The host is only read, by the collection's read-only modules: ``vllm_engine_info`` (the unit's process, given the
fingerprint as its ``no_log`` option, as before) and, with the container runtime, ``container_image_info``. The
result holds the environment and the fingerprint, so a successful run's output is hidden (``no_log``); a failure's
message names variables and types only, and is shown.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_plan import EnginePlanError
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

# The options (the documentation's). Lists and mappings are taken as given ("raw") and checked by _engine_plan:
# Ansible's own conversion would turn a string into a list of its comma-separated parts, and their items' types are
# part of the fingerprint.
ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    runtime=dict(type="str", required=True, choices=list(ep.RUNTIMES)),
    settings=dict(type="raw", required=True),
    service_settings=dict(type="raw", default={}),
    extra_args=dict(type="raw", default=[]),
    venv=dict(type="str", default="/opt/vllm"),
    container_engine=dict(type="str", default="/usr/bin/docker"),
    container_image=dict(type="str", default=""),
    container_pull=dict(type="bool", default=False),
    container_log_driver=dict(type="str", default=""),
    container_resource_args=dict(type="raw", default=[]),
    container_cache_dir=dict(type="str", default=""),
    container_cache_path=dict(type="str", default="/root/.cache"),
    container_run_args=dict(type="raw", default=[]),
    service_run_args=dict(type="raw", default=[]),
    stop_timeout=dict(type="int", default=40),
    env_file=dict(type="str", default=""),
    env=dict(type="raw", default={}, no_log=True),
    env_host=dict(type="raw", default={}, no_log=True),
    service_env=dict(type="raw", default={}, no_log=True),
    api_key=dict(type="str", default="", no_log=True),
    api_key_next=dict(type="str", default="", no_log=True),
    systemctl=dict(type="str", default="/usr/bin/systemctl"),
)


class ActionModule(ActionBase):
    """Composes with _engine_plan, reads the host with vllm_engine_info and container_image_info, decides."""

    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        given = self._task.args
        self._task.args = dict(ep.role_args(lambda name: self._role_variable(name, task_vars), given), **given)
        try:
            _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        finally:
            self._task.args = given
        try:
            composed = ep.compose(params, task_vars.get("inventory_hostname") or "this host")
        except EnginePlanError as exc:
            return dict(result, failed=True, msg=str(exc))
        try:
            engine, image_info = self._read(params, composed, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        for read in (engine, image_info):
            if read.get("failed"):
                return dict(result, failed=True, msg=read.get("msg", "reading the engine failed"))
        plan = ep.decide(params["runtime"], engine, params["container_image"], image_info, params["unit"])
        result.update(changed=False, argv=composed["argv"], environment=composed["environment"],
                      fingerprint=composed["fingerprint"], need_daemon_reload=bool(engine.get("need_daemon_reload")),
                      main_pid=engine.get("main_pid", 0), plan=plan)
        # The environment (HF_TOKEN...) and the fingerprint (a guess of the key could be checked against it).
        result["_ansible_no_log"] = True
        return result

    def _role_variable(self, name, task_vars):
        """The variable ``name`` as the task sees it (an include's ``vars`` too); KeyError when it is not defined."""
        if name not in task_vars:
            raise KeyError(name)
        return plain(self._templar.resolve_variable_expression(name))

    def _read(self, params, composed, task_vars):
        """(vllm_engine_info's result, container_image_info's or {}) on the host; both only read."""
        engine = self._execute_module(
            module_name="factory_floor.llm.vllm_engine_info", task_vars=task_vars,
            module_args={"unit": params["unit"], "argv": composed["argv"], "fingerprint": composed["fingerprint"],
                         "systemctl": params["systemctl"]})
        if engine.get("failed") or params["runtime"] != "container":
            return engine, {}
        # The same tag can name another build than the one the container was created from (pulled again): the
        # IDs tell. Pulls nothing.
        return engine, self._execute_module(
            module_name="factory_floor.llm.container_image_info", task_vars=task_vars,
            module_args={"engine": params["container_engine"], "image": params["container_image"],
                         "containers": [ep.container_name(params["unit"])]})
