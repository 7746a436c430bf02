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
* **Names** (:func:`check_names`): an inventory variable with one of the collection's
  prefixes (:func:`prefixes`: each role's name, and the first word of the options no
  role's name prefixes, such as ``switch_`` and ``tune_``) that no role's
  ``argument_specs`` declares is a typo or a leftover - no role reads it, so it would
  change nothing. The message names the closest declared name (``difflib``). A name
  the collection had and gave up for one shared name (:data:`RENAMED`) is refused
  whatever its prefix, naming the one to set instead; so is one that moved with its
  procedure to a role of its own (:data:`MOVED`).
* **Values** (:func:`check_values`): a declared variable whose value Ansible's argument
  check would refuse, or would take for the check only (a string for a list), each named
  in one line that says what the value must be: its type (``int`` as a whole number,
  ``float`` as a number, ``bool``...), its ``choices``, and its range where the spec's
  description documents one (:data:`RANGES`, and every ``int`` option documented as a
  TCP port). A scalar value is quoted unless the option is ``no_log``; a list or a dict
  never is.
"""

from __future__ import annotations

import difflib
import math
import re

from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_client import api_key_problem

# The variables that hold an API key (the engines', the site's, each role's own, and the metrics playbook's).
KEY_VARS = ("vllm_api_key", "site_api_key", "site_api_key_next", "tool_gate_api_key", "nginx_proxy_api_key",
            "metrics_api_key")
# Names the collection had for one concept, each refused with the one name it has now (one name per
# concept: the site role's, which every role reads).
RENAMED = {
    "vllm_engine_group": "site_engine_group",
    "nginx_proxy_backend_group": "site_engine_group",
    "maintenance_window_engine_group": "site_engine_group",
    "vllm_proxy_group": "site_proxy_group",
    "maintenance_window_proxy_group": "site_proxy_group",
    "ff_proxy_port": "site_proxy_port",
    "nginx_proxy_port": "site_proxy_port",
}
# Variables of the vllm_replica role that moved with its procedures to the procedure roles that read them
# now (issue 36): the rolling restart's and the model upgrade's.
MOVED = {
    "vllm_replica_drain_timeout": "rolling_restart_drain_timeout",
    "vllm_replica_drain_holder": "rolling_restart_drain_holder",
    "vllm_replica_restart_pass": "rolling_restart_pass",
    "vllm_replica_upgrade_model": "model_upgrade_model",
    "vllm_replica_upgrade_image": "model_upgrade_image",
    "vllm_replica_upgrade_image_digest": "model_upgrade_image_digest",
    "vllm_replica_upgrade_tool_call_parser": "model_upgrade_tool_call_parser",
    "vllm_replica_upgrade_chat_template": "model_upgrade_chat_template",
    "vllm_replica_upgrade_allow_outage": "model_upgrade_allow_outage",
    "vllm_replica_upgrade_candidate": "model_upgrade_candidate",
    "vllm_replica_restore": "model_upgrade_restore",
}
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
    return [_container_error(name, hosts, kind, expected[name]) for (name, kind), hosts in sorted(wrong.items())]


def _container_error(name, hosts, kind, want):
    """The error for a list or dict variable ``name`` whose value on ``hosts`` is of type ``kind`` (type_debug's name)."""
    said = {"str": "a string", "NoneType": "empty (null)", "int": "a number", "float": "a number",
            "bool": "a boolean"}.get(kind, "a %s" % kind)
    why = ""
    if kind == "str":
        why = (" Ansible's argument check turns a string into a %s for the check only: the role would take it "
               "%s." % (want, "character by character" if want == "list" else "as text"))
    return _error(
        "value_type",
        "%s on %s is %s, not a %s.%s Write it as a YAML %s where it is set (group_vars, host_vars), for example "
        "%s; on the command line as JSON: -e '{\"%s\": %s}'."
        % (name, _names(hosts), said, want, why, "list" if want == "list" else "mapping",
           _EXAMPLES[want] % name, name, '["..."]' if want == "list" else '{"NAME": "value"}'),
        hosts, [name])


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


# --- Names and values of every inventory variable the collection's roles declare ---------------

# Prefixes of other collections' variables that the collection's own option names share:
# prometheus.prometheus (the monitoring the docs recommend) names its variables prometheus_*.
# The collection's own prometheus_* options stay known by their full names.
NOT_OURS = ("prometheus",)
# Option types and the words a message uses for them.
_TYPE_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "str": "a string (text)",
    "path": "a path (text)",
    "list": "a list",
    "dict": "a mapping",
}
# Ansible's boolean strings (ansible.module_utils.parsing.convert_bool), lower case.
_BOOLEANS = ("y", "yes", "on", "1", "true", "t", "n", "no", "off", "0", "false", "f")
# Ranges the roles' argument_specs document in an option's description, and how a message says
# them: (low, high, low included, high included, the words of the spec's description, what the
# value must be). A unit test finds the words in the option's description. Every int option whose
# description says "TCP port" is 1-65535 (PORT).
RANGES = {
    "vllm_gpu_memory_utilization": (0, 1, False, False, "fraction 0-1 (exclusive)",
                                    "a number between 0 and 1 (a fraction, e.g. 0.80)"),
    "memory_guard_memory_high_ratio": (0, 1, False, True, "fraction (0-1]",
                                       "a number above 0 and at most 1 (a fraction, e.g. 0.9)"),
    "keepalived_virtual_router_id": (1, 255, True, True, "1-255", "a whole number from 1 to 255"),
    "keepalived_priority": (1, 254, True, True, "1-254", "a whole number from 1 to 254"),
    "keepalived_preempt_delay": (0, 1000, True, True, "0-1000", "a whole number of seconds from 0 to 1000"),
    "keepalived_engines_script_weight": (1, 253, True, True, "1-253", "a whole number from 1 to 253"),
    "keepalived_advert_int": (1, 255, True, True, "1-255", "a whole number of seconds from 1 to 255"),
    "tool_gate_min_score": (0, 100, True, True, "0-100", "a number from 0 to 100 (percent of cases passed)"),
    "tool_gate_concurrency": (1, None, True, True, "1 or more", "a whole number, 1 or more"),
    "tool_gate_repeat": (1, None, True, True, "1 or more", "a whole number, 1 or more"),
    "nginx_proxy_affinity_balance_factor": (1, None, True, True, "(>= 1)", "a number of at least 1 (a ratio, e.g. 1.5)"),
}
PORT = (1, 65535, True, True, "TCP port", "a TCP port, a whole number from 1 to 65535")


def _description(option):
    text = (option or {}).get("description") or ""
    return " ".join(str(line) for line in text) if isinstance(text, list) else str(text)


def option_table(argument_specs_docs) -> dict:
    """``{name: option}`` of every option of every entry point of ``argument_specs_docs``.

    ``argument_specs_docs`` maps each role's name to its ``meta/argument_specs.yml`` as
    parsed YAML. Each option is ``{"type", "elements", "choices", "no_log", "default",
    "range", "roles"}`` (``range`` from :data:`RANGES` or :data:`PORT`, else None;
    ``roles``: the roles that declare it). An option declared twice keeps what its first
    declaration says (a unit test checks that none differ in type).
    """
    table = {}
    for role in sorted(argument_specs_docs or {}):
        doc = argument_specs_docs[role] or {}
        for spec in (doc.get("argument_specs") or {}).values():
            for name, option in ((spec or {}).get("options") or {}).items():
                option = option or {}
                if name in table:
                    if role not in table[name]["roles"]:
                        table[name]["roles"].append(role)
                    continue
                kind = option.get("type", "str")
                found = RANGES.get(name)
                if found is None and kind == "int" and PORT[4] in _description(option):
                    found = PORT
                table[name] = {
                    "type": kind,
                    "elements": option.get("elements"),
                    "choices": list(option["choices"]) if option.get("choices") else None,
                    "no_log": bool(option.get("no_log")),
                    "default": option.get("default"),
                    "range": found,
                    "roles": [role],
                }
    return table


def prefixes(roles, table) -> tuple:
    """The collection's variable prefixes, each ending in ``_``: every role's name, and the
    first word of each declared option that no role's name prefixes (``switch_to`` ->
    ``switch_``), except :data:`NOT_OURS`. The longest first."""
    words = {str(role) for role in roles or ()}
    for name in table or {}:
        if "_" not in name or any(name.startswith(role + "_") for role in words):
            continue
        words.add(name.split("_", 1)[0])
    return tuple(sorted((word + "_" for word in words if word not in NOT_OURS), key=lambda p: (-len(p), p)))


def is_ours(name, our_prefixes) -> bool:
    """Whether ``name`` has one of the collection's prefixes (:func:`prefixes`)."""
    return any(str(name).startswith(prefix) and len(str(name)) > len(prefix) for prefix in our_prefixes)


def closest(name, known):
    """The declared name closest to ``name`` (difflib's ratio 0.8 or more), else None."""
    found = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.8)
    return found[0] if found else None


