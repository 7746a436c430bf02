# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: split_rank
short_description: A host's rank in the split - its group, rank, the group's size and head, the other ranks
version_added: 0.1.0
description:
  - Takes the split's hosts (C(groups[vllm_split_group]), one group) or a grouping of several split groups
    (C([[spark-a, spark-b], [spark-c, spark-d]]), each group its own rendezvous on its own head) and returns where
    O(host) runs.
  - A group's head (rank 0, the host that serves the API and holds the rendezvous, vLLM's C(--master-addr)) is
    O(head) when it is in that group, else the group's first host; the other hosts follow in the group's order
    (C(--node-rank) 1 to N-1, each C(--headless)). C(nnodes) is vLLM's C(--nnodes), the group's size.
  - Computed by C(plugins/module_utils/_engine_groups.py) (C(split_rank)); the C(factory_floor.llm.vllm_split)
    role's C(_vllm_split_member).
options:
  _input:
    description: The split's hosts (a list of inventory names) or a list of such lists (several groups).
    type: list
    required: true
  host:
    description: The host whose rank is wanted (C(inventory_hostname)).
    type: str
    required: true
  head:
    description: The head the inventory names (C(vllm_split_head)); one not in the host's group is not its head.
    type: str
    default: null
"""

EXAMPLES = r"""
- name: This host's rank
  ansible.builtin.debug:
    msg: "{{ groups['gb10'] | factory_floor.llm.split_rank(inventory_hostname, vllm_split_head) }}"
  # [spark-a, spark-b, spark-c], spark-c, spark-b ->
  # {group: [spark-b, spark-a, spark-c], rank: 2, nnodes: 3, head: spark-b, is_head: false,
  #  others: [{host: spark-b, rank: 0}, {host: spark-a, rank: 1}], peer: spark-b}
"""

RETURN = r"""
_value:
  description:
    - C(group) (the group's hosts in rank order), C(rank) (int, C(--node-rank); null for a host in no group),
      C(nnodes) (int, C(--nnodes); 0 for a host in no group), C(head) (the group's rank 0; "" for a host in no
      group), C(is_head) (bool), C(others) (C(host) and C(rank) of every other rank, in rank order) and C(peer)
      (the host this rank's link check pings - the head from every other rank, rank 1 from the head; "" for a host
      in no group).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import split_rank as _rank


def split_rank(hosts, host, head=None):
    """Filter entry point."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("split_rank expects the split's hosts (a list, or a list of host lists), got %r"
                                 % (hosts,))
    return _rank([list(g) if isinstance(g, (list, tuple)) else str(g) for g in hosts], str(host),
                 str(head) if head else None)


class FilterModule:
    """A host's rank in the split."""

    def filters(self):
        return {"split_rank": split_rank}
