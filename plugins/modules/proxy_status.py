#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxy_status
short_description: What a proxy host's membership checker sees, and its unit and nginx's, read only
version_added: 0.1.0
description:
  - "The C(factory_floor.llm.nginx_proxy) role's C(status) step, registered as C(nginx_proxy_status) for
    M(factory_floor.llm.site_status). The module reads the role's variables itself, as the task sees them (the
    inventory, the role's defaults and vars), on the controller."
  - "Runs on the host, for real also in check mode, M(factory_floor.llm.proxy_rotation) on the checker's state file
    (C(/run/factory-floor/upstream.json); until any of C(nginx_proxy_expect_in_rotation) is in rotation, at most
    C(nginx_proxy_rotation_timeout) seconds; none expected, read once) and C(systemctl show) of the checker's unit
    (C(factory-floor-upstream.service)) and C(nginx.service). A C(systemctl) that fails is noted as empty; a
    M(factory_floor.llm.proxy_rotation) that fails fails the task with its message."
  - A host that does not answer is the role's to note (C(ansible.builtin.ping) first).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options: {}
seealso:
  - module: factory_floor.llm.proxy_rotation
  - module: factory_floor.llm.site_status
"""

EXAMPLES = r"""
# What the nginx_proxy role's status entry point does once the host answered.
- name: Read what the membership checker has in rotation, its unit and nginx's
  factory_floor.llm.proxy_status:
  register: nginx_proxy_status
"""

RETURN = r"""
changed:
  description: Always false; it reads only.
  returned: always
  type: bool
  sample: false
host:
  description: The proxy host's inventory name.
  returned: success
  type: str
  sample: gateway
reachable:
  description: Always true (the host answered).
  returned: success
  type: bool
  sample: true
rotation:
  description:
    - The membership checker's state (M(factory_floor.llm.proxy_rotation)'s RV(factory_floor.llm.proxy_rotation#module:rotation)
      - C(mode), C(members), C(in_rotation), C(statuses), C(drained), C(updated)); C({}) when there is none.
  returned: success
  type: dict
checker:
  description:
    - C(systemctl show -p Id,LoadState,ActiveState,SubState,Result,UnitFileState,NRestarts) of the checker's unit and
      nginx's, as text; empty when it could not be read.
  returned: success
  type: str
"""
