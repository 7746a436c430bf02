# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: container_resource_args
short_description: The GPU, IPC and /dev/shm options of an engine's container
version_added: 0.1.0
description:
  - C(--device=GPUS) for podman (a CDI device such as C(nvidia.com/gpu=all)) or C(--gpus=GPUS) for docker, then
    C(--ipc=IPC) and C(--shm-size=SIZE); each left out when its value is empty.
options:
  _input:
    description: The container engine, C(docker) or C(podman) (C(vllm_container_engine)).
    type: str
    required: true
  gpus:
    description: C(vllm_container_gpus).
    type: str
    required: true
  ipc:
    description: C(vllm_container_ipc).
    type: str
    required: true
  shm_size:
    description: C(vllm_container_shm_size), for example C(16g).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The options
  ansible.builtin.debug:
    msg: "{{ 'docker' | factory_floor.llm.container_resource_args('all', 'host', '') }}"
  # -> ['--gpus=all', '--ipc=host']
"""

RETURN = r"""
_value:
  description: The options, in this order.
  type: list
  elements: str
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_settings import (
    container_resource_args as _container_resource_args,
)


def container_resource_args(engine, gpus, ipc, shm_size):
    """Filter entry point."""
    return _container_resource_args(engine, gpus, ipc, shm_size)


class FilterModule:
    """An engine container's resource options."""

    def filters(self):
        return {"container_resource_args": container_resource_args}
