# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.vllm_peers`` with a stand-in ``ss`` (the parsing and classing:
tests/unit/plugins/module_utils/test_peers.py). It only reads: check mode runs it in full and predicts no change."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import vllm_peers as module

SS = """\
0      0          10.89.0.3:8000      10.89.0.4:40112
0      0          127.0.0.1:8000      127.0.0.1:51000
0      0          10.89.0.3:8000      10.89.0.9:52000
"""


@pytest.fixture
def ss(tmp_path, monkeypatch):
    """An ``ss`` on PATH that prints SS and notes its arguments."""
    calls = tmp_path / "calls"
    program = tmp_path / "ss"
    program.write_text("#!/bin/sh\necho \"$@\" >> %s\ncat <<'EOF'\n%sEOF\n" % (calls, SS))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ.get("PATH", "")))
    return calls


@pytest.mark.parametrize("check_mode", [False, True])
def test_peers_are_read_the_same_in_check_mode(ss, run_module, check_mode):
    code, result = run_module(module, {"port": 8000, "allowed": ["10.89.0.4"], "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False
    assert result["others"] == ["10.89.0.9"] and result["connections"] == 3
    assert ss.read_text().split() == ["-Htn", "state", "established"]


def test_a_client_that_bypasses_the_proxy_fails_when_asked(ss, run_module):
    code, result = run_module(module, {"port": 8000, "allowed": ["10.89.0.4"], "fail_on_other": True,
                                       "_ansible_check_mode": True})
    assert code == 1 and result["changed"] is False
    assert result["msg"].startswith("clients bypass the proxy: 10.89.0.9 hold connections to port 8000 directly")


def test_the_engines_own_address_is_allowed_and_the_line_says_who_bypasses(ss, run_module):
    code, result = run_module(module, {"port": 8000, "allowed": ["10.89.0.4"], "probe_url": "http://10.89.0.9:8000",
                                       "fail_on_other": True})
    assert code == 0, result
    assert result["others"] == []
    assert result["report"] == "['10.89.0.4 allowed 1', '10.89.0.9 allowed 1', '127.0.0.1 loopback 1']"
    code, result = run_module(module, {"port": 8000, "allowed": ["10.89.0.4"], "probe_url": "http://spark-a:8000"})
    assert result["report"].endswith("; BYPASSING THE PROXY: 10.89.0.9")
