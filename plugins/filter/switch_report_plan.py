# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: switch_report_plan
short_description: The plan a topology switch's report reads, from the final decision and what the last steps saw
version_added: 0.1.0
description:
  - Takes the switch's final decision (M(factory_floor.llm.switch_plan)'s result, C(vllm_switch_plan)) and returns
    it with C(inventory), C(site) and C(record_errors) (the C(switch_record) entry point's comparison
    C(__vllm_switch_site) and each host's C(__vllm_switch_record_error)), C(lost_hosts) (the decision's and every
    host of C(lost_locks)), C(lost_locks) (the C(switch_release) entry point's C(maintenance_window_unlocked)),
    C(run), C(rotation_error) and C(inventory_sources) - the C(plan) option of M(factory_floor.llm.switch_report).
    What the last steps left is read from each engine host of O(engine_hosts) in O(hostvars).
  - Used by the C(switch_close) entry point of the C(factory_floor.llm.topology_switch) role.
options:
  _input:
    description: The final decision (C(vllm_switch_plan)).
    type: dict
    required: true
  hostvars:
    description: Ansible's C(hostvars), where the engine hosts' variables are read.
    type: dict
    default: {}
  engine_hosts:
    description: The engine hosts (C(groups[site_engine_group])), in inventory order.
    type: list
    elements: str
    default: []
  run:
    description: The run's id (C(maintenance_window_run.id)).
    type: str
    default: ""
  rotation_error:
    description: Why the serving engines did not join the proxy's rotation; empty when they did.
    type: str
    default: ""
  inventory_sources:
    description: The inventory sources (C(ansible_inventory_sources)), for what the inventory must say.
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Build the report
  factory_floor.llm.switch_report:
    plan: "{{ vllm_switch_plan | factory_floor.llm.switch_report_plan(hostvars, groups['gb10'], run_id) }}"
"""

RETURN = r"""
_value:
  description: The decision with what the last steps saw.
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import outcome_reads, report_plan


def switch_report_plan(plan, hostvars=None, engine_hosts=None, run="", rotation_error="", inventory_sources=None):
    """Filter entry point."""
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("switch_report_plan expects the switch's decision (a dict), got %s"
                                 % type(plan).__name__)
    site, lost_locks = outcome_reads(hostvars or {}, engine_hosts or ())
    return report_plan(plan, site, lost_locks, run, rotation_error, inventory_sources or ())


class FilterModule:
    """The plan of a topology switch's report."""

    def filters(self):
        return {"switch_report_plan": switch_report_plan}
