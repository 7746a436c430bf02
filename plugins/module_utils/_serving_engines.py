# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which engines serve the model now, each on its own address, for metrics.yml and prometheus-config.yml.

The topology is the one that runs now (``_running_topology.running_topology`` of every engine host's engine
units), else the inventory's; ``metrics_topology`` overrides both. The engines are then every replica, or the
split's rank-0 head only (``_host_inputs.metrics_engines``). Pure logic, no I/O.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._running_topology import BOTH, TOPOLOGIES, running_topology

FROM_OVERRIDE = "metrics_topology"
FROM_UNITS = "the engine units active now"
FROM_INVENTORY = "the inventory (no engine unit is active)"


def topology(units, override=None, inventory=None):
    """``(topology, source)``: the topology whose engines to read and where that came from (the words the
    metrics view prints). ``units``: host -> ``systemctl is-active`` states (``running_topology``'s).

    Hosts that run both topologies (a switch that failed half-way) give ``split``: its rank-0 head serves the whole
    tensor-parallel group. Raises ``ValueError`` with the message to show when the topology is neither replicas nor
    split.
    """
    if override:
        chosen, source = override, FROM_OVERRIDE
    else:
        live = running_topology(units)
        live = "split" if live == BOTH else live
        if live in TOPOLOGIES:
            chosen, source = live, FROM_UNITS
        else:
            chosen, source = inventory or "replicas", FROM_INVENTORY
    if chosen not in TOPOLOGIES:
        raise ValueError("metrics_topology (or the inventory's topology) must be replicas or split, not '%s'." % chosen)
    return chosen, source


def view(metrics, source):
    """The lines metrics.yml prints: what was read and from which topology, then the module's table.

    ``metrics`` is the ``vllm_metrics`` module's result, ``source`` where its topology came from (:func:`topology`).
    """
    engines = metrics.get("engines") or []
    down = [engine.get("name") for engine in engines if not engine.get("reachable")]
    restarted = [engine.get("name") for engine in engines if engine.get("restarted")]
    line = "topology: %s (from %s); %s of %d engine(s) read" % (
        metrics.get("topology"), source, (metrics.get("total") or {}).get("engines_counted"), len(engines))
    if down:
        line += ", not readable: " + ", ".join(down)
    if restarted:
        line += ", restarted between reads: " + ", ".join(restarted)
    return [line] + list(metrics.get("table") or [])


def targets(engines):
    """``[{name, url}]`` of :func:`_host_inputs.metrics_engines`' entries: what ``vllm_metrics`` reads."""
    return [{key: engine[key] for key in ("name", "url") if key in engine} for engine in engines or ()]
