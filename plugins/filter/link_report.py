# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: link_report
short_description: Judge the split's direct link from every rank's observations, naming each problem's host and fix
version_added: 0.1.0
description:
  - Runs on the controller. Puts together what C(factory_floor.llm.link_check) read on each of the split's hosts,
    what C(factory_floor.llm.link_collective) measured, or what the running engine's log says NCCL chose, and returns
    every problem with the host it is on, what is wrong and the fix, plus one summary line per host.
  - "O(kind=link): the link interface missing, down or without carrier; C(vllm_link_address) on another interface or on
    none; traffic to the peer leaving by another interface; the peer not answering a don't-fragment ping at the MTU (or
    the packet not leaving at that size); MTUs that differ between the ends (or from O(mtu)); one address on two hosts;
    a port the split needs taken; RDMA devices named in C(vllm_split_nccl_ib_hca) that the host lacks; none at all, or no
    C(/dev/infiniband), while C(vllm_split_rdma) is C(required); a C(vllm_split_nccl_library) path that does not exist."
  - "O(kind=collective): a rank that failed (the fix depends on why: the rendezvous not reached, an image of another
    architecture, NCCL failing, the image missing); NCCL choosing sockets while C(vllm_split_rdma) is C(required); a bus
    bandwidth below O(min_busbw_gb_s)."
  - "O(kind=engine): the transport NCCL logged in the running engine (C(level) C(ok), C(warn) for sockets with RDMA C(auto),
    C(refuse) for sockets or nothing with RDMA C(required), C(info) with no NCCL line - vLLM's CPU build)."
options:
  _input:
    description:
      - Per host of the split, the registered result of the module for O(kind) - C(link_check) for V(link) and V(engine),
        C(link_collective) for V(collective).
      - Or, with O(hostvars) and O(registered), the hosts of the split (inventory names) - the filter reads the result each
        one registered (none, an empty result).
    type: raw
    required: true
  hostvars:
    description: With a list of hosts as input, every host's variables (C(hostvars)); the first positional argument.
    type: dict
  registered:
    description: With a list of hosts as input, the name each host registered its result under; the second positional argument.
    type: str
  kind:
    description: What is judged.
    type: str
    choices: [link, collective, engine]
    default: link
  mtu:
    description: The MTU both ends must have (C(vllm_link_mtu)); null only asks that they be equal.
    type: int
  runtime:
    description: C(container) or C(venv) (C(vllm_runtime)); the container needs the RDMA device files.
    type: str
    default: container
  rdma:
    description: C(vllm_split_rdma) (V(collective), V(engine)).
    type: str
    default: auto
  interface:
    description: C(vllm_link_interface), for the messages (V(collective)).
    type: str
    default: ""
  head:
    description: The host running rank 0 (V(collective)).
    type: str
    default: ""
  master:
    description: Rank 0's C(address:port) (V(collective)).
    type: str
    default: ""
  min_busbw_gb_s:
    description: The lowest acceptable bus bandwidth in GB/s (V(collective)); 0 reports only.
    type: float
    default: 0
"""

EXAMPLES = r"""
- name: Refuse a link that would not carry the split
  ansible.builtin.fail:
    msg: "{{ report.message }}"
  vars:
    report: "{{ ansible_play_hosts | factory_floor.llm.link_report(hostvars, '__link') }}"
  when: not report.ok
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - C(ok) (bool), C(problems) (each C(host), C(what), C(fix)), C(message) (a title and one line per problem), C(summary)
      (one line per host; for V(collective) with the bandwidth and transport), C(level) and C(text) for V(engine), and for
      V(collective) C(busbw_gb_s) (the lowest of the ranks) and C(transport).
  type: dict
"""

from collections.abc import Iterable, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _split_link as sl
from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import per_host


def link_report(results, hostvars=None, registered=None, kind="link", mtu=None, runtime="container", rdma="auto",
                interface="", head="", master="", min_busbw_gb_s=0):
    """Filter entry point."""
    if (hostvars is None) != (registered is None):
        raise AnsibleFilterError("link_report takes hostvars and registered together")
    if registered is not None:
        if isinstance(results, (str, Mapping)) or not isinstance(results, Iterable):
            raise AnsibleFilterError("link_report with registered expects host names (a list), got %s"
                                     % type(results).__name__)
        results = per_host(hostvars, list(results), registered)
    if not isinstance(results, Mapping):
        raise AnsibleFilterError("link_report expects a dict of each host's result, got %s" % type(results).__name__)
    if kind not in sl.KINDS:
        raise AnsibleFilterError("link_report: kind must be link, collective or engine, got %r" % (kind,))
    return sl.report(kind, results, mtu=mtu, runtime=runtime, rdma=rdma, interface=interface, head=head, master=master,
                     min_busbw_gb_s=min_busbw_gb_s)


class FilterModule:
    """The split's direct link, judged on the controller."""

    def filters(self):
        return {"link_report": link_report}
