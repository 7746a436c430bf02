# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: keepalived_status
short_description: Which proxy host holds the floating address, from every host's keepalived_info
version_added: 0.1.0
description:
  - Takes the results of M(factory_floor.llm.keepalived_info) run on every proxy host (a registered loop's
    C(results)) and says which host holds the floating address, one line for people and the data for checks.
  - Used by the C(status) entry point of the C(factory_floor.llm.keepalived) role.
options:
  _input:
    description: The C(results) of a loop over the proxy hosts that ran M(factory_floor.llm.keepalived_info) on each.
    type: list
    elements: dict
    required: true
  loop_var:
    description: The loop variable holding each result's inventory host name (C(item) by default).
    type: str
    default: item
  address:
    description: The floating address, for the message (C(A.B.C.D) or C(A.B.C.D/prefix)).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Which host holds it
  ansible.builtin.debug:
    msg: "{{ (__vip.results | factory_floor.llm.keepalived_status('item', '10.89.7.100/24')).message }}"
"""

RETURN = r"""
_value:
  description: The holder and each host's state.
  type: dict
  contains:
    holders:
      description: Inventory names of the hosts that have the address on their interface (one, when all is well).
      type: list
      elements: str
    address:
      description: The floating address without its prefix.
      type: str
    ok:
      description: Whether exactly one host holds it.
      type: bool
    hosts:
      description: Each host's keepalived_info result, by inventory name.
      type: dict
    message:
      description: >-
        One line, for example "The floating address 10.89.7.100 is on spark-a. spark-a MASTER; spark-b BACKUP.",
        or what is wrong (no holder, two holders).
      type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._host.keepalived import summarize


# What the summary keeps of each host's keepalived_info (not Ansible's bookkeeping).
_FIELDS = ("interface", "addresses", "holds_address", "service_state", "vrrp_state", "vrrp_state_current", "since",
           "priority")


def keepalived_status(results, loop_var="item", address=""):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("keepalived_status expects a loop's results (a list), got %s" % type(results).__name__)
    statuses = {}
    for result in results:
        if not isinstance(result, Mapping):
            continue
        name = result.get(loop_var)
        if name is None:
            continue
        # A read that failed under failed_when: false is no longer marked failed; it has no answer either.
        if result.get("failed") or result.get("unreachable") or result.get("skipped") or "holds_address" not in result:
            statuses[str(name)] = {"holds_address": False, "service_state": "unknown (%s)" % (
                "unreachable" if result.get("unreachable") else "not asked" if result.get("skipped")
                else str(result.get("msg", "failed"))[:120])}
        else:
            statuses[str(name)] = {key: result.get(key) for key in _FIELDS}
    return summarize(statuses, address)


class FilterModule:
    """Which proxy host holds the floating address."""

    def filters(self):
        return {"keepalived_status": keepalived_status}
