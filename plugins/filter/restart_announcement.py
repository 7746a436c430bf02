# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: restart_announcement
short_description: What deploy.yml's rolling restart will do, in one sentence
version_added: 0.1.0
description:
  - The replicas whose configuration changed and that run (each engine host's C(vllm_service_plan), the
    C(factory_floor.llm.vllm) role's engine plan, with C(restart_pending)), each with what changed; how they restart
    (one at a time, one that serves only while another serves and is in the proxy's rotation, or forced); and the
    engine hosts not restarted.
  - Empty when no replica restarts. Used by the C(factory_floor.llm.site_deploy) role's C(deploy_preflight) entry point.
options:
  _input:
    description: The engine hosts, inventory names, in inventory order (C(groups[site_engine_group])).
    type: list
    elements: str
    required: true
  hostvars:
    description: Every host's variables (C(hostvars)).
    type: dict
    required: true
  force:
    description: C(vllm_restart_force) - a replica that serves restarts even when no other one carries the load.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Announce the replicas that restart, one at a time
  ansible.builtin.debug:
    msg: "{{ announcement }}"
  vars:
    announcement: "{{ groups['gb10'] | factory_floor.llm.restart_announcement(hostvars, vllm_restart_force | default(false)) }}"
  when: announcement | length > 0
"""

RETURN = r"""
_value:
  description: The sentence, or an empty string when no replica restarts.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.module_utils._host_inputs import restart_pending
from ansible_collections.factory_floor.llm.plugins.module_utils._restart_plan import deploy_announcement


def restart_announcement(engines, hostvars, force=False):
    """Filter entry point."""
    if not isinstance(engines, (list, tuple)):
        raise AnsibleFilterError("restart_announcement expects host names (a list), got %s" % type(engines).__name__)
    return deploy_announcement(list(engines), restart_pending(hostvars, engines), boolean(force, strict=False))


class FilterModule:
    """deploy.yml's rolling restart, announced."""

    def filters(self):
        return {"restart_announcement": restart_announcement}
