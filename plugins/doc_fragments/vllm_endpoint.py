# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The vLLM server a client module talks to (``module_utils/_vllm_endpoint.ENDPOINT_SPEC``): the options of
    the ``factory_floor.llm.vllm`` action group, which ``module_defaults`` gives once for a play or a block."""

    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the vLLM server's OpenAI-compatible API, for example V(http://127.0.0.1:8000) - the address
        vLLM's C(--host) and C(--port) bind. An OpenAI client base URL ending in C(/v1) is accepted too.
      - The roles give one engine's own address, never the proxy's (its host's C(vllm_listen_host) and C(vllm_port),
        as the filter P(factory_floor.llm.vllm_probe_url#filter) composes them).
      - Environment proxy variables (C(HTTP_PROXY) and friends) are not used; the module talks to this address itself.
      - "Part of the action group C(factory_floor.llm.vllm); set it once with
        C(module_defaults: {group/factory_floor.llm.vllm: {url: ...}})."
    type: str
    required: true
  api_key:
    description:
      - "The key vLLM was started with (C(--api-key) or E(VLLM_API_KEY)), sent as C(Authorization: Bearer KEY). vLLM
        only checks it on C(/v1/...) paths."
      - Defaults to the environment variable E(VLLM_API_KEY) on the host the module runs on, if set (for example
        through the task's C(environment)).
      - The roles give the site's key, C(site_api_key) (the engine hosts' C(vllm_api_key), which they must agree on).
        Never logged.
    type: str
  model:
    description:
      - The served model name, as vLLM's C(--served-model-name) sets it and C(GET /v1/models) lists it (the C(id)
        field).
      - The roles give the engine's C(vllm_served_model_name).
    type: str
"""
