# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the nginx_proxy role reads of its backends and its drain files. Pure logic, standard library only."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping


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


def drain_holders(files):
    """Who drained each engine, by the drain file's name (the engine's inventory name): ``files`` are the drain
    files' ``slurp`` results (a loop's, each with its ``item.path``). A file holds the ``drain`` entry point's JSON
    (its ``holder``), or any text, which is the holder (empty for an operator's ``touch``)."""
    holders = {}
    for file in files or []:
        if not isinstance(file, Mapping):
            continue
        text = base64.b64decode(file.get("content") or "").decode("utf-8").strip()
        holder = text
        if re.match("[{]", text):
            holder = json.loads(text).get("holder", "")
        holders[os.path.basename(file["item"]["path"])] = holder
    return holders
