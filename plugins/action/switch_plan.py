# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.switch_plan, and with ``read_hosts`` what the hosts said read from ``hostvars`` on the controller.

With ``read_hosts: true`` this plugin reads, for every argument the task does not give, what
the hosts noted and registered so far from ``hostvars`` (``_host_inputs``): for a switch each
engine host's units, topology record and notes, the tool gate's facts (on the first engine host,
and on the host of ``incumbent_host``) and each proxy host's drains (``proxies``); for a model
upgrade each engine host's stored score and note and the first tool-gate bar held; for the records
at the end of a switch each engine host's record. For a switch and its records it also reads, for every option the task does not give, the
variables the switch runs with, as the task sees them (``STANDING``: ``switch_to``, the engine and proxy
groups, the split's head, the start-ups the maintenance window read, the models). The module then decides
from them; its documentation is the module's.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _host_inputs as inputs
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

# Read by this plugin only, never passed to the module.
PLUGIN_OPTIONS = ("read_hosts", "proxies", "incumbent_host")
# With read_hosts, per procedure: option -> the variable it is read from where the task gives none ("models" is
# each topology's model directory, "head" the split's head or the first engine host, "incumbent_host" empty before
# the first decision). An undefined one of OPTIONAL leaves the module's default; any other is an error.
STANDING = {
    "switch": {"topology": "switch_to", "engines": "groups[site_engine_group]", "proxies": "groups[site_proxy_group]",
               "startup": "maintenance_window_startup", "play_hosts": "ansible_play_hosts",
               "playbook_dir": "playbook_dir", "served_model_name": "vllm_served_model_name"},
    "record": {"engines": "groups[site_engine_group]", "plan": "vllm_switch_plan"},
    "move": {"engines": "groups[site_engine_group]", "proxies": "groups[site_proxy_group]", "move_to": "move_to",
             "engine_groups": "site_engine_groups", "play_hosts": "ansible_play_hosts",
             "playbook_dir": "playbook_dir", "members": "nginx_proxy_backends"},
}
OPTIONAL = ("startup", "play_hosts", "playbook_dir", "served_model_name", "models", "move_to", "engine_groups",
            "members")
MODELS = {"replicas": "_vllm_topologies.replicas.model", "split": "_vllm_topologies.split.model"}
_UNSET = object()


def read_inputs(args, hostvars):
    """The module's arguments ``args`` (``read_hosts`` given) with what it reads from ``hostvars`` added where
    the task gave none."""
    procedure = args.get("procedure") or "switch"
    engines = args.get("engines") or []
    proxies = args.get("proxies") or []
    if procedure in ("switch", "move"):
        read = inputs.switch_inputs(hostvars, engines, proxies, args.get("incumbent_host") or "")
    elif procedure == "upgrade":
        read = inputs.upgrade_inputs(hostvars, engines)
    elif procedure == "record":
        read = inputs.record_inputs(hostvars, engines)
    else:
        raise AnsibleActionFail("switch_plan reads the hosts' variables (read_hosts) for the procedures switch, "
                                "move, upgrade and record, not %s" % procedure)
    given = {key: value for key, value in args.items() if key not in PLUGIN_OPTIONS}
    return dict(plain(read), **given)


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.switch_plan; its documentation is the module's."""

    _supports_check_mode = True

    def _variable(self, expression, default=None):
        try:
            return plain(self._templar.resolve_variable_expression(expression))
        except AnsibleUndefinedVariable:
            if default is None:
                raise
            return default

    def standing(self, args):
        """``args`` with the variables a switch (or its records) runs with, read where the task gives none."""
        procedure = args.get("procedure") or "switch"
        if procedure not in STANDING:
            return args
        args = dict(args)
        for option, expression in STANDING[procedure].items():
            if option not in args:
                value = self._variable(expression, _UNSET if option in OPTIONAL else None)
                if value is not _UNSET:
                    args[option] = value
        if "models" not in args:
            models = {name: self._variable(expression, _UNSET) for name, expression in MODELS.items()}
            if _UNSET not in models.values():
                args["models"] = models
        if procedure == "record" and "head" not in args and (args.get("plan") or {}).get("procedure") == "move":
            args["head"] = self._variable("vllm_split_head", "") or (args["engines"] or [""])[0]
        if procedure in ("switch", "move"):
            if "head" not in args:
                args["head"] = self._variable("vllm_split_head", "") or (args["engines"] or [""])[0]
            if "incumbent_host" not in args:
                args["incumbent_host"] = self._variable("vllm_switch_plan.incumbent.host", "")
        return args

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        args = dict(self._task.args)
        if boolean(args.get("read_hosts", False), strict=False):
            # A group move's plays name their procedure once (switch_procedure: move), so the steps it shares with the
            # switch ask this plugin the same question as there.
            if "procedure" not in args:
                args["procedure"] = self._variable("switch_procedure", "switch")
            args = read_inputs(self.standing(args), task_vars.get("hostvars") or {})
        else:
            extra = [key for key in PLUGIN_OPTIONS if args.get(key)]
            if extra:
                raise AnsibleActionFail("switch_plan reads %s only with read_hosts: true" % ", ".join(extra))
            args = {key: value for key, value in args.items() if key not in PLUGIN_OPTIONS}
        result.update(self._execute_module(module_name="factory_floor.llm.switch_plan", module_args=args,
                                           task_vars=task_vars))
        return result
