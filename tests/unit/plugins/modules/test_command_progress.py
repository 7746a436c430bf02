# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.command_progress on a real command."""

from __future__ import annotations

import sys

from ansible_collections.factory_floor.llm.plugins.modules import command_progress
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_command_progress import ARMS


def _runs(run_module, args):
    runs, resume = [], None
    while True:
        code, result = run_module(command_progress, dict(args, **({"resume": resume} if resume else {})))
        runs.append((code, result))
        if code != 0 or result["progress"]["done"]:
            return runs
        resume = result["progress"]["resume"]


def test_runs_in_parts_and_returns_like_command(run_module):
    runs = _runs(run_module, {"argv": [sys.executable, "-c", ARMS], "progress_interval": 0.2})
    code, last = runs[-1]
    assert code == 0 and len(runs) >= 2
    assert [line for _c, r in runs for line in r["progress"]["lines"]] == [
        "arm %d of 3: working" % n for n in (1, 2, 3)]
    assert last["rc"] == 0 and last["stdout_lines"] == ['RESULT {"ok": true}'] and last["changed"] is True
    assert len(last["stderr_lines"]) == 3 and last["cmd"][0] == sys.executable


def test_a_failing_command_fails_naming_its_status_and_last_line(run_module):
    code, result = _runs(run_module, {"argv": [sys.executable, "-c", ARMS, "2"], "progress_interval": 0})[-1]
    assert code == 1 and result["rc"] == 2
    assert "exited with status 2" in result["msg"] and result["msg"].endswith("arm 3 of 3: working")
    assert len(result["progress"]["lines"]) == 3


def test_check_mode_runs_nothing(run_module, tmp_path):
    marker = tmp_path / "ran"
    code, result = run_module(command_progress, {"argv": ["touch", str(marker)], "_ansible_check_mode": True})
    assert code == 0 and result["skipped"] is True and not marker.exists()


def test_bad_intervals(run_module):
    code, result = run_module(command_progress, {"argv": ["true"], "timeout": -1})
    assert code == 1 and "timeout must be 0 or more seconds" in result["msg"]
