# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The options that say which vLLM server a client module talks to, shared by the modules of the
``factory_floor.llm.vllm`` action group (``meta/runtime.yml``): ``vllm_health``, ``tool_call_test`` and
``concurrency_sweep``. Their documentation is the ``vllm_endpoint`` doc fragment; a play or a role block gives
them once, as ``module_defaults: {group/factory_floor.llm.vllm: {url: ..., api_key: ..., model: ...}}``.

Every module of the group takes every option here: ``module_defaults`` of a group hands each of its keys to each
member, and a module refuses an option it does not have. A module may set its own default on top
(``concurrency_sweep``'s ``url`` and required ``model``), through :func:`endpoint_spec`.
"""

from __future__ import annotations

from ansible.module_utils.basic import env_fallback

# The environment variable vLLM itself reads its key from (vllm serve --api-key's fallback).
API_KEY_ENV = "VLLM_API_KEY"

ENDPOINT_SPEC = dict(
    url=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, [API_KEY_ENV])),
    model=dict(type="str"),
)


def endpoint_spec(**overrides) -> dict:
    """A copy of :data:`ENDPOINT_SPEC`, each option of ``overrides`` updated with the keys given
    (``endpoint_spec(url={"required": False, "default": "http://127.0.0.1:8000"})``)."""
    spec = {name: dict(option) for name, option in ENDPOINT_SPEC.items()}
    for name, changes in overrides.items():
        spec[name].update(changes)
    return spec
