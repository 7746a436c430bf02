# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.vllm_health against a loopback fake vLLM server."""

from __future__ import annotations

import json
import os
import time

import pytest

from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.modules import vllm_health
from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM, free_port

RETURN_KEYS = {"changed", "status", "elapsed", "models", "model_roots", "version", "probe_latency", "error", "url", "attempts",
               "reason", "crashes"}


@pytest.fixture
def server():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


@pytest.fixture
def systemd(monkeypatch):
    """Answers for systemctl/journalctl through AnsibleModule.run_command; records the calls."""
    fake = {"show": "LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\nExecMainStatus=0\n",
            "journal": "", "calls": []}

    def run_command(self, args, **kwargs):
        fake["calls"].append(list(args))
        if args[1] == "show":
            return 0, fake["show"], ""
        return 0, fake["journal"], ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    return fake


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("probe", ["health", "models", "generate"])
def test_serving(server, run_module, probe, check_mode):
    code, result = run_module(vllm_health, {"url": server.url + "/v1", "model": "tiny-llama", "probe": probe, "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert RETURN_KEYS <= set(result)
    assert result["changed"] is False and "failed" not in result
    assert result["status"] == "serving" and result["error"] is None
    assert result["models"] == ["tiny-llama"] and result["version"] == "0.32.0"
    assert result["url"] == server.url and result["attempts"] == 1
    assert isinstance(result["elapsed"], float) and isinstance(result["probe_latency"], float)
    assert ("POST" in [r[0] for r in server.requests]) == (probe == "generate")


def test_timeout_zero_reports_without_failing(run_module):
    url = "http://127.0.0.1:%d" % free_port()
    code, result = run_module(vllm_health, {"url": url, "timeout": 0})
    assert code == 0, result
    assert result["status"] == "loading" and result["attempts"] == 1 and result["changed"] is False
    assert "connection refused" in result["error"]


def test_timeout_fails_naming_endpoint_elapsed_and_last_state(run_module):
    url = "http://127.0.0.1:%d" % free_port()
    started = time.monotonic()
    code, result = run_module(vllm_health, {"url": url, "timeout": 0.6, "interval": 0.2})
    assert time.monotonic() - started < 5
    assert code == 1 and result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("vLLM at %s was not serving after " % url)
    assert "(timeout 0.6s, " in result["msg"]
    assert "last status loading, last error: GET %s/health: connection refused" % url in result["msg"]
    assert result["status"] == "loading" and result["attempts"] >= 2 and result["elapsed"] >= 0.6


def test_wrong_model_times_out_as_wrong_model(server, run_module):
    code, result = run_module(vllm_health, {"url": server.url, "model": "llama-70b", "timeout": 0.3, "interval": 0.1})
    assert code == 1
    assert result["status"] == "wrong_model" and result["models"] == ["tiny-llama"]
    assert "last status wrong_model" in result["msg"]


def test_unit_failed_fails_at_once_with_journal(run_module, systemd):
    systemd["show"] = "LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n"
    systemd["journal"] = "vllm[812]: ValueError: No available memory for the cache blocks.\nsystemd[1]: vllm.service: Failed.\n"
    started = time.monotonic()
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service", "timeout": 1200})
    assert time.monotonic() - started < 10  # not after the 1200 s timeout
    assert code == 1 and result["attempts"] == 1
    assert result["msg"].startswith("systemd unit vllm.service is failed (ActiveState=failed, SubState=failed, "
                                    "Result=exit-code, ExecMainStatus=1)")
    assert "No available memory for the cache blocks." in result["msg"]
    assert result["journal"] == ["vllm[812]: ValueError: No available memory for the cache blocks.",
                                 "systemd[1]: vllm.service: Failed."]
    assert result["unit_state"] == {"name": "vllm.service", "load_state": "loaded", "active_state": "failed",
                                    "sub_state": "failed", "result": "exit-code", "exec_main_status": 1,
                                    "n_restarts": None, "main_started": None}
    assert result["reason"] == "unit_down" and result["crashes"] == 0
    assert systemd["calls"] == [
        ["/usr/bin/systemctl", "show", "-p", "LoadState,ActiveState,SubState,Result,ExecMainStatus,NRestarts,"
         "ExecMainStartTimestampMonotonic,InvocationID", "--", "vllm.service"],
        ["/usr/bin/journalctl", "-u", "vllm.service", "-n", "600", "--no-pager"],
        # what vLLM was doing: a unit that names no run (no InvocationID) is read by its name
        ["/usr/bin/journalctl", "-q", "-a", "-o", "cat", "-n", "300", "--no-pager", "-u", "vllm.service"],
    ]


def test_crash_loop_fails_at_the_second_crash_with_journal(run_module, systemd, monkeypatch):
    """Restart=always: the unit crashes, systemd starts it again, it crashes again. The module gives
    up at the second crash, not after its 1800 s budget nor at systemd's start limit."""
    runs = iter([(0, 100), (0, 100), (1, 200), (1, 200), (2, 300)] + [(2, 300)] * 100)
    shows = []

    def show():
        n, started = next(runs)
        shows.append(n)
        return ("LoadState=loaded\nActiveState=activating\nSubState=start\nResult=success\nExecMainStatus=0\n"
                "NRestarts=%d\nExecMainStartTimestampMonotonic=%d\n" % (n, started))

    def run_command(self, args, **kwargs):
        systemd["calls"].append(list(args))
        if args[1] == "show":
            return 0, show(), ""
        return 0, "vllm[9]: RuntimeError: Engine core initialization failed.\n", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    started = time.monotonic()
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service",
                                            "interval": 0.05})
    assert time.monotonic() - started < 10
    assert code == 1 and result["reason"] == "crash_loop" and result["crashes"] == 2
    assert shows == [0, 0, 1, 1, 2]
    assert result["msg"].startswith("systemd unit vllm.service crashed 2 times since the wait for vLLM at ")
    assert result["journal"] == ["vllm[9]: RuntimeError: Engine core initialization failed."]
    assert "Engine core initialization failed." in result["msg"]
    assert result["unit_state"]["n_restarts"] == 2