def check_names(known, our_prefixes, names: dict, foreign=()) -> list:
    """Errors for every variable of ``names`` (``{host: [name, ...]}``, the inventory variables
    set for each host, extra vars included) that has one of ``our_prefixes`` and is not in
    ``known`` (the declared options) nor in ``foreign`` (names the inventory says are another
    collection's). One error per name, naming its hosts and the closest declared name."""
    known = set(known or ())
    unknown = {}
    for host in sorted(names or {}):
        for name in names[host] or ():
            name = str(name)
            if name in RENAMED or name in MOVED or (is_ours(name, our_prefixes) and name not in known and name not in set(foreign or ())):
                unknown.setdefault(name, []).append(host)
    errors = []
    for name, hosts in sorted(unknown.items()):
        guess = closest(name, known)
        if name in RENAMED:
            text = ("%s (set for %s) is no longer a variable of factory_floor.llm: set %s instead, which every role "
                    "reads (one name for it). No role reads %s, so as written it would change nothing. Rename it where "
                    "it is set (group_vars, host_vars or -e)." % (name, _names(hosts), RENAMED[name], name))
            errors.append(_error("variable_renamed", text, hosts, [name]))
            continue
        if name in MOVED:
            text = ("%s (set for %s) is no longer a variable of factory_floor.llm: set %s instead, the role %s reads it "
                    "now. No role reads %s, so as written it would change nothing. Rename it where it is set (group_vars, "
                    "host_vars or -e)." % (name, _names(hosts), MOVED[name], "_".join(MOVED[name].split("_")[:2]), name))
            errors.append(_error("variable_renamed", text, hosts, [name]))
            continue
        if guess:
            text = ("%s (set for %s) is not a variable of factory_floor.llm: did you mean %s? No role reads %s, so as "
                    "written it would change nothing. Rename it where it is set (group_vars, host_vars or -e)."
                    % (name, _names(hosts), guess, name))
        else:
            text = ("%s (set for %s) is not a variable of factory_floor.llm, and no declared name is close (the roles' "
                    "README files list them). No role reads it, so it would change nothing: remove it, or list it in "
                    "vllm_layout_foreign_variables if another collection's role reads it." % (name, _names(hosts)))
        errors.append(_error("variable_name", text, hosts, [name]))
    return errors


