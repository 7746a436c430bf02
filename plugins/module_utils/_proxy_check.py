# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nginx_proxy role's preflight refusals (factory_floor.llm.proxy_check): its settings, before anything changes.
Pure logic, standard library only.

``settings`` are the role's variables without ``nginx_proxy_`` (``backends``, ``port``, ``api_key``...). The checks
run in order and the first that fails is the answer: a later one reads what an earlier one checked (a list that is a
string would be read letter by letter). An API key is checked, never put in a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int

# The role's variables that must be YAML lists, in the order the refusal names them.
LISTS = ("backends", "affinity_headers", "affinity_body_fields", "expect_in_rotation", "drain")
# The settings the check reads (nginx_proxy_<name>), each with its default when left out.
SETTINGS = dict(
    backends=[], affinity_headers=[], affinity_body_fields=[], expect_in_rotation=[], drain=[],
    port=0, check_interval=0, check_fails=0, check_passes=0, balance="", affinity_balance_factor=0,
    affinity_body_buffer_size="", api_key="", api_key_next="", tls_certificate="", tls_certificate_key="",
    tls_server_name="",
)
# The settings whose variable is the site's, not nginx_proxy_<name> (one name per concept).
VARIABLES = {"port": "site_proxy_port"}
# A bearer token's characters (RFC 6750); the trim comparison catches a final line break, which $ lets through.
TOKEN = re.compile(r"^[A-Za-z0-9._~+/-]*=*$")
HEADER = re.compile(r"^[A-Za-z0-9-]+$")
SIZE = re.compile(r"^[0-9]+[kKmM]?$")
# What nginx would read as syntax in a path of its configuration.
PATH_SYNTAX = re.compile(r".*[\s;{}\"']")


def _text(value):
    """``value`` as a template prints it."""
    return "" if value is None else str(value)


def not_lists(settings):
    """The list settings that are not lists (``nginx_proxy_<name>``): first those that are no sequence at all, then
    the strings, then the mappings."""
    values = [(name, settings.get(name)) for name in LISTS]
    found = [name for name, value in values if not isinstance(value, (str, list, tuple, Mapping))]
    found += [name for name, value in values if isinstance(value, str)]
    found += [name for name, value in values if isinstance(value, Mapping)]
    return ["nginx_proxy_" + name for name in found]


def _token_ok(key):
    key = _text(key)
    return bool(TOKEN.match(key)) and key == key.strip()


def _error(check, variables, message):
    return {"check": check, "variables": variables, "message": message}


def check(settings, host="", engine_group="", engines=None, endpoints=None):
    """The first refusal of the proxy's ``settings`` on ``host``, as ``[{check, variables, message}]``, or ``[]``.
    ``engines``: the hosts of ``engine_group`` (None when the inventory has no such group); ``endpoints``: the
    ``address:port`` the proxy reaches each backend at (``_proxy_view.backend_endpoints``)."""
    one = dict(SETTINGS)
    one.update(settings or {})
    bad = not_lists(one)
    if bad:
        return [_error("not_a_list", bad, (
            "%s must be a YAML list (for example nginx_proxy_affinity_body_fields: [prompt_cache_key, user]), not a "
            "string or a mapping: write the value as [a, b] or one \"- item\" per line.") % ", ".join(bad))]
    members = list(engines) if engines is not None else None
    port = jinja_int(one["port"])
    if not (members and one["backends"] and 1 <= port <= 65535 and jinja_float(one["check_interval"]) > 0
            and jinja_int(one["check_fails"]) >= 1 and jinja_int(one["check_passes"]) >= 1):
        return [_error("layout", ["site_engine_group", "site_proxy_port", "nginx_proxy_check_interval",
                                  "nginx_proxy_check_fails", "nginx_proxy_check_passes"], (
            "The proxy on %s needs at least one engine host in group '%s' (site_engine_group; now: %s), a port in "
            "1-65535 (site_proxy_port=%s), nginx_proxy_check_interval > 0 seconds and nginx_proxy_check_fails, "
            "nginx_proxy_check_passes >= 1 (now %s, %s).") % (
            host, engine_group, ", ".join(members or []) or "none", _text(one["port"]), _text(one["check_fails"]),
            _text(one["check_passes"])))]
    endpoints = list(endpoints or [])
    if len(endpoints) != len(set(endpoints)):
        return [_error("same_endpoint", ["nginx_proxy_backend_address", "vllm_port"], (
            "Two backends in '%s' use the same address:port (%s): give each replica its own vllm_port or host.")
            % (engine_group, ", ".join(endpoints)))]
    headers, fields = one["affinity_headers"], one["affinity_body_fields"]
    if not (one["balance"] in ("affinity", "least_conn")
            and all(isinstance(name, str) and HEADER.match(name) for name in headers)
            and jinja_float(one["affinity_balance_factor"]) >= 1
            and SIZE.match(_text(one["affinity_body_buffer_size"]))
            and all(isinstance(name, str) for name in fields)):
        return [_error("affinity", ["nginx_proxy_balance", "nginx_proxy_affinity_headers",
                                    "nginx_proxy_affinity_balance_factor", "nginx_proxy_affinity_body_buffer_size",
                                    "nginx_proxy_affinity_body_fields"], (
            "nginx_proxy_balance must be affinity or least_conn (now %s); nginx_proxy_affinity_headers a list of "
            "header names, each of letters, digits and '-' (nginx drops headers with '_'; now %s); "
            "nginx_proxy_affinity_balance_factor a ratio >= 1 to the mean in-flight (now %s; 1.5 lets an engine hold "
            "up to 1.5 x the mean before its keys spill); nginx_proxy_affinity_body_buffer_size an nginx size such "
            "as 4m (now %s); nginx_proxy_affinity_body_fields a list of field names (now %s).") % (
            _text(one["balance"]), list(headers), _text(one["affinity_balance_factor"]),
            _text(one["affinity_body_buffer_size"]), list(fields)))]
    first = (members or [""])[0]
    for name, site in (("api_key", "site_api_key, vllm_api_key"), ("api_key_next", "site_api_key_next, vllm_api_key_next")):
        if not _token_ok(one[name]):
            return [_error("key_characters", ["nginx_proxy_" + name], (
                "nginx_proxy_%s (default: %s of %s) has a character outside a bearer token's (letters, digits and "
                "- . _ ~ + / then = at the end; RFC 6750), such as a space or a line break at its end: set it again "
                "without them. Its value is not shown.") % (name, site, first))]
    certificate, key = _text(one["tls_certificate"]), _text(one["tls_certificate_key"])
    if not (bool(certificate) == bool(key) and not PATH_SYNTAX.match(certificate) and not PATH_SYNTAX.match(key)
            and (not certificate or _text(one["tls_server_name"]))):
        return [_error("tls", ["nginx_proxy_tls_certificate", "nginx_proxy_tls_certificate_key",
                               "nginx_proxy_tls_server_name"], (
            "TLS at the proxy needs both nginx_proxy_tls_certificate and nginx_proxy_tls_certificate_key (paths on "
            "%s, without spaces, quotes, ';' or braces), or neither for plain HTTP (now '%s' and '%s'), and "
            "nginx_proxy_tls_server_name, the name the certificate carries (now '%s').") % (
            host, certificate, key, _text(one["tls_server_name"])))]
    return []
