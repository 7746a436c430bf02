# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.link_collective with the rank's process faked (no torch here).

The all-reduce itself runs in the lab (the link scenario) inside the serving image; here the
module's own part: the command it runs, the result it reads back, and that check mode runs the
same read-only probe (it loads nothing but the link, and a check must still measure it).
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.modules import link_collective

RESULT = {"ok": True, "backend": "gloo", "rank": 0, "world_size": 2, "bytes": 4194304, "iterations": 5,
          "seconds": 0.5, "busbw_gb_s": 0.04, "error": ""}


@pytest.fixture
def ran(monkeypatch):
    calls = []

    def run_with_timeout(argv, timeout, env=None):
        calls.append(list(argv))
        return 0, "FACTORY_FLOOR_COLLECTIVE=" + json.dumps(RESULT) + "\n", "", False

    monkeypatch.setattr(lc, "run_with_timeout", run_with_timeout)
    return calls


@pytest.mark.parametrize("check_mode", [False, True])
def test_runs_the_rank_and_reads_its_result(ran, run_module, check_mode):
    code, result = run_module(link_collective, {"runtime": "venv", "venv": "/opt/vllm", "rank": 0,
                                                "master_addr": "127.0.0.1", "master_port": 29511,
                                                "backend": "gloo", "size_mib": 4, "iterations": 5,
                                                "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False and result["ok"] is True and result["busbw_gb_s"] == 0.04
    assert len(ran) == 1 and "--master-port" in ran[0] and "29511" in ran[0]


def test_a_rank_that_prints_nothing_is_a_failure_with_its_output(monkeypatch, run_module):
    monkeypatch.setattr(lc, "run_with_timeout", lambda argv, timeout, env=None: (1, "", "ImportError: no torch\n", False))
    code, result = run_module(link_collective, {"runtime": "venv", "venv": "/opt/vllm", "rank": 1,
                                                "master_addr": "127.0.0.1", "master_port": 29511,
                                                "backend": "gloo", "_ansible_check_mode": True})
    assert code == 0 and result["ok"] is False
    assert "no torch" in result["error"] and "rc 1" in result["error"]
