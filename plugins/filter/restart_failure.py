# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: restart_failure
short_description: Why deploy.yml's rolling restart stops at a replica whose restart failed, in words
version_added: 0.1.0
description:
  - The sentence the C(factory_floor.llm.rolling_restart) role fails with when a replica did not come back with its new
    configuration - what failed, which other replicas serve, that the replicas not restarted yet keep their old
    configuration, and what to do (its journal, then C(deploy.yml) again).
options:
  _input:
    description: The replica, an inventory name (C(inventory_hostname)).
    type: str
    required: true
  change:
    description: What changed in its configuration (C(vllm_service_plan.change), the engine plan's words).
    type: str
    required: true
  error:
    description: The failed task's message (C(ansible_failed_result.msg)), cut to 600 characters; empty, none.
    type: str
    default: ""
  carriers:
    description: The other replicas that serve (the C(factory_floor.llm.switch_plan) module's C(carriers)).
    type: list
    elements: str
    default: []
  unit:
    description: The replicas' systemd unit (C(_site_topologies.replicas.unit)).
    type: str
    default: vllm-replica.service
  playbook_dir:
    description: The directory of the playbook that runs now (Ansible's C(playbook_dir)), to name C(deploy.yml) as run.
    type: str
"""

EXAMPLES = r"""
- name: Stop the rolling restart here
  ansible.builtin.fail:
    msg: "{{ inventory_hostname | factory_floor.llm.restart_failure('the image', ansible_failed_result.msg, ['spark-b']) }}"
"""

RETURN = r"""
_value:
  description: The sentence.
  type: str
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._rolling_restart import failure_message


def restart_failure(host, change, error="", carriers=(), unit="vllm-replica.service", playbook_dir=None):
    """Filter entry point."""
    return failure_message(str(host), change, error or "", list(carriers or []), unit, playbook_dir)


class FilterModule:
    """deploy.yml's rolling restart, stopped."""

    def filters(self):
        return {"restart_failure": restart_failure}
