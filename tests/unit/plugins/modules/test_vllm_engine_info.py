# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.vllm_engine_info`` against a fake /proc and a fake systemctl."""

from __future__ import annotations

import sys

import yaml

from ansible_collections.factory_floor.llm.plugins.modules import vllm_engine_info as module

ARGV = ["/opt/vllm/bin/vllm", "serve", "/models/A", "--port", "8000"]


def fake_systemctl(tmp_path, pid):
    path = tmp_path / "systemctl"
    path.write_text("#!%s\nprint('ActiveState=active'); print('MainPID=%d')\n" % (sys.executable, pid))
    path.chmod(0o755)
    return str(path)


def test_running_engine(run_module, tmp_path):
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"/opt/vllm/bin/python3\0/opt/vllm/bin/vllm\0serve\0/models/B\0--port\08000\0")
    (proc / "environ").write_bytes(b"FACTORY_FLOOR_CONFIG=abc\0VLLM_API_KEY=secret\0")
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": ARGV, "fingerprint": "abc",
                                       "proc": str(tmp_path / "proc"), "systemctl": fake_systemctl(tmp_path, 4242)})
    assert code == 0, result
    assert (result["running"], result["main_pid"], result["config_differs"]) == (True, 4242, False)
    assert (result["args_removed"], result["args_added"]) == (["/models/B"], ["/models/A"])
    assert "secret" not in str(result)
    assert set(result) - {"changed", "invocation", "warnings", "deprecations"} == set(yaml.safe_load(module.RETURN))


def test_nothing_running(run_module, tmp_path):
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": ARGV, "proc": str(tmp_path),
                                       "systemctl": fake_systemctl(tmp_path, 0), "_ansible_check_mode": True})
    assert code == 0, result
    assert (result["running"], result["main_pid"], result["changed"]) == (False, 0, False)


def test_systemctl_that_fails_is_named(run_module, tmp_path):
    failing = tmp_path / "systemctl"
    failing.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    failing.chmod(0o755)
    code, result = run_module(module, {"unit": "vllm-replica.service", "systemctl": str(failing)})
    assert code == 1 and result["msg"].startswith("Could not read the main process of vllm-replica.service: ")
    assert "Failed to connect to bus" in result["msg"]


def test_the_fingerprint_is_never_shown(run_module, tmp_path):
    """It is derived from the API key: a guess of the key could be checked against it offline."""
    digest = "9c1f0e4b7a2d" * 5
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"/opt/vllm/bin/vllm\0serve\0/models/A\0--port\08000\0")
    (proc / "environ").write_bytes(b"FACTORY_FLOOR_CONFIG=other\0")
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": ARGV, "fingerprint": digest,
                                       "proc": str(tmp_path / "proc"), "systemctl": fake_systemctl(tmp_path, 4242)})
    assert code == 0, result
    assert result["config_differs"] is True
    assert digest not in str(result)
