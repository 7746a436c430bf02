# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The refusals of the engines' preflight and image check: what an engine host cannot run, before anything changes.

Pure logic, standard library only: no Ansible imports. Behind ``factory_floor.llm.vllm_check``,
whose action plugin reads, on the controller, the variables each check names in ``VARIABLES``
(as the task sees them: inventory, role defaults, an include's ``vars``) and passes what the
roles' tasks read on the host (``ansible.builtin.stat``, ``ss``, ``container_image_info``
results) as ``observed``. Each check returns a list of errors - check id, hosts, variables,
message - and nothing here connects anywhere.

The checks, where they run, and what they refuse:

* ``engine`` (the vllm role's ``preflight``, every engine host): a setting vLLM cannot run with
  (one message naming each), a model directory that is missing, a virtualenv without vLLM, a
  tool-call parser that vLLM does not know, the API port held by another program, a key
  rotation's second key that cannot be used;
* ``deploy`` (``deploy.yml``, once): a topology other than ``replicas``/``split``, or no
  engine or no proxy host;
* ``restart`` (``deploy.yml``, every engine host): an engine that rejects the new
  ``vllm_api_key``, the only replica restarting while it serves;
* ``switch``, ``switch_incumbent``, ``switch_hosts``, ``switch_proxy`` (a topology switch): another target than
  ``replicas``/``split``, an incumbent that could not be scored, a run without every engine host, a proxy that does
  not run the inventory's settings (``_proxy_settings``);
* ``image`` (the ``image_check`` entry point): an image that is missing, unpinned, another build
  than its digest, or of another architecture;
* ``image_builds`` (after ``image`` on every host): one image name that is different builds on
  different hosts; an engine running another image than the inventory's (``deploy.yml``).

No message ever holds a secret: an API key, an environment value or a container run argument's
value is named by its variable and key only.

Values are read the way the tasks' Jinja read them before (``| int``, ``| float``, ``| bool``,
``| string``, the ``match`` and ``search`` tests): what was refused is refused, word for word.
"""

from __future__ import annotations

import re

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_settings as ps
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

CHECKS = ("engine", "deploy", "restart", "switch", "switch_incumbent", "switch_hosts", "switch_proxy", "image",
          "image_builds")
TOPOLOGIES = ("replicas", "split")

# The variables each check reads, as the task sees them (the action plugin reads them; a name
# with a dot is read as that expression). OPTIONAL ones may be undefined there.
VARIABLES = {
    "engine": ("inventory_hostname", "vllm_runtime", "vllm_model", "vllm_served_model_name", "vllm_port",
               "vllm_max_num_seqs", "vllm_max_model_len", "vllm_kv_cache_dtype", "vllm_gpu_memory_utilization",
               "vllm_enable_auto_tool_choice", "vllm_tool_call_parser", "vllm_shutdown_timeout", "vllm_extra_args",
               "vllm_env", "vllm_env_host", "vllm_container_engine", "vllm_container_image",
               "vllm_container_image_digest", "vllm_container_shm_size", "vllm_container_ipc",
               "vllm_container_cache_dir", "vllm_container_cache_path", "vllm_container_run_args", "vllm_venv",
               "vllm_api_key", "vllm_api_key_next", "_vllm_units"),
    "deploy": ("topology", "groups", "site_engine_group", "site_proxy_group"),
    "restart": ("inventory_hostname", "topology", "groups", "site_engine_group", "vllm_service_plan",
                "vllm_restart_force", "playbook_dir"),
    "switch": ("switch_to", "playbook_dir"),
    "switch_incumbent": ("inventory_hostname", "vllm_switch_plan", "site_engine_group", "tool_gate_bar",
                         "playbook_dir"),
    "switch_hosts": ("vllm_switch_plan", "site_engine_group", "site_proxy_group"),
    "switch_proxy": ("groups", "site_proxy_group", "ansible_inventory_sources"),
    "image": ("inventory_hostname", "vllm_runtime", "vllm_container_engine", "vllm_container_pull",
              "ansible_facts.architecture"),
    "image_builds": ("inventory_hostname", "vllm_runtime", "vllm_image_check", "vllm_image_check_running",
                     "vllm_deploy_image_change", "vllm_container_image", "topology", "_vllm_units",
                     "ansible_play_hosts", "playbook_dir"),
}
OPTIONAL = frozenset(("topology", "switch_to", "vllm_service_plan", "vllm_restart_force", "vllm_switch_plan",
                      "vllm_image_check_running", "ansible_facts.architecture", "vllm_image_check", "tool_gate_bar",
                      "ansible_inventory_sources", "playbook_dir"))

# vLLM's --kv-cache-dtype choices the roles accept.
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
# `run` options the vllm role sets from its own variables, and -e/--env (a value there would be
# on the command line, readable in /proc and ps: vllm_env goes to the root-only env file).
MANAGED_RUN_ARGS = {
    "--name": "the role names the container after its unit",
    "--network": "the role sets --network=host, for the API port and the split's link",
    "--net": "the role sets --network=host, for the API port and the split's link",
    "--pull": "set vllm_container_pull instead",
    "--log-driver": "set vllm_container_log_driver instead",
    "--env-file": "the role passes the unit's root-only env file",
    "--gpus": "set vllm_container_gpus instead",
    "--ipc": "set vllm_container_ipc instead",
    "--shm-size": "set vllm_container_shm_size instead",
    "--entrypoint": "the role runs vllm serve",
    "--stop-timeout": "set vllm_shutdown_timeout instead (the container gets that plus 10 s before SIGKILL)",
    "--rm": "the unit removes the container itself, synchronously, in ExecStopPost=",
    "--restart": "systemd restarts the engine, Restart=always; a restart policy of the engine would fight it",
    "--detach": "the unit's main process must stay attached to the container",
    "-d": "the unit's main process must stay attached to the container",
    "--env": "set vllm_env or vllm_env_host instead, which go to the root-only env file, not the command line",
    "-e": "set vllm_env or vllm_env_host instead, which go to the root-only env file, not the command line",
}
# A Bearer token's characters (RFC 6750): anything else never reaches vLLM intact.
_BEARER_TOKEN = re.compile(r"^[A-Za-z0-9._~+/-]+=*\Z")
# The env file is read by systemd (EnvironmentFile=: it unquotes, unescapes backslashes and strips
# outer whitespace) and, with the container runtime, by `run --env-file` (as written).
_ENV_MISREAD = (re.compile(r"[\r\n\\]").search, re.compile(r"[\"'\s]").match, re.compile(r"\s\Z").search)
_TRUE = ("yes", "on", "true", "1")
_FALSE = ("no", "off", "false", "0")


# ------------------------------------------------------------------ values as Jinja read them

def _bool(value):
    """Ansible's ``bool`` filter."""
    if isinstance(value, bool):
        return value
    text = value.lower() if isinstance(value, str) else str(value).lower() if isinstance(value, int) else value
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return value == 1


