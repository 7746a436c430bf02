# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: watchdog_settings
short_description: An engine watchdog's role, peers, kill commands and own WatchdogSec=
version_added: 0.1.0
description:
  - C(role) - C(replica) for the replicas; in the split C(head) on rank 0 (it judges the split group) and C(worker) on
    every other rank (it follows the head).
  - C(peers) - the other ranks the watchdog reads over the direct link, in rank order; rank 0 reads every other host
    of the split group in the group's order, a worker reads the head.
  - C(kill_commands) - SIGKILL to every process of the engine (a hung engine takes no SIGTERM, and a closed port takes
    it out of the proxy at once); first to its container (container runtime), then to the unit's processes.
  - C(container) - the container runtime's engine and the container's name, where the daemon finds the engine's
    processes (under containerd-shim or conmon, not under the unit's main process); null for a virtualenv.
  - C(self_bound) - the watchdog unit's own C(WatchdogSec=) in seconds, four times its longest look (the interval,
    the probe, three requests to its engine and one to each other rank read - at least one - and the wait for a
    rank's acknowledgement), at least 300.
options:
  _input:
    description:
      - C(topology) (C(replicas) or C(split)), C(host) (C(inventory_hostname)), C(split_head), C(split_hosts) (the
        split group's hosts), C(runtime) (C(container) or C(venv)), C(container_engine_path), C(engine_unit) (the
        engine's unit), and the seconds C(interval), C(probe_timeout), C(request_timeout), C(pair_ack_timeout).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The watchdog's role
  ansible.builtin.debug:
    msg: "{{ (_vllm_watchdog_inputs | factory_floor.llm.watchdog_settings).role }}"
"""

RETURN = r"""
_value:
  description: The watchdog's settings.
  type: dict
  contains:
    role:
      description: C(replica), C(head) or C(worker).
      type: str
    peers:
      description: The hosts of the other ranks it reads.
      type: list
      elements: str
    read_ranks:
      description: How many other ranks a look reads (at least 1).
      type: int
    kill_commands:
      description: The commands (argv lists) that SIGKILL the engine, in order.
      type: list
      elements: list
    container:
      description: C(engine) and C(name) of the engine's container, or null.
      type: dict
    self_bound:
      description: The unit's WatchdogSec=, seconds.
      type: int
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils._watchdog_settings import KEYS
from ansible_collections.factory_floor.llm.plugins.module_utils._watchdog_settings import watchdog_settings as _settings


def watchdog_settings(inputs):
    """Filter entry point."""
    if not isinstance(inputs, Mapping) or any(key not in inputs for key in KEYS):
        raise AnsibleFilterError("watchdog_settings expects a dict with the keys %s" % ", ".join(KEYS))
    return _settings(inputs)


class FilterModule:
    """An engine watchdog's settings."""

    def filters(self):
        return {"watchdog_settings": watchdog_settings}
