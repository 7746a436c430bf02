# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.vllm_check, on the controller: the engines' preflight and image refusals.

The task names a check and passes what the roles' tasks read on the host (``container_image_info``, ``vllm_health``
results). ``engine`` given none of its observations reads the host itself, in check mode too (``stat``,
``systemctl is-active``, ``ss``, ``ps``: ``_engine_reads``); no key or environment value is an argument there. This
plugin reads the variables that check needs itself,
as the task sees them (``_vllm_check.VARIABLES``: the inventory, the roles' defaults, an
include's ``vars``), and from ``hostvars`` every play host's ``vllm_image_check`` for ``image_builds``
and every proxy host's ``nginx_proxy_settings`` for ``switch_proxy``; the decision is
``plugins/module_utils/_vllm_check.py``'s. The keys and environment values it reads stay in this
process, and no message shows one. The module's documentation is
``plugins/modules/vllm_check.py``.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_reads as er
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_check as vc
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

# What the task passes: the check, and what the host said (registered results, or a message).
ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=list(vc.CHECKS)),
    model_dir=dict(type="dict"),
    venv_vllm=dict(type="dict"),
    tool_parsers=dict(type="dict"),
    units_active=dict(type="dict"),
    port_listeners=dict(type="dict"),
    port_units=dict(type="dict"),
    serving=dict(type="dict"),
    failure=dict(type="str"),
    image_info=dict(type="dict"),
)


class ActionModule(ActionBase):
    """Runs the check on the controller; its documentation is the module factory_floor.llm.vllm_check's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def _variable(self, expression, local_variables=None):
        return plain(self._templar.resolve_variable_expression(expression, local_variables=local_variables))

    def read_variables(self, name):
        """The variables the check ``name`` reads, by name; an undefined OPTIONAL one is absent."""
        found = {}
        for variable in vc.VARIABLES[name]:
            try:
                found[variable] = self._variable(variable)
            except AnsibleUndefinedVariable as error:
                if variable not in vc.OPTIONAL:
                    raise AnsibleActionFail("vllm_check %s reads %s, which is not defined here: %s"
                                            % (name, variable, error)) from error
        return found

    def read_images(self, hosts):
        """Each of ``hosts``' ``vllm_image_check`` fact (absent where it has none)."""
        return self.read_facts(hosts, "vllm_image_check")

    def read_facts(self, hosts, fact):
        """Each of ``hosts``' ``fact`` (absent where it has none)."""
        found = {}
        for host in hosts:
            try:
                found[host] = self._variable("hostvars[host].%s" % fact, local_variables={"host": host})
            except AnsibleUndefinedVariable:
                continue
        return found

    def read_host(self, variables, task_vars):
        """``engine``'s observations, read on the host (for real in check mode too: they only read), as
        (observed, failure message or None)."""
        variables = dict(variables, **{name: self._variable(name) for name in er.VARIABLES})
        check_mode = self._task.check_mode
        self._task.check_mode = False
        observed = {}
        try:
            steps = er.reads(variables)
            while steps:
                option, module, module_args = steps.pop(0)
                observed[option] = self._execute_module(module_name=module, module_args=module_args,
                                                        task_vars=task_vars)
                failure = er.read_failure(option, observed[option])
                if failure:
                    return observed, failure
                if not steps and "port_units" not in observed:
                    steps = [step for step in [er.port_units_read(observed.get("port_listeners"),
                                                                  observed.get("units_active"))] if step]
        finally:
            self._task.check_mode = check_mode
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return observed, None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        name = args["check"]
        variables = self.read_variables(name)
        observed = {key: value for key, value in args.items() if key != "check" and value is not None}
        if name == "engine" and not observed:
            observed, failure = self.read_host(variables, task_vars)
            if failure:
                result.update(failed=True, msg=failure)
                return result
        if name == "image_builds":
            observed["images"] = self.read_images(variables.get("ansible_play_hosts") or [])
        if name == "switch_proxy":
            proxies = (variables.get("groups") or {}).get(variables.get("site_proxy_group")) or []
            observed["proxies"] = self.read_facts(proxies, "nginx_proxy_settings")
        errors = vc.check(name, variables, observed)
        result.update(changed=False, errors=errors)
        notes = vc.notes(name, variables, observed)
        if notes:
            result["warnings"] = list(result.get("warnings") or []) + notes
        if errors:
            result.update(failed=True, msg=vc.format_errors(errors))
        return result
