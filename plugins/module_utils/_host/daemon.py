# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shell the collection's daemons share (watchdog, memory guard, membership checker).

Standard library only, installed with each daemon on its host (the host programs' package). What every daemon
needs the same way: writing its status files atomically, one journal line format
(``<priority>`` then the message, which journald turns into the line's priority with
``SyslogLevelPrefix=yes``), telling systemd it is ready and still ticking
(``sd_notify``: ``READY=1`` once, ``WATCHDOG=1`` after each look, so a unit with
``WatchdogSec=`` is restarted when its loop stops), and the command line:
``--config FILE``, ``--check-config``, ``--once``, SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# syslog priorities, as journald reads them from a "<N>" prefix.
ERR = 3
WARNING = 4
NOTICE = 5
INFO = 6


def write_temp(path: str, text: str, mode: int = 0o644, sync: bool = False) -> str:
    """Write ``text`` to a new temporary file next to ``path`` and return its name.

    The name is ``.<name of path>.<random>``: hidden, and it does not end as ``path`` does,
    so whatever reads ``*.prom`` or ``*.json`` in that directory passes it over. With
    ``sync``, the bytes are on disk before it returns (fsync).
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def write_atomic(path: str, text: str, mode: int = 0o644, makedirs: bool = True, sync: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and rename.

    A reader (the playbooks, a peer, node_exporter) sees the old file or the new one, never
    half of one. The one writer of the daemons' status files, their textfile metrics and
    the maintenance lock. ``makedirs``: create the directory when it is missing (a
    daemon's own status directory) rather than fail (a directory someone else owns).
    ``sync`` as :func:`write_temp`.
    """
    if makedirs:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = write_temp(path, text, mode, sync)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def journal_line(priority: int, message: str) -> str:
    """One journal line: the syslog priority, then the message on one line."""
    return "<%d>%s" % (priority, message)


def event_line(priority: int, event: str, fields: dict) -> str:
    """A journal line whose message is one JSON object, ``event`` first among its keys' meaning."""
    record = {"event": event}
    record.update(fields)
    return journal_line(priority, json.dumps(record, sort_keys=True, default=str))


def emit(line: str) -> None:
    """Write a line to stdout (the journal, under systemd) at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def sd_notify(message: str, environ=None) -> bool:
    """Send ``message`` to systemd's notification socket; False when there is none (not under systemd)."""
    address = (environ if environ is not None else os.environ).get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


def parse_args(argv, description: str, dry_run: bool = False, prog: str | None = None):
    """The daemons' command line: ``--config FILE``, ``--check-config``, ``--once`` (and ``--dry-run``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", required=True, help="the JSON configuration its role writes")
    parser.add_argument("--check-config", action="store_true", help="check the configuration and exit")
    parser.add_argument("--once", action="store_true", help="one look, then exit")
    if dry_run:
        parser.add_argument("--dry-run", action="store_true", help="decide and log, act on nothing")
    return parser.parse_args(argv)


def load_json(path: str, load):
    """``load(data)`` of the JSON file at ``path``; raises OSError or ValueError with what is wrong."""
    with open(path, encoding="utf-8") as handle:
        return load(json.load(handle))


BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def boot_id(path: str = BOOT_ID_FILE) -> str:
    """This boot's id (the kernel's, as ``journalctl --list-boots`` shows it); "" when unreadable.

    A CLOCK_MONOTONIC reading means something only within the boot it was taken in.
    """
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def stamp(clock, wall, boot: str) -> dict:
    """A moment this host can measure the age of later: ``time`` (UNIX time, for people), ``mono``
    (CLOCK_MONOTONIC seconds) and ``boot`` (the boot the monotonic reading belongs to)."""
    return {"time": wall(), "mono": clock(), "boot": boot}


def age(record: dict, mono: float, wall: float, boot: str) -> float:
    """Seconds since ``record`` (:func:`stamp`) was taken on this host, at least 0.

    Measured on the monotonic clock when the record was taken in this boot: a step of the
    wall clock (NTP, an operator, a VM resumed) changes nothing. A record of an earlier boot
    (or without ``mono``) has only its UNIX time to go by.
    """
    try:
        if boot and record.get("boot") == boot and record.get("mono") is not None:
            return max(0.0, mono - float(record["mono"]))
        return max(0.0, wall - float(record.get("time") or 0.0))
    except (TypeError, ValueError):
        return max(0.0, wall)


def loop(tick, interval: float, stop: threading.Event, clock=time.monotonic, notify=sd_notify) -> None:
    """Call ``tick()`` every ``interval`` seconds until ``stop`` is set (SIGTERM, SIGINT).

    systemd is told the daemon is ready before the first look and that it still ticks
    after each one (``WATCHDOG=1``).
    """
    notify("READY=1")
    while not stop.is_set():
        started = clock()
        tick()
        notify("WATCHDOG=1")
        stop.wait(max(0.0, interval - (clock() - started)))
    notify("STOPPING=1")


def stop_event() -> threading.Event:
    """An event set by SIGTERM and SIGINT (the loop ends after the current look)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *args: stop.set())
    signal.signal(signal.SIGINT, lambda *args: stop.set())
    return stop


def status_server(body, address: str, port: int, path: str = "/state"):
    """An HTTP server answering ``GET path`` with ``body()`` (bytes of JSON); start it with ``serve_forever``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # the journal gets decisions, not every read
            pass

        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path.rstrip("/") not in (path, ""):
                payload, status = ('{"error": "not found; GET %s"}\n' % path).encode(), 404
            else:
                payload, status = body(), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    return server


def configure(argv, description: str, load, describe, prefix: str = "", dry_run: bool = False, prog: str | None = None):
    """The command line and the configuration: ``(args, config)``, or ``(None, exit status)`` when the run ends here.

    A configuration that cannot be read or is wrong is named on stderr (status 2);
    ``--check-config`` prints ``describe(path, config)`` (status 0).
    """
    args = parse_args(argv, description, dry_run=dry_run, prog=prog)
    try:
        config = load_json(args.config, load)
    except (OSError, ValueError) as exc:
        sys.stderr.write("%s%s: %s\n" % (prefix, args.config, exc))
        return None, 2
    if args.check_config:
        sys.stdout.write(prefix + describe(args.config, config) + "\n")
        return None, 0
    return args, config
