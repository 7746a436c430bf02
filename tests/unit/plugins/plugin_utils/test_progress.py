# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""plugin_utils/_progress.py: a module run in runs that report, each run's lines printed, the last run's result returned."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.factory_floor.llm.plugins.plugin_utils import _progress
from ansible_collections.factory_floor.llm.plugins.action.vllm_health import ActionModule


def _action(args, no_log=False, async_val=0):
    task = mock.MagicMock()
    task.args = dict(args)
    task.async_val = async_val
    task.check_mode = False
    task.no_log = no_log
    task.action = "factory_floor.llm.vllm_health"
    connection = mock.MagicMock()
    connection.has_native_async = False
    connection._shell.tmpdir = None
    return ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())


@pytest.fixture
def printed(monkeypatch):
    lines = []
    monkeypatch.setattr(_progress.display, "display", lambda msg, *a, **k: lines.append(msg))
    return lines


def _runs(action, results):
    """Make the module's runs answer ``results`` in turn; return the arguments each run got."""
    calls = []

    def execute(module_args=None, task_vars=None, wrap_async=False, **kwargs):
        calls.append(dict(module_args, _wrap_async=wrap_async))
        return results.pop(0)

    action._execute_module = execute
    action._remove_tmp_path = lambda path: None
    return calls


def test_runs_until_the_module_is_done_printing_each_line(printed):
    action = _action({"url": "http://127.0.0.1:8000", "unit": "vllm-replica.service"})
    calls = _runs(action, [
        {"reason": "waiting", "progress": {"done": False, "lines": ["30s of 30m: loading weights"], "resume": {"n": 1}}},
        {"reason": "waiting", "progress": {"done": False, "lines": ["1m of 30m: compiling"], "resume": {"n": 2}}},
        {"reason": "reached", "status": "serving", "changed": False},
    ])
    result = action.run(task_vars={"inventory_hostname": "spark-a"})
    assert result == {"reason": "reached", "status": "serving", "changed": False}
    assert printed == ["spark-a: 30s of 30m: loading weights", "spark-a: 1m of 30m: compiling"]
    assert [call.get("resume") for call in calls] == [None, {"n": 1}, {"n": 2}]
    assert all(call["url"] == "http://127.0.0.1:8000" for call in calls)


def test_a_failed_run_ends_the_task_with_its_lines_printed(printed):
    action = _action({"url": "x"})
    _runs(action, [{"failed": True, "msg": "crash loop", "progress": {"done": False, "lines": ["last"], "resume": {}}}])
    result = action.run(task_vars={"inventory_hostname": "spark-b"})
    assert result["failed"] and result["msg"] == "crash loop"
    assert printed == ["spark-b: last"]


def test_the_last_runs_lines_are_printed_too(printed):
    action = _action({"url": "x"})
    _runs(action, [{"score": 71.4, "progress": {"done": True, "lines": ["case 7 of 7: passed"]}}])
    assert action.run(task_vars={"inventory_hostname": "spark-a"})["score"] == 71.4
    assert printed == ["spark-a: case 7 of 7: passed"]


def test_no_log_prints_nothing(printed):
    action = _action({"url": "x"}, no_log=True)
    _runs(action, [{"progress": {"done": False, "lines": ["secret"], "resume": 1}}, {"ok": True}])
    assert action.run(task_vars={"inventory_hostname": "h"}) == {"ok": True}
    assert printed == []


def test_async_runs_the_module_once_in_the_background_without_progress(printed):
    action = _action({"url": "x"}, async_val=600)
    calls = _runs(action, [{"ansible_job_id": "j1", "started": 1}])
    assert action.run(task_vars={"inventory_hostname": "h"}) == {"ansible_job_id": "j1", "started": 1}
    assert calls == [{"url": "x", "progress_interval": 0, "_wrap_async": True}]


