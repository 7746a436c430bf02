#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deploy_restart_check
short_description: Refuse a deploy whose restarts would meet a rejected API key, or take the only replica away
version_added: 0.1.0
description:
  - C(deploy.yml)'s preflight, on every engine and proxy host, before anything changes. On an engine host of the
    replicas (C(topology) V(replicas), C(groups[site_engine_group])) whose configuration changed
    (C(vllm_service_plan.restart_pending), the engine plan's), asks its engine once whether it serves - a 1-token
    generation with M(factory_floor.llm.vllm_health) on the host (V(generate), C(generate_timeout) 60 seconds,
    C(timeout) 0, no wait) at the site's endpoint (the C(site) role's C(_site_vllm_endpoint) - url, key, served name).
    Other hosts are not asked.
  - Fails with the probe's message when it could not be asked (a configuration error on this side); an engine that
    serves, one that does not serve yet and one that rejects the key go on to the refusals.
  - Refuses (the M(factory_floor.llm.vllm_check) module's V(restart) check, in its words) an engine that rejects
    C(vllm_api_key) (HTTP 401 or 403; naming the two-run key rotation with C(vllm_api_key_next)), and restarting the
    only replica while it serves unless C(vllm_restart_force).
  - Runs on the controller through its action plugin, which reads the variables it decides on itself, as the task sees
    them (C(inventory_hostname), C(topology), C(groups), C(site_engine_group), C(vllm_service_plan),
    C(vllm_restart_force), C(playbook_dir)); no key is returned or shown.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
seealso:
  - module: factory_floor.llm.vllm_check
  - module: factory_floor.llm.vllm_health
options: {}
"""

EXAMPLES = r"""
- name: Refuse a new API key the running engines reject, and restarting the only replica while it serves, unless forced
  factory_floor.llm.deploy_restart_check:
"""

RETURN = r"""
serving:
  description:
    - M(factory_floor.llm.vllm_health)'s result for this host's engine (C(status), C(reason), ...); empty when it was not
      asked (not a replica whose configuration changed, or a proxy host).
  returned: always
  type: dict
errors:
  description:
    - Every refusal, as M(factory_floor.llm.vllm_check)'s RV(factory_floor.llm.vllm_check#module:errors) (C(check)
      V(api_key_rejected) or V(only_replica), C(hosts), C(variables), C(message)); empty when there is none. On failure
      C(msg) holds the same messages (numbered when there are several).
  returned: always
  type: list
  elements: dict
"""