KEY = "sk-lab-0123456789abcdef"
NEXT_KEY = "sk-next-fedcba9876543210"


def test_a_crash_loop_quotes_the_cause_and_never_a_key(run_module, systemd, monkeypatch):
    """Issue 35: docker refused --ulimit=memlock=-1; the headline quotes that line. The journal holds the api_key
    (whole, and in a line cut at 300 characters) and a rotation's next key no_log does not know: none reaches the
    result, in the message, the journal or the phase."""
    runs = iter([(0, 100), (0, 100), (1, 200), (1, 200), (2, 300)] + [(2, 300)] * 100)
    refused = ("docker: Error response from daemon: failed to create task for container: failed to create shim task: "
               "OCI runtime create failed: runc create failed: unable to start container process: error during "
               "container init: error setting rlimit type 8: operation not permitted: unknown.")
    journal = ["Jan 02 03:04:05 spark-a vllm-replica[7]: INFO non-default args: {'api_key': ['%s', '%s']}"
               % (KEY, NEXT_KEY),
               "Jan 02 03:04:05 spark-a vllm-replica[7]: ValueError: %s --api-key %s" % ("y" * 205, KEY),
               "Jan 02 03:04:06 spark-a vllm-replica[8]: " + refused,
               "Jan 02 03:04:06 spark-a systemd[1]: vllm-replica.service: Failed with result 'exit-code'."]

    def run_command(self, args, **kwargs):
        systemd["calls"].append(list(args))
        if args[1] == "show":
            n, started = next(runs)
            return 0, ("LoadState=loaded\nActiveState=activating\nSubState=start\nResult=success\nExecMainStatus=0\n"
                       "NRestarts=%d\nExecMainStartTimestampMonotonic=%d\n" % (n, started)), ""
        return 0, "\n".join(journal) + "\n", ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm-replica.service",
                                            "interval": 0.05, "api_key": KEY})
    assert code == 1 and result["reason"] == "crash_loop"
    headline = result["msg"].split("\n")[0]
    assert ': a crash loop, giving up - its journal says: "%s" (' % refused in headline
    assert result["msg"].endswith("Failed with result 'exit-code'.\n-- end of the unit's lines --")
    text = json.dumps(result)
    for key in (KEY, NEXT_KEY):
        for piece in (key[:7], key[-7:]):
            assert piece not in text
    # The line cut in the phase's root cause (240 characters) had the key at its end: hidden before the cut.
    assert result["journal"][1].endswith("--api-key <hidden>")


