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


# What the last steps left on the engine hosts for the report: switch_record's comparison (registered once for every
# engine host of its play) and each host's failed record write, switch_release's release of the lost hosts' locks.
SITE = "__vllm_switch_site"
RECORD_ERROR = "__vllm_switch_record_error"
UNLOCKED = "maintenance_window_unlocked"


def _first(hostvars, engines, name):
    """The variable ``name`` of the first of ``engines`` that has one (a host the run lost before it was set has
    none), else None."""
    for host in engines or ():
        if host in hostvars and name in hostvars[host]:
            return hostvars[host][name]
    return None


def outcome_reads(hostvars, engines):
    """``(site, lost_locks)`` for :func:`report_plan`, read from the engine hosts' variables (Ansible's ``hostvars``):
    the comparison of records and units (``site`` and ``inventory`` of switch_record's ``__vllm_switch_site``), each
    host's record that could not be written (``write_errors``), and the locks switch_release tried to release on the
    hosts the run lost (``maintenance_window_unlocked``); empty where a step did not run."""
    compared = _first(hostvars, engines, SITE)
    compared = compared if isinstance(compared, Mapping) else {}
    errors = {}
    for host in engines or ():
        error = hostvars[host][RECORD_ERROR] if host in hostvars and RECORD_ERROR in hostvars[host] else ""
        if error:
            errors[host] = error
    site = {"site": compared.get("site") or {}, "inventory": compared.get("inventory") or {}, "write_errors": errors}
    return site, _first(hostvars, engines, UNLOCKED) or {}


def _truncate(text, length, end="...", leeway=5):
    """Jinja's ``truncate`` filter as Ansible configures it (whole words, ``...``, a leeway of 5 characters)."""
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def gate_failure(failure, gate=None):
    """Why an engine did not pass the switch's tool-calling gate, for the rollback: the gate's own message when it
    ran and failed (``gate``, the tool_gate role's ``tool_gate_result``), else why it could not test the engine - the
    test outlasting ``tool_gate_run_timeout`` (``failure``, the failed task's result, ``timedout``) or another error
    - with that task's message. At most 900 characters."""
    gate = gate if isinstance(gate, Mapping) else {}
    failure = failure if isinstance(failure, Mapping) else {}
    if not gate.get("passed", True):
        why = str(gate.get("message"))
    else:
        why = "%s: %s" % ("the tool-calling test took longer than tool_gate_run_timeout" if "timedout" in failure
                          else "the tool-calling gate could not test it", failure.get("msg", "no message"))
    return _truncate(why, 900)
