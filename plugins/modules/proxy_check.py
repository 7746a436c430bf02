#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxy_check
short_description: Refuse nginx proxy settings that cannot work, before anything changes
version_added: 0.1.0
description:
  - "The preflight of the C(factory_floor.llm.nginx_proxy) role, on the controller: it reads the role's variables as
    the task sees them (inventory, the role's defaults, an include's C(vars)) and fails with the first refusal,
    naming the variable and what to change. The checks run in order; a later one reads what an earlier one checked."
  - "Refused, in that order: C(nginx_proxy_backends), C(nginx_proxy_affinity_headers),
    C(nginx_proxy_affinity_body_fields), C(nginx_proxy_expect_in_rotation) or C(nginx_proxy_drain) not a YAML list (a
    string or a mapping; the role's argument_specs split a string for their check only); no host in the engine group
    C(site_engine_group), no backend, C(site_proxy_port) outside 1-65535, C(nginx_proxy_check_interval) not above 0
    seconds, C(nginx_proxy_check_fails) or C(nginx_proxy_check_passes) below 1; two backends at one
    C(nginx_proxy_backend_address:vllm_port) (default C(site_engine_port)); C(nginx_proxy_balance) other than
    V(affinity)/V(least_conn), a header name in C(nginx_proxy_affinity_headers) with other than letters, digits and
    C(-) (nginx drops headers with C(_)), C(nginx_proxy_affinity_balance_factor) below 1 (a ratio to the mean
    in-flight), C(nginx_proxy_affinity_body_buffer_size) not an nginx size, C(nginx_proxy_affinity_body_fields) with
    a non-string; C(nginx_proxy_api_key) or C(nginx_proxy_api_key_next) with a character outside a bearer token's
    (RFC 6750; the value is never shown); half a TLS setting (C(nginx_proxy_tls_certificate) without
    C(nginx_proxy_tls_certificate_key) or the reverse), a TLS path with spaces, quotes, C(;) or braces, TLS without
    C(nginx_proxy_tls_server_name)."
  - The check runs on the controller and never connects to the host; no key becomes a module argument.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options: {}
notes:
  - Its action plugin does the work; this file holds its documentation.
"""

EXAMPLES = r"""
# What the nginx_proxy role's preflight does.
- name: Refuse proxy settings that cannot work, naming the variable
  factory_floor.llm.proxy_check:
"""

RETURN = r"""
changed:
  description: Always false; the check only reads variables.
  returned: always
  type: bool
  sample: false
errors:
  description: The first refusal, or nothing; on failure C(msg) is its message.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - Which refusal - V(not_a_list), V(layout), V(same_endpoint), V(affinity), V(key_characters), V(tls).
      type: str
      sample: not_a_list
    variables:
      description: The variables to change.
      type: list
      elements: str
      sample: [nginx_proxy_affinity_body_fields]
    message:
      description: What is refused and what to change.
      type: str
      sample: >-
        nginx_proxy_affinity_body_fields must be a YAML list (for example nginx_proxy_affinity_body_fields:
        [prompt_cache_key, user]), not a string or a mapping: write the value as [a, b] or one "- item" per line.
"""
