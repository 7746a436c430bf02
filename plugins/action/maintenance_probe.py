# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.maintenance_probe: stop the probe client an interrupted run left behind, and start this run's.

Runs ``command`` (``systemctl stop``, ``systemd-run``) and ``file`` on the host, in the order
``plugins/module_utils/_maintenance_window.py``'s ``probe_steps`` gives; the documentation is
``plugins/modules/maintenance_probe.py``. Without ``model``, the model is ``engine_host``'s ``vllm_served_model_name``,
read from ``hostvars`` on the controller only when the client starts."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import probe_steps

ARGUMENT_SPEC = dict(
    unit=dict(type="str", required=True),
    start=dict(type="bool", default=True),
    log=dict(type="str", required=True),
    url=dict(type="str", default=""),
    model=dict(type="str"),
    engine_host=dict(type="str", default=""),
    interval=dict(type="raw", default=0.5),
    concurrency=dict(type="raw", default=2),
    max_seconds=dict(type="raw", default=7200),
    lib_dir=dict(type="str", default=""),
    api_key_file=dict(type="str", default=""),
    ca_file=dict(type="str", default=""),
)


class ActionModule(ActionBase):
    """Runs the steps; the documentation is the module factory_floor.llm.maintenance_probe's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    @staticmethod
    def served_model_name(host, task_vars):
        """``host``'s ``vllm_served_model_name``, the name the engines serve the model under."""
        hostvars = task_vars.get("hostvars") or {}
        try:
            return str(hostvars[host]["vllm_served_model_name"])
        except (KeyError, AnsibleUndefinedVariable) as error:
            raise AnsibleActionFail("maintenance_probe asks for the model the engine host %r serves "
                                    "(its vllm_served_model_name), which is not defined there" % host) from error

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["start"] and args["model"] is None:
            args["model"] = self.served_model_name(args["engine_host"], task_vars or {})
        result.update(changed=False, started=None)
        try:
            for module, module_args, required in probe_steps(args, self._task.check_mode):
                step = self._execute_module(module_name="ansible.legacy." + module, module_args=module_args,
                                            task_vars=task_vars)
                if not required:
                    continue
                if step.get("failed"):
                    # What the failed step said, as the task that ran it alone would have shown it.
                    result.update(step)
                    return result
                if module == "command":
                    result["started"] = step
                    result["changed"] = True
                elif step.get("changed"):
                    result["changed"] = True
            if args["start"] and self._task.check_mode:
                result["changed"] = True  # a real run starts the client
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
