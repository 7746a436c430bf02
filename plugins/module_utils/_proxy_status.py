# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the nginx_proxy role's ``status`` entry point notes of a proxy host (``nginx_proxy_status``), from the reads
``factory_floor.llm.proxy_status`` runs there: the membership checker's state (``proxy_rotation``) and the checker's
and nginx's units (``systemctl show``). Pure logic, standard library only."""

from __future__ import annotations

# The variables the status reads, as the task sees them (the inventory, the role's defaults and vars).
VARIABLES = ("inventory_hostname", "_nginx_proxy_state_file", "_nginx_proxy_checker_unit",
             "nginx_proxy_expect_in_rotation", "nginx_proxy_rotation_timeout")
# What systemctl show reads of each unit.
PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,UnitFileState,NRestarts"


def rotation_args(v):
    """``factory_floor.llm.proxy_rotation``'s arguments: the checker's state, read until any of
    ``nginx_proxy_expect_in_rotation`` is in rotation (none expected: read once)."""
    return {"state_file": v["_nginx_proxy_state_file"], "expect_in_rotation": v["nginx_proxy_expect_in_rotation"],
            "wait_for": "any", "timeout": int(v["nginx_proxy_rotation_timeout"])}


def units_args(v):
    """``command``'s arguments: ``systemctl show`` of the membership checker's unit and nginx's."""
    return {"argv": ["systemctl", "show", "-p", PROPERTIES, "--", v["_nginx_proxy_checker_unit"], "nginx.service"]}


def status(v, rotation, shown):
    """``nginx_proxy_status`` of a host that answers: ``host``, ``reachable``, ``rotation`` (the checker's state, ``{}``
    when there is none) and ``checker`` (``systemctl show`` as text; empty when it could not be read)."""
    return {"host": v["inventory_hostname"], "reachable": True, "rotation": (rotation or {}).get("rotation") or {},
            "checker": (shown or {}).get("stdout") or ""}
