#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: keepalived_settings_info
short_description: One proxy host's keepalived settings and what is seen on it, for the floating address's group decision
version_added: 0.1.0
description:
  - "The C(factory_floor.llm.keepalived) role's preflight step on each proxy host, before
    M(factory_floor.llm.keepalived_check) decides for the group. The module reads the role's variables itself, as the
    task sees them (the inventory, the role's defaults and vars), on the controller: another host's role defaults are
    not among what the controller reads of it, so each host notes its own (register the result as
    C(__keepalived_settings), the name M(factory_floor.llm.keepalived_check)'s O(factory_floor.llm.keepalived_check#module:settings_fact)
    and M(factory_floor.llm.keepalived_info)'s O(factory_floor.llm.keepalived_info#module:settings_of) read)."
  - "Runs M(factory_floor.llm.keepalived_info) on the host with C(keepalived_interface), C(keepalived_virtual_ipaddress)
    and the role's state file, then, when that interface exists and C(keepalived_preflight_listen) (seconds) is above
    0, M(factory_floor.llm.vrrp_info) for that long on it. Either failing fails the task with its message."
  - Reads only, also in check mode. C(keepalived_auth_pass) is not among what it returns; the role notes it apart,
    never shown.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options: {}
seealso:
  - module: factory_floor.llm.keepalived_check
  - module: factory_floor.llm.keepalived_info
  - module: factory_floor.llm.vrrp_info
"""

EXAMPLES = r"""
# What the keepalived role's preflight does on each proxy host.
- name: Read this host's keepalived settings, its interfaces and the VRRP routers heard
  factory_floor.llm.keepalived_settings_info:
  register: __keepalived_settings
"""

RETURN = r"""
changed:
  description: Always false; it reads only.
  returned: always
  type: bool
  sample: false
virtual_ipaddress:
  description: C(keepalived_virtual_ipaddress), C(A.B.C.D/prefix).
  returned: success
  type: str
  sample: 10.89.7.100/24
interface:
  description: C(keepalived_interface).
  returned: success
  type: str
  sample: eth0
virtual_router_id:
  description: C(keepalived_virtual_router_id) (1-255), as the inventory or the role's defaults give it.
  returned: success
  type: raw
  sample: 51
priority:
  description: C(keepalived_priority) (1-254) as text, spaces around it removed.
  returned: success
  type: str
  sample: "250"
advert_int:
  description: C(keepalived_advert_int), seconds between advertisements.
  returned: success
  type: raw
  sample: 1
unicast_src_ip:
  description: C(keepalived_unicast_src_ip); empty - this host's own address on the interface.
  returned: success
  type: str
unicast_peer:
  description: C(keepalived_unicast_peer); empty - the other proxy hosts' C(unicast_src_ip).
  returned: success
  type: list
  elements: str
nopreempt:
  description: C(keepalived_nopreempt) as a boolean.
  returned: success
  type: bool
preempt_delay:
  description: C(keepalived_preempt_delay), seconds.
  returned: success
  type: raw
track_engines:
  description: C(keepalived_track_engines) as a boolean.
  returned: success
  type: bool
engines_weight:
  description: C(keepalived_engines_script_weight), the priority a failed engines check takes off (1-254).
  returned: success
  type: raw
observed:
  description: M(factory_floor.llm.keepalived_info)'s result on this host (C(interface_exists), C(interfaces), C(addresses), C(service_state), ...).
  returned: always
  type: dict
routers:
  description:
    - M(factory_floor.llm.vrrp_info)'s RV(factory_floor.llm.vrrp_info#module:routers) heard on the interface; null when it did not
      listen (the interface does not exist, or C(keepalived_preflight_listen) is 0).
  returned: success
  type: list
  elements: dict
"""
