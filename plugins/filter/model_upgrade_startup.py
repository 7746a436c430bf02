# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_upgrade_startup
short_description: The start-up a replica's model upgrade measured, for the next run's announcement
version_added: 0.1.0
description:
  - For the C(factory_floor.llm.model_upgrade) role's C(done) entry point, the C(maintenance_window_startup_record) of
    one replica - C(replicas), the seconds from leaving the proxy's rotation (C(events.drained)) to serving the candidate
    (C(events.serving)), both epoch seconds on the controller's clock, rounded to 0.1 s - when the replica was upgraded
    (C(upgraded)); an empty dict otherwise (nothing to record).
options:
  _input:
    description: What the replica noted during the run (C(maintenance_window_host)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Record this replica's start-up for the next announcement
  ansible.builtin.include_role:
    name: factory_floor.llm.maintenance_window
    tasks_from: record_startup
  vars:
    maintenance_window_startup_record: "{{ maintenance_window_host | default({}) | factory_floor.llm.model_upgrade_startup }}"
  when: maintenance_window_startup_record | length > 0
"""

RETURN = r"""
_value:
  description: C({replicas - seconds}) (float), or an empty dict when the replica was not upgraded or its times are missing.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._model_upgrade import measured_startup


def model_upgrade_startup(noted):
    """Filter entry point."""
    try:
        return measured_startup(noted)
    except (TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("model_upgrade_startup expects maintenance_window_host, a dict whose events are epoch "
                                 "seconds: %s" % exc) from exc


class FilterModule:
    """The model upgrade's measured start-up."""

    def filters(self):
        return {"model_upgrade_startup": model_upgrade_startup}