def _text(value):
    """What Jinja's ``~`` and ``string`` make of a value."""
    return str(value)


def _length(value):
    """Jinja's ``length`` of a setting: None (YAML's empty value) counts as empty."""
    if value is None:
        return 0
    try:
        return len(value)
    except TypeError:
        return len(str(value))


def _items(value):
    """What a Jinja loop or ``select`` walks: a list's items, a mapping's keys, a string's characters."""
    if isinstance(value, (list, tuple, dict, str)):
        return list(value)
    return []


def _lines(result, key="stdout_lines"):
    """A registered command result's lines ([] when the command did not run)."""
    lines = (result or {}).get(key)
    return [str(line) for line in lines] if isinstance(lines, list) else []


def _number(value):
    """A score as the gate's messages show it: 20, not 20.0."""
    return "%d" % value if value == int(value) else "%s" % value


def _names(hosts):
    return ", ".join(str(host) for host in hosts)


def truncate(text, length=600, end="..."):
    """Jinja's ``truncate(length)``: whole words, ``end`` appended, 5 characters of leeway."""
    if len(text) <= length + 5:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


class _Errors(list):
    """Errors as dicts: check id, hosts, variables and the message."""

    def add(self, check, message, hosts=(), variables=()):
        self.append({"check": check, "hosts": [str(host) for host in hosts if host is not None],
                     "variables": list(variables), "message": message})


# ------------------------------------------------------------------------------- engine

