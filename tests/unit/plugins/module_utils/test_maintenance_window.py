# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_window role reads from its hosts' results (``_maintenance_window.py``) and the filters that
give it to the role (longest_startups, lock_refusals, lock_releases, abort_message)."""

from __future__ import annotations

import base64
import json
import time

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.abort_message import abort_message as abort_filter
from ansible_collections.factory_floor.llm.plugins.filter.lock_refusals import lock_refusals as lock_refusals_filter
from ansible_collections.factory_floor.llm.plugins.filter.lock_releases import lock_releases as releases_filter
from ansible_collections.factory_floor.llm.plugins.filter.longest_startups import longest_startups as startups_filter
from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import (
    abort_message, lock_refusals, longest_startups, noted, truncate, unlocked)


def _slurped(seconds):
    return {"content": base64.b64encode(json.dumps(seconds).encode()).decode(), "encoding": "base64"}


def test_the_longest_start_up_per_name_over_the_engine_hosts():
    files = [_slurped({"replicas": 40, "split": "131.5"}), _slurped({"replicas": 48.5, "replicas_gate": "n/a"}),
             {"skipped": True}, {"failed": False, "msg": "file not found"}, {}]
    assert longest_startups(files) == {"replicas": 48.5, "split": 131.5, "replicas_gate": 0}
    assert longest_startups([]) == {} and longest_startups(None) == {}
    assert startups_filter(files) == longest_startups(files)
    with pytest.raises(AnsibleFilterError, match="a list"):
        startups_filter({"content": ""})


def test_each_refusal_names_its_host_and_reason_then_the_roles_sentence():
    results = [{"item": "spark-a", "failed": True, "msg": "the maintenance lock is held by switch-model"},
               {"item": "spark-b", "changed": False}, {"item": "gw", "failed": True}]
    # "<host>: <why> " each; the role's maintenance_window_lock_refused follows (as the Jinja loop wrote it).
    assert lock_refusals(results) == "spark-a: the maintenance lock is held by switch-model gw:  "
    assert lock_refusals([]) == "" and lock_refusals(None) == ""
    assert lock_refusals_filter(results) == lock_refusals(results)
    with pytest.raises(AnsibleFilterError, match="a list"):
        lock_refusals_filter("spark-a")


@pytest.mark.parametrize("length", [1, 194, 195, 200, 205, 206, 260])
def test_truncate_is_jinjas_as_ansible_configures_it(length):
    from jinja2 import Environment
    text = " ".join(["word"] * 60)[:length]
    assert truncate(text, 200) == Environment().from_string("{{ t | truncate(200) }}").render(t=text)


HOSTVARS = {"spark-a": {"maintenance_window_lock_path": "/run/lab-a.lock"}, "spark-b": {}}


def test_each_host_released_or_kept_with_why_and_its_own_lock_file():
    results = [{"item": "spark-a", "changed": False},
               {"item": "spark-b", "unreachable": True, "msg": "Failed to connect to the host via ssh"},
               {"item": "spark-c", "failed": True, "msg": "x" * 300}]
    summary = unlocked(results, HOSTVARS, "/run/factory-floor-maintenance", {"gw": {"released": True}})
    assert summary["gw"] == {"released": True}
    assert summary["spark-a"] == {"released": True, "path": "/run/lab-a.lock", "error": ""}
    assert summary["spark-b"] == {"released": False, "path": "/run/factory-floor-maintenance",
                                  "error": "host unreachable: Failed to connect to the host via ssh"}
    assert not summary["spark-c"]["released"] and summary["spark-c"]["error"] == truncate("x" * 300, 200)
    assert unlocked(None, HOSTVARS, "/l") == {}
    assert releases_filter(results, HOSTVARS, "/l") == unlocked(results, HOSTVARS, "/l")
    with pytest.raises(AnsibleFilterError, match="a list"):
        releases_filter({"item": "spark-a"}, HOSTVARS, "/l")


@pytest.mark.parametrize("released, failure, message", [
    ({"spark-a": {"released": True}, "spark-b": {"released": True}}, {"msg": "unit failed"},
     "unit failed Nothing was stopped. This run's maintenance lock was given back on spark-a, spark-b."),
    ({"spark-a": {"released": True}, "spark-b": {"released": False}}, {},
     "A step failed (see above). Nothing was stopped. This run's maintenance lock was given back on spark-a; it stays "
     "on spark-b (not reachable): remove it there once this run is known ended."),
    ({"spark-a": {"released": False}}, {"msg": ""},
     "A step failed (see above). Nothing was stopped. This run's maintenance lock was given back on no host; it stays "
     "on spark-a (not reachable): remove it there once this run is known ended."),
])
def test_the_abort_says_what_failed_and_where_the_lock_was_given_back(released, failure, message):
    assert abort_message(released, failure, "Nothing was stopped.", False, ["spark-a", "spark-b"]) == message
    assert abort_filter(released, failure, "Nothing was stopped.", False, ["spark-a", "spark-b"]) == message


def test_an_abort_under_check_says_no_lock_was_taken():
    assert abort_message({}, {"msg": "refused"}, "", True, ["spark-a", "spark-b"]) == (
        "refused  --check took no maintenance lock, so none was given back (a real run takes it on spark-a, spark-b "
        "before it changes anything, and gives it back here).")
    with pytest.raises(AnsibleFilterError, match="a dict"):
        abort_filter(["spark-a"])


def test_a_note_merges_and_stamps_its_events_on_the_controllers_clock():
    host = {"events": {"drained": 10.0}, "gate": {"passed": True, "score": 0.9}}
    before = time.time()
    after_note = noted(host, {"gate": {"passed": False}, "failed": True}, ["old_stopped"])
    assert after_note["events"]["drained"] == 10.0 and before <= after_note["events"]["old_stopped"] <= time.time()
    assert after_note["gate"] == {"passed": False, "score": 0.9} and after_note["failed"] is True
    assert host == {"events": {"drained": 10.0}, "gate": {"passed": True, "score": 0.9}}  # not changed in place
    assert noted({}, events=["serving"], at="12.5") == {"events": {"serving": 12.5}}
    assert noted(None, {"health": None}) == {"health": None}
    assert noted({}, {"reason": "x"}, ["failed"], 3) == {"reason": "x", "events": {"failed": 3.0}}
