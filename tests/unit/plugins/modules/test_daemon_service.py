# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.daemon_service``: the re-run of an interrupted run (issue 33, item 16) restarts a daemon left on
its old files though this run changes none; a daemon on its files is left running; the rule
(``_daemon_service``), the action plugin's steps on the host, and the roles' calls (the memory guard's and
keepalived's watches), their arguments evaluated with Ansible's templating as a run would."""

from __future__ import annotations

import os
import re
from unittest import mock

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.daemon_service import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _daemon_service as ds
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, _trusted, role_variables, templar

UNIT = "factory-floor-memory-guard.service"
FRESH = {"changed": False, "need_daemon_reload": False, "restart": []}
STALE = {"changed": False, "need_daemon_reload": True, "restart": [UNIT]}


@pytest.mark.parametrize("started, info, changed, restart", [
    (False, STALE, False, True),      # an interrupted run left it on its old files
    (False, FRESH, False, False),     # on its files: left running
    (False, FRESH, True, True),       # this run changed one (check mode predicts it so)
    (True, STALE, True, False),       # the start started it on the files as they are
])
def test_the_restart_rule(started, info, changed, restart):
    assert ds.restarts(started, info, changed) is restart


def test_the_start_reloads_systemd_when_it_has_not_read_the_unit():
    assert ds.start_args(UNIT, False, STALE) == {"name": UNIT, "state": "started", "enabled": True,
                                                 "daemon_reload": True}
    assert ds.start_args(UNIT, True, FRESH)["daemon_reload"] is True
    assert ds.start_args(UNIT, False, FRESH)["daemon_reload"] is False
    # Check mode with a unit file not written yet: nothing to start.
    assert ds.starts(True, True) is False and ds.starts(True, False) and ds.starts(False, True)


def run(args, results, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0,
                          action="factory_floor.llm.daemon_service")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args), task.check_mode))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars={}), calls


def test_a_daemon_left_on_its_old_files_is_reloaded_and_restarted():
    result, calls = run({"unit": UNIT, "files": ["/etc/x.json"]}, [STALE, {"changed": False}, {"changed": True}])
    assert [call[0] for call in calls] == ["factory_floor.llm.systemd_unit_info", "ansible.legacy.systemd_service",
                                           "ansible.legacy.systemd_service"]
    assert calls[0][1] == {"units": [UNIT], "files": ["/etc/x.json"]}
    assert calls[1][1]["daemon_reload"] is True and calls[2][1] == {"name": UNIT, "state": "restarted"}
    assert result["changed"] is True and not result.get("failed")


def test_a_daemon_on_its_files_is_left_running_and_the_read_runs_in_check_mode_too():
    result, calls = run({"unit": UNIT}, [FRESH, {"changed": False}], check_mode=True)
    assert len(calls) == 2 and result["changed"] is False and result["restarted"] is None
    assert calls[0][2] is False and calls[1][2] is True  # the read for real, the start predicted


def test_check_mode_starts_no_unit_it_has_not_written():
    result, calls = run({"unit": UNIT, "unit_changed": True}, [FRESH], check_mode=True)
    assert len(calls) == 1 and result["started"] is None and result["changed"] is False


def test_a_failed_start_fails_with_its_message():
    result, calls = run({"unit": UNIT}, [FRESH, {"failed": True, "msg": "Unit not found"}])
    assert len(calls) == 2 and result["failed"] and result["msg"] == "Unit not found"


def test_removal_stops_removes_and_reloads_only_what_the_role_installed():
    files = ["/etc/systemd/system/" + UNIT, "/etc/factory-floor/memory-guard.json"]
    assert ds.removal(False, UNIT, files) == []
    assert ds.removal(True, UNIT, files) == [
        ("systemd_service", {"name": UNIT, "state": "stopped", "enabled": False}),
        ("file", {"path": files[0], "state": "absent"}), ("file", {"path": files[1], "state": "absent"}),
        ("systemd_service", {"daemon_reload": True})]


def test_state_absent_looks_for_the_marker_first():
    files = ["/etc/keepalived/keepalived.conf", "/etc/systemd/system/keepalived.service.d/ff.conf"]
    args = {"unit": "keepalived.service", "files": files, "marker": files[1], "state": "absent"}
    result, calls = run(args, [{"stat": {"exists": False}}], check_mode=True)
    assert calls == [("ansible.legacy.stat", {"path": files[1]}, True)] and result["changed"] is False
    result, calls = run(args, [{"stat": {"exists": True}}] + [{"changed": True}] * 4)
    assert [call[0] for call in calls] == ["ansible.legacy.stat", "ansible.legacy.systemd_service",
                                           "ansible.legacy.file", "ansible.legacy.file",
                                           "ansible.legacy.systemd_service"]
    assert result["changed"] is True and result["removed"] == files
    # Without a marker, the first file (the unit file) is it.
    _result, calls = run({"unit": UNIT, "files": ["/etc/systemd/system/" + UNIT], "state": "absent"},
                         [{"stat": {"exists": False}}])
    assert calls[0][1] == {"path": "/etc/systemd/system/" + UNIT}


def test_the_documentation_is_the_argument_spec():
    with open(os.path.join(ROOT, "plugins", "modules", "daemon_service.py"), encoding="utf-8") as handle:
        text = handle.read()
    options = yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', text, re.S).group(1))["options"]
    assert sorted(options) == sorted(ARGUMENT_SPEC)
    for name, spec in ARGUMENT_SPEC.items():
        assert options[name]["type"] == spec["type"], name
    assert "def main" not in text


UNCHANGED = {"changed": False, "skipped": False, "failed": False}
CHANGED = {"changed": True, "skipped": False, "failed": False}
PACKAGE = ["/usr/local/lib/factory-floor/_host/__init__.py", "/usr/local/lib/factory-floor/_host/watchdog.py"]


def _call(path, state="present"):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        (task,) = [task for task in yaml.safe_load(handle) if "factory_floor.llm.daemon_service" in task
                   and state in task.get("when", "site_daemon_state == 'present'")]
    return task


def _evaluate(task, variables):
    found = templar(variables)
    return {key: found.template(_trusted(value)) for key, value in
            task["factory_floor.llm.daemon_service"].items()}


def _daemon_step(path):
    """The site role's daemon entry point is how the role installs its watch."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        (include,) = [task for task in yaml.safe_load(handle) if (task.get("ansible.builtin.include_role") or {})
                      .get("tasks_from") == "daemon" and "present" in task["vars"]["site_daemon_state"]]
    return include["vars"]["site_daemon"]


