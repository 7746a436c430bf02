# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """Where a module runs its program: in the image that will serve, or in the virtualenv (``_link_check.RUNNER_SPEC``)."""

    DOCUMENTATION = r"""
options:
  runtime:
    description: C(container) runs the program in O(image) with O(engine) (C(--pull=never)); C(venv) runs it with
      O(venv)'s Python.
    type: str
    choices: [container, venv]
    required: true
  engine:
    description: The container engine's command (C(/usr/bin/docker), C(/usr/bin/podman)).
    type: str
    default: /usr/bin/docker
  image:
    description: The vLLM image that will serve (container runtime). It must be on the host; nothing is pulled.
    type: str
    default: ""
  python:
    description: The image's Python, run as the container's entrypoint.
    type: str
    default: python3
  venv:
    description: The virtualenv holding vLLM and torch (venv runtime).
    type: str
    default: /opt/vllm
"""
