# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Start, restart or stage one vLLM engine's unit, behind ``factory_floor.llm.engine_service``: the steps, in order,
as (step, ``systemd_service`` arguments), whether the engine is then checked, the plan afterwards and the note.

The restart follows the plan's fingerprint (``restart_pending``), not "a file changed in this run": a run that wrote
a new unit and failed before the restart left the old process running, and the next run restarts it. Such a run may
also have stopped before systemd read the new file: the reload follows ``reload`` (the unit changed in this run, or
systemd's ``NeedDaemonReload``), since a restart without it runs the old definition. Pure logic, standard library
only; the vllm role's ``service_run`` tasks before.
"""

from __future__ import annotations


def steps(state, unit, restart_pending, restart, reload):
    """The ``systemd_service`` steps: ``present`` only makes systemd read a staged unit; ``started`` restarts the
    engine when it runs another configuration and ``restart`` allows it, then starts and enables it (reloading
    there when no restart did)."""
    if state == "present":
        return [("reload", {"daemon_reload": True})] if reload else []
    restarting = bool(restart_pending and restart)
    out = []
    if restarting:
        out.append(("restart", {"name": unit, "state": "restarted", "enabled": True, "daemon_reload": bool(reload)}))
    out.append(("start", {"name": unit, "state": "started", "enabled": True,
                          "daemon_reload": bool(reload) and not restarting}))
    return out


def checks(state, check_mode, done):
    """Whether the engine is checked against the configuration just rendered: started, for real, and the restart or
    the start changed something (``done``: step -> its result)."""
    if state != "started" or check_mode:
        return False
    return any((done.get(step) or {}).get("changed") for step in ("restart", "start"))


def plan_after(plan, done):
    """The plan once the steps ran: a restart that ran (also predicted, in check mode) leaves nothing pending."""
    plan = dict(plan or {})
    if "restart" in done:
        plan["restart_pending"] = False
    return plan


def note(state, plan, restart, unit, host):
    """What an operator reads when the engine stays on its old configuration (the caller restarts it later); ""
    otherwise."""
    plan = plan or {}
    if state != "started" or not plan.get("restart_pending") or restart:
        return ""
    return ("%s on %s runs another configuration than the one just rendered (%s); not restarted now "
            "(vllm_service_restart is false)." % (unit, host, plan.get("change", "")))