def setting_problems(v):
    """Each setting of ``v`` vLLM cannot run with: ``(variables, words)``, in the order the preflight names them.

    A value is shown where it is a plain setting; an environment value, a run argument's value
    and a key never are."""
    out = []

    def bad(variable, words):
        out.append(([variable] if isinstance(variable, str) else list(variable), words))

    runtime = v.get("vllm_runtime")
    if runtime not in ("venv", "container"):
        bad("vllm_runtime", "vllm_runtime=%s (venv or container)" % _text(runtime))
    if _length(v.get("vllm_model")) == 0:
        bad("vllm_model", "vllm_model is empty (the model directory, required)")
    if _length(v.get("vllm_served_model_name")) == 0:
        bad("vllm_served_model_name", "vllm_served_model_name is empty (required)")
    if not 1 <= jinja_int(v.get("vllm_port")) <= 65535:
        bad("vllm_port", "vllm_port=%s (1-65535)" % _text(v.get("vllm_port")))
    if jinja_int(v.get("vllm_max_num_seqs")) < 1:
        bad("vllm_max_num_seqs", "vllm_max_num_seqs=%s (>= 1)" % _text(v.get("vllm_max_num_seqs")))
    if jinja_int(v.get("vllm_max_model_len")) < 1:
        bad("vllm_max_model_len", "vllm_max_model_len=%s (tokens, >= 1)" % _text(v.get("vllm_max_model_len")))
    dtype = v.get("vllm_kv_cache_dtype")
    if not isinstance(dtype, str) or dtype not in KV_CACHE_DTYPES:
        bad("vllm_kv_cache_dtype", "vllm_kv_cache_dtype=%s (one of %s)" % (_text(dtype), ", ".join(KV_CACHE_DTYPES)))
    share = v.get("vllm_gpu_memory_utilization")
    if share is not None and not 0 < jinja_float(share) < 1:
        bad("vllm_gpu_memory_utilization", "vllm_gpu_memory_utilization=%s (a fraction strictly between 0 and 1, "
                                           "e.g. 0.74)" % _text(share))
    if v.get("vllm_enable_auto_tool_choice") and _length(v.get("vllm_tool_call_parser") or "") == 0:
        bad(("vllm_tool_call_parser", "vllm_enable_auto_tool_choice"),
            "vllm_tool_call_parser is empty (required when vllm_enable_auto_tool_choice is true)")
    if jinja_int(v.get("vllm_shutdown_timeout")) < 0:
        bad("vllm_shutdown_timeout", "vllm_shutdown_timeout=%s (seconds, >= 0)" % _text(v.get("vllm_shutdown_timeout")))
    if any(re.match(r"--api-key(=|$)", str(arg)) for arg in _items(v.get("vllm_extra_args"))):
        bad(("vllm_extra_args", "vllm_api_key"), "vllm_extra_args has --api-key (the key would be on the command line, "
                                                 "readable in /proc and ps): set vllm_api_key")
    out.extend(env_problems(v))
    if runtime == "container":
        out.extend(container_problems(v))
    return out


def env_problems(v):
    """Each ``vllm_env``/``vllm_env_host`` value systemd's ``EnvironmentFile=`` or ``--env-file`` would read otherwise
    than the inventory says, by its variable and key only."""
    out = []
    for variable in ("vllm_env", "vllm_env_host"):
        env = v.get(variable)
        if not isinstance(env, dict):
            continue
        for key, value in env.items():
            if isinstance(value, str) and any(test(value) for test in _ENV_MISREAD):
                out.append(([variable], "%s %s holds a newline or a backslash, or starts with a quote, or starts or ends "
                                        "with whitespace: systemd's EnvironmentFile= (and the container engine's "
                                        "--env-file) would not read it as the inventory says; give the value without "
                                        "them" % (variable, key)))
    return out


def container_problems(v):
    """The container runtime's own settings (the image itself is the ``image`` check's). A run argument is named by
    its flag only: a value (``-e KEY=secret``) is never shown."""
    out = []
    engine = v.get("vllm_container_engine")
    if engine not in ("docker", "podman"):
        out.append((["vllm_container_engine"], "vllm_container_engine=%s (docker or podman)" % _text(engine)))
    image = v.get("vllm_container_image")
    if not re.match(r"^\S+$", str(image) if image else ""):
        out.append((["vllm_container_image"], "vllm_container_image is empty or has spaces (NAME:TAG, "
                                              "NAME@sha256:DIGEST)"))
    digest = v.get("vllm_container_image_digest")
    if not re.match(r"^((sha256:)?[0-9a-f]{64})?$", str(digest) if digest else ""):
        out.append((["vllm_container_image_digest"], 'vllm_container_image_digest=%s (sha256: and 64 hex digits, or "")'
                    % _text(digest)))
    shm = _text(v.get("vllm_container_shm_size"))
    if not re.match(r"^([0-9]+[bkmgBKMG]?)?$", shm):
        out.append((["vllm_container_shm_size"], 'vllm_container_shm_size=%s (a size such as 16g, or "")' % shm))
    if v.get("vllm_container_ipc") == "host" and shm:
        out.append((["vllm_container_shm_size", "vllm_container_ipc"],
                    "vllm_container_shm_size=%s does nothing with vllm_container_ipc: host (the host's /dev/shm is "
                    'used): leave it empty, or set vllm_container_ipc: "" for a /dev/shm of that size' % shm))
    cache_dir, cache_path = v.get("vllm_container_cache_dir"), v.get("vllm_container_cache_path")
    if _length(cache_dir) > 0 and not (str(cache_dir).startswith("/") and str(cache_path).startswith("/")):
        out.append((["vllm_container_cache_dir", "vllm_container_cache_path"],
                    "vllm_container_cache_dir=%s, vllm_container_cache_path=%s (absolute paths, on the host and in the "
                    'container; or vllm_container_cache_dir: "" to keep no cache)' % (_text(cache_dir), _text(cache_path))))
    flags = []
    for arg in _items(v.get("vllm_container_run_args")):
        flag = re.sub(r"^(-[a-zA-Z]).+$", r"\1", re.sub(r"=.*$", "", str(arg)))
        if flag not in flags:
            flags.append(flag)
    for flag in flags:
        if flag in MANAGED_RUN_ARGS:
            out.append((["vllm_container_run_args"], "vllm_container_run_args has %s: %s" % (flag, MANAGED_RUN_ARGS[flag])))
    return out


