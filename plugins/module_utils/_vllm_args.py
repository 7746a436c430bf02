# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build vLLM's command line from settings named after vLLM's own flags.

One place turns role variables into ``vllm serve`` arguments, for a replica and
for each rank of a split, so both topologies launch vLLM the same way; and says
where a client on the engine's own host reaches what ``--host`` binds (the
playbooks' health checks, the watchdog, the tool-calling gate, tuning).
Pure logic: no Ansible imports, unit-tested in tests/unit.
"""

from __future__ import annotations

import ipaddress
import json
import re

# Settings passed as ``--flag value``, in this order. Key = vLLM's flag with
# dashes turned into underscores (``max_num_seqs`` -> ``--max-num-seqs``).
VALUE_FLAGS = (
    "served_model_name",
    "host",
    "port",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
    "dtype",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "load_format",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "tool_call_parser",
    "chat_template",
    "shutdown_timeout",
    # vLLM reads more arguments from this YAML file (the role's root-only key list during a key rotation).
    "config",
)
# Settings that are JSON objects on the command line.
JSON_FLAGS = ("speculative_config",)
# Booleans vLLM declares with BooleanOptionalAction (``--x`` / ``--no-x``).
OPTIONAL_BOOL_FLAGS = ("enable_prefix_caching",)
# Booleans that are plain switches (present or absent).
SWITCH_FLAGS = ("enable_auto_tool_choice", "headless")
# Never put on the command line (it is world-readable in /proc): vLLM reads
# VLLM_API_KEY from the environment instead.
SECRET_SETTINGS = ("api_key",)


# --host values that bind every address: a client on the same host reaches them on
# loopback. Empty is vLLM's default (every IPv4 address).
WILDCARD_HOSTS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}
DEFAULT_LISTEN_HOST = "0.0.0.0"   # roles/vllm: vllm_listen_host
DEFAULT_PORT = 8000               # roles/vllm: vllm_port


class VllmArgsError(ValueError):
    """A setting that vLLM would reject, with what to change."""


def flag(name):
    """``max_num_seqs`` -> ``--max-num-seqs``."""
    return "--" + name.replace("_", "-")


def build_args(settings, extra_args=None):
    """Return ``vllm serve``'s arguments (after ``serve``) for ``settings``.

    The model comes first, as the positional argument ``vllm serve`` expects
    (its ``--model`` option is deprecated).

    ``settings`` maps vLLM flag names (underscored) to values; ``None`` and
    missing keys are left to vLLM's defaults. ``extra_args`` are appended as
    given. Raises VllmArgsError for an unknown key, so a typo in an inventory
    fails loudly instead of being ignored.
    """
    known = {"model"} | set(VALUE_FLAGS) | set(JSON_FLAGS) | set(OPTIONAL_BOOL_FLAGS) | set(SWITCH_FLAGS) | set(SECRET_SETTINGS)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise VllmArgsError(
            "unknown vLLM setting(s) %s; known: %s; pass other flags through extra args"
            % (", ".join(unknown), ", ".join(sorted(known))))
    if not settings.get("model"):
        raise VllmArgsError("model is required (the model directory or name vllm serve loads)")
    args = [str(settings["model"])]
    for key in VALUE_FLAGS:
        value = settings.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            raise VllmArgsError("%s must be a value, not a boolean" % key)
        args += [flag(key), str(value)]
    for key in JSON_FLAGS:
        value = settings.get(key)
        if value:
            args += [flag(key), json.dumps(value, sort_keys=True, separators=(",", ":"))]
    for key in OPTIONAL_BOOL_FLAGS:
        value = settings.get(key)
        if value is None:
            continue
        args.append(flag(key) if value else "--no-" + key.replace("_", "-"))
    for key in SWITCH_FLAGS:
        if settings.get(key):
            args.append(flag(key))
    if extra_args is not None and not isinstance(extra_args, (list, tuple)):
        # A string would become one argument per character.
        raise VllmArgsError("extra args (vllm_extra_args) must be a list, one item per argument, got %s: write "
                            "vllm_extra_args: [first, second] in the inventory" % type(extra_args).__name__)
    args += [str(a) for a in (extra_args or [])]
    return args


# Words systemd passes on as they are, unquoted (readable unit files for the usual arguments).
_SYSTEMD_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+\Z")
_SYSTEMD_ESCAPES = {"\\": "\\\\", '"': '\\"', "%": "%%", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def systemd_exec_line(argv):
    """The value of an ``ExecStart=`` line whose words systemd passes to the program exactly as ``argv``.

    systemd changes a command line on its way (systemd.service(5), "Command lines"): it
    expands ``%`` specifiers, unescapes C escapes (``\\b`` is a backspace, also inside single
    quotes), and substitutes ``$VAR`` and ``${VAR}``. So each word that is not plain is
    written in double quotes with ``\\`` and ``"`` escaped, ``%`` doubled and control
    characters as C escapes; and the line starts with the ``:`` prefix (systemd 249 and
    later), which turns environment variable substitution off for the whole command
    (nothing the roles run relies on it). Raises VllmArgsError for an empty command or a
    NUL, which no command line can hold.
    """
    words = [str(word) for word in (argv or [])]
    if not words:
        raise VllmArgsError("an empty command line")
    quoted = []
    for word in words:
        if "\0" in word:
            raise VllmArgsError("a command line argument holds a NUL character, which no command line can pass")
        if _SYSTEMD_PLAIN_WORD.match(word):
            quoted.append(word)
            continue
        text = "".join(_SYSTEMD_ESCAPES.get(char) or ("\\x%02x" % ord(char) if ord(char) < 32 or ord(char) == 127 else char)
                       for char in word)
        quoted.append('"%s"' % text)
    return ":" + " ".join(quoted)


def probe_host(listen_host, override=None):
    """Where a client on the engine's own host reaches vLLM started with ``--host listen_host``.

    ``override`` (the inventory's ``vllm_probe_host``) wins when set. Otherwise a
    wildcard (``0.0.0.0``, empty: every IPv4 address) is reached on ``127.0.0.1``
    (``::`` on ``::1``, which also works where IPv6 sockets take IPv6 only); any
    other value is the one address vLLM listens on, so it is used as it is (a
    specific address answers nowhere else, not even on loopback).
    """
    chosen = "" if override is None else str(override).strip()
    if chosen:
        return chosen.strip("[]")
    host = (DEFAULT_LISTEN_HOST if listen_host is None else str(listen_host)).strip().strip("[]")
    return WILDCARD_HOSTS.get(host, host)


def probe_url(listen_host=None, port=None, override=None):
    """``http://HOST:PORT`` for :func:`probe_host`; an IPv6 address goes in brackets."""
    host = probe_host(listen_host, override)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = "[%s]" % host
    except ValueError:
        pass
    try:
        number = int(DEFAULT_PORT if port in (None, "") else port)
    except (TypeError, ValueError):
        raise VllmArgsError("vllm_port must be a port number, got %r" % (port,)) from None
    if not 1 <= number <= 65535:
        raise VllmArgsError("vllm_port must be 1-65535, got %d" % number)
    return "http://%s:%d" % (host, number)


def engine_probe_url(host_vars):
    """:func:`probe_url` from one engine host's variables (``vllm_probe_host``, ``vllm_listen_host``, ``vllm_port``).

    Unset variables take the vllm role's defaults (``""``, ``0.0.0.0``, 8000).
    """
    return probe_url(host_vars.get("vllm_listen_host"), host_vars.get("vllm_port"), host_vars.get("vllm_probe_host"))
