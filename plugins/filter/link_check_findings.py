# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: link_check_findings
short_description: The link check's findings, as link_check.yml saves them
version_added: 0.1.0
description:
  - Reads what the split's link check read on each host (C(vllm_split_link), the C(factory_floor.llm.vllm_split)
    role's C(link_check) entry point) from C(hostvars) on the controller and puts it next to the all-reduce's report
    and the running engine's transport report - the file C(link_check_report_file) names.
options:
  _input:
    description: Ansible's C(hostvars) (or a dict of each host's variables).
    type: dict
    required: true
  hosts:
    description: The hosts whose link was read (inventory names), for example C(ansible_play_hosts).
    type: list
    elements: str
    required: true
  collective:
    description: The all-reduce's report (C(vllm_split_link_collective_report)).
    type: dict
    default: {}
  transport:
    description: The running engine's transport report (C(vllm_split_transport_report)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Save the findings on the controller
  ansible.builtin.copy:
    content: "{{ hostvars | factory_floor.llm.link_check_findings(ansible_play_hosts) | to_nice_json }}"
    dest: /tmp/link-check.json
    mode: "0644"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - C(hosts) (per host its C(vllm_split_link), C({}) where it has none), C(collective) and C(transport) (O(collective)
      and O(transport) as given).
  type: dict
"""

from collections.abc import Iterable, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import link_check_findings as _findings


_NOT_GIVEN = object()


def link_check_findings(hostvars, hosts, collective=_NOT_GIVEN, transport=_NOT_GIVEN):
    """Filter entry point (O(collective) and O(transport) as given, null included; C({}) when not given)."""
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("link_check_findings expects hostvars (a dict), got %s" % type(hostvars).__name__)
    if isinstance(hosts, (str, Mapping)) or not isinstance(hosts, Iterable):
        raise AnsibleFilterError("link_check_findings expects the hosts (a list), got %s" % type(hosts).__name__)
    return _findings(hostvars, list(hosts), {} if collective is _NOT_GIVEN else collective,
                     {} if transport is _NOT_GIVEN else transport)


class FilterModule:
    """The split's link check findings file."""

    def filters(self):
        return {"link_check_findings": link_check_findings}