def check_engine(v, observed):
    """The ``engine`` check: ``v`` the settings (``VARIABLES['engine']``), ``observed`` what the host said - the
    ``stat`` of the model directory (``model_dir``) and of the virtualenv's ``vllm`` (``venv_vllm``), the parsers
    the installed vLLM lists (``tool_parsers``), ``systemctl is-active`` of the engine units (``units_active``),
    ``ss`` of the API port (``port_listeners``) and the units of those listeners (``port_units``)."""
    host = v.get("inventory_hostname")
    errors = _Errors()
    problems = setting_problems(v)
    if problems:
        named = []
        for variables, _words in problems:
            named.extend(name for name in variables if name not in named)
        errors.add("settings", "vLLM settings on %s are not valid: %s. Fix the variable named in host_vars/%s.yml or "
                               "group_vars." % (host, "; ".join(words for _variables, words in problems), host),
                   [host], named)

    model = v.get("vllm_model")
    stat = ((observed.get("model_dir") or {}).get("stat") or {})
    if str(model).startswith("/") and not stat.get("isdir", False):
        errors.add("model_dir", "vllm_model=%s does not exist (or is not a directory) on %s. Copy the model there or set "
                                "vllm_model to where it is." % (model, host), [host], ["vllm_model"])

    runtime, venv = v.get("vllm_runtime"), v.get("vllm_venv")
    if runtime == "venv" and not ((observed.get("venv_vllm") or {}).get("stat") or {}).get("exists"):
        errors.add("venv", "%s/bin/vllm not found on %s: install vLLM there or set vllm_venv." % (venv, host),
                   [host], ["vllm_venv"])

    parser = v.get("vllm_tool_call_parser")
    parsers = observed.get("tool_parsers") or {}
    known = _lines(parsers)
    if runtime == "venv" and _length(parser) > 0 and parsers.get("rc") == 0 and known and parser not in known:
        errors.add("tool_call_parser", "vllm_tool_call_parser=%s is not known to the vLLM in %s on %s. Known: %s."
                   % (parser, venv, host, ", ".join(known)), [host], ["vllm_tool_call_parser"])

    listeners = str((observed.get("port_listeners") or {}).get("stdout") or "")
    ours = [unit for units in (v.get("_vllm_units") or {}).values() for unit in units]
    held = _lines(observed.get("port_units"))
    if (listeners and "active" not in _lines(observed.get("units_active"))
            and set(line.strip() for line in held) - set(ours)):
        errors.add("port", "Port %s on %s is held by %s (%s). Stop that program or set vllm_port to a free port."
                   % (_text(v.get("vllm_port")), host, ", ".join(held), listeners.strip()), [host], ["vllm_port"])

    key, key_next = v.get("vllm_api_key"), v.get("vllm_api_key_next")
    if _length(key_next or "") > 0 and not (_length(key) > 0 and key_next != key
                                            and _BEARER_TOKEN.match(str(key_next))):
        errors.add(
            "api_key_next",
            "vllm_api_key_next on %s cannot be used (its value is not shown): it must be a Bearer token (letters, "
            "digits and - . _ ~ + /, then = padding; no space or newline - ansible-vault encrypt_string with echo -n), "
            "differ from vllm_api_key, and come with vllm_api_key set (the key everything the collection runs keeps "
            "sending while the engines accept both). To put a key on a site that has none, set vllm_api_key and move "
            "the clients to it first (vLLM ignores a key it does not ask for). Nothing was changed." % host,
            [host], ["vllm_api_key_next", "vllm_api_key"])
    return list(errors)


# ------------------------------------------------------------------------------- deploy.yml

def check_deploy(v, observed):
    """The ``deploy`` check (once per run): the topology and the engine and proxy groups."""
    del observed
    topology = v.get("topology", "")
    groups = v.get("groups") or {}
    engines = groups.get(v.get("site_engine_group")) or []
    proxies = groups.get(v.get("site_proxy_group")) or []
    errors = _Errors()
    if topology not in TOPOLOGIES or not engines or not proxies:
        errors.add("topology", "Set topology to 'replicas' or 'split' in the inventory (now '%s'), and list at least one "
                               "machine in group gb10 (now %d) and one proxy host in group proxy (now %d)."
                   % (_text(topology), len(engines), len(proxies)), [],
                   ["topology", "site_engine_group", "site_proxy_group"])
    return list(errors)


def _playbook(v, name):
    """The playbook ``name`` as the operator runs it, from the running playbook's ``playbook_dir``."""
    return playbook_name(name, v.get("playbook_dir"))


