#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: link_collective
short_description: One rank of a timed torch.distributed all-reduce over the split's link, inside the image that will serve
version_added: 0.1.0
description:
  - Runs one rank of an O(world_size)-rank C(torch.distributed) all-reduce on this host - inside a container of O(image) run the
    way the split's container is (host network, O(run_args) such as the GPU, IPC, the RDMA devices and the host's NCCL,
    and O(env) such as C(NCCL_SOCKET_IFNAME), C(GLOO_SOCKET_IFNAME), C(NCCL_IB_HCA)), or with the virtualenv's Python
    (O(runtime) C(venv)) - and returns how long it took, the bandwidth and, with NCCL, the transport NCCL logged
    (C(NCCL_DEBUG=INFO) in O(env)).
  - Every rank must run at the same time; run it on every host of the group in one task (the C(vllm_split) role's
    C(link) entry point runs it with C(async) so that the ranks meet even with C(forks) 1). Rank 0 listens on
    O(master_addr):O(master_port) (torch's TCPStore); all then open Gloo's or NCCL's connections over the interfaces
    O(env) names.
  - The first all-reduce (connection set-up) is not timed; then O(iterations) all-reduces of O(size_mib) MiB of float32
    are, and a last one checks the sums. Bandwidth is nccl-tests' - C(algbw) = bytes / time per all-reduce, C(busbw) =
    C(algbw) x 2(n-1)/n - in GB/s (10^9 bytes).
  - Changes nothing on the host; the container is removed when it ends (C(--rm)), and a container of the same name left
    by an interrupted run is removed first.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.image_runner
options:
  run_args:
    description: Options of the container engine's C(run) the split's container gets (GPU, IPC or /dev/shm, RDMA devices, capabilities, the host's NCCL).
    type: list
    elements: str
    default: []
  env:
    description: The environment of the rank (the link's interface names, NCCL's settings). Given on the command line - no secrets.
    type: dict
    default: {}
  name:
    description: The container's name.
    type: str
    default: factory-floor-link-check
  rank:
    description: This host's rank, 0 (it listens) to O(world_size) - 1 (the C(vllm_split) role's C(--node-rank)).
    type: int
    required: true
  world_size:
    description: Ranks taking part (the C(vllm_split) role's group size, C(--nnodes)).
    type: int
    default: 2
  master_addr:
    description: Rank 0's address on the link.
    type: str
    required: true
  master_port:
    description: The TCP port rank 0 listens on for the rendezvous.
    type: int
    required: true
  backend:
    description: C(nccl) (GPU hosts), C(gloo) (CPU), or C(auto) - C(nccl) when O(gpu), else C(gloo).
    type: str
    choices: [auto, nccl, gloo]
    default: auto
  gpu:
    description: Whether the rank has a GPU (for O(backend) C(auto)); null looks for C(/dev/nvidiactl) on the host.
    type: bool
  size_mib:
    description: Size of the tensor reduced, in MiB.
    type: float
    default: 64
  iterations:
    description: All-reduces timed.
    type: int
    default: 20
  timeout:
    description:
      - Seconds the rank waits for the other and for each collective (torch's C(init_process_group) timeout); the whole
        run is cut at twice that plus 60.
    type: int
    default: 120
"""

EXAMPLES = r"""
- name: One rank of the all-reduce in the vLLM image, both hosts at once
  factory_floor.llm.link_collective:
    runtime: container
    image: vllm-gb10:0.32.0
    run_args: [--gpus=all, --ipc=host, --device=/dev/infiniband, --cap-add=IPC_LOCK, --ulimit=memlock=-1]
    env: {NCCL_SOCKET_IFNAME: enp1s0f1np1, GLOO_SOCKET_IFNAME: enp1s0f1np1, NCCL_IB_HCA: "rocep1s0f1,roceP2p1s0f1",
          NCCL_DEBUG: INFO, NCCL_DEBUG_SUBSYS: "INIT,NET"}
    rank: "{{ 0 if inventory_hostname == 'spark-1' else 1 }}"
    master_addr: 10.10.10.1
    master_port: 29501
  async: 300
  poll: 5
"""

RETURN = r"""
ok:
  description: The all-reduce ran and its sums were right.
  returned: always
  type: bool
backend:
  description: The backend used (C(nccl) or C(gloo)).
  returned: always
  type: str
rank:
  description: This host's rank.
  returned: always
  type: int
size_mib:
  description: The tensor's size, MiB.
  returned: always
  type: float
iterations:
  description: All-reduces timed.
  returned: always
  type: int
seconds:
  description: The timed loop, seconds.
  returned: when ok
  type: float
seconds_per_iteration:
  description: One all-reduce, seconds.
  returned: when ok
  type: float
init_seconds:
  description: From the start of the rank until both ranks had met and set up their connections, seconds.
  returned: when ok
  type: float
algbw_gb_s:
  description: Algorithm bandwidth, GB/s (10^9 bytes per second).
  returned: when ok
  type: float
busbw_gb_s:
  description: Bus bandwidth (what the link carried), GB/s; x 8 for Gbit/s.
  returned: when ok
  type: float
  sample: 22.4
transport:
  description: What NCCL logged (C(transport) C(rdma), C(socket) or C(unknown); C(network), C(devices), C(version), C(warnings), C(evidence)).
  returned: always
  type: dict
torch:
  description: torch's version in the image.
  returned: when ok
  type: str
nccl_version:
  description: NCCL's version torch reports (NCCL backend).
  returned: when ok
  type: str
error:
  description: Why it failed; empty when ok.
  returned: always
  type: str
command:
  description: The command run (options and environment names are not secret).
  returned: always
  type: list
  elements: str
log_tail:
  description: The last 30 lines the rank printed.
  returned: always
  type: list
  elements: str
"""

import inspect
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _collective_probe
from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            lc.RUNNER_SPEC,
            run_args=dict(type="list", elements="str", default=[]),
            env=dict(type="dict", default={}),
            name=dict(type="str", default="factory-floor-link-check"),
            rank=dict(type="int", required=True),
            world_size=dict(type="int", default=2),
            master_addr=dict(type="str", required=True),
            master_port=dict(type="int", required=True),
            backend=dict(type="str", choices=["auto", "nccl", "gloo"], default="auto"),
            gpu=dict(type="bool"),
            size_mib=dict(type="float", default=64),
            iterations=dict(type="int", default=20),
            timeout=dict(type="int", default=120),
        ),
        required_if=[("runtime", "container", ("image",))],
        supports_check_mode=True,
    )
    params = module.params
    backend = params["backend"]
    if backend == "auto":
        gpu = params["gpu"] if params["gpu"] is not None else os.path.exists("/dev/nvidiactl")
        backend = "nccl" if gpu else "gloo"
    env = {str(k): str(v) for k, v in (params["env"] or {}).items()}
    base = dict(changed=False, ok=False, backend=backend, rank=params["rank"], size_mib=params["size_mib"],
                iterations=params["iterations"], transport={}, error="", command=[], log_tail=[])

    workdir = tempfile.mkdtemp(prefix="factory-floor-link-")
    try:
        os.chmod(workdir, 0o755)
        probe = os.path.join(workdir, "collective_probe.py")
        with open(probe, "w", encoding="utf-8") as handle:
            handle.write(inspect.getsource(_collective_probe))
        os.chmod(probe, 0o644)
        argv = lc.collective_argv(
            params["runtime"], probe, params["rank"], params["master_addr"], params["master_port"], backend,
            params["size_mib"], params["iterations"], params["timeout"], world_size=params["world_size"],
            engine=params["engine"], image=params["image"], run_args=params["run_args"], env=env, name=params["name"],
            python=params["python"], venv=params["venv"])
        base["command"] = argv
        if params["runtime"] == "container":
            # An interrupted run's container would hold the name.
            module.run_command([params["engine"], "rm", "-f", params["name"]])
            run_env = None
        else:
            run_env = dict(os.environ, **env)
        rc, out, err, timed_out = lc.run_with_timeout(argv, params["timeout"] * 2 + 60, env=run_env)
        if timed_out and params["runtime"] == "container":
            module.run_command([params["engine"], "rm", "-f", params["name"]])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    probe_result, transport = lc.parse_probe_output(out, err)
    base["transport"] = transport
    base["log_tail"] = (out.splitlines() + err.splitlines())[-30:]
    if probe_result is None:
        tail = " | ".join(line.strip() for line in (err or out).splitlines()[-6:] if line.strip())
        base["error"] = ("timed out after %s s" % (params["timeout"] * 2 + 60)) if timed_out else (
            "the rank printed no result (rc %s): %s" % (rc, tail[:1500] or "no output"))
        module.exit_json(**base)
    base.update(probe_result)
    base["backend"] = backend
    base["transport"] = transport
    module.exit_json(**base)


if __name__ == "__main__":
    main()