def _shown(value):
    """A scalar value as a message quotes it (at most 40 characters)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    return "'%s'" % (text if len(text) <= 40 else text[:37] + "...")


def _as_int(value):
    """``value`` as Ansible's int check takes it (an int, a whole float, digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.match(r"\s*[-+]?[0-9]+\s*\Z", value):
        return int(value)
    return None


def _as_float(value):
    """``value`` as Ansible's float check takes it (a number, or text that is one), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _as_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        return value.strip().lower() in _BOOLEANS[:6]
    return None


def _range_problem(number, found):
    low, high, low_in, high_in = found[:4]
    if low is not None and (number < low or (number == low and not low_in)):
        return found[5]
    if high is not None and (number > high or (number == high and not high_in)):
        return found[5]
    return None


def _example(option):
    """``, for example <the default>`` when the option's documented default is an example of its type."""
    default = option.get("default")
    if option["type"] == "int" and _as_int(default) is not None:
        return " (for example %s, the default)" % default
    if option["type"] == "float" and _as_float(default) is not None:
        return " (for example %s, the default)" % default
    return ""


def _scalar_problem(kind, value, option, choices=None, found=None):
    """What ``value`` must be for an option of scalar type ``kind``, in words; None when it is fine."""
    if value is None:
        return None  # null: the role's default or "unset", as Ansible's own check takes it
    if kind == "int":
        number = _as_int(value)
        if number is None:
            return found[5] if found else _TYPE_WORDS["int"] + _example(option)
    elif kind == "float":
        number = _as_float(value)
        if number is None:
            return found[5] if found else _TYPE_WORDS["float"] + _example(option)
    elif kind == "bool":
        if _as_bool(value) is None:
            return "true or false"
        return None
    elif kind in ("str", "path"):
        if isinstance(value, (list, tuple, dict)):
            return _TYPE_WORDS[kind]
        number = None
    else:
        return None
    if choices and str(value) not in [str(choice) for choice in choices]:
        return "one of: %s" % ", ".join(str(choice) for choice in choices)
    if found and number is not None:
        return _range_problem(number, found)
    return None