def check_restart(v, observed):
    """The ``restart`` check on each host: ``observed['serving']`` is its engine's one ``vllm_health`` probe (asked
    when its configuration changed), ``vllm_service_plan`` whether it restarts."""
    host = v.get("inventory_hostname")
    deploy = _playbook(v, "deploy.yml")
    serving = observed.get("serving") or {}
    plan = v.get("vllm_service_plan") or {}
    engines = (v.get("groups") or {}).get(v.get("site_engine_group")) or []
    errors = _Errors()
    if serving.get("reason") == "rejected":
        errors.add(
            "api_key_rejected",
            "%s's engine rejects vllm_api_key (HTTP 401 or 403): it runs with another key. Changing the key in one step "
            "would leave clients, the proxy's membership checker and the watchdogs with a key that half the engines "
            "refuse until every one restarted. Nothing was changed. Rotate it in two runs instead (roles/vllm/README.md, "
            '"Rotating the API key"): put the old key back as vllm_api_key and the new one as vllm_api_key_next, run '
            "%s (the engines restart one at a time and take both keys), move the clients to the new key; then "
            "make the new key vllm_api_key, remove vllm_api_key_next and run %s again." % (host, deploy, deploy),
            [host], ["vllm_api_key", "vllm_api_key_next"])
    if (host in engines and v.get("topology") == "replicas" and len(engines) == 1 and plan.get("restart_pending")
            and serving.get("status") == "serving" and not _bool(v.get("vllm_restart_force", False))):
        errors.add(
            "only_replica",
            "%s is the only replica and its configuration changed (%s). Restarting it while it serves is an outage by "
            "nature: no other replica can take the requests, so the proxy answers 503 with Retry-After for one start-up "
            "(5 to 13 min on GB10). Nothing was changed. To restart it now anyway: %s -e "
            "vllm_restart_force=true. Or add a second machine to group gb10 first: %s starts it, then restarts "
            "this one while the new one serves." % (host, _text(plan.get("change")), deploy, deploy),
            [host], ["vllm_restart_force"])
    return list(errors)


# ------------------------------------------------------------------------------- switch

def check_switch(v, observed):
    """The ``switch`` check (once per run): the target topology."""
    del observed
    target = v.get("switch_to", "")
    errors = _Errors()
    if target not in TOPOLOGIES:
        errors.add("switch_to", "switch_to must be 'replicas' or 'split' (got '%s'); use %s or %s."
                   % (_text(target), _playbook(v, "switch-to-replicas.yml"), _playbook(v, "switch-to-split.yml")),
                   [], ["switch_to"])
    return list(errors)


def _unscored_why(failure, serving):
    """Why the incumbent could not be scored: in words naming the setting when the gate's probe (``serving``, the
    failed ``vllm_health`` result: it has ``status`` and ``reason``) saw why, else the failed task's message."""
    probe = serving if isinstance(serving, dict) and "status" in serving and "reason" in serving else {}
    where = "its engine at %s" % (probe.get("url") or "?")
    if probe.get("reason") == "rejected":
        return ("%s rejects the key the gate sends (tool_gate_api_key, by default vllm_api_key; HTTP 401 or 403): it was "
                "started with another key." % where)
    if probe.get("status") == "wrong_model":
        return ("%s does not serve the model the gate asks for (tool_gate_model, by default vllm_served_model_name): its "
                "/v1/models lists %s." % (where, ", ".join(_text(name) for name in probe.get("models") or []) or "none"))
    if probe and probe.get("status") != "serving":
        return "%s is %s (%s)." % (where, _text(probe.get("status")),
                                   truncate(_text(probe.get("error") or probe.get("msg") or "no error given")))
    return truncate(_text(failure or ""))


def check_switch_incumbent(v, observed):
    """The ``switch_incumbent`` check, in the rescue of scoring the incumbent: always a refusal. Why, from
    ``observed['serving']`` (the gate's probe, when it is what failed) or ``observed['failure']`` (the failed task's
    message, cut to 600 characters); the way on names every setting it takes - with ``tool_gate_bar.min_score`` at 0
    (``tool_gate_min_score``'s default; the tool_gate role notes it before it measures), a tool_gate_min_score too,
    or the gate would have no bar and the switch would refuse again."""
    host = v.get("inventory_hostname")
    incumbent = (v.get("vllm_switch_plan") or {}).get("incumbent") or {}
    min_score = jinja_float((v.get("tool_gate_bar") or {}).get("min_score", 0))
    if min_score > 0:
        way = ("Or switch without the incumbent's score: -e tool_gate_measure_incumbent=false; the new topology must then "
               "reach tool_gate_min_score (%s) only." % _number(min_score))
    else:
        way = ("Or switch without the incumbent's score, which takes two settings: -e tool_gate_measure_incumbent=false "
               "-e tool_gate_min_score=N. tool_gate_min_score is 0 (its default), and without the incumbent's score it "
               "is the gate's only bar: at 0 the switch refuses again, since a candidate that passes a single case would "
               "pass. For N take one case below the lowest score a build you trust reaches with this suite "
               "(%s runs the suite on an engine that serves it and prints that value), and keep it in the inventory "
               "(group_vars/%s.yml)." % (_playbook(v, "tool-gate-spread.yml"), _text(v.get("site_engine_group") or "gb10")))
    errors = _Errors()
    errors.add("incumbent_score",
               "Could not score the tool calling of the %s serving now on %s: %s Nothing was changed. Fix that and run "
               "again. %s" % (_text(incumbent.get("topology")), host,
                              _unscored_why(observed.get("failure"), observed.get("serving")), way),
               [host], ["tool_gate_measure_incumbent", "tool_gate_min_score"] if min_score <= 0
               else ["tool_gate_measure_incumbent"])
    return list(errors)


