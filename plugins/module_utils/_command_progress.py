# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A long command in the background, looked at in parts: its new stderr lines (its progress) and, at the end, its result.

Pure standard library. The command runs under a small Python wrapper in a session of its
own (so nothing ties it to the process that started it, and a timeout can stop it and its
children together), its stdout and stderr to files in a private directory, and the wrapper
writes its exit status there when it ends. :func:`start` launches it; :func:`look` waits up
to a number of seconds for it to end and returns the stderr lines written since the last
look, and when it has ended its status and output (and removes the directory).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The wrapper: run argv with stdout/stderr to files, write the exit status when it ends
# (atomically: rc.tmp, then renamed), so a look sees either no status or the whole one.
_WRAPPER = r"""
import json, os, signal, subprocess, sys
# Detach: the process that started this returns at once; this one lives on in its session.
if os.fork() > 0:
    os._exit(0)
# A SIGTERM to the group (a timeout) ends the command; this one stays to write its status.
signal.signal(signal.SIGTERM, lambda signum, frame: None)
d, cwd, argv = sys.argv[1], sys.argv[2] or None, sys.argv[3:]
with open(os.path.join(d, "stdout"), "wb") as out, open(os.path.join(d, "stderr"), "wb") as err:
    try:
        rc, why = subprocess.call(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err), None
    except OSError as exc:
        rc, why = 127, "%s: %s" % (argv[0], exc)
with open(os.path.join(d, "rc.tmp"), "w") as handle:
    json.dump({"rc": rc, "error": why}, handle)
os.rename(os.path.join(d, "rc.tmp"), os.path.join(d, "rc"))
"""

#: Longest stderr kept in a final result, in characters (the end of it).
STDERR_CHARS = 20000


def start(argv, chdir=None, python=None, clock=time.time):
    """Start ``argv`` in the background; return the state :func:`look` goes on from.

    The state (JSON-able): ``dir`` (the private directory), ``pid`` (the wrapper, leader
    of the command's process group), ``offset`` (stderr bytes already returned), ``started``
    (epoch seconds, ``clock``'s).
    """
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings, got %r" % (argv,))
    directory = tempfile.mkdtemp(prefix="factory-floor-command-")
    # The wrapper's first process leads a new session and process group and exits at once
    # (waited for here); its child runs the command in that group (pgid = the first pid).
    # The command runs detached in its own session while the module polls its progress: run_command would wait.
    # pylint: disable-next=ansible-bad-function
    process = subprocess.Popen([python or sys.executable, "-c", _WRAPPER, directory, chdir or ""] + list(argv),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               close_fds=True, start_new_session=True)
    process.wait()
    return {"dir": directory, "pid": process.pid, "offset": 0, "started": clock()}


def _new_lines(path, offset, final):
    """(lines, new offset) of the complete lines written to ``path`` after ``offset`` (every line when ``final``)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return [], offset
    if not final:
        end = data.rfind(b"\n")
        data = data[:end + 1] if end >= 0 else b""
    text = data.decode("utf-8", errors="replace")
    lines = [line.split("\r")[-1].rstrip() for line in text.splitlines()]
    return [line for line in lines if line.strip()], offset + len(data)


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def stop(state, grace=10.0, sleep=time.sleep):
    """SIGTERM to the command's process group, SIGKILL after ``grace`` seconds if it is still there."""
    pgid = int(state["pid"])
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        waited = 0.0
        while waited < wait and not os.path.exists(os.path.join(state["dir"], "rc")):
            sleep(0.2)
            waited += 0.2
        if os.path.exists(os.path.join(state["dir"], "rc")):
            return


def look(state, wait, timeout=0, clock=time.time, sleep=time.sleep):
    """Wait up to ``wait`` seconds for the command to end; say what it wrote to stderr meanwhile.

    Returns a dict: ``lines`` (stderr lines since the last look, complete lines only while
    it runs), ``state`` (the state to look again from), ``done``; when done also ``rc``,
    ``stdout``, ``stderr`` (its end, :data:`STDERR_CHARS`), ``error`` (why the command did
    not start, or that it timed out), ``elapsed`` (seconds since :func:`start`). With
    ``timeout`` (seconds since the start, 0 none) a command still running past it is
    stopped (:func:`stop`): ``rc`` is then -15 (it ended on SIGTERM) or -9. The directory
    is removed once done.
    """
    directory = state["dir"]
    rc_file = os.path.join(directory, "rc")
    began = clock()
    timed_out = False
    while not os.path.exists(rc_file):
        if timeout and clock() - float(state["started"]) >= timeout:
            stop(state, sleep=sleep)
            timed_out = True
            break
        if clock() - began >= wait:
            break
        if not os.path.isdir(directory):
            raise ValueError("%s is gone: the command's state is lost (was the host restarted?)" % directory)
        sleep(min(1.0, max(0.05, wait / 10.0)))
    done = os.path.exists(rc_file) or timed_out
    lines, offset = _new_lines(os.path.join(directory, "stderr"), int(state["offset"]), done)
    result = {"lines": lines, "state": dict(state, offset=offset), "done": done}
    if not done:
        return result
    ended = {}
    try:
        ended = json.loads(_read(rc_file) or "{}")
    except ValueError:
        pass
    stderr = _read(os.path.join(directory, "stderr"))
    result.update(
        rc=ended["rc"] if "rc" in ended else -int(signal.SIGKILL),
        stdout=_read(os.path.join(directory, "stdout")),
        stderr=stderr[-STDERR_CHARS:],
        error=("stopped after %s s (timeout)" % timeout) if timed_out else ended.get("error"),
        elapsed=round(clock() - float(state["started"]), 3),
    )
    shutil.rmtree(directory, ignore_errors=True)
    return result