# The watches' daemon_service call is the site role's daemon entry point's, given each role's description of its watch.
DAEMON = "roles/site/tasks/daemon.yml"
TASK = yaml.safe_load(open(os.path.join(ROOT, DAEMON), encoding="utf-8"))[0]["block"]


@pytest.mark.parametrize("role, path, unit, config", [
    ("memory_guard", "roles/memory_guard/tasks/main.yml", UNIT, "/etc/factory-floor/memory-guard.json"),
    ("keepalived", "roles/keepalived/tasks/main.yml", "factory-floor-keepalived-watch.service",
     "/etc/factory-floor/keepalived-watch.json"),
    ("vllm_watchdog", "roles/vllm_watchdog/tasks/main.yml", "vllm-replica-watchdog.service",
     "/etc/factory-floor/vllm-replica-watchdog.json"),
], ids=["memory-watch", "keepalived-watch", "vllm-watchdog"])
def test_each_watch_is_asked_about_every_file_it_was_started_from(role, path, unit, config):
    (task,) = [task for task in TASK if "factory_floor.llm.daemon_service" in task]
    values = dict(role_variables(role), site_daemon=_trusted(_daemon_step(path)), _site_host_files=PACKAGE,
                  __site_host_programs=UNCHANGED, __site_daemon_config=UNCHANGED, __site_daemon_unit_file=UNCHANGED)
    args = _evaluate(task, values)
    assert args == {"unit": unit, "files": ["/etc/systemd/system/" + unit, config] + PACKAGE, "changed": False,
                    "unit_changed": False}
    # The code (the host programs' package), the configuration and the unit written by this run.
    for name in ("__site_host_programs", "__site_daemon_config", "__site_daemon_unit_file"):
        changed = _evaluate(task, dict(values, **{name: CHANGED}))
        assert changed["changed"] or changed["unit_changed"], name
    # Removed: its unit (the marker that the role installed it) and its configuration, never the package.
    removed = _evaluate(_call(DAEMON, "absent"), values)
    assert removed == {"unit": unit, "files": ["/etc/systemd/system/" + unit, config], "state": "absent"}
