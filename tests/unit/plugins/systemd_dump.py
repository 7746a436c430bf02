# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What systemd itself makes of a unit's ExecStart= line, without a running systemd.

``systemd --test --system --unit=U`` (as a user other than root, which it requires) loads
the unit with systemd's own parser - unquoting, C unescaping, ``%`` specifiers - and dumps
each command as ``Command Line: ...``, every word shell-quoted. Environment variable
substitution happens later, when the command is spawned; the collection's lines start
with the ``:`` prefix, which turns it off, so the dumped words are the ones the program
gets. (That last step was checked once by executing such a line under a real systemd
user manager: see the commit that added this file.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

SYSTEMD = next((path for path in ("/lib/systemd/systemd", "/usr/lib/systemd/systemd") if os.path.exists(path)), None)
SETPRIV = shutil.which("setpriv")
# systemd --test refuses to run as root.
AVAILABLE = SYSTEMD is not None and (os.geteuid() != 0 or SETPRIV is not None)
WHY_NOT = "systemd (or, as root, setpriv) is not installed"

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def words(line: str) -> list:
    """The words of a dumped ``Command Line:`` (systemd's shell quoting: "..." with \\-escapes)."""
    found, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        if line[i] != '"':
            end = line.find(" ", i)
            end = len(line) if end < 0 else end
            found.append(line[i:end])
            i = end
            continue
        i += 1
        buf = []
        while line[i] != '"':
            if line[i] != "\\":
                buf.append(line[i])
                i += 1
                continue
            nxt = line[i + 1]
            if nxt in '"\\$`':
                buf.append(nxt)
                i += 2
            elif nxt in _ESCAPES:
                buf.append(_ESCAPES[nxt])
                i += 2
            elif nxt in "01234567":
                buf.append(chr(int(line[i + 1:i + 4], 8)))
                i += 4
            elif nxt == "x":
                buf.append(chr(int(line[i + 2:i + 4], 16)))
                i += 4
            else:
                raise ValueError("unknown escape \\%s in %r" % (nxt, line))
        found.append("".join(buf))
        i += 1
    return found


def exec_start(unit_text: str, name: str = "probe.service") -> list:
    """The words systemd passes to the program of the ExecStart= line of ``unit_text``."""
    # Readable by the unprivileged user systemd --test runs as (pytest's own tmp_path is not).
    unit_dir = tempfile.mkdtemp(prefix="ff-systemd-units-")
    try:
        os.chmod(unit_dir, 0o755)
        # Only this directory: the default transaction then needs nothing but sysinit.target.
        for file_name, text in (("sysinit.target", "[Unit]\nDescription=stand-in\n"),
                                (name, unit_text.replace("[Unit]\n", "[Unit]\nDefaultDependencies=no\n", 1))):
            with open(os.path.join(unit_dir, file_name), "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(os.path.join(unit_dir, file_name), 0o644)
        argv = [SYSTEMD, "--test", "--system", "--unit=" + name, "--no-pager", "--log-target=console"]
        if os.geteuid() == 0:
            argv = [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"] + argv
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "SYSTEMD_UNIT_PATH": unit_dir}
        done = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    finally:
        shutil.rmtree(unit_dir, ignore_errors=True)
    output = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
    lines = [line.strip()[len("Command Line: "):] for line in output.splitlines()
             if line.strip().startswith("Command Line: ")]
    problems = [line for line in output.splitlines() if name + ":" in line and "/" in line]
    assert len(lines) == 1, "systemd --test did not dump one command line (rc %s):\n%s" % (done.returncode, output[-3000:])
    assert not problems, problems
    return words(lines[0])
