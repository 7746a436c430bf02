#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_cli_check
short_description: Whether a vLLM build accepts the command line the roles render, asked of the build itself once per image ID
version_added: 0.1.0
description:
  - Asks the vLLM build that will serve - a container image (O(runtime) C(container)) or a virtualenv (C(venv)) - what it
    accepts, and says which of the rendered arguments (O(argv)) it would refuse, before anything stops.
  - "The build is asked twice, each with its own Python and no network: C(vllm serve --help=all) (C(--help) for builds
    that know no C(=all)) for every flag and the choices of those that have them; and a short probe for the vLLM version
    (its distribution's metadata), the tool-call parsers it ships, its architecture, whether C(fastsafetensors) is
    installed and which C(libnccl) its torch loads. The answer is cached in O(cache_dir), one file per image ID (per
    virtualenv: its installed distributions), so a build is asked once; check mode reads the cache but does not write it."
  - "Refused (RV(problems), one sentence each naming the flag, the variable it comes from and the build's version): a flag
    the build does not know; a value outside the flag's choices (C(--kv-cache-dtype), C(--dtype)...); a tool-call parser
    (O(tool_call_parser)) it does not ship; O(load_format) C(fastsafetensors) without the package; MTP speculative
    decoding with prefix caching on a hybrid model (its C(config.json)), unless O(allow_mtp_prefix_caching)."
  - The module never fails for a refusal; the C(vllm) role's C(cli_check) entry point fails with RV(problems).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.image_runner
options:
  image_id:
    description: The image's ID (C(sha256:...)), the cache key; read with C(image inspect) when empty.
    type: str
    default: ""
  cache_dir:
    description: Where the answers are kept on the host, one JSON file per build.
    type: path
    default: /var/cache/factory-floor/vllm-cli
  argv:
    description: The rendered arguments of C(vllm serve) (after C(serve), the model first), as the C(vllm_args) filter builds them.
    type: list
    elements: str
    default: []
  settings_keys:
    description: The names of the settings rendered (C(max_num_seqs), ...), to name each flag's variable in the messages.
    type: list
    elements: str
    default: []
  tool_call_parser:
    description: C(vllm_tool_call_parser); empty checks none.
    type: str
    default: ""
  load_format:
    description: C(vllm_load_format); C(fastsafetensors) needs the package in the build.
    type: str
    default: ""
  timeout:
    description: Seconds each question may take (importing vLLM in a container takes 10-30 s).
    type: int
    default: 600
  allow_mtp_prefix_caching:
    description:
      - C(vllm_allow_mtp_prefix_caching). Without it, MTP speculative decoding together with prefix caching (rendered, or
        vLLM's default) is refused on a hybrid model (the model directory's C(config.json), the first of O(argv)), which
        has open corruption reports in vLLM (vllm-project/vllm issues 43559, 53912, 47194).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Would the image accept what is rendered?
  factory_floor.llm.vllm_cli_check:
    runtime: container
    image: vllm-gb10:0.32.0
    argv: "{{ settings | factory_floor.llm.vllm_args(vllm_extra_args) }}"
    settings_keys: "{{ settings.keys() | list }}"
    tool_call_parser: hermes
  register: cli

- name: Refuse it before anything stops
  ansible.builtin.fail:
    msg: "{{ cli.problems | join('; ') }}"
  when: cli.problems | length > 0
"""

RETURN = r"""
version:
  description: vLLM's version in the build (its distribution's metadata, else C(vllm.__version__)).
  returned: always
  type: str
  sample: 0.32.0
torch:
  description: torch's version in the build.
  returned: always
  type: str
machine:
  description: The build's architecture as its Python sees it (C(platform.machine())).
  returned: always
  type: str
  sample: aarch64
tool_parsers:
  description: The tool-call parsers it ships.
  returned: always
  type: list
  elements: str
modules:
  description: Optional packages found in it (C(fastsafetensors), C(flashinfer), C(deep_gemm)), each true or false.
  returned: always
  type: dict
nccl_library:
  description: The C(libnccl) its torch loads (a path inside the image); empty without NCCL (a CPU build).
  returned: always
  type: str
  sample: /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2
flags:
  description: How many flags the build's C(vllm serve) knows.
  returned: always
  type: int
problems:
  description: What it would refuse of O(argv), O(tool_call_parser) and O(load_format), one sentence each; empty when it accepts all.
  returned: always
  type: list
  elements: str
model:
  description: What the model's C(config.json) says (see M(factory_floor.llm.model_manifest)'s C(model)); C(hybrid) null when not read.
  returned: always
  type: dict
cached:
  description: The answer came from the cache (the build was not asked this time).
  returned: always
  type: bool
cache_file:
  description: The cache file of this build.
  returned: always
  type: str
