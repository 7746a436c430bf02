# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.layout_check, and with ``inventory_variables`` the inventory's own variables, on the controller.

The module checks the layout it is given (groups, each host's layout variables, the API
keys). With ``inventory_variables: true`` this plugin also reads, for every host of
``groups``, the inventory variables set for it (host_vars, group_vars, extra vars: what
``hostvars`` holds) that have one of the collection's prefixes, and checks them against
every role's ``meta/argument_specs.yml`` (read here, once, from the collection's own
``roles/``): a name no spec declares is refused with the closest declared one; a value is
checked against its option's type, choices and documented range
(``plugins/module_utils/_inventory_values.py``). The values stay in this process: they
never become module arguments, so no verbosity shows them. Every problem, the layout's
and the variables', is one numbered line of the task's ``msg``. A name this run set on the host itself
(``set_fact``, ``register``, gathered facts: a role's own fact such as ``tool_gate_build``) is no inventory
variable and is not checked: a playbook that runs the layout check after another procedure in the same run (the
topology advisor's switches) would otherwise be refused for its own facts.

Without ``groups``, the plugin reads the layout itself from the inventory (``groups`` and
``hostvars`` as the task sees them, ``_layout.inventory_input``): the groups the check needs,
each of their hosts' ``HOST_VARS`` and API key variables (``api_keys``, a no_log option). It
then also returns ``prometheus_hosts`` (``_layout.prometheus_hosts``): the engine hosts that set
``vllm_prometheus_hosts`` and the names there the inventory does not list; once the layout passed, it fails
naming those (``_layout.prometheus_hosts_errors``).
"""

from __future__ import annotations

import os

import yaml

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _inventory_values as iv
from ansible_collections.factory_floor.llm.plugins.module_utils import _layout as layout
from ansible_collections.factory_floor.llm.plugins.module_utils._layout import format_errors
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain as _plain

# The collection's roles, next to plugins/ in a checkout and in an installed collection alike.
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
# Checked by the layout itself (topology and site_engine_groups, with their own words) or by the API key check.
SKIP = ("topology", "site_engine_groups") + iv.KEY_VARS
# The list an operator fills with another collection's variables that share a prefix.
FOREIGN = "vllm_layout_foreign_variables"


def load_specs(roles_dir=ROLES_DIR):
    """Every role's ``meta/argument_specs.yml``, parsed: ``{role: document}``."""
    docs = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                docs[role] = yaml.safe_load(handle) or {}
    return docs


def _templated(host_vars, name):
    """``(True, value)`` of ``host_vars[name]`` templated, ``(False, None)`` when it cannot be (a value, or an item
    of it, that refers to a role's default, say): its name is still checked, its value then by the role."""
    try:
        return True, _plain(host_vars[name])
    except Exception:  # pylint: disable=broad-exception-caught  # any templating error: the value is not checked here
        return False, None


def run_facts(hostvars, host):
    """The names this run set on ``host`` itself - ``set_fact`` and ``register`` (Ansible's non-persistent fact
    cache) and facts (its fact cache) -, read from the variable manager behind Ansible's ``hostvars``; an empty set
    for a plain dict (the tests') or where that manager is not there to ask."""
    manager = getattr(hostvars, "_variable_manager", None)
    names = set()
    for cache in (getattr(manager, "_nonpersistent_fact_cache", None), getattr(manager, "_fact_cache", None)):
        try:
            names.update(str(name) for name in (cache.get(host) or {}) if cache is not None)
        except Exception:  # pylint: disable=broad-exception-caught  # a cache plugin that cannot answer: check them all
            continue
    return names


def inventory_errors(hostvars, hosts, docs, set_by_run=None):
    """The errors of the inventory variables of ``hosts``: ``hostvars`` is Ansible's (each host's variables,
    templated when read) or a dict of dicts; ``docs`` every role's argument specs (:func:`load_specs`);
    ``set_by_run``: per host, the names this run set itself (:func:`run_facts`), which are not checked - by default
    read from ``hostvars``."""
    table = iv.option_table(docs)
    prefixes = iv.prefixes(docs, table)
    names, values, foreign = {}, {}, set()
    for host in hosts:
        if host not in hostvars:
            continue
        host_vars = hostvars[host]
        own = (set_by_run or {}).get(host, set()) if set_by_run is not None else run_facts(hostvars, host)
        names[host] = sorted(str(name) for name in host_vars if str(name) not in own and (
            iv.is_ours(name, prefixes) or name in iv.RENAMED or name in iv.MOVED))
        values[host] = {}
        for name in names[host]:
            if name in table:
                ok, value = _templated(host_vars, name)
                if ok:
                    values[host][name] = value
        ok, more = _templated(host_vars, FOREIGN) if FOREIGN in host_vars else (False, None)
        if ok and isinstance(more, (list, tuple)):
            foreign.update(str(name) for name in more)
    return iv.check_names(table, prefixes, names, foreign) + iv.check_values(table, values, skip=SKIP)


def _reported(error, others):
    """Whether the layout reported the same variable on the same hosts (a port it read itself)."""
    return any(other["check"] == "port_value" and other["variables"] == error["variables"]
               and set(error["hosts"]) <= set(other["hosts"]) for other in others)


class ActionModule(ActionBase):
    """Runs the module factory_floor.llm.layout_check; its documentation is the module's."""

    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        args = dict(self._task.args)
        found = []
        hostvars = task_vars.get("hostvars") or {}
        prometheus = None
        if args.get("groups") is None:
            groups = task_vars.get("groups") or {}
            args["groups"], args["hostvars"], args["api_keys"] = _plain(layout.inventory_input(
                groups, hostvars, engine_group=args.get("engine_group") or layout.ENGINE_GROUP,
                proxy_group=args.get("proxy_group") or layout.PROXY_GROUP,
                split_group=args.get("split_group") or layout.SPLIT_GROUP, key_vars=iv.KEY_VARS))
            prometheus = _plain(layout.prometheus_hosts(
                args["groups"].get(args.get("engine_group") or layout.ENGINE_GROUP), hostvars, groups.get("all")))
        if boolean(args.get("inventory_variables", False), strict=False):
            groups = args.get("groups") or {}
            hosts = []
            for members in groups.values() if isinstance(groups, dict) else ():
                for host in members or ():
                    if host not in hosts:
                        hosts.append(host)
            found = inventory_errors(hostvars, hosts, load_specs())
        outcome = self._execute_module(module_name="factory_floor.llm.layout_check", module_args=args,
                                       task_vars=task_vars)
        result.update(outcome)
        if found and "errors" in outcome:  # (without errors the module failed on its arguments: its msg says why)
            errors = [error for error in found if not _reported(error, outcome["errors"])] + outcome["errors"]
            result.update(failed=True, changed=False, errors=errors, msg=format_errors(errors))
        if prometheus is not None and not result.get("failed"):  # checked after the layout passed
            result["prometheus_hosts"] = prometheus
            refused = layout.prometheus_hosts_errors(prometheus)
            if refused:
                result.update(failed=True, errors=refused, msg=refused[0]["message"])
        return result
