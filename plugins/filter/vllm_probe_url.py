# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: vllm_probe_url
short_description: Where a client on an engine's own host reaches its vLLM
version_added: 0.1.0
description:
  - Returns C(http://HOST:PORT) for the health checks, watchdog, tool-calling gate, metrics reads and tuning that
    run on the engine's own host.
  - HOST is C(vllm_probe_host) when set; else C(127.0.0.1) while vLLM's C(--host) (C(vllm_listen_host)) binds every
    address (C(0.0.0.0), empty; C(::) gives C(::1)); else C(vllm_listen_host) itself, the one address vLLM answers on
    (a specific address does not answer on loopback). PORT is C(vllm_port). An IPv6 address is put in brackets.
  - Unset variables take the C(vllm) role's defaults (C(vllm_listen_host) C(0.0.0.0), C(vllm_port) 8000), so it also
    works on C(hostvars) in plays where that role's defaults are not loaded.
options:
  _input:
    description: The engine host's variables, for example C(hostvars[inventory_hostname]) or a dict with the keys above.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Wait until this host's replica serves
  factory_floor.llm.vllm_health:
    url: "{{ hostvars[inventory_hostname] | factory_floor.llm.vllm_probe_url }}"
  # vllm_listen_host 0.0.0.0 -> http://127.0.0.1:8000; vllm_listen_host 10.0.0.5 -> http://10.0.0.5:8000

- name: The same for another engine host
  ansible.builtin.debug:
    msg: "{{ hostvars['spark-2'] | factory_floor.llm.vllm_probe_url }}"
"""

RETURN = r"""
_value:
  description: The engine's base URL as seen from its own host, for example C(http://127.0.0.1:8000).
  type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import VllmArgsError, engine_probe_url


def vllm_probe_url(host_vars):
    """Filter entry point."""
    if not isinstance(host_vars, Mapping):
        raise AnsibleFilterError("vllm_probe_url expects an engine host's variables (a dict), got %s" % type(host_vars).__name__)
    try:
        return engine_probe_url(host_vars)
    except VllmArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """Where an engine's own host reaches it."""

    def filters(self):
        return {"vllm_probe_url": vllm_probe_url}
