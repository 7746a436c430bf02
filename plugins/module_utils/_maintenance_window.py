# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_window role reads from its hosts' results, reshaped. Pure logic, standard library only."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_float
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure


def longest_startups(files):
    """The longest start-up in seconds by name (replicas, split, replicas_gate, split_gate) over the engine hosts'
    start-up files: ``files`` are their ``slurp`` results (JSON ``{name: seconds}``, base64); one without content (no
    file yet, not read) adds nothing."""
    seconds = {}
    for file in files or []:
        if not isinstance(file, Mapping) or "content" not in file:
            continue
        for name, value in json.loads(base64.b64decode(file["content"]).decode("utf-8")).items():
            seconds[name] = max(seconds.get(name, 0), jinja_float(value))
    return seconds


def lock_refusals(results):
    """One ``<host>: <why>`` per host that refused the lock (a delegated loop's failed ``results``), each followed by
    a space: what comes before the role's own sentence (``maintenance_window_lock_refused``)."""
    return "".join("%s: %s " % (result.get("item"), result.get("msg", ""))
                   for result in results or [] if isinstance(result, Mapping) and result.get("failed"))


# The fact an engine host notes its own lock file as (the role's "open" entry point): a lock taken or released from
# another host (delegate_to) goes to that file.
LOCK_PATH_FACT = "maintenance_window_lock_path"


def lock_path(host_vars, default):
    """A host's maintenance lock file: the one it noted (``LOCK_PATH_FACT``), else ``default``. ``host_vars``: its
    variables (Ansible's ``hostvars[host]``, or any mapping)."""
    return host_vars[LOCK_PATH_FACT] if LOCK_PATH_FACT in host_vars else default