"""

import glob
import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _container_image as ci
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_config as mc
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_cli as cli
from ansible_collections.factory_floor.llm.plugins.module_utils._link_check import RUNNER_SPEC, run_with_timeout


def venv_key(venv):
    """A key that changes whenever another vLLM (or torch...) is installed in the virtualenv."""
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "*.dist-info")))
    return "venv-" + hashlib.sha256(json.dumps([os.path.realpath(venv), names]).encode()).hexdigest()[:32]


def ask(argv, timeout):
    rc, out, err, timed_out = run_with_timeout(argv, timeout)
    if timed_out:
        return None, "%s timed out after %s s" % (" ".join(argv[:6]), timeout)
    return (rc, out, err), ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            RUNNER_SPEC,
            image_id=dict(type="str", default=""),
            cache_dir=dict(type="path", default="/var/cache/factory-floor/vllm-cli"),
            argv=dict(type="list", elements="str", default=[]),
            settings_keys=dict(type="list", elements="str", default=[], no_log=False),
            tool_call_parser=dict(type="str", default=""),
            load_format=dict(type="str", default=""),
            timeout=dict(type="int", default=600),
            allow_mtp_prefix_caching=dict(type="bool", default=False),
        ),
        required_if=[("runtime", "container", ("image",))],
        supports_check_mode=True,
    )
    params = module.params
    container = params["runtime"] == "container"
    if container:
        key = params["image_id"]
        if not key:
            rc, out, err = module.run_command([params["engine"], "image", "inspect", params["image"]])
            if rc != 0:
                module.fail_json(msg="%s is not on this host (%s image inspect: %s): the image check refuses it first"
                                 % (params["image"], params["engine"], (err or out).strip()[:300]))
            key = str((json.loads(out or "[{}]") or [{}])[0].get("Id") or "")
        try:
            key = ci.normalize_digest(key).split(":", 1)[1]
        except ValueError as exc:
            module.fail_json(msg="image_id %r: %s" % (params["image_id"], exc))
        base = [params["engine"], "run", "--rm", "--network=none", "--pull=never"]
        help_argv = base + ["--entrypoint", "vllm", params["image"], "serve"]
        probe_argv = base + ["--entrypoint", params["python"], params["image"], "-c", cli.PROBE]
        where = params["image"]
    else:
        key = venv_key(params["venv"])
        help_argv = [os.path.join(params["venv"], "bin", "vllm"), "serve"]
        probe_argv = [os.path.join(params["venv"], "bin", "python"), "-c", cli.PROBE]
        where = params["venv"]
    cache_file = os.path.join(params["cache_dir"], key + ".json")
    record, cached = None, False
    try:
        with open(cache_file, encoding="utf-8") as handle:
            record = json.load(handle)
        cached = record.get("cache_version") == cli.CACHE_VERSION and bool(record.get("flags"))
    except (OSError, ValueError):
        record = None
    if not cached:
        help_error = ""
        answer, error = ask(help_argv + ["--help=all"], params["timeout"])
        if answer and (answer[0] != 0 or not cli.parse_help(answer[1])):
            # Builds before --help=all print every flag with --help.
            answer, error = ask(help_argv + ["--help"], params["timeout"])
        help_text = answer[1] if answer else ""
        if not answer:
            help_error = error
        elif answer[0] != 0:
            lines = (answer[2] or answer[1]).strip().splitlines()
            help_error = "rc %s: %s" % (answer[0], lines[-1] if lines else "no output")
        answer, error = ask(probe_argv, params["timeout"])
        probe = cli.parse_probe(answer[1]) if answer else None
        record = cli.cache_record(help_text, probe, help_error)
        if not record["flags"]:
            record["help_error"] = help_error or "no option in its output"
        elif not module.check_mode:
            try:
                os.makedirs(params["cache_dir"], mode=0o755, exist_ok=True)
                tmp = cache_file + ".tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    json.dump(record, handle, sort_keys=True)
                os.rename(tmp, cache_file)
            except OSError as exc:
                module.warn("could not cache the answer in %s: %s" % (cache_file, exc))
    problems = cli.problems(params["argv"], record, params["settings_keys"], params["tool_call_parser"],
                            params["load_format"], where)
    model = mc.summary({})
    model_dir = str(params["argv"][0]) if params["argv"] else ""
    if model_dir.startswith("/"):
        try:
            with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
                model = mc.summary(json.load(handle))
        except (OSError, ValueError):
            pass
    speculative, prefix = cli.engine_settings(params["argv"])
    problems += mc.engine_problems(model, speculative, prefix, params["allow_mtp_prefix_caching"])
    module.exit_json(changed=False, version=record.get("version", ""), torch=record.get("torch", ""),
                     machine=record.get("machine", ""), tool_parsers=record.get("tool_parsers") or [],
                     modules=record.get("modules") or {}, nccl_library=record.get("nccl_library", ""),
                     flags=len(record.get("flags") or {}), problems=problems, cached=cached, cache_file=cache_file,
                     model=model)


if __name__ == "__main__":
    main()
