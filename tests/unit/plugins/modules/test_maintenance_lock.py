# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.maintenance_lock`` on lock files in a tmp dir."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.action.maintenance_lock import lock_args
from ansible_collections.factory_floor.llm.plugins.modules import maintenance_lock as module

RUN = "20261129T110000Z-aaaaaa"
OTHER = "20261129T100000Z-bbbbbb"


@pytest.fixture
def path(tmp_path):
    return tmp_path / "factory-floor-maintenance"


def other_lock(expires_in=3600.0):
    now = time.time()
    return json.dumps({"holder": "switch-to-split", "since": now - 600, "run": OTHER, "by": "kim@ctl",
                       "expires": now + expires_in}) + "\n"


def args(path, **more):
    """Module arguments; a value of None leaves that argument out."""
    base = {"path": str(path), "run": RUN, "holder": "switch-model", "by": "me@ctl", "since": 1795950000.0}
    base.update(more)
    return {k: v for k, v in base.items() if v is not None}


def test_take_then_take_again_then_release(run_module, path):
    code, result = run_module(module, args(path, ttl=600))
    assert code == 0, result
    assert result["changed"] is True and result["state"] == "free" and result["previous"] is None
    written = json.loads(path.read_text())
    assert {k: written[k] for k in ("holder", "since", "run", "by")} == {
        "holder": "switch-model", "since": 1795950000.0, "run": RUN, "by": "me@ctl"}
    assert written["expires"] == pytest.approx(time.time() + 600, abs=30)
    assert result["lock"]["run"] == RUN and result["lock"]["path"] == str(path)

    code, again = run_module(module, args(path, ttl=600))
    assert code == 0 and again["changed"] is False and again["state"] == "ours"
    assert json.loads(path.read_text()) == written

    code, released = run_module(module, {"path": str(path), "run": RUN, "state": "absent"})
    assert code == 0 and released["changed"] is True and released["state"] == "ours"
    assert released["lock"] is None and not path.exists()


def test_held_by_another_run_fails_naming_it_and_changes_nothing(run_module, path):
    path.write_text(other_lock())
    code, result = run_module(module, args(path, _ansible_check_mode=True))
    assert code == 1
    assert result["failed"] is True and result["changed"] is False and result["state"] == "held"
    assert result["msg"].startswith("The maintenance lock %s is held by switch-to-split (run %s, by kim@ctl), since "
                                    % (path, OTHER))
    assert result["msg"].endswith("remove the file (rm %s) and run again." % path)
    assert result["previous"]["run"] == OTHER
    assert json.loads(path.read_text())["run"] == OTHER


@pytest.mark.parametrize("check_mode", [False, True])
def test_an_expired_lock_is_taken_over_with_a_warning(run_module, path, check_mode):
    path.write_text(other_lock(expires_in=-1))
    code, result = run_module(module, args(path, _ansible_check_mode=check_mode))
    assert code == 0, result
    assert result["changed"] is True and result["state"] == "expired"
    assert "Took over the expired maintenance lock %s, held by switch-to-split" % path in json.dumps(result["warnings"])
    assert json.loads(path.read_text())["run"] == (OTHER if check_mode else RUN)
    assert result["lock"]["run"] == RUN


def test_release_leaves_another_runs_lock_with_a_warning(run_module, path):
    path.write_text(other_lock())
    code, result = run_module(module, {"path": str(path), "run": RUN, "state": "absent"})
    assert code == 0, result
    assert result["changed"] is False and result["state"] == "held"
    assert result["lock"]["run"] == OTHER
    assert "Left the maintenance lock %s in place: it is not this run's" % path in json.dumps(result["warnings"])
    assert path.exists()


@pytest.mark.parametrize("state", ["present", "absent"])
def test_check_mode_predicts_and_writes_nothing(run_module, path, state):
    if state == "absent":
        run_module(module, args(path))
        before = path.read_text()
    code, result = run_module(module, args(path, state=state, _ansible_check_mode=True, _ansible_diff=True))
    assert code == 0, result
    assert result["changed"] is True
    if state == "present":
        assert not path.exists()
        assert result["diff"]["before"] == "" and json.loads(result["diff"]["after"])["run"] == RUN
    else:
        assert path.read_text() == before
        assert json.loads(result["diff"]["before"])["run"] == RUN and result["diff"]["after"] == ""


