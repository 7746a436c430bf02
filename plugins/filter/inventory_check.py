# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: inventory_check
short_description: Whether the inventory has the engine (and proxy) hosts a playbook runs on, and what to check when not
version_added: 0.1.0
description:
  - Runs on the controller, reads the inventory only. An C(ansible-playbook -i) path that does not exist, that Ansible
    cannot parse, or whose hosts are under other group names than C(gb10) and C(proxy) (the names the playbooks'
    C(hosts:) lines use) makes Ansible only warn; every play is then skipped and the run exits 0 having done nothing.
  - Returns C(ok) false and one line naming what was found (no file at the path, no host, the group without a host) and
    what to check - the C(-i) path, the group names, C(inventory/example/hosts.yml) - for the playbooks to refuse with.
options:
  _input:
    description: Ansible's C(groups) (group name to inventory host names).
    type: dict
    required: true
  sources:
    description: The inventory sources Ansible was given, C(ansible_inventory_sources); each is looked up on the controller.
    type: list
    elements: str
    default: []
  proxy:
    description: The playbook also needs a host in group C(proxy).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Refuse an inventory without engine and proxy hosts
  ansible.builtin.assert:
    that: report.ok
    fail_msg: "{{ report.message }}"
    quiet: true
  vars:
    report: "{{ groups | factory_floor.llm.inventory_check(sources=ansible_inventory_sources) }}"
  # -i invetory/site -> "No inventory at /home/ops/invetory/site: that path does not exist. Check the -i path ..."
"""

RETURN = r"""
_value:
  description:
    - C(ok) (bool); C(missing), the groups without a host (C(gb10), C(proxy)); C(message), one line ("" when C(ok)).
  type: dict
"""

import os
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils._inventory_groups import check_inventory


def inventory_check(groups, sources=None, proxy=True):
    """Filter entry point."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("inventory_check expects Ansible's groups (a dict), got %s" % type(groups).__name__)
    try:
        proxy = boolean(proxy, strict=True)
    except TypeError as exc:
        raise AnsibleFilterError("inventory_check: proxy must be true or false, got %r" % (proxy,)) from exc
    sources = [str(source) for source in sources or []]
    existing = [source for source in sources if os.path.exists(os.path.expanduser(source))]
    return check_inventory(groups, sources, existing, proxy=proxy)


class FilterModule:
    """The hosts the playbooks run on, checked on the controller."""

    def filters(self):
        return {"inventory_check": inventory_check}
