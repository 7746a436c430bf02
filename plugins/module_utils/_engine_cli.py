# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Would the vLLM build that will serve accept what the inventory renders: the vllm role's ``cli_check`` step, behind
``factory_floor.llm.engine_cli_check``.

The settings of the topology that will run (the split's own flags when the include gives them), rendered as ``vllm
serve`` arguments; ``factory_floor.llm.vllm_cli_check``'s arguments; whether the image can be asked (present, of this
architecture - otherwise the image check refuses it); and the refusal. Pure logic, standard library only; Jinja in
``roles/vllm/tasks/cli_check.yml`` before.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import build_args

# The variables the step reads, as the task sees them; OPTIONAL ones may be undefined there.
VARIABLES = ("inventory_hostname", "vllm_runtime", "_vllm_container_engine_path", "vllm_container_image", "vllm_venv",
             "vllm_cli_cache_dir", "_vllm_settings", "vllm_cli_check_settings", "_vllm_cli_check_settings", "topology",
             "vllm_extra_args", "vllm_tool_call_parser", "vllm_load_format", "vllm_allow_mtp_prefix_caching")
OPTIONAL = frozenset(("vllm_cli_check_settings", "topology", "vllm_tool_call_parser", "vllm_load_format"))
_TRUE = ("yes", "on", "true", "1", "y", "t")


def settings(v):
    """The settings the build is asked about: the engine's, with the topology's own flags over them (an include's
    ``vllm_cli_check_settings``, else the role's for ``topology``, default replicas)."""
    own = v.get("vllm_cli_check_settings")
    if own is None:
        own = (v.get("_vllm_cli_check_settings") or {}).get(v.get("topology") or "replicas") or {}
    return dict(v.get("_vllm_settings") or {}, **own)


def _bool(value):
    return value is True or str(value).strip().lower() in _TRUE


def module_args(v, image_id=""):
    """``factory_floor.llm.vllm_cli_check``'s arguments: the rendered arguments, the names of the settings rendered
    (those neither null nor empty), and the build's ``image_id`` (the container runtime)."""
    rendered = settings(v)
    args = {"runtime": v["vllm_runtime"], "engine": v["_vllm_container_engine_path"], "image_id": image_id or "",
            "venv": v["vllm_venv"], "cache_dir": v["vllm_cli_cache_dir"],
            "argv": build_args(rendered, v.get("vllm_extra_args")),
            "settings_keys": [key for key, value in rendered.items() if value is not None and value != ""],
            "tool_call_parser": v.get("vllm_tool_call_parser") or "", "load_format": v.get("vllm_load_format") or "",
            "allow_mtp_prefix_caching": _bool(v.get("vllm_allow_mtp_prefix_caching"))}
    if v["vllm_runtime"] == "container":
        args["image"] = v["vllm_container_image"]
    return args


def image_args(v):
    """``container_image_info``'s arguments, to read the image's ID and architecture (pulls nothing)."""
    return {"engine": v["_vllm_container_engine_path"], "image": v["vllm_container_image"]}


def askable(image_info):
    """Whether the image can be asked: present and not of another architecture (the image check refuses those)."""
    image = (image_info or {}).get("image") or {}
    return bool(image.get("present")) and image.get("architecture_matches") is not False


def refusal(host, cli):
    """The task's failure message when the build would refuse the command line, else ""."""
    problems = [str(problem) for problem in (cli or {}).get("problems") or []]
    if not problems:
        return ""
    return ("%s: the vLLM that would serve cannot run what the inventory renders: %s. Nothing was changed."
            % (host, "; ".join(problems)))