def test_unit_running_is_watched_until_timeout(run_module, systemd):
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm", "timeout": 0.3, "interval": 0.1})
    assert code == 1 and result["msg"].startswith("vLLM at ")
    assert "unit_state" not in result
    # The state after every probe; on the timeout, once, the journal, the unit's processes and
    # what vLLM was doing (the unit names no run here: its journal by name).
    assert len(systemd["calls"]) == result["attempts"] + 3
    assert systemd["calls"][-3:] == [["/usr/bin/journalctl", "-u", "vllm", "-n", "600", "--no-pager"],
                                     ["/usr/bin/systemctl", "show", "-p", "MainPID", "--", "vllm"],
                                     ["/usr/bin/journalctl", "-q", "-a", "-o", "cat", "-n", "300", "--no-pager", "-u", "vllm"]]
    assert "journal" in result and "processes" in result


def test_container_processes_are_read_on_a_timeout(run_module, systemd):
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm-replica.service",
                                            "container_engine": "/usr/bin/docker", "timeout": 0.3, "interval": 0.1})
    assert code == 1 and "processes" in result
    # After the unit's MainPID, the container's main process (docker runs it under containerd-shim).
    assert systemd["calls"][-2] == ["/usr/bin/docker", "container", "inspect", "--format", "{{.State.Pid}}", "vllm-replica"]


def test_unit_state_unreadable(run_module, monkeypatch, systemd):
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, args, **kw: (1, "", "Failed to connect to bus"))
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service"})
    assert code == 1
    assert "Could not read the state of systemd unit vllm.service" in result["msg"]
    assert "Failed to connect to bus" in result["msg"]


def test_wait_for_dead_sees_hung_engine(server, run_module):
    server.completion_delay = 30
    code, result = run_module(vllm_health, {"url": server.url, "wait_for": "dead", "probe": "generate", "generate_timeout": 0.3, "timeout": 5})
    assert code == 0, result
    assert result["status"] == "dead"
    assert result["error"].startswith("1-token generation did not finish within 0.3s")


def test_api_key_is_sent_and_never_shown(server, run_module):
    server.api_key = "sk-secret-1234"
    code, result = run_module(vllm_health, {"url": server.url, "api_key": "sk-secret-1234", "probe": "models"})
    assert code == 0 and result["status"] == "serving"
    assert "sk-secret-1234" not in json.dumps(result)


def test_model_roots_returned(server, run_module):
    server.models = ["lab-chat"]
    server.roots = {"lab-chat": "/opt/models/tiny-random"}
    code, result = run_module(vllm_health, {"url": server.url, "probe": "models", "timeout": 0})
    assert code == 0 and result["model_roots"] == {"lab-chat": "/opt/models/tiny-random"}


def test_api_key_from_vllm_api_key(server, run_module, monkeypatch):
    server.api_key = "sk-from-env"
    monkeypatch.setenv("VLLM_API_KEY", "sk-from-env")
    code, result = run_module(vllm_health, {"url": server.url, "probe": "models"})
    assert code == 0 and result["status"] == "serving"


def test_rejected_api_key_fails_at_once(server, run_module):
    server.api_key = "sk-right"
    code, result = run_module(vllm_health, {"url": server.url, "api_key": "sk-wrong", "probe": "models", "timeout": 1200})
    assert code == 1 and result["attempts"] == 1
    assert "rejected the api_key (HTTP 401)" in result["msg"]


@pytest.mark.parametrize("args, words", [
    ({"url": "127.0.0.1:8000"}, "url must be an http:// or https:// URL"),
    ({"url": "http://127.0.0.1:8000", "interval": 0}, "interval must be more than 0 seconds"),
    ({"url": "http://127.0.0.1:8000", "timeout": -1}, "timeout must be 0 or more seconds"),
    ({"url": "http://127.0.0.1:8000", "probe": "metrics"}, "value of probe must be one of"),
])
def test_bad_arguments(run_module, args, words):
    code, result = run_module(vllm_health, args)
    assert code == 1 and words in result["msg"]


def test_requests_missing(run_module, monkeypatch):
    monkeypatch.setattr(vllm_health, "HAS_REQUESTS", False)
    monkeypatch.setattr(vllm_health, "REQUESTS_IMPORT_ERROR", "ModuleNotFoundError: No module named 'requests'")
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:8000"})
    assert code == 1
    assert "Failed to import the required Python library (requests)" in result["msg"]