def value_problem(option, value):
    """``(words, quote)``: what ``value`` must be for ``option`` (an :func:`option_table` entry),
    and whether the message may quote the value; ``(None, False)`` when it is fine. A list or a
    dict option's wrong type is :func:`check_values`' own message (the list/dict check)."""
    kind = option.get("type", "str")
    quote = not option.get("no_log") and not isinstance(value, (list, tuple, dict))
    if kind == "raw":
        return None, False
    if kind in CONTAINER_TYPES:
        return None, False
    return _scalar_problem(kind, value, option, option.get("choices"), option.get("range")), quote


def element_problems(option, value):
    """For a list option whose value is a list: ``[(index, words, quote)]`` of the items that
    its ``elements`` type or ``choices`` refuse (items count from 1)."""
    kind = option.get("elements")
    problems = []
    for index, item in enumerate(value, 1):
        if kind == "dict":
            words = None if isinstance(item, dict) else "a mapping"
        elif kind in ("int", "float", "bool", "str", "path"):
            words = _scalar_problem(kind, item, option, option.get("choices"))
            if item is None:
                words = _TYPE_WORDS[kind]
        else:
            words = None
        if words:
            problems.append((index, words, not option.get("no_log") and item is not None
                             and not isinstance(item, (list, tuple, dict))))
    return problems


def _kind(value):
    """Jinja's type_debug name of ``value``'s kind, for the list/dict message."""
    if value is None:
        return "NoneType"
    for kind, types in (("bool", bool), ("int", int), ("float", float), ("str", str), ("list", (list, tuple)),
                        ("dict", dict)):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def check_values(table, values: dict, skip=()) -> list:
    """Errors for every declared variable of ``values`` (``{host: {name: value}}``) whose value
    the option (``table``, :func:`option_table`) refuses - one per variable, value and problem,
    naming the hosts. ``skip``: names another check reports on (the layout's own, the API keys).
    A value is quoted only when scalar and the option is not ``no_log``."""
    wrong = {}
    containers = {}
    for host in sorted(values or {}):
        for name, value in sorted((values[host] or {}).items()):
            option = (table or {}).get(name)
            if option is None or name in set(skip or ()):
                continue
            kind = option.get("type", "str")
            if kind in CONTAINER_TYPES:
                seen = _kind(value)
                want = "list" if kind == "list" else "dict"
                if seen != want:
                    containers.setdefault((name, seen, want), []).append(host)
                    continue
                if kind == "list":
                    for index, words, quote in element_problems(option, value):
                        shown = " (%s)" % _shown(value[index - 1]) if quote else ""
                        key = (name, "item %d%s must be %s" % (index, shown, words))
                        wrong.setdefault(key, []).append(host)
                continue
            words, quote = value_problem(option, value)
            if words:
                key = (name, "is %s: must be %s" % (_shown(value), words) if quote else "must be %s" % words)
                wrong.setdefault(key, []).append(host)
    errors = [_container_error(name, hosts, seen, want) for (name, seen, want), hosts in sorted(containers.items())]
    for (name, said), hosts in sorted(wrong.items()):
        if said.startswith("item "):
            text = "%s on %s: %s." % (name, _names(hosts), said)
        elif said.startswith("is "):
            text = "%s on %s %s." % (name, _names(hosts), said)
        else:
            text = "%s on %s %s (its value is not shown)." % (name, _names(hosts), said)
        errors.append(_error("value_type", text, hosts, [name]))
    return sorted(errors, key=lambda error: error["variables"])