def check_switch_hosts(v, observed):
    """The ``switch_hosts`` check (once per run): engine hosts the run does not reach (``vllm_switch_plan``)."""
    del observed
    lost = list((v.get("vllm_switch_plan") or {}).get("lost_hosts") or [])
    engine_group, proxy_group = v.get("site_engine_group"), v.get("site_proxy_group")
    errors = _Errors()
    if lost:
        errors.add(
            "lost_hosts",
            "This run does not reach every engine host of group %s: %s %s not in it (--limit, or not answering). A "
            "topology switch stops and starts every engine host together. Nothing was changed. Run it without --limit "
            "(or with a --limit that includes every host of %s and %s)."
            % (engine_group, _names(lost), "is" if len(lost) == 1 else "are", engine_group, proxy_group),
            lost, [])
    return list(errors)


def playbook_command(v, playbook, *args):
    """The command line that runs the collection's ``playbook`` on this run's inventory (``ansible_inventory_sources``)."""
    sources = [_text(source) for source in v.get("ansible_inventory_sources") or [] if source]
    return " ".join(["ansible-playbook"] + ["-i %s" % source for source in sources or ["INVENTORY"]]
                    + [_playbook(v, playbook + ".yml")] + list(args))


def _proxy_differences(v, observed):
    """``(host, differences)`` for each proxy host (``groups[site_proxy_group]``) that was read, set up and differs."""
    proxies = observed.get("proxies") or {}
    return [(host, proxies[host]["differences"]) for host in (v.get("groups") or {}).get(v.get("site_proxy_group")) or []
            if proxies.get(host) and proxies[host].get("deployed") is not False and proxies[host].get("differences")]


def _proxy_words(differing):
    return " ".join("On %s: %s." % (host, "; ".join(ps.describe(item) for item in items)) for host, items in differing)


def check_switch_proxy(v, observed):
    """The ``switch_proxy`` check (once per run): a proxy host that does not run the inventory's proxy settings.
    ``observed['proxies']`` is each proxy host's ``nginx_proxy_settings`` (the nginx_proxy role's ``settings`` entry
    point: ``proxy_settings_info``'s ``deployed`` and ``differences``); a host without one is not judged.

    A switch changes the engines only: it starts the new ones with the inventory's settings and leaves the proxy as it
    is. Refused: a proxy never set up, and one with a difference the switch cannot go right with (``blocks``: the
    engines' key, served model name, address or port, the port and TLS clients reach it by, ...), naming every
    difference. Settings that describe the engines too cannot go to the proxy alone while the engines that serve now
    run the proxy's: the way on is deploy.yml for both, or the inventory set back; the others, deploy.yml --tags
    proxy. The rest is named, not refused (:func:`proxy_note`)."""
    proxies = observed.get("proxies") or {}
    hosts = [host for host in (v.get("groups") or {}).get(v.get("site_proxy_group")) or [] if proxies.get(host)]
    errors = _Errors()
    missing = [host for host in hosts if proxies[host].get("deployed") is False]
    if missing:
        errors.add(
            "proxy_missing",
            "The proxy on %s has no membership checker configuration (/etc/factory-floor/upstream.json): the proxy was "
            "never set up there. A switch puts the new engines in the proxy's rotation and needs it. Nothing was "
            "changed. Set it up first (%s --tags proxy), then run the switch again."
            % (_names(missing), playbook_command(v, "deploy")), missing, [])
    differing = _proxy_differences(v, observed)
    if any(item.get("blocks") for _host, items in differing for item in items):
        engines = []
        for _host, items in differing:
            engines += [item["setting"] for item in items if item.get("engines") and item["setting"] not in engines]
        if engines:
            way = ("%s describe%s the engines too, and the engines that serve now run what the proxy has: applied to "
                   "the proxy alone, %s would take those engines out of rotation or refuse their clients. Bring the "
                   "engines and the proxy to the inventory together first (%s; a new vllm_api_key the way "
                   "roles/vllm/README.md, \"Rotating the API key\", says), or set the inventory back to what runs and "
                   "change %s after the switch. Then run the switch again."
                   % (", ".join(engines), "s" if len(engines) == 1 else "", "it" if len(engines) == 1 else "they",
                      playbook_command(v, "deploy"), "it" if len(engines) == 1 else "them"))
        else:
            way = ("Apply them to the proxy first (%s --tags proxy: nginx reloads, the engines that serve now stay in "
                   "rotation), then run the switch again." % playbook_command(v, "deploy"))
        errors.add(
            "proxy_settings",
            "The proxy does not run the inventory's settings. %s A switch changes the engines only: it starts the new "
            "ones with the inventory's settings and leaves the proxy as it is, so the proxy would go on with its own "
            "next to engines that run the inventory's. Nothing was changed. %s" % (_proxy_words(differing), way),
            [host for host, _items in differing],
            [item["setting"] for _host, items in differing for item in items])
    return list(errors)


