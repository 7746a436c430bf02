# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: rollback_reason
short_description: The maintenance window's reason once a switch's rollback failed too
version_added: 0.1.0
description:
  - >-
    Takes the reason noted so far and returns it with C(; rollback failed on <host>: <message>) added, the failed
    task's message cut to about 400 characters at a word (as Jinja's C(truncate) filter cuts it).
  - Used by the C(factory_floor.llm.topology_switch) role's rollback.
options:
  _input:
    description: The reason noted so far (C(maintenance_window_host.reason)), empty for none.
    type: str
    required: true
  host:
    description: The host whose rollback failed.
    type: str
    required: true
  message:
    description: The failed task's message (C(ansible_failed_result.msg)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Note that the rollback failed too
  ansible.builtin.debug:
    msg: "{{ 'tool gate failed' | factory_floor.llm.rollback_reason(inventory_hostname, ansible_failed_result.msg) }}"
  # tool gate failed; rollback failed on spark-a: the engine did not serve in 900 s
"""

RETURN = r"""
_value:
  description: The reason.
  type: str
"""

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import truncate


def rollback_reason(reason, host, message):
    """Filter entry point."""
    return "%s; rollback failed on %s: %s" % (reason, host, truncate(message, 400))


class FilterModule:
    """A failed rollback's reason."""

    def filters(self):
        return {"rollback_reason": rollback_reason}
