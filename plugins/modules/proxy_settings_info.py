#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: proxy_settings_info
short_description: Say which settings the nginx proxy on this host runs other than the inventory's
version_added: 0.1.0
description:
  - Reads, on a proxy host, the files the C(factory_floor.llm.nginx_proxy) role wrote - the membership checker's
    configuration (O(checker_config_path)), the API keys nginx lets through (O(key_map_path)) and O(nginx_conf_path) -
    and compares each with the same file as the role renders it from the inventory now (O(checker_config),
    O(key_map), O(nginx_conf); the role's C(settings) entry point passes its own template lookups).
  - Each difference names the variable that sets it (C(nginx_proxy_model), by default C(vllm_served_model_name);
    C(nginx_proxy_api_key); an engine's C(vllm_port); C(nginx_proxy_check_interval); ...) or, for C(nginx.conf),
    the nginx directives of the lines that differ, with the value on the proxy and in the inventory. A key is compared
    on the host and only said to differ - no key, the proxy's or the inventory's, is ever returned.
  - A topology switch runs it in its preflight and refuses, before anything changes, the differences it cannot go
    right with (M(factory_floor.llm.vllm_check), check C(switch_proxy); RV(differences[].blocks)), since the switch
    starts the new engines with the inventory's settings and leaves the proxy as it is; it names the others.
  - The module only reads. Comparing is done in C(plugins/module_utils/_proxy_settings.py).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  checker_config_path:
    description: The membership checker's configuration on this host (the role's C(upstream.json)).
    type: path
    default: /etc/factory-floor/upstream.json
  checker_config:
    description:
      - C(upstream.json) as the role renders it from the inventory now (JSON text). Holds the engines' API key, so it
        is never logged.
    type: str
    required: true
  key_map_path:
    description: The API keys nginx lets through, on this host (the role's root-only key map).
    type: path
    default: /etc/factory-floor/nginx-api-key.conf
  key_map:
    description:
      - The key map as the role renders it from the inventory now; V("") when the inventory sets no key (the role then
        removes the file). Never logged.
    type: str
    default: ""
  nginx_conf_path:
    description: nginx's configuration on this host.
    type: path
    default: /etc/nginx/nginx.conf
  nginx_conf:
    description: C(nginx.conf) as the role renders it from the inventory now. Compared line by line, comments and blank
      lines aside.
    type: str
    required: true
notes:
  - A missing O(checker_config_path) means the role never set up the proxy on this host (RV(deployed) false);
    nothing else is compared then.
seealso:
  - module: factory_floor.llm.vllm_check
"""

EXAMPLES = r"""
# What the nginx_proxy role's settings entry point does (its templates, rendered on the controller).
- name: Compare the settings this proxy runs with the ones the inventory renders
  factory_floor.llm.proxy_settings_info:
    checker_config: "{{ lookup('ansible.builtin.template', 'upstream.json.j2') }}"
    key_map: "{{ lookup('ansible.builtin.template', 'nginx-api-key.conf.j2') if nginx_proxy_api_key | length > 0 else '' }}"
    nginx_conf: "{{ lookup('ansible.builtin.template', 'nginx.conf.j2') }}"
  register: __settings
  no_log: true
"""

RETURN = r"""
deployed:
  description: Whether the proxy on this host has the membership checker's configuration (set up by C(deploy.yml)).
  returned: always
  type: bool
  sample: true
differences:
  description: One per setting that differs; empty when the proxy runs the inventory's settings.
  returned: always
  type: list
  elements: dict
  contains:
    file:
      description: Where the proxy holds it - V(upstream.json), V(nginx-api-key.conf) or V(nginx.conf).
      type: str
      sample: upstream.json
    setting:
      description: The variable that sets it (V(nginx.conf) for nginx.conf's lines).
      type: str
      sample: nginx_proxy_model
    default_from:
      description: The variable it defaults from (the engines' own), or null.
      type: str
      sample: vllm_served_model_name
    host:
      description: The engine the setting belongs to (an engine's address, port, max_num_seqs), or null.
      type: str
      sample: spark-1
    applied:
      description: The value on the proxy; null for a key (never returned) and for what the proxy lacks.
      type: raw
      sample: old-chat
    wanted:
      description: The value the inventory gives; null for a key (never returned) and for what it no longer has.
      type: raw
      sample: qwen3-next
    secret:
      description: A key - compared here, never shown.
      type: bool
      sample: false
    engines:
      description:
        - The setting describes the engines too (their key, served model name, address or port). The engines that serve
          now run what the proxy has, so applying it to the proxy alone would take them out of rotation or refuse their
          clients.
      type: bool
      sample: true
    blocks:
      description:
        - A topology switch cannot go right with it - the engines' settings above, the port and TLS clients and the
          switch's probe client reach the proxy by (C(listen), C(ssl_certificate), C(ssl_certificate_key)), an engine
          the proxy does not know, the paths the switch's drains and waits use - and refuses it.
      type: bool
      sample: true
    directives:
      description: For V(nginx.conf), the directives of the lines that differ, in nginx's words.
      type: list
      elements: str
      returned: for nginx.conf
      sample: [listen, proxy_read_timeout]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_settings as ps


def _read(module, path):
    """The file's text, or None when it is missing."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg="Could not read %s: %s" % (path, exc))
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            checker_config_path=dict(type="path", default="/etc/factory-floor/upstream.json"),
            checker_config=dict(type="str", required=True, no_log=True),
            key_map_path=dict(type="path", default="/etc/factory-floor/nginx-api-key.conf"),
            key_map=dict(type="str", default="", no_log=True),
            nginx_conf_path=dict(type="path", default="/etc/nginx/nginx.conf"),
            nginx_conf=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    applied = {"checker": _read(module, params["checker_config_path"]), "keys": _read(module, params["key_map_path"]),
               "nginx": _read(module, params["nginx_conf_path"])}
    wanted = {"checker": params["checker_config"], "keys": params["key_map"], "nginx": params["nginx_conf"]}
    try:
        found = ps.compare(applied, wanted)
    except ValueError as exc:
        module.fail_json(msg="checker_config is not the membership checker's JSON configuration: %s" % exc)
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()
