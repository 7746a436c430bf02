# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """How a module reads vLLM's ``/metrics`` from each engine on its own address (``module_utils/_engine_metrics``):
    vllm_metrics's and workload_profile's ``timeout`` and ``api_key`` (one text for both, so they cannot drift).
    ``engines`` stays with each module: its words say what the module returns per engine."""

    DOCUMENTATION = r"""
options:
  timeout:
    description:
      - Seconds to wait for each engine, for connecting and again for the answer, per read.
    type: float
    default: 5
  api_key:
    description:
      - Sent to every engine as a bearer token (C(Authorization) header). vLLM's C(/metrics) normally needs none,
        even when the server was started with C(--api-key).
    type: str
"""
