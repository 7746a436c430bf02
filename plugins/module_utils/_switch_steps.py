# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the topology_switch role's steps hand each other, reshaped. Pure logic, standard library only."""

from __future__ import annotations

from collections.abc import Mapping


def report_plan(plan, site=None, lost_locks=None, run="", rotation_error="", inventory_sources=()):
    """The plan the switch's report reads (switch_report's ``plan``): the final decision (``plan``, switch_plan's
    result) with what the engine hosts run and record (``site``: switch_record's ``vllm_switch_site``), the locks left
    on the hosts the run lost (``lost_locks``: the unlock's ``maintenance_window_unlocked``, whose hosts count as lost
    too), the run's id, a rotation timeout the proxy host noted and the inventory sources."""
    site = site if isinstance(site, Mapping) else {}
    lost_locks = dict(lost_locks or {})
    lost_hosts = list(plan.get("lost_hosts") or [])
    lost_hosts += [host for host in lost_locks if host not in lost_hosts]
    return dict(plan, inventory=site.get("inventory") or {}, site=site.get("site") or {},
                record_errors=site.get("write_errors") or {}, lost_hosts=lost_hosts, lost_locks=lost_locks, run=run,
                rotation_error=rotation_error or "", inventory_sources=list(inventory_sources or []))
