# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance lock the switch and model-upgrade playbooks hold on an engine host.

While the file exists and has not expired, the host's watchdog takes no action
(``_watchdog.read_lock``: any content counts as a lock; it shows ``holder`` and ``since``).
The playbooks write one JSON object on one line::

    {"holder": "switch-model", "since": 1795950000.0, "run": "20261129T110000Z-3f9a1c",
     "by": "ops@controller", "expires": 1795964400.0}

- ``holder``: which playbook (and step) holds it;
- ``since``: epoch seconds the holding run started;
- ``run``: the id of the run that wrote it; only that run rewrites or removes it;
- ``by``: who ran it (user@controller);
- ``expires``: epoch seconds, from the clock of the host the lock is on (the module runs
  there), after which the writer is presumed dead: another run may take the lock over, and
  the watchdog acts again (:func:`expires_at`). For a run, a lock without ``expires``
  (written by hand, by ``touch``, by an older version of the playbooks) never expires: it
  stays until someone removes the file. The watchdog honours such a lock for a set time
  after the file was last written (its ``lock_stale_after``), so that no forgotten file
  switches protection off for good.

An expiry is judged on the clock of the host the lock is on, never on another host's.
Pure logic plus small file operations (a path and the time are passed in), unit-tested
without Ansible.
"""

from __future__ import annotations

import datetime
import json
import os

from . import daemon

# What a lock is, compared with the run that asks.
FREE = "free"          # no file
OURS = "ours"          # written by this run
EXPIRED = "expired"    # another run's, past its expiry: may be taken over
HELD = "held"          # another run's (or unknown content), not expired: hands off

FIELDS = ("holder", "since", "run", "by", "expires")


class LockHeld(Exception):
    """The lock belongs to someone else and has not expired. ``lock`` is what the file holds."""

    def __init__(self, lock: dict, message: str):
        super().__init__(message)
        self.lock = lock


def json_number(value):
    """A JSON number as a float; None for anything else (a boolean, a string, null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def json_text(value):
    """A JSON value as text of at most 200 characters; None for null."""
    return None if value is None else str(value)[:200]


def parse(text: str) -> dict:
    """The fields of a lock file's content; a field that is absent or of the wrong type is None.

    Content that is not a JSON object (a hand-written note, ``touch``) is a lock without an
    owner or expiry: its first 100 characters become the holder (as the watchdog shows it).
    """
    lock = dict.fromkeys(FIELDS)
    stripped = text.strip()
    if not stripped:
        return lock
    try:
        data = json.loads(stripped)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        lock["holder"] = stripped[:100]
        return lock
    lock.update(holder=json_text(data.get("holder")), run=json_text(data.get("run")), by=json_text(data.get("by")),
                since=json_number(data.get("since")), expires=json_number(data.get("expires")))
    return lock


def read_record(path: str, parse_text, unreadable) -> dict | None:
    """``parse_text`` of the first 4 KiB of the small JSON file at ``path``, plus ``path`` and ``mtime``
    (epoch seconds); None when the file is absent; ``unreadable(reason)`` when it exists but cannot be read."""
    try:
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            record = parse_text(handle.read(4096))
    except OSError as exc:
        record = unreadable(exc.strerror or str(exc))
    record.update(path=path, mtime=mtime)
    return record


def _unreadable_lock(reason: str) -> dict:
    lock = dict.fromkeys(FIELDS)
    lock["holder"] = "unknown (unreadable: %s)" % reason
    return lock


def read(path: str) -> dict | None:
    """The lock at ``path`` (:func:`parse` plus ``path`` and ``mtime``, epoch seconds), or None when absent.

    A file that exists but cannot be read is a lock of unknown holder: held.
    """
    return read_record(path, parse, _unreadable_lock)


def expires_at(lock: dict, untimed_for: float) -> float:
    """When ``lock`` (:func:`read`) stops holding the watchdog back, epoch seconds on this host's clock.

    Its own ``expires`` when it has one; otherwise ``untimed_for`` seconds after the file was
    last written (``mtime``: ``touch`` it again to hold on).
    """
    if lock.get("expires") is not None:
        return lock["expires"]
    return (lock.get("mtime") or 0.0) + untimed_for


def state_of(lock: dict | None, run: str, now: float) -> str:
    """:data:`FREE`, :data:`OURS`, :data:`EXPIRED` or :data:`HELD` for the run ``run`` at ``now`` (epoch seconds)."""
    if lock is None:
        return FREE
    if lock.get("run") is not None and lock["run"] == run:
        return OURS
    if lock.get("expires") is not None and lock["expires"] <= now:
        return EXPIRED
    return HELD


def render(holder: str, since: float, run: str, by: str, expires: float) -> str:
    """The file content this run writes (one JSON line; ``holder`` and ``since`` first, as the watchdog reads them)."""
    return json.dumps({"holder": holder, "since": since, "run": run, "by": by, "expires": expires}) + "\n"


def when(epoch: float, now: float) -> str:
    """``epoch`` in words for people, UTC and relative to ``now``: ``2026-11-29 11:00:00 UTC (10 min ago)``."""
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = now - epoch
    span = abs(delta)
    if span < 120:
        words = "%d s" % round(span)
    elif span < 7200:
        words = "%d min" % round(span / 60)
    else:
        words = "%.1f h" % (span / 3600)
    return "%s (%s)" % (stamp, ("%s ago" if delta >= 0 else "in %s") % words)


def describe(lock: dict, now: float) -> str:
    """Who holds ``lock``, since when and until when, in words."""
    who = lock.get("holder") or "an unnamed holder"
    extra = []
    if lock.get("run"):
        extra.append("run " + lock["run"])
    if lock.get("by"):
        extra.append("by " + lock["by"])
    if extra:
        who += " (%s)" % ", ".join(extra)
    if lock.get("since") is not None:
        since = "since " + when(lock["since"], now)
    elif lock.get("mtime") is not None:
        since = "file written " + when(lock["mtime"], now)
    else:
        since = "since an unknown time"
    if lock.get("expires") is not None:
        until = ("expired " if lock["expires"] <= now else "expires ") + when(lock["expires"], now)
    else:
        until = "no expiry: it stays until the file is removed"
    return "%s, %s; %s" % (who, since, until)


def held_message(lock: dict, now: float) -> str:
    """Why this run refuses to take a lock another run holds, and what to do."""
    return ("The maintenance lock %s is held by %s. Another switch or model upgrade is running on this host, "
            "or one that ended without releasing it. If that run is dead (interrupted, its controller lost), "
            "remove the file (rm %s) and run again."
            % (lock.get("path"), describe(lock, now), lock.get("path")))


def create(path: str, content: str, mode: int = 0o644) -> bool:
    """Create ``path`` with ``content`` only if it does not exist (atomic); False when it already exists.

    The lock's one difference from the daemons' writer (``_daemon.write_atomic``): the
    whole file appears under its name only when no file has that name, so of two runs
    taking a free lock at once one wins; the content is on disk first (``sync``).
    """
    tmp = daemon.write_temp(path, content, mode, sync=True)
    try:
        os.link(tmp, path)  # fails with FileExistsError when another writer got there first
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def replace(path: str, content: str, mode: int = 0o644) -> None:
    """Write ``content`` to ``path`` in one step (a reader sees the old or the new content, never half)."""
    daemon.write_atomic(path, content, mode, makedirs=False, sync=True)


def take(path: str, holder: str, since: float, run: str, by: str, expires: float, now: float,
         mode: int = 0o644, check: bool = False) -> dict:
    """Take the lock for ``run``: create it, rewrite our own, or take over an expired one.

    Our own lock with the same ``holder``, ``since`` and ``by`` is left as it is (its
    expiry is not pushed back), so taking it twice changes nothing. Returns ``{"changed",
    "previous", "state"}`` (``state`` of the lock as found, see :func:`state_of`). Raises
    :class:`LockHeld` when another run holds it and it has not expired, also when another
    writer takes it between our look and our write. With ``check``, only says what it would do.
    """
    previous = read(path)
    state = state_of(previous, run, now)
    if state == HELD:
        raise LockHeld(previous, held_message(previous, now))
    wanted = {"holder": holder, "since": since, "run": run, "by": by}
    if state == OURS and all(previous.get(key) == value for key, value in wanted.items()):
        return {"changed": False, "previous": previous, "state": state}
    if check:
        return {"changed": True, "previous": previous, "state": state}
    content = render(holder, since, run, by, expires)
    if state == FREE:
        if not create(path, content, mode):
            # Another writer created it between our look and our write: judge theirs.
            return take(path, holder, since, run, by, expires, now, mode)
    else:
        replace(path, content, mode)
        # Two runs taking over the same expired lock: the last writer wins, the other stops.
        after = read(path)
        if state_of(after, run, now) != OURS:
            raise LockHeld(after, held_message(after, now))
    return {"changed": True, "previous": previous, "state": state}


def release(path: str, run: str, now: float, check: bool = False) -> dict:
    """Remove the lock if ``run`` wrote it; leave anyone else's in place.

    Returns ``{"changed", "previous", "state"}``; ``state`` :data:`HELD` or :data:`EXPIRED`
    means the file was someone else's and is left.
    """
    previous = read(path)
    state = state_of(previous, run, now)
    if state != OURS:
        return {"changed": False, "previous": previous, "state": state}
    if not check:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return {"changed": True, "previous": previous, "state": state}
