# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_command_progress``: a real command in the background, looked at in parts."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _command_progress as command

# Writes "arm n of 3" to stderr, a result to stdout, one line at a time.
ARMS = ("import sys, time\n"
        "for n in range(1, 4):\n"
        "    sys.stderr.write('arm %d of 3: working\\n' % n); sys.stderr.flush(); time.sleep(0.3)\n"
        "print('RESULT {\"ok\": true}')\n"
        "sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n")


def _follow(state, wait=0.2, timeout=0):
    looks = []
    while True:
        seen = command.look(state, wait, timeout=timeout)
        looks.append(seen)
        if seen["done"]:
            return looks
        state = seen["state"]


def test_progress_lines_come_while_it_runs_and_the_result_at_the_end():
    state = command.start([sys.executable, "-c", ARMS])
    looks = _follow(state)
    assert len(looks) >= 2 and not looks[0]["done"]
    lines = [line for seen in looks for line in seen["lines"]]
    assert lines == ["arm 1 of 3: working", "arm 2 of 3: working", "arm 3 of 3: working"]
    last = looks[-1]
    assert last["rc"] == 0 and last["stdout"] == 'RESULT {"ok": true}\n' and last["error"] is None
    assert last["stderr"].count("arm") == 3 and last["elapsed"] >= 0.9
    assert not os.path.exists(state["dir"])


def test_the_exit_status_is_the_commands():
    looks = _follow(command.start([sys.executable, "-c", ARMS, "3"]))
    assert looks[-1]["rc"] == 3


def test_the_command_runs_where_asked(tmp_path):
    looks = _follow(command.start([sys.executable, "-c", "import os; print(os.getcwd())"], chdir=str(tmp_path)))
    assert looks[-1]["stdout"].strip() == str(tmp_path)


def test_a_command_that_cannot_start_says_why():
    looks = _follow(command.start(["/nonexistent/benchmark"]))
    assert looks[-1]["rc"] == 127 and "/nonexistent/benchmark" in looks[-1]["error"]


def test_a_timeout_stops_the_command_and_its_children():
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "print(child.pid, flush=True)\n"
              "sys.stderr.write('started\\n'); sys.stderr.flush(); time.sleep(60)\n")
    state = command.start([sys.executable, "-c", script])
    started = time.time()
    looks = _follow(state, wait=0.2, timeout=1.5)
    last = looks[-1]
    assert time.time() - started < 20
    assert last["rc"] == -15 and last["error"] == "stopped after 1.5 s (timeout)"
    child = int(last["stdout"].split()[0])
    for _tick in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the command's child %d outlived the timeout" % child)
    assert "started" in [line for seen in looks for line in seen["lines"]]


def test_a_half_written_line_waits_for_its_end(tmp_path):
    state = {"dir": str(tmp_path), "pid": 0, "offset": 0, "started": time.time()}
    (tmp_path / "stderr").write_bytes(b"arm 1 of 2: done\narm 2 of")
    seen = command.look(state, 0)
    assert seen["lines"] == ["arm 1 of 2: done"] and seen["state"]["offset"] == len(b"arm 1 of 2: done\n")
    assert not seen["done"]


def test_a_lost_directory_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="is gone"):
        command.look({"dir": str(tmp_path / "gone"), "pid": 0, "offset": 0, "started": time.time()}, 1)


@pytest.mark.parametrize("argv", [[], [1, 2], "python"])
def test_start_refuses_what_is_no_argv(argv):
    with pytest.raises(ValueError):
        command.start(argv)
