# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine plan: what command line and environment an engine's unit runs, its fingerprint, and whether a restart
is pending. Pure logic, no Ansible imports: the ``factory_floor.llm.engine_plan`` action composes with
:func:`compose` on the controller and decides with :func:`decide` from what the host says.

The command line per runtime (``vllm_runtime``):

- ``venv``: ``VENV/bin/vllm serve`` and vLLM's arguments (:func:`_vllm_args.build_args`).
- ``container``: the attached ``docker``/``podman run`` client, the unit's main process: the container is named after
  the unit, on the host's network, with the unit's root-only env file as its one way to the environment (never
  ``-e``), its stop timeout, the engine's cache and read-only mounts of what vLLM reads from the host (the model
  directory, a chat template, a draft model or a ``--config`` file outside it, at the same path), then
  ``--entrypoint vllm IMAGE serve`` and vLLM's arguments.

Words are kept exactly as the inventory gives them (backslashes, ``$``, ``%``, quotes): ``systemd_exec_line`` quotes
them for ``ExecStart=`` so that systemd passes them on unchanged.

The fingerprint is the SHA-256 of the JSON ``[argv, sorted environment, sha256(api key)(, sha256(next key))]``, the
way Ansible's ``to_json`` writes it: the engine's process carries it as ``FACTORY_FLOOR_CONFIG``, so any change of
the command line, the environment or the keys shows as a configuration that differs (``_engine_info``). It is
derived from the keys: never shown.
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, build_args

RUNTIMES = ("venv", "container")


class EnginePlanError(ValueError):
    """An input the plan cannot use, with the variable to change. Never holds a value of the environment or a key."""


def container_name(unit):
    """The engine's container is named after its unit: ``vllm-replica.service`` -> ``vllm-replica``."""
    return re.sub(r"\.service$", "", str(unit))


def _absolute(value):
    """``value`` as a path when it is an absolute one, else ``""`` (unset, a name, a relative path)."""
    return str(value) if value and str(value).startswith("/") else ""


def mounts(settings):
    """The host paths vLLM reads, mounted read-only at the same path in its container, in order, once each.

    The model directory when it is a path (a hub name is downloaded into the cache instead); the chat template, the
    speculative model and the ``--config`` file when they are paths outside it (inside it, its mount has them).
    """
    model_dir = _absolute(settings.get("model"))
    speculative = settings.get("speculative_config")
    others = [path for path in (_absolute(settings.get("chat_template")),
                                _absolute(speculative.get("model") if isinstance(speculative, dict) else None),
                                _absolute(settings.get("config"))) if path]
    if model_dir:
        inside = model_dir.rstrip("/") + "/"
        others = [model_dir] + [path for path in others if not path.startswith(inside)]
    unique = []
    for path in others:
        if path not in unique:
            unique.append(path)
    return unique


