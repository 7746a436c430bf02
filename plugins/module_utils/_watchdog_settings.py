# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What an engine's watchdog derives from the inventory (roles/vllm_watchdog/vars): its role in its
topology, the other ranks it reads, how it kills a hung engine, and its own WatchdogSec=.

Private to the collection; standard library only. The values are those the role's Jinja gave before
(tests/unit/roles/test_engine_vars_filters.py compares them), Jinja's ``int``/``float`` included.
"""

from __future__ import annotations

import re

from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float, jinja_int

KEYS = ("topology", "host", "split_head", "split_hosts", "runtime", "container_engine_path", "engine_unit",
        "interval", "probe_timeout", "request_timeout", "pair_ack_timeout")


def watchdog_settings(inputs):
    """``role`` (replica; head: rank 0, judges the split group; worker: every other rank), ``peers`` (the ranks
    it reads: the head every other host of the group in order, a worker the head), ``read_ranks``,
    ``kill_commands`` (SIGKILL to the container, then to the unit's processes), ``container`` (where the
    daemon finds the engine's processes; None outside a container) and ``self_bound`` (its WatchdogSec=,
    seconds: four times its longest look, at least 300)."""
    topology, host, head = inputs["topology"], inputs["host"], inputs["split_head"]
    role = "replica" if topology == "replicas" else ("head" if host == head else "worker")
    peers = [name for name in inputs["split_hosts"] if name != head] if host == head else [head]
    read_ranks = max(1, len(peers)) if topology == "split" else 1
    unit = inputs["engine_unit"]
    name = re.sub(r"\.service$", "", unit)
    container = inputs["runtime"] == "container"
    kill_commands = ([[inputs["container_engine_path"], "kill", "--signal", "KILL", name]] if container else []) + \
        [["/usr/bin/systemctl", "kill", "--signal=SIGKILL", unit]]
    look = (jinja_float(inputs["interval"]) + jinja_float(inputs["probe_timeout"])
            + (3 + jinja_int(read_ranks)) * jinja_float(inputs["request_timeout"])
            + jinja_float(inputs["pair_ack_timeout"]))
    return {"role": role, "peers": peers, "read_ranks": read_ranks, "kill_commands": kill_commands,
            "container": {"engine": inputs["container_engine_path"], "name": name} if container else None,
            "self_bound": int(max(300, 4 * look))}
