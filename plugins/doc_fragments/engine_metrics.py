# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """How a module reads vLLM's ``/metrics`` from each engine on its own address (``module_utils/_engine_metrics``):
    vllm_metrics's and workload_profile's ``timeout`` (one text for both, so they cannot drift). ``engines`` and
    ``api_key`` stay with each module: ``engines`` names what the module returns per engine, and the two
    ``api_key`` texts differ by a clause (vllm_metrics's adds that ``/metrics`` needs no key even with ``--api-key``),
    which this change leaves as it was."""

    DOCUMENTATION = r"""
options:
  timeout:
    description:
      - Seconds to wait for each engine, for connecting and again for the answer, per read.
    type: float
    default: 5
"""
