# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: prometheus_hosts
short_description: The Prometheus hosts the engine hosts name, each once
version_added: 0.1.0
description:
  - Reads each engine host's C(vllm_prometheus_hosts) (the inventory names of the hosts that run Prometheus) from
    C(hostvars) on the controller and returns them in the engine hosts' order, each once.
  - A host that does not set it names none; nested lists are opened and null items left out, and names are compared
    as Ansible's C(unique) filter compares them (letter case ignored, the first spelling kept).
options:
  _input:
    description: Ansible's C(hostvars) (or a dict of each host's variables).
    type: dict
    required: true
  engines:
    description: The engine hosts (inventory names), for example C(groups['gb10']).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Install the alert rules on the Prometheus hosts only
  ansible.builtin.include_role:
    name: factory_floor.llm.monitoring
  when: inventory_hostname in hostvars | factory_floor.llm.prometheus_hosts(groups['gb10'] | default([]))
"""

RETURN = r"""
_value:
  description: The Prometheus hosts' inventory names, for example C(['prom-1']); empty when no engine host names one.
  type: list
  elements: str
"""

from collections.abc import Iterable, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import prometheus_hosts as _prometheus_hosts


def prometheus_hosts(hostvars, engines):
    """Filter entry point."""
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("prometheus_hosts expects hostvars (a dict), got %s" % type(hostvars).__name__)
    if isinstance(engines, (str, Mapping)) or not isinstance(engines, Iterable):
        raise AnsibleFilterError("prometheus_hosts expects the engine hosts (a list), got %s" % type(engines).__name__)
    return _prometheus_hosts(hostvars, list(engines))


class FilterModule:
    """The Prometheus hosts of the site."""

    def filters(self):
        return {"prometheus_hosts": prometheus_hosts}
