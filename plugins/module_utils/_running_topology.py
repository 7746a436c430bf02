# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which topology runs now: the one reading of the engine units' states. Pure logic, no I/O.

Each engine host says ``systemctl is-active`` of the engine units in ``_topology_record.UNIT_ORDER``
(the replicas' unit, then the split's); a unit runs when its state is one of ``UP_STATES``
(``_topology_record.runs``, what deploy.yml's topology check and the status view read per host).
The inventory's ``topology`` says what deploy.yml brings the site to, not what a switch left running.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._topology_record import BOTH, NONE, TOPOLOGIES, runs

__all__ = ["BOTH", "NONE", "TOPOLOGIES", "running_topology", "units_of"]


def running_topology(units):
    """What the engine hosts run now, together.

    ``units``: host -> that host's ``systemctl is-active`` states in ``UNIT_ORDER`` (None or empty where they were
    not read). A topology when every host that runs an engine runs that one's unit; ``NONE`` when no engine unit
    runs; ``BOTH`` when hosts run different topologies, or one runs both (``Conflicts=`` makes that a failure);
    None when no host's states were read.
    """
    seen = [runs(states) for states in (units or {}).values()]
    seen = [host_runs for host_runs in seen if host_runs is not None]
    if not seen:
        return None
    running = {host_runs for host_runs in seen if host_runs != NONE}
    if BOTH in running or len(running) > 1:
        return BOTH
    return running.pop() if running else NONE


def units_of(results):
    """``{host: states}`` from a loop's registered ``systemctl is-active`` results, one per engine host (the loop's
    ``item`` is the host it was delegated to); a result without ``stdout_lines`` (skipped, unreachable) is left out."""
    units = {}
    for result in results or ():
        if isinstance(result, dict) and isinstance(result.get("stdout_lines"), list):
            units[str(result.get("item"))] = result["stdout_lines"]
    return units
