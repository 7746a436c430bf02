# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_window role reads from its hosts' results, reshaped. Pure logic, standard library only."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping


def _float(value):
    """Jinja's ``float`` filter: the number, or 0.0 when it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def longest_startups(files):
    """The longest start-up in seconds by name (replicas, split, replicas_gate, split_gate) over the engine hosts'
    start-up files: ``files`` are their ``slurp`` results (JSON ``{name: seconds}``, base64); one without content (no
    file yet, not read) adds nothing."""
    seconds = {}
    for file in files or []:
        if not isinstance(file, Mapping) or "content" not in file:
            continue
        for name, value in json.loads(base64.b64decode(file["content"]).decode("utf-8")).items():
            seconds[name] = max(seconds.get(name, 0), _float(value))
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
