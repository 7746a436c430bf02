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


def systemctl_with(tmp_path, pid, need_daemon_reload):
    path = tmp_path / "systemctl"
    path.write_text("#!%s\nprint('ActiveState=active'); print('MainPID=%d'); print('NeedDaemonReload=%s')\n"
                    % (sys.executable, pid, "yes" if need_daemon_reload else "no"))
    path.chmod(0o755)
    return str(path)


def engine_process(tmp_path, max_num_seqs, fingerprint):
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "cmdline").write_bytes(("/usr/bin/docker\0run\0--name\0vllm-replica\0img\0serve\0/models/A\0--max-num-seqs\0%d\0"
                                    % max_num_seqs).encode())
    (proc / "environ").write_bytes(("FACTORY_FLOOR_CONFIG=%s\0VLLM_API_KEY=secret\0" % fingerprint).encode())
    return str(tmp_path / "proc")


RENDERED = ["/usr/bin/docker", "run", "--name", "vllm-replica", "img", "serve", "/models/A", "--max-num-seqs", "10"]


def test_a_restart_that_ran_the_old_definition_fails_and_says_why(run_module, tmp_path):
    # Issue 33, item 18: the unit file says 10, systemd had not reloaded it, the restart ran 12 again.
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": RENDERED, "fingerprint": "new",
                                       "require_match": True, "settle": 0, "proc": engine_process(tmp_path, 12, "old"),
                                       "systemctl": systemctl_with(tmp_path, 4242, need_daemon_reload=True)})
    assert code == 1
    assert result["need_daemon_reload"] is True
    assert result["msg"].startswith("vllm-replica.service was just started, and it does not run the configuration rendered"
                                    " for it: its vLLM arguments differ (runs --max-num-seqs 12; rendered --max-num-seqs 10)")
    assert "NeedDaemonReload=yes" in result["msg"] and "daemon-reload" in result["msg"]
    assert "secret" not in str(result)


def test_a_restart_onto_the_rendered_configuration_passes(run_module, tmp_path):
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": RENDERED, "fingerprint": "new",
                                       "require_match": True, "settle": 0, "proc": engine_process(tmp_path, 10, "new"),
                                       "systemctl": systemctl_with(tmp_path, 4242, need_daemon_reload=False)})
    assert code == 0, result
    assert (result["config_differs"], result["args_removed"], result["need_daemon_reload"]) == (False, [], False)


def test_only_the_fingerprint_differs_is_named_too(run_module, tmp_path):
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": RENDERED, "fingerprint": "new",
                                       "require_match": True, "settle": 0, "proc": engine_process(tmp_path, 10, "old"),
                                       "systemctl": systemctl_with(tmp_path, 4242, need_daemon_reload=False)})
    assert code == 1
    assert "configuration fingerprint (FACTORY_FLOOR_CONFIG) is not the rendered one" in result["msg"]
    assert "systemctl cat vllm-replica.service" in result["msg"]
    assert "secret" not in str(result)


def test_plan_reads_need_daemon_reload_without_failing(run_module, tmp_path):
    code, result = run_module(module, {"unit": "vllm-replica.service", "argv": RENDERED, "fingerprint": "new",
                                       "proc": engine_process(tmp_path, 12, "old"),
                                       "systemctl": systemctl_with(tmp_path, 4242, need_daemon_reload=True)})
    assert code == 0, result
    assert (result["need_daemon_reload"], result["config_differs"]) == (True, True)
