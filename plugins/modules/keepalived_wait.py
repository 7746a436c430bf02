#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: keepalived_wait
short_description: Wait until the proxies' floating address answers the proxy's /healthz, as a client asks it
version_added: 0.1.0
description:
  - "Asks C(/healthz) on the floating address once a second with C(curl) (2 s per try) until it answers HTTP 200,
    at most O(timeout) more times: the address answers when one proxy host holds it and its nginx answers."
  - "With O(tls) it asks as a client asks a proxy that answers only TLS: https to O(server_name), the name its
    certificate carries, verified against O(ca_file), and connected to the floating address itself whatever that name
    resolves to (C(curl --resolve)). C(uri) cannot connect to one address and verify the certificate for another name."
  - "Fails, when it never answered, naming the address, the time, the request, the last HTTP status and curl's error,
    and where to look (C(journalctl -u keepalived.service), C(/run/factory-floor/keepalived.json))."
  - The C(factory_floor.llm.keepalived) role runs it once per play, after keepalived has started; never in check mode.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
requirements:
  - curl on the host (the keepalived role installs it)
options:
  address:
    description: The floating address (C(keepalived_virtual_ipaddress), a prefix length after C(/) is ignored).
    type: str
    required: true
  port:
    description: The proxy's port (C(site_proxy_port)).
    type: int
    required: true
  tls:
    description: The proxy answers only TLS (C(nginx_proxy_tls_certificate) is set).
    type: bool
    default: false
  server_name:
    description: With O(tls), the name the proxy's certificate carries (C(nginx_proxy_tls_server_name)).
    type: str
    default: ""
  ca_file:
    description: With O(tls), the CA file to verify the certificate against (C(nginx_proxy_tls_ca_file)); empty uses the host's trust store.
    type: str
    default: ""
  timeout:
    description: How many more tries, one second apart, after the first (C(keepalived_status_timeout)), in seconds.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Wait until the floating address answers the proxy's /healthz
  factory_floor.llm.keepalived_wait:
    address: 192.0.2.10/24
    port: 8080
  run_once: true
"""

RETURN = r"""
changed:
  description: Always false; the module only asks.
  returned: always
  type: bool
  sample: false
status:
  description: The last HTTP status C(curl) saw (C(000) when nothing answered), empty when curl printed none.
  returned: always
  type: str
  sample: "200"
cmd:
  description: The C(curl) command line asked.
  returned: always
  type: list
  elements: str
stderr:
  description: curl's error output of the last try.
  returned: always
  type: str
tries:
  description: How many times it asked.
  returned: always
  type: int
  sample: 3
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._keepalived_wait import curl_argv, failure


def wait(module, argv, timeout, sleep=None):
    """Ask until 200 or ``timeout`` more tries failed; (status, stderr, tries)."""
    tries = 0
    while True:
        tries += 1
        _rc, out, err = module.run_command(argv)
        status = out.strip()
        if status == "200" or tries > timeout:
            return status, err, tries
        (sleep or time.sleep)(1)


def run_module():
    module = AnsibleModule(
        argument_spec=dict(address=dict(type="str", required=True), port=dict(type="int", required=True),
                           tls=dict(type="bool", default=False), server_name=dict(type="str", default=""),
                           ca_file=dict(type="str", default=""), timeout=dict(type="int", default=30)),
        supports_check_mode=True,
    )
    params = module.params
    argv = curl_argv(params["address"], params["port"], params["tls"], params["server_name"], params["ca_file"])
    status, stderr, tries = wait(module, argv, max(params["timeout"], 0))
    result = dict(changed=False, status=status, cmd=argv, stderr=stderr, tries=tries)
    if status != "200":
        module.fail_json(msg=failure(params["address"], params["timeout"], argv, status, stderr, params["tls"]),
                         **result)
    module.exit_json(**result)


def main():
    run_module()


if __name__ == "__main__":
    main()
