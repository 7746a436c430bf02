# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_systemd.py, the one reader of ``systemctl show``."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _systemd as sd

SHOW = ("LoadState=loaded\nActiveState=inactive\nSubState=dead\nResult=success\nExecMainStatus=0\nMainPID=0\n"
        "InvocationID=\nUnitFileState=enabled\nNRestarts=3\nExecMainStartTimestampMonotonic=12500000\n")


def test_parse_show_reads_every_property():
    state = sd.parse_show("vllm.service", SHOW)
    assert state == sd.UnitState("vllm.service", "loaded", "inactive", "dead", "success", 0, 3, 12500000,
                                 main_pid=None, invocation_id=None, unit_file_state="enabled")
    # vLLM's API server exits with status 0 when its engine core dies: down, although "success".
    assert state.down and state.wanted and not state.running


@pytest.mark.parametrize("load, active, sub, down", [
    ("loaded", "active", "running", False),
    ("loaded", "activating", "auto-restart", False),
    ("loaded", "deactivating", "stop-sigterm", False),
    ("loaded", "failed", "failed", True),
    ("loaded", "active", "exited", True),
    ("not-found", "inactive", "dead", True),
])
def test_down(load, active, sub, down):
    assert sd.UnitState("u", load, active, sub).down is down


def test_show_asks_for_the_properties_given():
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, "ActiveState=active\nSubState=running\n", ""

    state = sd.show("vllm.service", run, systemctl="/usr/bin/systemctl", properties=("ActiveState", "SubState"))
    assert calls == [["/usr/bin/systemctl", "show", "-p", "ActiveState,SubState", "--", "vllm.service"]]
    assert state.running and state.main_started is None


@pytest.mark.parametrize("answer, words", [
    ((1, "", "Failed to connect to bus"), "failed (rc 1): Failed to connect to bus"),
    ((0, "garbage\n", ""), "did not report ActiveState"),
])
def test_show_errors(answer, words):
    with pytest.raises(sd.UnitStateError) as err:
        sd.show("vllm.service", lambda argv: answer)
    assert words in str(err.value)


def test_as_dict_with_fields():
    state = sd.parse_show("u", SHOW)
    assert state.as_dict(("name", "n_restarts")) == {"name": "u", "n_restarts": 3}
    assert set(state.as_dict()) >= {"main_pid", "invocation_id", "unit_file_state"}


def test_run_for_daemons():
    assert sd.run([sys.executable, "-c", "print('out')"]) == (0, "out\n", "")
    rc, out, err = sd.run(["/nonexistent/systemctl", "show"])
    assert rc == 127 and out == "" and err.startswith("/nonexistent/systemctl show could not run: ")
