# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the engine preflight reads on an engine host before ``_vllm_check.check_engine`` judges it: the model
directory, the virtualenv's ``vllm``, the tool-call parsers it knows, whether one of the role's engine units is active,
who listens on the API port and which units those listeners belong to.

``factory_floor.llm.vllm_check``'s action plugin runs these reads on the host (``check: engine`` without the
observations given); the vllm role's ``preflight`` entry point asked them in six tasks before. Pure logic, standard
library only: the steps as (option, module, arguments), and whether a failed read fails the check.
"""

from __future__ import annotations

import re

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_int

# The variables the reads need besides the engine check's own (``_vllm_check.VARIABLES['engine']``).
VARIABLES = ("_vllm_tool_parser_probe",)
# The reads whose failure fails the preflight (the others are judged on what they said, or ignored when they failed).
MUST_SUCCEED = frozenset(("model_dir", "venv_vllm", "port_listeners"))
OPTIONS = ("model_dir", "venv_vllm", "tool_parsers", "units_active", "port_listeners", "port_units")


def reads(v):
    """The reads that apply, in order, as (option, module, arguments); ``v`` holds ``vllm_model``, ``vllm_runtime``,
    ``vllm_venv``, ``vllm_tool_call_parser``, ``vllm_port``, ``_vllm_units`` and ``_vllm_tool_parser_probe``. A model
    that is not an absolute path is not looked for (a hub name); the port is not asked about outside 1-65535 (the
    engine check refuses it by its name)."""
    model, runtime, venv = str(v.get("vllm_model") or ""), v.get("vllm_runtime"), str(v.get("vllm_venv") or "")
    units = v.get("_vllm_units") or {}
    steps = []
    if model.startswith("/"):
        steps.append(("model_dir", "ansible.legacy.stat", {"path": model}))
    if runtime == "venv":
        steps.append(("venv_vllm", "ansible.legacy.stat", {"path": venv + "/bin/vllm"}))
        if len(str(v.get("vllm_tool_call_parser") or "")) > 0:
            steps.append(("tool_parsers", "ansible.legacy.command",
                          {"argv": [venv + "/bin/python", "-c", str(v.get("_vllm_tool_parser_probe") or "")]}))
    steps.append(("units_active", "ansible.legacy.command",
                  {"argv": ["systemctl", "is-active", (units.get("replicas") or [""])[0],
                            (units.get("split") or [""])[0]]}))
    port = jinja_int(v.get("vllm_port"))
    if 1 <= port <= 65535:
        steps.append(("port_listeners", "ansible.legacy.command", {"argv": ["ss", "-Hltnp", "sport = :%d" % port]}))
    return steps


def port_units_read(port_listeners, units_active):
    """The ``ps`` that names the units of the port's listeners, as (option, module, arguments), or None: not when no
    one listens, nor when one of the role's engine units is active (the port is then ours)."""
    listeners = str((port_listeners or {}).get("stdout") or "")
    active = [str(line) for line in ((units_active or {}).get("stdout_lines") or [])]
    if not listeners or "active" in active:
        return None
    return ("port_units", "ansible.legacy.command",
            {"argv": ["ps", "-o", "unit=", "-p", ",".join(re.findall(r"pid=([0-9]+)", listeners))]})


def read_failure(option, result):
    """The module's own message when the read ``option`` failed and must not (as the task that read it failed), else
    None."""
    result = result or {}
    if option in MUST_SUCCEED and result.get("failed"):
        return str(result.get("msg") or "reading %s failed" % option)
    return None