# --- progress lines of a long wait --------------------------------------------------------------

RUN_LOG = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "engine_log")


def _run_log(name, until):
    with open(os.path.join(RUN_LOG, name), encoding="utf-8") as handle:
        lines = handle.read().splitlines(True)
    for index, line in enumerate(lines):
        if until in line:
            return "".join(lines[:index + 1])
    raise AssertionError(until)


@pytest.fixture
def starting(systemd, monkeypatch):
    """A unit that is starting (InvocationID abc123), its run's journal from a real vLLM-CPU start."""
    systemd["show"] = ("LoadState=loaded\nActiveState=activating\nSubState=start\nResult=success\nExecMainStatus=0\n"
                       "NRestarts=0\nExecMainStartTimestampMonotonic=100\nInvocationID=abc123\n")
    systemd["run_log"] = _run_log("cpu-tiny-random-eager.log", "checkpoint shards: 100%")

    def run_command(self, args, **kwargs):
        systemd["calls"].append(list(args))
        if args[1] == "show":
            return 0, systemd["show"], ""
        if args[-1].startswith("_SYSTEMD_INVOCATION_ID="):
            return 0, systemd["run_log"], ""
        return 0, systemd["journal"], ""

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return systemd


def test_a_long_wait_returns_to_report_what_vllm_is_doing(run_module, starting):
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm-replica.service",
                                            "timeout": 1800, "interval": 0.1, "progress_interval": 0.3})
    assert code == 0 and "failed" not in result, result
    assert result["reason"] == "waiting" and result["status"] == "loading"
    progress = result["progress"]
    assert progress["done"] is False and len(progress["lines"]) == 1
    assert progress["lines"][0].startswith("0s of 30m: vllm-replica.service activating (start); vLLM: loading weights "
                                           "(1/1 shards); API: loading")
    assert result["phase"]["phase"] == "loading" and result["phase"]["seen"][-1] == "loading"
    assert set(progress["resume"]) == {"started", "attempts", "crashes"}
    assert ["/usr/bin/journalctl", "-q", "-a", "-o", "cat", "-n", "300", "--no-pager",
            "_SYSTEMD_INVOCATION_ID=abc123"] in starting["calls"]


def test_the_next_run_goes_on_with_the_same_wait(run_module, starting):
    first = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service", "timeout": 1800,
                                     "interval": 0.1, "progress_interval": 0.3})[1]
    code, second = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service",
                                            "timeout": 1800, "interval": 0.1, "progress_interval": 0.3,
                                            "resume": first["progress"]["resume"]})
    assert code == 0 and second["reason"] == "waiting"
    assert second["attempts"] > first["attempts"] and second["elapsed"] > first["elapsed"]


def test_a_failed_start_names_the_phase_and_the_root_cause_before_the_journal_tail(run_module, starting):
    starting["show"] = starting["show"].replace("ActiveState=activating\nSubState=start", "ActiveState=failed\nSubState=failed")
    starting["run_log"] = _run_log("cpu-tiny-random-no-compiler.log", "Engine core initialization failed")
    starting["journal"] = "vllm[9]: RuntimeError: Engine core initialization failed. See root cause above.\n"
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "unit": "vllm.service"})
    assert code == 1 and result["reason"] == "unit_down"
    lines = result["msg"].split("\n")
    assert lines[0].startswith("systemd unit vllm.service is failed")
    assert lines[1].startswith("What vLLM logged last: shutting down [12-01 23:58:33]; root cause: "
                               "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found")
    assert lines[1].endswith("(while compiling (torch.compile and warm-up))")
    assert lines[-2:] == ["vllm[9]: RuntimeError: Engine core initialization failed. See root cause above.",
                          "-- end of the unit's lines --"]
    assert result["journal"] == [lines[-2]] and result["phase"]["failed_in"] == "compiling"


def test_progress_interval_zero_waits_in_one_run(run_module):
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:%d" % free_port(), "timeout": 0.5, "interval": 0.1,
                                            "progress_interval": 0})
    assert code == 1 and result["reason"] == "timeout" and "progress" not in result


def test_progress_interval_must_not_be_negative(run_module):
    code, result = run_module(vllm_health, {"url": "http://127.0.0.1:1", "progress_interval": -1})
    assert code == 1 and "progress_interval must be 0" in result["msg"]
