# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the nginx proxy's membership checker has in rotation, as its state file says, and the drains it applied
(factory_floor.llm.proxy_rotation). Pure logic, standard library only; runs on the proxy host.

The state file (``_host/upstream``'s) holds ``mode``, ``members``, ``in_rotation``, ``statuses`` (by engine),
``drained`` and ``updated``. A drain file (``<drain_dir>/<engine>``) takes that engine out of rotation; the checker
looks at its name only, the ``drained`` entry point reads who wrote it (``{"holder": ...}``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping


def read_state(path):
    """The checker's state, or None while there is none (no file yet, or half of one)."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, Mapping) else None


def in_rotation(state):
    return list((state or {}).get("in_rotation") or [])


def expected_in(state, expected, wait_for="all"):
    """Whether ``expected`` are in rotation: all of them, or (``any``) one of them; an empty ``any`` asks nothing."""
    if wait_for == "any":
        return not expected or (state is not None and bool(set(expected) & set(in_rotation(state))))
    return state is not None and not set(expected) - set(in_rotation(state))


def drain_applied(state, engines, present=True):
    """Whether the checker has taken ``engines`` out of rotation (``present``), or put them all back."""
    if state is None:
        return False
    drained = set((state or {}).get("drained") or [])
    return not set(engines) - drained if present else not set(engines) & drained


def is_list(value):
    return isinstance(value, (list, tuple))


def holder_content(holder):
    """A drain file naming who drained the engine, as the drain entry point writes it."""
    return json.dumps({"holder": holder}) + "\n"


def holder_of(text):
    """Who a drain file names: the drain entry point's JSON ``holder``, or the file's text (empty for a ``touch``)."""
    text = text.strip()
    return json.loads(text).get("holder", "") if text.startswith("{") else text


def read_holders(drain_dir):
    """``{engine: holder}`` of the drain files in ``drain_dir`` (its own regular files, not hidden ones, as
    ``ansible.builtin.find`` lists them); a drain counts from the moment its file exists."""
    holders = {}
    try:
        names = sorted(os.listdir(drain_dir))
    except OSError:
        return holders
    for name in names:
        path = os.path.join(drain_dir, name)
        if name.startswith(".") or not stat.S_ISREG(os.lstat(path).st_mode):
            continue
        with open(path, encoding="utf-8") as handle:
            holders[name] = holder_of(handle.read())
    return holders


def not_a_list(value):
    return "nginx_proxy_drain must be a YAML list of inventory names, such as [spark-a], not '%s'." % value


def unknown_engines(drain, state, host):
    """The refusal of drains the checker would ignore (names that are none of its engines), or ""."""
    names = list(((state or {}).get("statuses") or {}).keys())
    unknown = [name for name in drain if name not in names]
    if not unknown:
        return ""
    return ("nginx_proxy_drain names %s, which the proxy's membership checker on %s does not know: use the engines' "
            "inventory names (%s)." % (", ".join(unknown), host, ", ".join(names)))


def not_in_rotation(state, expected, host, timeout, unit):
    """Why a wait for ``expected`` to be in rotation failed."""
    return ("After %s s the proxy on %s has %s in rotation, expected %s. Engine states seen: %s. See journalctl -u %s."
            % (timeout, host, ", ".join(in_rotation(state)) or "no engine", ", ".join(expected),
               dict((state or {}).get("statuses") or {}), unit))


def drain_not_applied(state, drain, present, host, timeout, unit):
    """Why a wait for the checker to apply a drain (or its end) failed."""
    return ("After %s s the membership checker on %s has not %s %s (drained now: %s). See journalctl -u %s."
            % (timeout, host, "taken out of rotation" if present else "put back in rotation", ", ".join(drain),
               ", ".join((state or {}).get("drained") or []) or "none" if state is not None else "no state file",
               unit))
