# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where the nginx proxy reaches its backends. Pure logic, standard library only."""

from __future__ import annotations


def backend_endpoints(backends, hostvars, default_port):
    """``address:port`` the proxy reaches each of ``backends`` at: its ``nginx_proxy_backend_address`` (default its
    inventory name) and its ``vllm_port`` (default ``default_port``, ``site_engine_port``), as the upstream's
    templates write them. ``hostvars``: each host's variables (Ansible's, or any mappings)."""
    endpoints = []
    for host in backends or []:
        one = hostvars[host] if host in hostvars else {}
        address = one["nginx_proxy_backend_address"] if "nginx_proxy_backend_address" in one else host
        port = one["vllm_port"] if "vllm_port" in one else default_port
        endpoints.append("%s:%s" % (address, port))
    return endpoints
