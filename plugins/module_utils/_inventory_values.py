# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Inventory values the roles cannot take as they are, found on the controller before anything changes.

Pure logic, standard library only (the API key's rule is ``_vllm_client``'s). The
``layout_check`` module runs these next to its layout checks; each error is a dict
like theirs (``check``, ``hosts``, ``variables``, ``message``). Values themselves are
never quoted: a dict may hold ``vllm_env``'s ``HF_TOKEN``, a key is a key.

* **Lists and dicts** (:func:`check_types`): a role's ``argument_specs`` option of
  ``type: list`` or ``type: dict`` set to anything else. Ansible's own check turns a
  string into a list (``"a,b"`` -> ``["a", "b"]``) or a dict (``"k=v"``) for the check
  only and leaves the variable a string, which a role then takes character by
  character (``vllm_extra_args: "--enforce-eager"`` became fifteen arguments). What the
  controller passes is the type of each value, as Jinja's ``type_debug`` names it.
* **API keys** (:func:`check_api_keys`): each key variable set for a host must be a
  bearer token (``_vllm_client.api_key_problem``).
* **Engines that must agree** (:func:`check_agreement`): the engine hosts of one site
  serve one ``vllm_served_model_name`` with one ``vllm_api_key`` - the proxy sends every
  engine the same key and model, its checker probes each with them. Keys are compared,
  never shown: a message names the hosts of each key only.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_client import api_key_problem

# The variables that hold an API key (each role's own, and the metrics playbook's).
KEY_VARS = ("vllm_api_key", "tool_gate_api_key", "nginx_proxy_api_key", "metrics_api_key")
# What Jinja's type_debug names a value of each kind.
CONTAINER_TYPES = ("list", "dict")
_EXAMPLES = {
    "list": "%s: [first, second] (one item each; [] for none)",
    "dict": "%s: {NAME: value} ({} for none)",
}


def container_types(argument_specs_docs) -> dict:
    """``{variable: "list" | "dict"}`` of every option of type list or dict in ``argument_specs_docs``.

    Each document is a role's ``meta/argument_specs.yml`` as parsed YAML. An option
    typed both ways in two entry points (none today) keeps the first type seen.
    """
    found = {}
    for doc in argument_specs_docs or ():
        for spec in ((doc or {}).get("argument_specs") or {}).values():
            for name, option in ((spec or {}).get("options") or {}).items():
                kind = (option or {}).get("type", "str")
                if kind in CONTAINER_TYPES:
                    found.setdefault(name, kind)
    return found


def _names(hosts):
    return ", ".join(hosts)


def _error(check, message, hosts=(), variables=()):
    return {"check": check, "hosts": sorted(set(hosts)), "variables": list(variables), "message": message}


def check_types(expected: dict, seen: dict) -> list:
    """Errors for every variable of ``expected`` whose value's type (``seen[host][variable]``) is another.

    ``expected`` maps a variable to ``list`` or ``dict``; ``seen`` maps each host to
    the type names (Jinja's ``type_debug``) of the variables set for it. One error per
    variable and type, naming the hosts.
    """
    wrong = {}
    for host in sorted(seen or {}):
        for name, kind in sorted((seen[host] or {}).items()):
            want = (expected or {}).get(name)
            if want is None or kind == want:
                continue
            wrong.setdefault((name, kind), []).append(host)
    errors = []
    for (name, kind), hosts in sorted(wrong.items()):
        want = expected[name]
        said = {"str": "a string", "NoneType": "empty (null)", "int": "a number", "float": "a number",
                "bool": "a boolean"}.get(kind, "a %s" % kind)
        why = ""
        if kind == "str":
            why = (" Ansible's argument check turns a string into a %s for the check only: the role would take it "
                   "%s." % (want, "character by character" if want == "list" else "as text"))
        errors.append(_error(
            "value_type",
            "%s on %s is %s, not a %s.%s Write it as a YAML %s where it is set (group_vars, host_vars), for example "
            "%s; on the command line as JSON: -e '{\"%s\": %s}'."
            % (name, _names(hosts), said, want, why, "list" if want == "list" else "mapping",
               _EXAMPLES[want] % name, name, '["..."]' if want == "list" else '{"NAME": "value"}'),
            hosts, [name]))
    return errors


def check_api_keys(keys: dict) -> list:
    """Errors for every key of ``keys`` (``{host: {variable: value}}``, the ones set) that is no bearer token."""
    wrong = {}
    for host in sorted(keys or {}):
        for name, value in sorted((keys[host] or {}).items()):
            problem = api_key_problem(value)
            if problem is not None:
                wrong.setdefault((name, problem), []).append(host)
    return [_error("api_key", "%s on %s %s. Nothing was changed." % (name, _names(hosts), problem), hosts, [name])
            for (name, problem), hosts in sorted(wrong.items())]


def _groups(values: dict):
    """Hosts grouped by equal value, the largest group first (ties: by first host)."""
    by_value = {}
    for host in sorted(values):
        by_value.setdefault(values[host], []).append(host)
    return sorted(by_value.items(), key=lambda item: (-len(item[1]), item[1][0]))


def check_agreement(engines, hostvars: dict, keys: dict, engine_group: str = "gb10") -> list:
    """Errors when the engine hosts disagree on ``vllm_served_model_name`` or ``vllm_api_key``.

    ``hostvars`` holds each host's ``vllm_served_model_name`` when set, ``keys`` its
    ``vllm_api_key`` when set; unset is the role's default, "" (no key; the preflight
    refuses an empty model name).
    """
    engines = list(engines or [])
    if len(engines) < 2:
        return []
    errors = []
    names = {host: str((hostvars.get(host) or {}).get("vllm_served_model_name") or "") for host in engines}
    groups = _groups(names)
    if len(groups) > 1:
        said = "; ".join("%s on %s" % (repr(value) if value else "not set", _names(hosts)) for value, hosts in groups)
        odd = [host for dummy, hosts in groups[1:] for host in hosts]
        errors.append(_error(
            "served_model_name_differs",
            "The engine hosts serve different vllm_served_model_name (%s): clients ask the proxy for one name and it "
            "sends each request to any engine, so those of %s would answer 404. Set vllm_served_model_name once, in "
            "group_vars/%s.yml, and remove it from the host_vars of %s." % (said, _names(odd), engine_group, _names(odd)),
            odd, ["vllm_served_model_name"]))
    secrets = {host: str((keys.get(host) or {}).get("vllm_api_key") or "") for host in engines}
    groups = _groups(secrets)
    if len(groups) > 1:
        labels = []
        number = 0
        for value, hosts in groups:
            if value:
                number += 1
                labels.append("key %d on %s" % (number, _names(hosts)))
            else:
                labels.append("no key on %s" % _names(hosts))
        odd = [host for dummy, hosts in groups[1:] for host in hosts]
        errors.append(_error(
            "api_key_differs",
            "The engine hosts have different vllm_api_key (%s; the keys are not shown): the proxy and its checker send "
            "one key to every engine, so the others answer 401 and never join its rotation. Set vllm_api_key once, in "
            "group_vars/%s.yml (ansible-vault encrypt_string), and remove it from the host_vars of %s."
            % ("; ".join(labels), engine_group, _names(odd)),
            odd, ["vllm_api_key"]))
    return errors
