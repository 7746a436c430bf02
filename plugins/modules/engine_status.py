#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_status
short_description: Read what an engine host runs, for the status view - each read kept, failed or not
version_added: 0.1.0
description:
  - The reads of the C(factory_floor.llm.site_view) role's C(status) entry point, on one engine host, in this order -
    C(systemctl show) of O(units) (also in check mode; it only reads), the topology record
    (M(factory_floor.llm.topology_record) with O(record_path), O(topology), O(inventory_sources), O(playbook_dir)),
    whether the engine serves (M(factory_floor.llm.vllm_health) at O(endpoint), probe C(models) - any model, the view
    reports what it serves - once, with no wait), what each unit's process was started with
    (M(factory_floor.llm.vllm_engine_info)) and, with O(runtime) C(container), the engines' containers
    (M(factory_floor.llm.container_image_info)).
  - Each read is kept as a task with C(failed_when false) registers it - a read that fails is its failure, the others
    go on; M(factory_floor.llm.site_status) makes sense of them on the controller.
  - The action plugin runs the modules on the host in turn; the module has no code of its own.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  units:
    description: The engine units, the replicas' then the split's (the C(vllm) role's C(_vllm_units)).
    type: list
    elements: str
    required: true
  topology:
    description: The inventory's topology, which the host's record is compared with.
    type: str
    required: true
  record_path:
    description: The topology record on the host (the C(vllm) role's C(_vllm_topology_record_file)).
    type: path
    required: true
  inventory_sources:
    description: The run's inventory sources (C(ansible_inventory_sources)), named in the record's messages.
    type: list
    elements: str
    default: []
  playbook_dir:
    description: The run's C(playbook_dir), to name playbooks in the record's messages as the operator runs them.
    type: str
    default: ""
  endpoint:
    description:
      - The engine's endpoint as the C(site) role's C(_site_vllm_endpoint) gives it - C(url) (the URL the host reaches
        its engine at) and C(api_key) (left out when empty; never shown). Other keys are not read.
    type: dict
    required: true
  runtime:
    description: C(vllm_runtime) - C(venv) or C(container); with C(container) the containers are read.
    type: str
    required: true
  container_engine:
    description: The container engine's command or path (the C(vllm) role's C(_vllm_container_engine_path)).
    type: str
    default: docker
  containers:
    description: The engines' container names (the C(vllm) role's C(_vllm_container_names)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Read the engine units, the topology record, whether the engine serves and what each engine unit runs
  factory_floor.llm.engine_status:
    units: [vllm-replica.service, vllm-split.service]
    topology: replicas
    record_path: /var/lib/factory-floor/topology.json
    endpoint: {url: "http://127.0.0.1:8000"}
    runtime: venv
  register: read
"""

RETURN = r"""
runtime:
  description: O(runtime).
  returned: always
  type: str
  sample: venv
units:
  description: C(systemctl show -p Id,LoadState,ActiveState,SubState,Result,UnitFileState,NRestarts) of O(units), as text (empty when it could not run).
  returned: always
  type: str
  sample: "Id=vllm-replica.service\nLoadState=loaded\nActiveState=active\n..."
record:
  description: M(factory_floor.llm.topology_record)'s result.
  returned: always
  type: dict
health:
  description: M(factory_floor.llm.vllm_health)'s result.
  returned: always
  type: dict
engine:
  description: M(factory_floor.llm.vllm_engine_info)'s result per unit, each with C(item), the unit, as a loop registers it.
  returned: always
  type: list
  elements: dict
containers:
  description: M(factory_floor.llm.container_image_info)'s C(containers) (empty with the C(venv) runtime).
  returned: always
  type: dict
"""
