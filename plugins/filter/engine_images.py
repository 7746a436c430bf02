# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: engine_images
short_description: The image an engine host has and what each engine unit's container runs
version_added: 0.1.0
description:
  - From M(factory_floor.llm.container_image_info)'s result, the image (its C(image)) and, for each engine unit, what
    its container runs (its C(containers) entry of the container named after the unit, without C(.service)).
  - An empty dict for another runtime than C(container) (the image check then reads no image).
options:
  _input:
    description: The registered result of M(factory_floor.llm.container_image_info).
    type: dict
    required: true
  units:
    description: The engine units, for example C([vllm-replica.service, vllm-split.service]).
    type: list
    elements: str
    required: true
  runtime:
    description: The engine's runtime (C(vllm_runtime)), C(container) or C(venv).
    type: str
    default: container
"""

EXAMPLES = r"""
- name: Note the image and what the engines' containers run
  ansible.builtin.set_fact:
    vllm_image_check: "{{ __vllm_image_info | factory_floor.llm.engine_images(['vllm-replica.service'], vllm_runtime) }}"
"""

RETURN = r"""
_value:
  description: C(image) and C(running) (per unit, what its container runs); empty outside a container.
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_settings import engine_images as _engine_images


def engine_images(image_info, units, runtime="container"):
    """Filter entry point."""
    if runtime != "container":
        return {}
    if not isinstance(image_info, Mapping) or "image" not in image_info or "containers" not in image_info:
        raise AnsibleFilterError("engine_images expects container_image_info's result (image, containers)")
    try:
        return _engine_images(image_info, units)
    except KeyError as exc:
        raise AnsibleFilterError("engine_images: container_image_info read no container %s" % exc) from exc


class FilterModule:
    """The engine host's image and containers."""

    def filters(self):
        return {"engine_images": engine_images}