def _list(name, value, variable):
    """A list option as given: a string would become one argument per character, a mapping its keys."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise EnginePlanError("%s (%s) must be a list, one item per argument, got %s: write %s: [first, second] in the "
                              "inventory" % (name, variable, type_name(value), variable))
    return list(value)


def container_program(params, settings):
    """``docker``/``podman run ... --entrypoint vllm IMAGE serve`` for the engine's unit (the words before vLLM's).

    Attached (no ``--detach``): the client is the unit's main process and the container's output its journal. No
    ``--rm``: the unit's ``ExecStopPost=`` removes the container synchronously, so the next start's ``--name`` is
    free. The API key reaches the container only through ``--env-file`` (root-only), never on this command line.
    """
    log_driver = params.get("container_log_driver") or ""
    cache_dir = params.get("container_cache_dir") or ""
    words = [params["container_engine"], "run", "--name", container_name(params["unit"]), "--network=host",
             "--pull=" + ("missing" if params.get("container_pull") else "never"),
             "--stop-timeout=%s" % params["stop_timeout"]]
    words += ["--log-driver=" + log_driver] if log_driver else []
    words += ["--env-file", params["env_file"]]
    words += _list("container_resource_args", params.get("container_resource_args"), "vllm_container_gpus, "
                   "vllm_container_ipc, vllm_container_shm_size")
    words += ["--volume=%s:%s" % (cache_dir, params.get("container_cache_path"))] if cache_dir else []
    words += ["--volume=%s:%s:ro" % (path, path) for path in mounts(settings)]
    words += _list("service_run_args", params.get("service_run_args"), "vllm_service_run_args")
    words += _list("container_run_args", params.get("container_run_args"), "vllm_container_run_args")
    return words + ["--entrypoint", "vllm", params["container_image"], "serve"]


def settings_of(params):
    """The vLLM settings the engine runs with: the role's (``settings``), then its topology's (``service_settings``)."""
    for name, variable in (("settings", "the vllm role's _vllm_settings"), ("service_settings", "vllm_service_settings")):
        if not isinstance(params.get(name) or {}, dict):
            raise EnginePlanError("%s (%s) must be a mapping of vLLM settings, got %s"
                                  % (name, variable, type_name(params.get(name))))
    return dict(params.get("settings") or {}, **(params.get("service_settings") or {}))


def argv(params):
    """The engine unit's whole command line (``ExecStart=``) for ``params`` (the ``engine_plan`` options)."""
    runtime = params.get("runtime")
    if runtime not in RUNTIMES:
        raise EnginePlanError("vllm_runtime must be venv or container, got %r" % (runtime,))
    settings = settings_of(params)
    program = ["%s/bin/vllm" % params.get("venv"), "serve"] if runtime == "venv" else container_program(params, settings)
    try:
        return program + build_args(settings, params.get("extra_args"))
    except VllmArgsError as exc:
        raise EnginePlanError(str(exc)) from exc


# Where each environment mapping comes from, in the order they are merged (a later one wins).
ENVIRONMENTS = (("env", "vllm_env"), ("env_host", "vllm_env_host"), ("service_env", "vllm_service_env"))


def runtime_environment(params):
    """What the role adds to every engine's environment: with the container runtime and its cache kept, Triton's
    compiled kernels go there too (its default, ~/.triton/cache, is outside the mounted ~/.cache)."""
    if params.get("runtime") == "container" and params.get("container_cache_dir"):
        return {"TRITON_CACHE_DIR": "%s/triton" % params.get("container_cache_path")}
    return {}


def environment(params, host="this host"):
    """The engine's environment: the runtime's, then ``vllm_env``, ``vllm_env_host``, the topology's.

    Raises EnginePlanError naming the variables and their types, never a value (they may hold HF_TOKEN).
    """
    given = [(variable, params.get(name)) for name, variable in ENVIRONMENTS]
    if not all(isinstance(value, dict) for _variable, value in given):
        (env, env_host, service_env) = ["%s (%s)" % (variable, type_name(value)) for variable, value in given]
        raise EnginePlanError("%s, %s and the role's %s must be mappings (NAME: value) on %s: write vllm_env: "
                              "{NAME: value} in the inventory." % (env, env_host, service_env, host))
    merged = runtime_environment(params)
    for _variable, value in given:
        merged.update(value)
    return merged


def type_name(value):
    """The name of the builtin type ``value`` is (``dict``, ``str``, ``list``, ``NoneType``), as ``type_debug`` says."""
    for kind in type(value).__mro__:
        if kind.__module__ == "builtins" and kind is not object:
            return kind.__name__
    return type(value).__name__


def _sorted_items(mapping):
    """Jinja's ``dictsort``: by key, case-insensitively, as ``[key, value]`` pairs."""
    return sorted(mapping.items(), key=lambda item: item[0].lower() if isinstance(item[0], str) else item[0])


def _sha256(value):
    """Ansible's ``hash('sha256')`` of a value: its text, UTF-8."""
    text = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")
    return hashlib.sha256(text).hexdigest()


def fingerprint(words, env, api_key, api_key_next=""):
    """The configuration fingerprint (64 hex digits) of a command line, an environment and the API keys."""
    parts = [list(words), _sorted_items(env), _sha256(api_key)]
    if api_key_next:
        parts.append(_sha256(api_key_next))
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def compose(params, host="this host"):
    """``{argv, environment, fingerprint}`` of the engine that ``params`` (the ``engine_plan`` options) describe on
    ``host`` (named in errors)."""
    words = argv(params)
    env = environment(params, host)
    return {"argv": words, "environment": env,
            "fingerprint": fingerprint(words, env, params.get("api_key"), params.get("api_key_next") or "")}


