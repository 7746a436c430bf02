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