def proxy_note(v, observed):
    """What a switch that goes on says of the proxy's settings it leaves as they are (none of them ``blocks``), or
    "" (none, or the ``switch_proxy`` check refuses)."""
    differing = _proxy_differences(v, observed)
    if not differing or any(item.get("blocks") for _host, items in differing for item in items):
        return ""
    return ("The proxy runs other settings than the inventory's, which a switch leaves as they are. %s None of them "
            "keeps the new engines out of rotation; apply them when you choose: %s --tags proxy (nginx reloads, the "
            "engines that serve stay in rotation)." % (_proxy_words(differing), playbook_command(v, "deploy")))


# ------------------------------------------------------------------------------- image

def image_problem(v, info):
    """What is wrong with the image ``info`` (``container_image_info``'s result) on this host, or ""."""
    i = info.get("image") or {}
    host, engine = v.get("inventory_hostname"), v.get("vllm_container_engine")
    ref, name, expected = i.get("ref"), i.get("name"), i.get("expected_digest")
    if not i.get("pinned"):
        return ("vllm_container_image %s is not pinned: %s names whatever was pulled or loaded last on each host, so the "
                "inventory would not say which vLLM runs, and two hosts could serve two builds under one name. Name a "
                "tag (for example %s:v0.32.0), or keep the name and set vllm_container_image_digest%s."
                % (ref, ":latest" if i.get("tag") else "no tag (:latest)", name,
                   (": %s is what it names on this host now" % i.get("id")) if i.get("present")
                   else " (sha256:..., its ID or repository digest)"))
    if i.get("digest_matches") is False:
        digests = i.get("repo_digests")
        return ("the vLLM image %s here is not the build vllm_container_image_digest names (%s): its ID is %s%s. Load or "
                "pull the build the digest names, or set vllm_container_image_digest to the one you mean to run."
                % (ref, expected, i.get("id"), (" and its repository digests are " + ", ".join(digests)) if digests
                   else ", with no repository digest"))
    if i.get("architecture_matches") is False:
        arch = i.get("host_architecture")
        machine = v.get("ansible_facts.architecture", arch)
        return ('the vLLM image %s is built for %s, and this host is %s (%s): its programs would die with "exec format '
                'error" when the engine starts. Load or pull the %s build of the image (docker pull --platform '
                "linux/%s ...; the GB10 builds are arm64), or set vllm_container_image to one."
                % (ref, i.get("architecture"), arch, machine, arch, arch))
    if i.get("present"):
        return ""
    if not _bool(v.get("vllm_container_pull")):
        return ("the vLLM image %s is not on this host (%s image inspect finds no such image), and vllm_container_pull "
                "is false (--pull=never), so the engine could not start. Put it there first: `%s load -i FILE` (an "
                "image built or saved elsewhere) or `%s pull %s` on %s; or set vllm_container_pull: true to let the "
                "unit's start pull it when it is missing (--pull=missing, never at every start)."
                % (ref, info.get("engine"), engine, engine, ref, host))
    if expected and "@" not in str(ref):
        return ("the vLLM image %s is not on this host, so it cannot be checked against vllm_container_image_digest %s "
                "before anything changes (a pull by tag may bring another build). Pull or load it first (`%s pull "
                "%s@%s`), or write the digest into vllm_container_image (%s@%s): a pull by digest can only bring that "
                "build." % (ref, expected, engine, name, expected, name, expected))
    return ""


def check_image(v, observed):
    """The ``image`` check (container runtime): ``observed['image_info']`` is ``container_image_info``'s result."""
    if v.get("vllm_runtime") != "container":
        return []
    host = v.get("inventory_hostname")
    errors = _Errors()
    problem = image_problem(v, observed.get("image_info") or {})
    if problem:
        errors.add("image", "%s: %s Nothing was changed." % (host, problem), [host],
                   ["vllm_container_image", "vllm_container_image_digest", "vllm_container_pull"])
    return list(errors)


def image_conflicts(images, hosts):
    """``REF is HOST ID, HOST ID`` for each image name that is different builds on ``hosts``; ``images`` is each
    host's ``vllm_image_check`` (absent or without a present image: not compared)."""
    by_ref = {}
    for host in hosts:
        image = (images.get(host) or {}).get("image")
        if isinstance(image, dict) and image.get("present"):
            by_ref.setdefault(image.get("ref"), []).append((host, image.get("id")))
    return ["%s is %s" % (ref, ", ".join("%s %s" % seen for seen in found))
            for ref, found in by_ref.items() if len(set(image_id for _host, image_id in found)) > 1]