def image_state(image, image_info, unit):
    """The container runtime's image comparison, from ``container_image_info`` (``image_info``).

    ``wanted``/``wanted_id``: the image the configuration names and its ID on the host; ``running``/``running_id``:
    the one the engine's container was created from, while it runs. ``changed`` only while the container runs and
    the wanted image is on the host (with ``vllm_container_pull`` it may not be yet; then the reference in the
    command line decides): a tag pulled again to another build changes no command line, only the ID tells.
    """
    found = (image_info.get("image") or {})
    container = (image_info.get("containers") or {}).get(container_name(unit)) or {}
    running = bool(container.get("running"))
    return {"wanted": image, "wanted_id": found.get("id", ""),
            "running": container.get("image", "") if running else "",
            "running_id": container.get("image_id", "") if running else "",
            "changed": running and bool(found.get("present")) and container.get("image_id") != found.get("id")}


def change_words(removed, added, image, pending):
    """The differences in words, for messages; ``""`` when no restart is pending."""
    if not pending:
        return ""
    words = (["was " + " ".join(removed)] if removed else []) + (["now " + " ".join(added)] if added else [])
    if image.get("changed"):
        words.append("image %s (%s) -> %s (%s)" % (image["running"], image["running_id"][:19], image["wanted"],
                                                   image["wanted_id"][:19]))
    return ", ".join(words) or "the environment, the API key or the container options changed"


def decide(runtime, engine_info, image=None, image_info=None, unit=""):
    """What a ``service`` run would do to the engine (the role's ``vllm_service_plan``).

    ``engine_info`` is ``vllm_engine_info``'s result for the composed argv and fingerprint; with the container
    runtime ``image_info`` is ``container_image_info``'s for ``image`` and the unit's container. A restart is
    pending when the unit's process runs another configuration (its fingerprint), or, while it runs, another image.
    """
    running = bool(engine_info.get("running"))
    state = image_state(image, image_info or {}, unit) if runtime == "container" else {}
    pending = bool(engine_info.get("config_differs")) or (running and bool(state.get("changed")))
    removed, added = list(engine_info.get("args_removed") or []), list(engine_info.get("args_added") or [])
    return {"running": running, "restart_pending": pending, "args_removed": removed, "args_added": added,
            "image": state, "change": change_words(removed, added, state, pending)}


# The vllm role's variable each option comes from, when the task leaves the option out (roles/vllm/tasks/plan.yml
# passed them one by one before). ``env_file`` is derived: ``_vllm_config_dir``/UNIT.env.
ROLE_VARIABLES = {
    "unit": "vllm_service_name", "runtime": "vllm_runtime", "settings": "_vllm_settings",
    "service_settings": "vllm_service_settings", "extra_args": "vllm_extra_args", "venv": "vllm_venv",
    "container_engine": "_vllm_container_engine_path", "container_image": "vllm_container_image",
    "container_pull": "vllm_container_pull", "container_log_driver": "vllm_container_log_driver",
    "container_resource_args": "_vllm_container_resource_args", "container_cache_dir": "vllm_container_cache_dir",
    "container_cache_path": "vllm_container_cache_path", "container_run_args": "vllm_container_run_args",
    "service_run_args": "vllm_service_run_args", "stop_timeout": "_vllm_stop_timeout", "env": "vllm_env",
    "env_host": "vllm_env_host", "service_env": "vllm_service_env", "api_key": "vllm_api_key",
    "api_key_next": "vllm_api_key_next",
}


def role_args(read, given):
    """The options ``given`` (the task's) leaves out, from the role's variables: ``read(name)`` is a variable's value
    as the task sees it, raising KeyError when it is undefined there (the option's default then applies)."""
    args = {}
    for option, variable in ROLE_VARIABLES.items():
        if option not in given:
            try:
                args[option] = read(variable)
            except KeyError:
                continue
    unit = given.get("unit", args.get("unit"))
    if "env_file" not in given and unit:
        try:
            args["env_file"] = "%s/%s.env" % (read("_vllm_config_dir"), unit)
        except KeyError:
            pass
    return args
