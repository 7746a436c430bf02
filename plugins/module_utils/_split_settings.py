# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a rank of the split derives from the inventory and the link check (roles/vllm_split/vars).

Private to the collection; standard library only. Each function gives what the role's Jinja gave
before, for the same inputs (tests/unit/roles/test_engine_vars_filters.py compares them): the
peculiarities of Jinja's filters (``int`` and ``float`` give 0 for what is no number, ``default(x, true)``
replaces every false value) are kept on purpose.
"""

from __future__ import annotations

import re

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int

_COLLECTIVE_ENV = re.compile("(NCCL|GLOO|UCX)_")
_ULIMIT_MEMLOCK = re.compile("--ulimit[= ]memlock")


def link_address(hostvars, host, interface):
    """``host``'s address on the direct link: its ``vllm_link_address`` when set (and not empty), else the
    IPv4 address of its link interface (its own ``vllm_link_interface``, else ``interface``) from its facts;
    "" when neither is known, or when ``host`` is "" or no host of ``hostvars``."""
    if not host or host not in hostvars:
        return ""
    host_vars = hostvars[host]
    if host_vars.get("vllm_link_address"):
        return host_vars["vllm_link_address"]
    facts = host_vars["ansible_facts"] if "ansible_facts" in host_vars else {}
    name = host_vars["vllm_link_interface"] if "vllm_link_interface" in host_vars else interface
    return facts.get(name, {}).get("ipv4", {}).get("address", "")


def tightest_gpu_memory_utilization(hostvars, hosts, fallback):
    """The smallest ``vllm_gpu_memory_utilization`` the ``hosts`` set (as floats), else ``fallback``
    (also when that smallest is 0: Jinja's ``default(fallback, true)``)."""
    found = []
    for host in hosts:
        host_vars = hostvars[host]
        if "vllm_gpu_memory_utilization" in host_vars and host_vars["vllm_gpu_memory_utilization"] is not None:
            found.append(jinja_float(host_vars["vllm_gpu_memory_utilization"]))
    return (min(found) if found else None) or fallback


def link_ports(master_port, collective_port, is_head):
    """The ports the link check wants free on the head (none on another rank)."""
    if not is_head:
        return []
    return [{"port": jinja_int(master_port), "variable": "vllm_split_master_port",
             "purpose": "the split's rendezvous (--master-port) on the head"},
            {"port": jinja_int(collective_port), "variable": "vllm_split_link_collective_port",
             "purpose": "the link check's all-reduce"}]


def rank_settings(inputs):
    """A rank's link settings from ``inputs`` (runtime, rdma, link, image_nccl_library, container_run_args,
    link_address, link_interface, nccl_debug, env, env_host): ``hca`` (NCCL_IB_HCA's devices), ``nccl_host``
    (the host's NCCL library), ``nccl_target`` (where the rank loads it), ``run_args`` (the container's
    options), ``env`` (the rank's environment) and ``collective_env`` (the all-reduce check's)."""
    runtime = inputs["runtime"]
    link = inputs["link"]
    hca = link.get("hca", []) if inputs["rdma"] != "disabled" else []
    nccl_host = link.get("nccl_library", "")
    nccl_target = (inputs["image_nccl_library"] or nccl_host) if runtime == "container" else nccl_host

    run_args = []
    if runtime == "container":
        if len(hca) > 0:
            run_args += ["--device=%s" % node for node in link.get("device_nodes", [])] + ["--cap-add=IPC_LOCK"]
            if not [arg for arg in inputs["container_run_args"] if _ULIMIT_MEMLOCK.match(arg)]:
                run_args.append("--ulimit=memlock=-1")
        if len(nccl_host) > 0:
            run_args.append("--volume=%s:%s:ro" % (nccl_host, nccl_target))

    env = {"VLLM_HOST_IP": inputs["link_address"], "GLOO_SOCKET_IFNAME": inputs["link_interface"],
           "NCCL_SOCKET_IFNAME": inputs["link_interface"]}
    if len(hca) > 0:
        env["NCCL_IB_HCA"] = ",".join(str(device) for device in hca)
    if inputs["rdma"] == "disabled":
        env["NCCL_IB_DISABLE"] = "1"
    if len(inputs["nccl_debug"]) > 0:
        env.update({"NCCL_DEBUG": inputs["nccl_debug"], "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    if len(nccl_host) > 0:
        env["VLLM_NCCL_SO_PATH"] = nccl_target
    if runtime == "venv" and len(nccl_host) > 0:
        env["LD_PRELOAD"] = nccl_host

    user_env = dict(inputs["env"])
    user_env.update(inputs["env_host"])
    collective_env = {key: value for key, value in user_env.items() if _COLLECTIVE_ENV.match(key)}
    collective_env.update((key, value) for key, value in env.items() if key != "VLLM_HOST_IP")
    collective_env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    return {"hca": hca, "nccl_host": nccl_host, "nccl_target": nccl_target, "run_args": run_args,
            "env": env, "collective_env": collective_env}
