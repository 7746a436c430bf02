# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: backend_endpoints
short_description: The address and port the proxy reaches each engine at
version_added: 0.1.0
description:
  - For each engine host of the input, C(<address>:<port>) as the C(factory_floor.llm.nginx_proxy) role's upstream
    templates write it - the host's C(nginx_proxy_backend_address) (default its inventory name) and its C(vllm_port)
    (default O(default_port)).
  - Used by that role's preflight, which refuses two backends at one address and port.
options:
  _input:
    description: The engine hosts, inventory names (C(nginx_proxy_backends)).
    type: list
    elements: str
    required: true
  hostvars:
    description: Every host's variables (C(hostvars)).
    type: dict
    required: true
  default_port:
    description: The TCP port of a host without C(vllm_port) (C(site_engine_port)).
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Check that no two backends share an address and port
  ansible.builtin.assert:
    that: endpoints | length == endpoints | unique | length
  vars:
    endpoints: "{{ nginx_proxy_backends | factory_floor.llm.backend_endpoints(hostvars, site_engine_port) }}"
"""

RETURN = r"""
_value:
  description: C(address:port) per backend, in the input's order.
  type: list
  elements: str
  sample: ["127.0.0.1:8000", "spark-b:8000"]
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._proxy_view import backend_endpoints as _endpoints


def backend_endpoints(backends, hostvars, default_port):
    """Filter entry point."""
    if not isinstance(backends, (list, tuple)):
        raise AnsibleFilterError("backend_endpoints expects host names (a list), got %s" % type(backends).__name__)
    return _endpoints(backends, hostvars, default_port)


class FilterModule:
    """Where the proxy reaches its backends."""

    def filters(self):
        return {"backend_endpoints": backend_endpoints}