def truncate(text, length, end="...", leeway=5):
    """Jinja's ``truncate`` filter as Ansible configures it (whole words, ``...``, a leeway of 5 characters)."""
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _merged(base, extra):
    """``base | combine(extra, recursive=true)``: mappings merged key by key, any other value replaced."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def noted(host, note=None, events=(), at=None):
    """What a host noted during a run (the fact ``maintenance_window_host``) with ``note`` added (events: {name: epoch
    seconds}; health, gate, reason, failed, ... - the switch_report module's hosts option) and each name of ``events``
    noted at ``at`` (epoch seconds; a time the caller measured, else the controller's clock, now)."""
    merged = _merged(host if isinstance(host, Mapping) else {}, note or {})
    if events:
        when = float(at) if at is not None else time.time()
        merged = _merged(merged, {"events": {name: when for name in events}})
    return merged


# The fact each engine host notes what happened to it in (the maintenance_note action's).
NOTES = "maintenance_window_host"


def notes_of(host_vars, default=None):
    """What a host noted during the run (``host_vars``: its variables, as ``hostvars[host]`` or an action's task_vars):
    the maintenance_note action's fact in ``ansible_facts`` - where ansible-core keeps a fact once it no longer injects
    facts as top-level variables (deprecated in 2.20, gone in 2.24), and where no set_fact or play variable can hide
    it - else a top-level ``maintenance_window_host`` (recorded inputs); ``default`` when the host noted nothing."""
    facts = host_vars["ansible_facts"] if "ansible_facts" in host_vars else None
    if isinstance(facts, Mapping) and NOTES in facts:
        return facts[NOTES]
    return host_vars[NOTES] if NOTES in host_vars else default


# What a failed step notes, by the step (the maintenance_note action's ``failure``).
FAILURES = ("step", "switch_gate", "switch_rollback", "upgrade", "upgrade_rollback")


def failure_note(kind, host, so_far, failed, note=None, message="step failed", now=None):
    """The note of a failed step on ``host`` (``failed``: the failed task's result, ansible_failed_result) after what
    the host noted so far (``so_far``), in the report's words, by ``kind``: ``step`` - failed, and the task's message
    (``message`` when it has none) as the reason; ``switch_gate`` - failed, the gate's verdict (``note["gate"]``) and
    why it did not pass (``_switch_steps.gate_failure``); ``switch_rollback`` - rollback_failed, the reason so far and
    why the rollback failed too; ``upgrade`` - the upgrade's failure at ``now`` (epoch seconds), the gate's message when
    it rejected the candidate; ``upgrade_rollback`` - restore_failed, the reason so far and why the rollback could not
    start. ``{}`` for no kind; any other kind raises ValueError."""
    if not kind:
        return {}
    note = note if isinstance(note, Mapping) else {}
    failed = failed if isinstance(failed, Mapping) else {}
    so_far = so_far if isinstance(so_far, Mapping) else {}
    if kind == "step":
        return {"failed": True, "reason": "%s: %s" % (host, truncate(str(failed.get("msg", message)), 600))}
    if kind == "switch_gate":
        return {"failed": True, "gate": note.get("gate") or {},
                "reason": "%s: %s" % (host, gate_failure(failed, note.get("gate") or {}))}
    if kind == "switch_rollback":
        return {"rollback_failed": True, "reason": "%s; rollback failed on %s: %s" % (
            so_far.get("reason", ""), host, truncate(str(failed.get("msg", "")), 400))}
    if kind == "upgrade":
        return mu.failed_note(host, failed, note.get("gate") or {}, time.time() if now is None else now)
    if kind == "upgrade_rollback":
        return mu.rollback_failed_note(host, failed, so_far)
    raise ValueError("maintenance_note: failure must be one of %s, got %r" % (", ".join(FAILURES), kind))


def seconds_of(delta):
    """Seconds in a step's duration: a number, or a command result's ``delta`` (``H:MM:SS.ffffff``); None when it is
    neither."""
    if isinstance(delta, bool):
        return None
    if isinstance(delta, (int, float)):
        return float(delta)
    text = str(delta or "").strip()
    if text.startswith("-"):
        return None
    parts = text.split(":")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        return None
    if not 1 <= len(values) <= 3 or any(v < 0 for v in values):
        return None
    seconds = 0.0
    for value in values:
        seconds = seconds * 60 + value
    return seconds


def after_event(so_far, after):
    """Epoch seconds of ``after`` (``{event, delta}``): the host's noted ``event`` plus ``delta`` (:func:`seconds_of`);
    None when the event was not noted or the delta is no duration."""
    if not isinstance(after, Mapping):
        return None
    begun = ((so_far.get("events") or {}) if isinstance(so_far, Mapping) else {}).get(after.get("event"))
    took = seconds_of(after.get("delta"))
    return float(begun) + took if begun is not None and took is not None else None


def host_note(so_far, host, note=None, events=(), at=None, failure=None, failed=None, message="step failed",
              restored=None, after=None):
    """What ``host`` noted so far (``so_far``, maintenance_window_host) with one step's note added - the maintenance_note
    action's whole decision: ``note`` as given, a failure's note (``failure_note``), a restore's outcome
    (``restored``: ok, at, msg - ``_model_upgrade.restore_note``) and each of ``events`` noted at ``after``
    (:func:`after_event`), else ``at`` (epoch seconds), else the controller's clock now."""
    so_far = so_far if isinstance(so_far, Mapping) else {}
    now = time.time()
    when = after_event(so_far, after)
    at = when if when is not None else at
    merged = noted(so_far, note, events, at if at is not None else (now if events else None))
    merged = _merged(merged, failure_note(failure, host, so_far, failed, note, message, now))
    if restored is not None:
        merged = _merged(merged, mu.restore_note(host, restored, so_far))
    return merged


def unlocked(results, host_vars, default_path, previous=None):
    """Per host of a delegated release loop (its ``results``), ``{released, path, error}``, added to ``previous``: a
    host that answered with no failure released this run's lock (or had none); one that did not keeps it, named with
    why. ``host_vars``: Ansible's ``hostvars`` (each host's own lock file, ``lock_path``), else ``default_path``."""
    summary = dict(previous or {})
    for result in results or []:
        if not isinstance(result, Mapping):
            continue
        host = result.get("item")
        unreachable, failed = bool(result.get("unreachable")), bool(result.get("failed"))
        error = ""
        if unreachable or failed:
            error = ("host unreachable: " if unreachable else "") + truncate(str(result.get("msg", "")), 200)
        summary[host] = {"released": not unreachable and not failed,
                         "path": lock_path(host_vars[host] if host in host_vars else {}, default_path),
                         "error": error}
    return summary


def abort_message(unlocked_hosts, failure, note, check_mode, engine_hosts):
    """What a run that stops after a failed step says (the ``abort`` entry point): what failed (``failure``, the
    failed task's result), ``note`` (what the run left as it was) and where this run's lock was given back and where
    it stays; under ``--check`` that no lock was taken."""
    what = failure.get("msg") if isinstance(failure, Mapping) else None
    head = "%s %s " % (what if what else "A step failed (see above).", note)
    if check_mode:
        return head + ("--check took no maintenance lock, so none was given back (a real run takes it on %s before it "
                       "changes anything, and gives it back here)." % ", ".join(engine_hosts))
    hosts = unlocked_hosts or {}
    released = [host for host, state in hosts.items() if state.get("released")]
    kept = [host for host, state in hosts.items() if not state.get("released")]
    stays = ("; it stays on %s (not reachable): remove it there once this run is known ended" % ", ".join(kept)
             if kept else "")
    return head + "This run's maintenance lock was given back on %s%s." % (", ".join(released) or "no host", stays)


# The probe client: a transient unit on a proxy host that asks the model through the proxy for the whole run.
PROBE_PROGRAM = ["/usr/bin/python3", "-m", "_host.probe_client"]


def probe_argv(args):
    """``systemd-run``'s command line that starts the probe client as the transient unit ``args["unit"]``, collected
    when it ends, stopped by systemd after ``max_seconds``; the host programs' package on its ``PYTHONPATH``
    (``lib_dir``); the API key read from ``api_key_file``, never on the command line; ``ca_file`` empty for none."""
    return (["systemd-run", "--unit=%s" % args["unit"], "--collect", "--property=RuntimeMaxSec=%s" % args["max_seconds"],
             "--setenv=PYTHONPATH=%s" % args["lib_dir"]] + PROBE_PROGRAM
            + ["--url=%s" % args["url"], "--model=%s" % args["model"], "--out=%s" % args["log"],
               "--interval=%s" % args["interval"], "--concurrency=%s" % args["concurrency"],
               "--api-key-file=%s" % args["api_key_file"], "--ca-file=%s" % (args.get("ca_file") or "")])


def probe_steps(args, check_mode):
    """The probe client's steps, ``(module, arguments, must succeed)`` in order: stop one an interrupted run left behind
    (never in check mode; a unit that is not there is no failure), then, with ``start``, remove the last run's log and
    start this run's client (not in check mode: that would start it)."""
    steps = []
    if not check_mode:
        steps.append(("command", {"argv": ["systemctl", "stop", "%s.service" % args["unit"]]}, False))
    if args["start"]:
        steps.append(("file", {"path": args["log"], "state": "absent"}, True))
        if not check_mode:
            steps.append(("command", {"argv": probe_argv(args)}, True))
    return steps
