#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_record_write
short_description: Write which topology (and model) an engine host was brought to, by whom and when, when it changes
version_added: 0.1.0
description:
  - "Writes the host's topology record (one JSON object: C(topology), C(since), C(by), C(playbook), C(run), C(note),
    C(model)) that M(factory_floor.llm.topology_record) reads, creating its directory (root's, C(0755)); the file is
    root's, C(0644)."
  - "Only when it changes, so a C(deploy.yml) re-run changes nothing: when O(record) (M(factory_floor.llm.topology_record)'s
    result on this host) does not say V(agrees), when C(vllm_topology_record_model) is set and the record names
    another model, or always with C(vllm_topology_record_always)."
  - "The record's values are the variables C(vllm_topology_record_topology), C(vllm_topology_record_since) (seconds
    since the epoch, the controller's clock), C(vllm_topology_record_by), C(vllm_topology_record_playbook),
    C(vllm_topology_record_run), C(vllm_topology_record_note), C(vllm_topology_record_model) and, after a group move
    (C(move_groups.yml)), C(vllm_topology_record_grouping) (the site's grouping, a list of host lists, rank 0 first),
    C(vllm_topology_record_group) (this host's group) and C(vllm_topology_record_rank) (its rank in it, a count from
    0) - written only when the grouping is given (C(plugins/module_utils/_group_record.py) reads them), which the action
    plugin reads itself as the task sees them (the C(factory_floor.llm.vllm) role's C(topology_record) entry point);
    the optional ones default to empty, except C(by) and C(run), which default to the maintenance window's
    (C(maintenance_window_run.by) and C(.id)) where one is open."
  - The rule and the content are C(plugins/module_utils/_topology_record_write.py)'s; the action plugin runs
    C(ansible.builtin.file) and C(ansible.builtin.copy) on the host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  path:
    description: The record's file on the host (the C(factory_floor.llm.vllm) role's C(_vllm_topology_record_file)).
    type: path
    required: true
  record:
    description: M(factory_floor.llm.topology_record)'s result on this host (its C(state) and C(model_state)).
    type: dict
    required: true
seealso:
  - module: factory_floor.llm.topology_record
"""

EXAMPLES = r"""
- name: Record the topology, who, when, the playbook and the run
  factory_floor.llm.topology_record_write:
    path: /var/lib/factory-floor/topology.json
    record: "{{ vllm_topology_record }}"
  vars:
    vllm_topology_record_topology: replicas
    vllm_topology_record_playbook: deploy.yml
    vllm_topology_record_since: "{{ now().timestamp() }}"
"""

RETURN = r"""
written:
  description: The record was written (would be, in check mode) - it changed, or it is written always.
  returned: always
  type: bool
  sample: true
"""
