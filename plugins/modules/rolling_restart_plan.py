#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rolling_restart_plan
short_description: Whether a replica restarts now for its new configuration, and who carries the load meanwhile
version_added: 0.1.0
description:
  - The decision of the C(rolling_restart) role (C(playbooks/deploy.yml)'s rolling restart, C(serial) 1) for one replica
    whose configuration changed. A replica that serves restarts only while another replica serves and is in every proxy
    host's rotation (RV(carriers)); otherwise the task fails with RV(refusal), which names each other replica's state,
    the proxy's view and the C(-e vllm_restart_force=true) that restarts it anyway. A replica that does not serve
    restarts at once. In check mode the sentences say what a real run would do and leave.
  - Reads the host's last measured start-up (O(startup_file), with C(ansible.builtin.slurp) on the host; read-only, also
    in check mode) for the outage the sentences name. The rest is read on the controller, as the task sees it - the
    engine hosts (C(groups[site_engine_group])), every proxy host's rotation (C(nginx_proxy_rotation) of each host of
    C(groups[site_proxy_group]), from C(hostvars); a proxy host that read nothing has nobody in rotation), what changed
    (C(vllm_service_plan.change), the engine plan's), C(vllm_restart_force) (bool, false when not set) and
    C(playbook_dir) (to name C(deploy.yml) as the operator runs it).
  - The rule and the sentences are C(plugins/module_utils/_restart_plan.py)'s.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  status:
    description:
      - What the replica's own 1-token generation probe said (M(factory_floor.llm.vllm_health)'s C(status)) - C(serving),
        or another state (it does not serve, so nobody loses anything by its restart).
    type: str
    required: true
  peers:
    description:
      - The other replicas' probes, each on its own host - the loop results of M(factory_floor.llm.vllm_health) (C(item)
        the host, C(status); or C(unreachable), C(msg), C(error) for one that could not be asked). Empty when the replica
        does not serve (nobody was asked).
    type: list
    elements: dict
    default: []
  startup_file:
    description:
      - The host's last measured start-ups, a JSON object of seconds by topology (C(replicas)) that the
        C(maintenance_window) role's C(record_startup) writes. Absent, unreadable or not a JSON object, the sentences
        name GB10's range (5 to 13 min) instead.
    type: path
    default: /var/lib/factory-floor/startup.json
"""

EXAMPLES = r"""
- name: Decide whether this replica restarts now, and who carries the load meanwhile
  factory_floor.llm.rolling_restart_plan:
    status: "{{ self_probe.status }}"
    peers: "{{ peer_probes.results }}"
  register: restart
"""

RETURN = r"""
serving:
  description: The replica serves now (O(status) is C(serving)).
  returned: always
  type: bool
carriers:
  description: The other replicas that serve and are in every proxy host's rotation while it restarts (none when it does not serve).
  returned: always
  type: list
  elements: str
  sample: [spark-b]
refusal:
  description:
    - Why the replica does not restart - it serves and no other replica serves and is in the proxy's rotation - and how
      to restart it anyway; the task fails with it as C(msg). Empty when it restarts.
  returned: always
  type: str
forced:
  description: What a forced restart (C(vllm_restart_force), nobody carries the load) says first; empty otherwise.
  returned: always
  type: str
announcement:
  description: What the restart says before it starts - who carries the load, or that the replica does not serve.
  returned: always
  type: str
  sample: >-
    Restarting spark-a for its new configuration (--max-num-seqs 8 -> 16): spark-b serves meanwhile; it leaves the proxy
    first and its in-flight requests finish.
"""