def test_every_returned_key_is_documented(run_module, path):
    code, result = run_module(module, args(path))
    assert code == 0, result
    documented = set(yaml.safe_load(module.RETURN))
    assert set(result) - {"changed", "invocation", "warnings", "deprecations"} == documented - {"holder"}
    queried = run_module(module, {"path": str(path), "state": "query"})[1]
    assert set(queried) - {"changed", "invocation", "warnings", "deprecations"} == documented
    fields = set(yaml.safe_load(module.RETURN)["previous"]["contains"])
    assert set(result["lock"]) == fields


@pytest.mark.parametrize("more, message", [
    ({"holder": None}, "state is present but all of the following are missing: holder"),
    ({"run": " "}, "run must be a non-empty id"),
    ({"ttl": 0}, "ttl must be more than 0 seconds"),
    ({"mode": "rw-r--r--"}, "mode must be an octal string"),
])
def test_bad_arguments_are_refused(run_module, path, more, message):
    code, result = run_module(module, args(path, **more))
    assert code == 1 and result["msg"].startswith(message), result["msg"]
    assert not path.exists()


def test_a_missing_directory_fails_naming_the_path(run_module, tmp_path):
    lock = tmp_path / "no-such-dir" / "lock"
    code, result = run_module(module, args(lock))
    assert code == 1 and result["msg"].startswith("Could not take the maintenance lock %s: " % lock)


@pytest.mark.parametrize("check_mode", [False, True])
def test_query_names_the_holder_and_changes_nothing(run_module, path, check_mode):
    path.write_text(other_lock())
    before = path.read_text()
    code, result = run_module(module, {"path": str(path), "state": "query", "_ansible_check_mode": check_mode})
    assert code == 0 and result["changed"] is False
    assert result["state"] == "held" and result["lock"]["holder"] == "switch-to-split" and result["lock"]["run"] == OTHER
    assert result["holder"].startswith("switch-to-split (run %s, by kim@ctl), since " % OTHER)
    assert path.read_text() == before


def test_query_of_no_lock_is_free(run_module, path):
    code, result = run_module(module, {"path": str(path), "state": "query"})
    assert code == 0 and result["state"] == "free" and result["lock"] is None and result["holder"] is None
    assert not path.exists()


def test_query_with_a_run_knows_its_own_and_an_expired_lock(run_module, path):
    path.write_text(other_lock(expires_in=-60))
    assert run_module(module, {"path": str(path), "state": "query"})[1]["state"] == "expired"
    assert run_module(module, {"path": str(path), "state": "query", "run": OTHER})[1]["state"] == "ours"


@pytest.mark.parametrize("state", ["present", "absent"])
def test_taking_or_releasing_needs_a_run(run_module, path, state):
    code, result = run_module(module, {"path": str(path), "state": state, "holder": "x"})
    assert code == 1 and "run" in result["msg"]


# --- path_of: the lock file of the host a delegated task runs on (the action plugin; issue 36) -------------------

def test_path_of_is_the_lock_file_that_host_noted_else_the_path_given(run_module, path):
    hostvars = {"spark-a": {"maintenance_window_lock_path": str(path)}, "gw": {}}
    given = {"path_of": "spark-a", "path": "/run/elsewhere", "run": RUN, "state": "absent"}
    assert lock_args(given, hostvars) == {"path": str(path), "run": RUN, "state": "absent"}
    assert lock_args(dict(given, path_of="gw"), hostvars)["path"] == "/run/elsewhere"
    assert "path" not in lock_args({"path_of": "gw", "run": RUN}, hostvars)  # the module's default
    assert lock_args({"path": "/run/x"}, hostvars) == {"path": "/run/x"}
    code, result = run_module(module, args(lock_args(dict(given, path="/nope"), hostvars)["path"]))
    assert code == 0 and json.loads(path.read_text())["run"] == RUN
