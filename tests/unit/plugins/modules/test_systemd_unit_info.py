# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.systemd_unit_info`` against a fake systemctl and real files."""

from __future__ import annotations

import os
import sys
import time

import yaml

from ansible_collections.factory_floor.llm.plugins.modules import systemd_unit_info as module


def fake_systemctl(tmp_path, answers):
    """A systemctl whose `show ... -- UNIT` prints answers[UNIT] (a dict of properties); it records each call."""
    path = tmp_path / "systemctl"
    path.write_text(
        "#!%s\nimport json, sys\nanswers = json.loads(%r)\nopen(%r, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "print('\\n'.join('%%s=%%s' %% kv for kv in answers[sys.argv[-1]].items()))\n"
        % (sys.executable, __import__("json").dumps(answers), str(tmp_path / "calls")))
    path.chmod(0o755)
    return str(path)


def started(seconds_ago):
    return str(int((time.monotonic() - seconds_ago) * 1e6))


def write(path, seconds_ago):
    path.write_text("x")
    when = time.time() - seconds_ago
    os.utime(path, (when, when))
    return str(path)


def test_the_daemon_an_interrupted_run_left_is_named_for_a_restart(run_module, tmp_path):
    config = write(tmp_path / "watchdog.json", seconds_ago=60)
    code_file = write(tmp_path / "watchdog.py", seconds_ago=90_000)
    systemctl = fake_systemctl(tmp_path, {
        "w.service": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "MainPID": "42",
                      "NeedDaemonReload": "no", "ExecMainStartTimestampMonotonic": started(3_600)},
        "m.service": {"LoadState": "loaded", "ActiveState": "inactive", "SubState": "dead", "MainPID": "0",
                      "NeedDaemonReload": "yes", "ExecMainStartTimestampMonotonic": "0"},
    })
    code, result = run_module(module, {"units": ["w.service", "m.service"], "files": [config, code_file, "/nonexistent"],
                                       "systemctl": systemctl, "_ansible_check_mode": True})
    assert code == 0, result
    assert result["changed"] is False
    assert result["restart"] == ["w.service"]
    assert result["need_daemon_reload"] is True
    watchdog = result["units"]["w.service"]
    assert watchdog["files_changed"] == [config]
    assert watchdog["reasons"][0].startswith(config + " was modified ")
    assert abs(watchdog["started"] - (time.time() - 3_600)) < 5
    assert result["units"]["m.service"]["reasons"] == [] and result["units"]["m.service"]["started"] is None
    assert "show -p LoadState,ActiveState,SubState,MainPID,NeedDaemonReload,ExecMainStartTimestampMonotonic -- w.service" in (
        tmp_path / "calls").read_text()
    assert set(result) - {"changed", "invocation", "warnings", "deprecations"} == set(yaml.safe_load(module.RETURN))


def test_a_daemon_on_its_files_is_left_running(run_module, tmp_path):
    config = write(tmp_path / "watchdog.json", seconds_ago=120)
    systemctl = fake_systemctl(tmp_path, {
        "w.service": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "MainPID": "42",
                      "NeedDaemonReload": "no", "ExecMainStartTimestampMonotonic": started(60)}})
    code, result = run_module(module, {"units": ["w.service"], "files": [config], "systemctl": systemctl})
    assert code == 0, result
    assert (result["restart"], result["need_daemon_reload"], result["units"]["w.service"]["files_changed"]) == ([], False, [])


def test_systemctl_that_fails_is_named(run_module, tmp_path):
    failing = tmp_path / "systemctl"
    failing.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    failing.chmod(0o755)
    code, result = run_module(module, {"units": ["w.service"], "systemctl": str(failing)})
    assert code == 1
    assert result["msg"].startswith("Could not read whether systemd runs w.service as it is on disk: ")
    assert "Failed to connect to bus" in result["msg"]