def check_image_builds(v, observed):
    """The ``image_builds`` check, after ``image`` on every host: ``observed['images']`` is every host's
    ``vllm_image_check`` (the play's hosts, in order), compared by name; and, with ``vllm_image_check_running``
    (``deploy.yml``), this host's engine of ``topology`` running another image than the inventory's."""
    host = v.get("inventory_hostname")
    errors = _Errors()
    conflicts = image_conflicts(observed.get("images") or {}, v.get("ansible_play_hosts") or [])
    if conflicts:
        errors.add(
            "image_builds",
            "vllm_container_image names different builds on different hosts: %s. One name must be one build on every "
            "engine host (the split's two ranks run one vLLM; replicas behind one served name serve one build). Nothing "
            "was changed. Load the same build on every host; a digest (vllm_container_image_digest, or NAME@sha256:... "
            "in vllm_container_image) then says which one is meant." % "; ".join(conflicts),
            [], ["vllm_container_image", "vllm_container_image_digest"])

    check = v.get("vllm_image_check") or {}
    image = check.get("image") or {}
    topology = v.get("topology", "replicas")
    unit = ((v.get("_vllm_units") or {}).get(topology) or [None])[0]
    running = (check.get("running") or {}).get(unit) or {}
    wanted = v.get("vllm_container_image")
    if (v.get("vllm_runtime") == "container" and _bool(v.get("vllm_image_check_running", False))
            and not _bool(v.get("vllm_deploy_image_change")) and running.get("running", False) and image.get("present")
            and running.get("image_id") != image.get("id")):
        # What names the running build: its reference, or its ID when the reference moved on.
        moved = running.get("image") == wanted
        deploy = _playbook(v, "deploy.yml")
        keep = running.get("image_id") if moved else running.get("image")
        if topology == "replicas":
            way = ("The gated way: set vllm_container_image back to %s (what runs), then run %s "
                   "-e switch_image=%s (one replica at a time, each tool-call gated before it takes traffic, rolled back "
                   "on failure), then set vllm_container_image: %s." % (keep, _playbook(v, "switch-model.yml"), wanted,
                                                                        wanted))
        else:
            way = ("The split has no gated image upgrade in place: %s starts the replicas on the inventory's image and "
                   "gates them before they take traffic (then %s)." % (_playbook(v, "switch-to-replicas.yml"),
                                                                       _playbook(v, "switch-to-split.yml")))
        errors.add(
            "image_running",
            "%s's %s runs the image %s (%s), not the inventory's vllm_container_image %s (%s). %s does not change "
            "the image of a serving engine: a new vLLM is a new build, and %s has no tool-calling gate. Nothing "
            "was changed.%s %s To keep what runs, set vllm_container_image: %s in the inventory. To restart on %s now, "
            "ungated: %s -e vllm_deploy_image_change=true (%s)."
            % (host, unit, running.get("image"), running.get("image_id"), wanted, image.get("id"), deploy, deploy,
               (" The name %s now names another build than the one that runs (pulled, loaded or built again since it "
                "started); what runs is %s, which vllm_container_image can name by that ID." % (wanted, running.get("image_id")))
               if moved else "", way, keep, wanted, deploy,
               "replicas one at a time while another serves" if topology == "replicas"
               else "the split as a pair: an outage of one start-up"),
            [host], ["vllm_container_image", "vllm_deploy_image_change"])
    return list(errors)


_CHECK_FUNCTIONS = {
    "engine": check_engine,
    "deploy": check_deploy,
    "restart": check_restart,
    "switch": check_switch,
    "switch_incumbent": check_switch_incumbent,
    "switch_hosts": check_switch_hosts,
    "switch_proxy": check_switch_proxy,
    "image": check_image,
    "image_builds": check_image_builds,
}


def check(name, variables, observed=None):
    """Run the check ``name`` (one of ``CHECKS``) over ``variables`` (by name, as in ``VARIABLES[name]``; an
    undefined one absent) and ``observed`` (what the host said). A list of errors, empty when nothing is refused."""
    if name not in _CHECK_FUNCTIONS:
        raise ValueError("check must be one of %s, not %r" % (", ".join(CHECKS), name))
    return _CHECK_FUNCTIONS[name](dict(variables), dict(observed or {}))


def notes(name, variables, observed=None):
    """What the check ``name`` says without refusing: a list of sentences (the ``switch_proxy`` check's note)."""
    if name != "switch_proxy":
        return []
    note = proxy_note(dict(variables), dict(observed or {}))
    return [note] if note else []


def format_errors(errors):
    """One message for the task's failure: the one refusal as it is, or every one, numbered."""
    if len(errors) == 1:
        return errors[0]["message"]
    return "\n".join("%d) %s" % (index, error["message"]) for index, error in enumerate(errors, 1))
