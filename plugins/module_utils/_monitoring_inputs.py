# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the monitoring role reads from the inventory (roles/monitoring/vars/main.yml). Pure logic.

Which rule groups a site does not need - the memory guard's watch when no engine host runs it,
the floating address's when fewer than two proxy hosts share one - and the thresholds the
named settings give, under the site's own dict.
"""

from __future__ import annotations

from collections.abc import Mapping

# The rule groups of daemons a site may not run (extras/prometheus/factory-floor-alerts.yml).
GROUP_MEMORY_GUARD_WATCH = "factory-floor-memory-guard-watch"
GROUP_FLOATING_ADDRESS = "factory-floor-floating-address"
# The alerts whose threshold a named setting gives.
THRESHOLD_QUEUE = "VLLMQueueDeep"
THRESHOLD_TTFT = "VLLMTimeToFirstTokenHigh"

_TRUE = {"yes", "on", "true", "1"}
_FALSE = {"no", "off", "false", "0"}


def _bool(value):
    """Ansible's ``bool`` filter: the well-known spellings of true and false; anything else is ``value == 1``."""
    if isinstance(value, str):
        value = value.lower()
    elif isinstance(value, int):
        value = str(value).lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    try:
        return value == 1
    except TypeError:
        return False


def memory_guard_watched(engines):
    """Whether any engine host (its variables) runs the memory guard's watch: the guard and its watch on (the
    role's defaults, true, when unset) and a workload that names a unit or a slice."""
    for engine in engines:
        workloads = engine.get("memory_guard_workloads", [])
        if (_bool(engine.get("memory_guard_enabled", True)) and _bool(engine.get("memory_guard_watch", True))
                and any(isinstance(w, Mapping) and ("unit" in w or "slice" in w) for w in workloads)):
            return True
    return False


def skip_groups(watched, proxies):
    """The rule groups to leave out: the watch's when nothing is watched, the floating address's under two proxies."""
    return (([] if _bool(watched) else [GROUP_MEMORY_GUARD_WATCH])
            + ([] if len(proxies) >= 2 else [GROUP_FLOATING_ADDRESS]))


def thresholds(queue_waiting_max, ttft_p95_seconds, alert_thresholds):
    """The thresholds of the named settings, then the site's dict (which wins)."""
    if not isinstance(alert_thresholds, Mapping):
        raise TypeError("monitoring_alert_thresholds must be a dict (alert name: number), got %r" % (alert_thresholds,))
    found = {THRESHOLD_QUEUE: queue_waiting_max, THRESHOLD_TTFT: ttft_p95_seconds}
    found.update(alert_thresholds)
    return found
