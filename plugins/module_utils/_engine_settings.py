# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the vLLM engine base role derives from the inventory (roles/vllm/vars): the container's GPU, IPC
and /dev/shm options, the addresses of the proxy hosts that may reach the API port, and this host's
Prometheus file_sd targets.

Private to the collection; standard library only. The values are those the role's Jinja gave before
(tests/unit/roles/test_engine_vars_filters.py compares them).
"""

from __future__ import annotations

import re

from collections.abc import Mapping


def container_resource_args(engine, gpus, ipc, shm_size):
    """``--device=`` (podman, CDI) or ``--gpus=`` (docker) of ``gpus``, ``--ipc=`` and ``--shm-size=``, each
    only when its value is not empty."""
    args = []
    if len(gpus) > 0:
        args.append(("--device=%s" if engine == "podman" else "--gpus=%s") % (gpus,))
    if len(ipc) > 0:
        args.append("--ipc=%s" % (ipc,))
    if len(shm_size) > 0:
        args.append("--shm-size=%s" % (shm_size,))
    return args


def _item(value, key, default):
    """Jinja's ``map(attribute=key, default=default)`` on one value."""
    return value[key] if isinstance(value, Mapping) and key in value else default


def default_ipv4_addresses(hostvars, hosts):
    """The address of each host's default IPv4 interface (its gathered facts), in order; hosts without facts
    or without such an address left out."""
    found = []
    for host in hosts:
        address = _item(_item(_item(hostvars[host], "ansible_facts", None), "default_ipv4", {}), "address", "")
        if address:
            found.append(address)
    return found


def prometheus_targets(topology, host, head, address, port):
    """This host's Prometheus file_sd targets for the topology recorded: its API engine at ``address:port``
    when it serves one (every replica; in the split only the head, rank 0), else none."""
    if not (topology == "replicas" or host == head):
        return []
    return [{"targets": ["%s:%s" % (address, port)], "labels": {"host": host, "topology": topology}}]


class EngineSettingsError(Exception):
    """A value that cannot be derived (the role's Jinja failed on it too)."""


def link_interface_address(facts, interface):
    """This host's address on the direct link from its facts: the IPv4 address of ``interface`` when it is set
    and the facts hold it (an error when that interface has none), else the default IPv4 address, else ""."""
    if interface and interface in facts:
        address = _item(_item(facts[interface], "ipv4", None), "address", None)
        if address is None:
            raise EngineSettingsError("vllm_link_interface %s has no IPv4 address in this host's facts (ansible_facts['%s'])"
                                      % (interface, interface))
        return address
    return _item(_item(facts, "default_ipv4", None), "address", "")


def engine_images(image_info, units):
    """The image check's note: the image (container_image_info's ``image``) and, for each engine unit, what
    its container runs (container_image_info's ``containers``, by the container's name: the unit's without
    ``.service``)."""
    containers = image_info["containers"]
    return {"image": image_info["image"],
            "running": {unit: containers[re.sub(r"\.service$", "", unit)] for unit in units}}
