# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The options of the modules that read vLLM's ``/metrics`` from each engine on its own address, never through the
proxy: ``vllm_metrics`` and ``workload_profile``. The reading itself is ``_host.vllm_metrics`` (``make_fetch``);
the documentation of ``timeout`` is the ``engine_metrics`` doc fragment (each module documents ``engines``, whose
words name what it returns per engine, and ``api_key``)."""

from __future__ import annotations

import copy

from ._host.vllm_metrics import DEFAULT_TIMEOUT

ENGINE_METRICS_SPEC = dict(
    engines=dict(
        type="list",
        elements="dict",
        required=True,
        options=dict(
            name=dict(type="str", required=True),
            url=dict(type="str", required=True),
        ),
    ),
    timeout=dict(type="float", default=DEFAULT_TIMEOUT),
    api_key=dict(type="str", no_log=True),
)


def engine_metrics_spec(**options) -> dict:
    """A copy of :data:`ENGINE_METRICS_SPEC` with the module's own ``options`` added
    (``engine_metrics_spec(window={"type": "float", "default": 0.0})``)."""
    spec = copy.deepcopy(ENGINE_METRICS_SPEC)
    spec.update(options)
    return spec