def test_a_module_that_never_finishes_is_stopped(printed, monkeypatch):
    monkeypatch.setattr(_progress, "MAX_RUNS", 3)
    action = _action({"url": "x"})
    _runs(action, [{"progress": {"done": False, "lines": [], "resume": 1}}] * 3)
    result = action.run(task_vars={})
    assert result["failed"] and "3 times without finishing" in result["msg"]


@pytest.mark.parametrize("result, expected", [
    ({}, ([], None, False)),
    ({"progress": {"done": False, "lines": ["a"], "resume": {"x": 1}}}, (["a"], {"x": 1}, True)),
    ({"progress": {"done": False, "lines": ["a"]}}, (["a"], None, False)),
    ({"progress": {"done": True, "lines": ["a"], "resume": 1}}, (["a"], 1, False)),
    ({"failed": True, "progress": {"done": False, "lines": [], "resume": 1}}, ([], 1, False)),
    ({"progress": "not a dict"}, ([], None, False)),
])
def test_progress_of(result, expected):
    assert _progress.progress_of(result) == expected


def test_vllm_health_ended_at_is_the_controllers_time_whatever_the_engine_hosts_clock(printed):
    """The engine host's clock 600 s ahead or behind: ended_at is when the result reached the controller."""
    import time
    for skew in (600.0, -600.0):
        action = _action({"url": "http://127.0.0.1:8000"})
        host_now = time.time() + skew
        _runs(action, [
            {"reason": "waiting", "progress": {"done": False, "lines": ["30s of 30m"], "resume": {"n": 1}}},
            {"reason": "reached", "status": "serving", "changed": False, "ended_at": round(host_now, 3)},
        ])
        before = time.time()
        result = action.run(task_vars={"inventory_hostname": "spark-a"})
        after = time.time()
        assert before - 0.001 <= result["ended_at"] <= after + 0.001, (skew, result["ended_at"] - before)
        assert result["status"] == "serving"


def test_other_progress_modules_keep_their_results_as_they_are(printed):
    from ansible_collections.factory_floor.llm.plugins.action.tool_call_test import ActionModule as ToolCallTest
    task = mock.MagicMock(args={}, async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.tool_call_test")
    connection = mock.MagicMock(has_native_async=False)
    action = ToolCallTest(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    _runs(action, [{"score": 71.4, "ended_at": 5.0}])
    assert action.run(task_vars={})["ended_at"] == 5.0


def test_vllm_health_engine_host_asks_that_hosts_engine_with_its_own_endpoint(printed):
    """engine_host: the plugin reads the host's endpoint from hostvars, in place of the task's (issue 36)."""
    from ansible.errors import AnsibleActionFail

    hostvars = {"spark-b": {"vllm_listen_host": "0.0.0.0", "vllm_port": 8001, "vllm_api_key": "k-b",
                            "vllm_served_model_name": "m-b"},
                "spark-c": {"vllm_served_model_name": "m-c", "vllm_api_key": ""},
                "spark-d": {}}
    action = _action({"engine_host": "spark-b", "url": "http://127.0.0.1:8000", "api_key": "k-a", "probe": "generate"})
    calls = _runs(action, [{"status": "serving", "changed": False}])
    action.run(task_vars={"inventory_hostname": "spark-a", "hostvars": hostvars})
    assert calls == [{"url": "http://127.0.0.1:8001", "api_key": "k-b", "model": "m-b", "probe": "generate",
                      "_wrap_async": False}]
    # No key set for it (or an empty one): none is sent, as default(omit, true) did.
    action = _action({"engine_host": "spark-c"})
    calls = _runs(action, [{"status": "serving", "changed": False}])
    action.run(task_vars={"hostvars": hostvars})
    assert calls == [{"url": "http://127.0.0.1:8000", "model": "m-c", "_wrap_async": False}]
    for host, words in (("spark-d", "spark-d has no vllm_served_model_name"), ("spark-x", "'spark-x' is not a host")):
        action = _action({"engine_host": host})
        _runs(action, [])
        with pytest.raises(AnsibleActionFail, match=words):
            action.run(task_vars={"hostvars": hostvars})
