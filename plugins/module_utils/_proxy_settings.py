# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether an nginx proxy of the collection runs the settings its inventory gives it now.

Pure logic, standard library only: no Ansible imports. Behind ``factory_floor.llm.proxy_settings_info``, which
reads on the proxy host the files the nginx_proxy role wrote there - the membership checker's configuration
(``upstream.json``), the API keys nginx lets through (``nginx-api-key.conf``) and ``nginx.conf`` - and is handed
the same three files as the role renders them from the inventory now (its ``settings`` entry point's template
lookups; nothing is written). :func:`compare` says which settings differ, each named by the variable that sets it
(nginx.conf's by nginx's own directive names), the value on the proxy and in the inventory - never a key's: keys
are compared here and only said to differ.

A difference carries ``engines``: the setting describes the engines as well (their API key, served model name,
address or port). The engines that serve now were started with what the proxy has, so applying such a setting to
the proxy alone would take them out of rotation or refuse their clients; the others can be applied to the proxy at
any time (nginx reloads, the engines stay in rotation). And ``blocks``: a topology switch, which starts the new
engines with the inventory's settings and leaves the proxy as it is, cannot go right with it - the engines'
settings, the port and TLS clients and the switch's probe client reach the proxy by (nginx.conf's ``listen``,
``ssl_certificate``, ``ssl_certificate_key``), an engine the proxy does not know, the paths the switch's drains and
waits use. The switch refuses those before anything changes, naming every difference and the command for each kind
(``_vllm_check``'s ``switch_proxy``); the others (check timings, the balancer, timeouts, ...) it names and leaves.
"""

from __future__ import annotations

import difflib
import json
import re

CHECKER_FILE = "upstream.json"
KEYS_FILE = "nginx-api-key.conf"
NGINX_FILE = "nginx.conf"

# upstream.json's settings: key -> (the variable that sets it, the variable it defaults from or None, secret, engines)
CHECKER = {
    "model": ("nginx_proxy_model", "vllm_served_model_name", False, True),
    "api_key": ("nginx_proxy_api_key", "vllm_api_key", True, True),
    "interval": ("nginx_proxy_check_interval", None, False, False),
    "probe_timeout": ("nginx_proxy_probe_timeout", None, False, False),
    "fails": ("nginx_proxy_check_fails", None, False, False),
    "passes": ("nginx_proxy_check_passes", None, False, False),
}
# Each engine's entry in upstream.json's candidates: key -> (variable, engines)
CANDIDATE = {
    "address": ("nginx_proxy_backend_address", True),
    "port": ("vllm_port", True),
    "max_num_seqs": ("vllm_max_num_seqs", False),
}
# The key map's lines, in the order the role writes them.
KEY_VARIABLES = (("nginx_proxy_api_key", "vllm_api_key"), ("nginx_proxy_api_key_next", "vllm_api_key_next"))
# nginx.conf's directives that say how clients - and a switch's probe client, which follows the inventory - reach
# the proxy.
CLIENT_DIRECTIVES = ("listen", "ssl_certificate", "ssl_certificate_key")
_KEY_LINE = re.compile(r'^\s*"~\^Bearer (?P<key>.*)\$"\s+1;\s*$')


def _difference(file, setting, applied=None, wanted=None, default_from=None, secret=False, engines=False, host=None,
                blocks=None):
    return {"file": file, "setting": setting, "default_from": default_from, "host": host,
            "applied": None if secret else applied, "wanted": None if secret else wanted,
            "secret": secret, "engines": engines, "blocks": engines if blocks is None else blocks}


def _candidates(config):
    found = config.get("candidates")
    return {str(item.get("name")): item for item in found if isinstance(item, dict)} if isinstance(found, list) else {}


def checker_differences(applied, wanted):
    """The differences between two parsed ``upstream.json`` (the proxy's, the inventory's rendering)."""
    out = []
    for key, (variable, default_from, secret, engines) in CHECKER.items():
        if applied.get(key) != wanted.get(key):
            out.append(_difference(CHECKER_FILE, variable, applied.get(key), wanted.get(key), default_from, secret,
                                   engines))
    mine, theirs = _candidates(applied), _candidates(wanted)
    for name in theirs:
        if name not in mine:
            # The switch would start an engine there and wait for it in a rotation the proxy never gives it.
            out.append(_difference(CHECKER_FILE, "site_engine_group", None, name, host=name, blocks=True))
    for name in mine:
        if name not in theirs:
            out.append(_difference(CHECKER_FILE, "site_engine_group", name, None, host=name))
    for name in theirs:
        for key, (variable, engines) in CANDIDATE.items():
            if name in mine and mine[name].get(key) != theirs[name].get(key):
                out.append(_difference(CHECKER_FILE, variable, mine[name].get(key), theirs[name].get(key),
                                       engines=engines, host=name))
    # The affinity balancer's members file is written only with nginx_proxy_balance: affinity.
    if ("members_file" in applied) != ("members_file" in wanted):
        out.append(_difference(CHECKER_FILE, "nginx_proxy_balance",
                               "affinity" if "members_file" in applied else "least_conn",
                               "affinity" if "members_file" in wanted else "least_conn"))
    known = set(CHECKER) | {"candidates", "members_file"}
    for key in sorted((set(applied) | set(wanted)) - known):
        if applied.get(key) != wanted.get(key):
            # The collection's own (paths, commands): a proxy set up by another version of the role, whose drains
            # and rotation the switch would look for elsewhere.
            out.append(_difference(CHECKER_FILE, "%s %s" % (CHECKER_FILE, key), applied.get(key), wanted.get(key),
                                   blocks=True))
    return out


def accepted_keys(text):
    """The keys a key map lets through, in its order (``"~^Bearer KEY$" 1;`` lines, KEY as regex_escape wrote it)."""
    keys = []
    for line in (text or "").splitlines():
        match = _KEY_LINE.match(line)
        if match:
            keys.append(re.sub(r"\\(.)", r"\1", match.group("key")))
    return keys


def key_differences(applied_text, wanted_text):
    """The keys nginx lets through on the proxy (``applied_text``; None: no key map there) against the inventory's
    rendering (``wanted_text``; "" or None: no key wanted). Never a key in what it returns."""
    applied, wanted = accepted_keys(applied_text), accepted_keys(wanted_text)
    out = []
    for index, (variable, default_from) in enumerate(KEY_VARIABLES):
        mine = applied[index] if index < len(applied) else None
        theirs = wanted[index] if index < len(wanted) else None
        if mine != theirs:
            out.append(_difference(KEYS_FILE, variable, default_from=default_from, secret=True, engines=True))
    return out


def nginx_lines(text):
    """nginx.conf's lines as nginx reads them: no comment, no blank line, whitespace collapsed."""
    lines = []
    for line in (text or "").splitlines():
        line = " ".join(line.split())
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _directive(line):
    word = line.split(" ", 1)[0].rstrip(";{")
    return word if word not in ("", "}") else None


def nginx_differences(applied_text, wanted_text):
    """nginx.conf on the proxy against the inventory's rendering: one difference, with ``directives`` naming the
    directives of the lines that differ (nginx's own words), or none."""
    applied, wanted = nginx_lines(applied_text), nginx_lines(wanted_text)
    if applied == wanted:
        return []
    directives = []
    matcher = difflib.SequenceMatcher(a=applied, b=wanted, autojunk=False)
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        for line in applied[a_start:a_end] + wanted[b_start:b_end] if tag != "equal" else ():
            directive = _directive(line)
            if directive and directive not in directives:
                directives.append(directive)
    return [dict(_difference(NGINX_FILE, NGINX_FILE, blocks=any(name in CLIENT_DIRECTIVES for name in directives)),
                 directives=directives)]


def compare(applied, wanted):
    """What differs between the files on the proxy and the inventory's rendering of them.

    ``applied`` and ``wanted``: ``checker`` (upstream.json's text; applied None: the file is missing), ``keys`` (the
    key map's text; None: missing, wanted "": no key) and ``nginx`` (nginx.conf's text; applied None: missing).
    Returns ``deployed`` (False when the proxy has no checker configuration: deploy.yml never set it up there) and
    ``differences``, one per setting (a key named once, though two files hold it)."""
    if applied.get("checker") is None:
        return {"deployed": False, "differences": []}
    try:
        mine = json.loads(applied["checker"])
    except ValueError:
        mine = None
    theirs = json.loads(wanted["checker"])
    if not isinstance(mine, dict):
        out = [_difference(CHECKER_FILE, CHECKER_FILE, "not JSON", "the inventory's", blocks=True)]
    else:
        out = checker_differences(mine, theirs)
    named = set((item["setting"], item["host"]) for item in out)
    out += [item for item in key_differences(applied.get("keys"), wanted.get("keys"))
            if (item["setting"], None) not in named]
    out += nginx_differences(applied.get("nginx"), wanted.get("nginx"))
    return {"deployed": True, "differences": out}


def _value(value):
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return json.dumps(value) if isinstance(value, (dict, bool)) or value is None else str(value)


def describe(difference):
    """One difference in words: the setting, what the proxy has, what the inventory says (a key: only that it differs)."""
    setting, default_from = difference["setting"], difference.get("default_from")
    name = "%s (by default %s)" % (setting, default_from) if default_from else setting
    if difference["file"] == NGINX_FILE:
        return "nginx.conf, its %s lines (nginx_proxy_* settings)" % (_value(difference.get("directives"))
                                                                      or "closing")
    if setting == "site_engine_group":
        if difference["applied"] is None:
            return "the engine %s: in the inventory's engine group (%s), not among the proxy's engines" % (
                difference["host"], setting)
        return "the engine %s: among the proxy's engines, not in the inventory's engine group (%s)" % (
            difference["host"], setting)
    if difference["secret"]:
        return "%s: another key than the proxy's (neither is shown)" % name
    if difference.get("host"):
        name = "%s's %s" % (difference["host"], name)
    return "%s: %s on the proxy, %s in the inventory" % (
        name, _value(difference["applied"]), _value(difference["wanted"]))
