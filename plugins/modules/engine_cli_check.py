#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_cli_check
short_description: Refuse a command line the vLLM build that will serve would refuse, asking the build itself
version_added: 0.1.0
description:
  - "The C(factory_floor.llm.vllm) role's image check, last step (the split's preflight: its only one). Reads the
    variables it needs itself, as the task sees them - C(vllm_runtime), C(vllm_container_image), C(vllm_venv),
    C(vllm_cli_cache_dir), the engine's settings (C(_vllm_settings)) with the topology's own flags over them (an include's
    C(vllm_cli_check_settings), else the role's for C(topology), default C(replicas)), C(vllm_extra_args),
    C(vllm_tool_call_parser), C(vllm_load_format), C(vllm_allow_mtp_prefix_caching) - then runs on the host
    M(factory_floor.llm.container_image_info) (the C(container) runtime: the image's ID and architecture; pulls
    nothing) and M(factory_floor.llm.vllm_cli_check) with the rendered C(vllm serve) arguments (the C(vllm_args)
    filter's)."
  - "Skipped, with the C(container) runtime, for an image that is missing or of another architecture: the image check
    (M(factory_floor.llm.vllm_check) V(image)) refuses those."
  - "Fails with one message naming the host and every problem the build would refuse (M(factory_floor.llm.vllm_cli_check)'s
    RV(factory_floor.llm.vllm_cli_check#module:problems)); nothing was changed."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options: {}
notes:
  - An undefined variable it reads fails the task, naming it - except C(vllm_cli_check_settings), C(topology),
    C(vllm_tool_call_parser) and C(vllm_load_format).
seealso:
  - module: factory_floor.llm.vllm_cli_check
  - module: factory_floor.llm.container_image_info
"""

EXAMPLES = r"""
- name: Ask the vLLM build what it accepts (once per build, cached); refuse a command line it would refuse
  factory_floor.llm.engine_cli_check: {}
  register: vllm_cli
"""

RETURN = r"""
version:
  description: vLLM's version in the build; the rest of the result is M(factory_floor.llm.vllm_cli_check)'s.
  returned: success
  type: str
  sample: 0.32.0
nccl_library:
  description: The C(libnccl) the build's torch loads (a path inside the image); empty without NCCL (a CPU build).
  returned: success
  type: str
  sample: /usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2
problems:
  description: What the build would refuse; empty on success (the task fails otherwise).
  returned: success
  type: list
  elements: str
  sample: []
"""
