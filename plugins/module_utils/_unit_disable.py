# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``systemctl disable --now`` of a unit a role installed, behind ``factory_floor.llm.unit_disable``: the steps, in
order, as (module, arguments).

Disabled, not only stopped: an operations layer that restarts enabled units would otherwise bring back what the
other topology replaced. A unit left "failed" by its stop is cleared, so the host reports it inactive. Files the
unit leaves behind (a watchdog's last verdict in node_exporter's textfile directory) go with it. A unit whose file
is not there (never installed on this host) is left alone. Pure logic, standard library only; the vllm role's
``service_disable`` and the vllm_watchdog role's ``stop_unit`` tasks before.
"""

from __future__ import annotations


def unit_file(unit, unit_dir="/etc/systemd/system"):
    """Where the role writes ``unit``."""
    return "%s/%s" % (unit_dir.rstrip("/"), unit)


def steps(present, unit, remove=(), check_mode=False):
    """The steps after the look for the unit file: stop and disable it (when ``present``), remove ``remove`` (always:
    a leftover of an earlier run goes too), clear its failed state (when ``present``; not in check mode, where the
    stop was only predicted)."""
    out = []
    if present:
        out.append(("ansible.legacy.systemd_service", {"name": unit, "state": "stopped", "enabled": False}))
    out.extend(("ansible.legacy.file", {"path": path, "state": "absent"}) for path in remove or ())
    if present and not check_mode:
        out.append(("ansible.legacy.command", {"argv": ["systemctl", "reset-failed", unit]}))
    return out


def counts(module, step_result):
    """Whether a step's result fails the task, and whether it changed something: ``reset-failed`` never does either
    (a unit that was not failed makes it exit non-zero)."""
    if module == "ansible.legacy.command":
        return False, False
    return bool(step_result.get("failed")), bool(step_result.get("changed"))
