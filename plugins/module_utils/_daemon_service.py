# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""When a daemon's unit is started, reloaded, restarted and removed: the rule of ``factory_floor.llm.daemon_service``.

A daemon runs on the files as they are on disk now, whatever run wrote them: ``systemd_unit_info`` says whether
systemd has read its unit (``need_daemon_reload``) and whether its process started before one of its files changed
(``restart``); a run interrupted before its restart leaves the old process otherwise. Pure logic, standard library.
"""

from __future__ import annotations


def starts(check_mode, unit_changed):
    """Whether to start it: not in check mode when its unit file is new or changed (not written, nothing to start)."""
    return not (check_mode and unit_changed)


def start_args(unit, unit_changed, info):
    """``systemd_service``'s arguments to start and enable it, reloading systemd first when it has not read the unit
    as it is on disk (this run changed it, or an earlier run did)."""
    return {"name": unit, "state": "started", "enabled": True,
            "daemon_reload": bool(unit_changed or (info or {}).get("need_daemon_reload"))}


def restarts(started, info, changed):
    """Whether to restart it after the start: not when the start started it (it runs on the files now), else when it
    does not run on its files as they are on disk (``info``'s ``restart``) or this run ``changed`` one of them (what
    check mode, which writes nothing, predicts)."""
    return not started and (bool((info or {}).get("restart")) or bool(changed))


def removal(marker_exists, unit, files):
    """The steps that take out a daemon this role installed, in order, as (module, arguments): nothing when its marker
    (its unit file, or a drop-in of the role's) is gone - a daemon the role never installed is left alone - else stop
    and disable it, remove its files, and make systemd forget the unit."""
    if not marker_exists:
        return []
    return ([("systemd_service", {"name": unit, "state": "stopped", "enabled": False})]
            + [("file", {"path": path, "state": "absent"}) for path in files]
            + [("systemd_service", {"daemon_reload": True})])
