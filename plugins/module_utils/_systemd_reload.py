# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""When systemd is reloaded before units a role wrote files for are used, and how they are started: the rule of
``factory_floor.llm.systemd_reload``.

A unit's settings (a drop-in's ``Restart=``, ``After=``, a slice's limits) apply once systemd has read its files, and
need no restart: systemd is reloaded whenever it has not loaded them as they are on disk (``systemd_unit_info``'s
``need_daemon_reload``: an earlier run may have written them and stopped before it reloaded), or when this run
changed one (``reload``: what check mode, which writes nothing, predicts). Pure logic, standard library.
"""

from __future__ import annotations


def reloads(info, reload):
    """Whether to reload systemd: it has not loaded the units as they are on disk (``info``), or ``reload``."""
    return bool(reload or (info or {}).get("need_daemon_reload"))


def steps(units, start, info, reload=False):
    """``ansible.builtin.systemd_service``'s arguments, in order: with ``start``, start and enable each of ``units``
    (the first start reloading systemd first when :func:`reloads`); without, only the reload when :func:`reloads`,
    else nothing. Never a restart: what runs keeps running, on the settings systemd has read."""
    reload = reloads(info, reload)
    if not start:
        return [{"daemon_reload": True}] if reload else []
    return [{"name": unit, "state": "started", "enabled": True, "daemon_reload": reload and index == 0}
            for index, unit in enumerate(units)]
