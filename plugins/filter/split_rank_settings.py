# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: split_rank_settings
short_description: A split rank's container options and environment from the link check's findings
version_added: 0.1.0
description:
  - From what the link check found on the host (C(vllm_split_link) - the RDMA devices, their device nodes, the host's
    NCCL library) and the image check (the NCCL the image's torch loads), the settings a rank of the split runs with.
  - NCCL_IB_HCA names the RDMA devices unless C(vllm_split_rdma) is C(disabled) (then NCCL_IB_DISABLE=1); with RDMA
    devices a container gets each device node, IPC_LOCK and no memlock limit (unless the container's own options set
    one); the host's NCCL is mounted read-only over the image's (container) or preloaded (virtualenv) and named in
    VLLM_NCCL_SO_PATH; NCCL and Gloo are pinned to the link interface.
  - The all-reduce check's environment is the rank's without VLLM_HOST_IP, over the NCCL, Gloo and UCX settings of
    C(vllm_env) and C(vllm_env_host) (the rest may hold secrets), with NCCL's set-up always logged.
options:
  _input:
    description:
      - C(runtime) (C(container) or C(venv)), C(rdma) (C(vllm_split_rdma)), C(link) (C(vllm_split_link), keys C(hca),
        C(device_nodes), C(nccl_library)), C(image_nccl_library) (the image's, or C("")), C(container_run_args),
        C(link_address), C(link_interface), C(nccl_debug) (C(vllm_split_nccl_debug)), C(env) and C(env_host).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The rank's environment
  ansible.builtin.debug:
    msg: "{{ (_vllm_split_rank_inputs | factory_floor.llm.split_rank_settings).env }}"
"""

RETURN = r"""
_value:
  description: The rank's settings.
  type: dict
  contains:
    hca:
      description: The RDMA devices NCCL uses (NCCL_IB_HCA).
      type: list
      elements: str
    nccl_host:
      description: The host's NCCL library, or C("").
      type: str
    nccl_target:
      description: Where the rank loads it (over the image's in a container).
      type: str
    run_args:
      description: The container's options (none for a virtualenv).
      type: list
      elements: str
    env:
      description: The rank's environment.
      type: dict
    collective_env:
      description: The all-reduce check's environment.
      type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._split_settings import rank_settings

_KEYS = ("runtime", "rdma", "link", "image_nccl_library", "container_run_args", "link_address", "link_interface",
         "nccl_debug", "env", "env_host")


def split_rank_settings(inputs):
    """Filter entry point."""
    if not isinstance(inputs, Mapping) or any(key not in inputs for key in _KEYS):
        raise AnsibleFilterError("split_rank_settings expects a dict with the keys %s" % ", ".join(_KEYS))
    return rank_settings(inputs)


class FilterModule:
    """A split rank's link settings."""

    def filters(self):
        return {"split_rank_settings": split_rank_settings}
