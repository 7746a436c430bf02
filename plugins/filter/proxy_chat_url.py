# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: proxy_chat_url
short_description: The chat completions URL of the proxy on its own host
version_added: 0.1.0
description:
  - Takes the proxy's TLS certificate (C(nginx_proxy_tls_certificate)) and returns
    C(https://<server name>:<port>/v1/chat/completions) when there is one (the name its certificate carries, verified
    against it), else C(http://127.0.0.1:<port>/v1/chat/completions).
  - Used by the C(factory_floor.llm.maintenance_window) role's probe, which runs on the proxy host.
options:
  _input:
    description: The certificate's path, empty for none.
    type: str
    required: true
  server_name:
    description: The name the certificate carries (C(nginx_proxy_tls_server_name), else the host's name).
    type: str
    required: true
  port:
    description: The proxy's port (C(site_proxy_port)).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Where the probe sends its chats
  ansible.builtin.debug:
    msg: "{{ nginx_proxy_tls_certificate | default('') | factory_floor.llm.proxy_chat_url('llm.example.org', 8443) }}"
  # with a certificate -> https://llm.example.org:8443/v1/chat/completions
"""

RETURN = r"""
_value:
  description: The URL.
  type: str
"""


def proxy_chat_url(certificate, server_name, port):
    """Filter entry point."""
    base = ("https://" + str(server_name)) if len(certificate) > 0 else "http://127.0.0.1"
    return "%s:%s/v1/chat/completions" % (base, port)


class FilterModule:
    """The proxy's chat URL."""

    def filters(self):
        return {"proxy_chat_url": proxy_chat_url}
