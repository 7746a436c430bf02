# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/maintenance_lock.py (lock files in a tmp dir, time passed in)."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import maintenance_lock as ml
from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog as wd

T0 = 1795950000.0   # "now" in these tests
RUN = "20261129T110000Z-aaaaaa"
OTHER = "20261129T100000Z-bbbbbb"


def utc(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def lock_text(run=OTHER, holder="switch-model", since=T0 - 600, by="ops@ctl", expires=T0 + 3600):
    return ml.render(holder, since, run, by, expires)


def take(path, holder="switch-model", since=T0, run=RUN, by="me@ctl", expires=T0 + 14400, now=T0, check=False):
    return ml.take(str(path), holder, since, run, by, expires, now, check=check)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "factory-floor-maintenance"


# --- parse() / read() ---------------------------------------------------------------------------


def test_parse_what_the_playbooks_write():
    assert ml.parse(lock_text()) == {"holder": "switch-model", "since": T0 - 600, "run": OTHER, "by": "ops@ctl",
                                     "expires": T0 + 3600}


@pytest.mark.parametrize("text, holder", [
    ("", None),                                   # touch
    ("  \n", None),
    ("upgrading the firmware, Kim\n", "upgrading the firmware, Kim"),   # by hand
    ("[1, 2]", "[1, 2]"),                        # JSON, but not an object
    ('{"holder": "switch-to-split", "since": 1795949000.0}\n', "switch-to-split"),   # an older playbook
])
def test_parse_content_without_owner_or_expiry(text, holder):
    lock = ml.parse(text)
    assert lock["holder"] == holder
    assert lock["run"] is None and lock["expires"] is None


def test_parse_ignores_fields_of_the_wrong_type():
    lock = ml.parse(json.dumps({"holder": "x", "since": "yesterday", "run": 42, "expires": True}))
    assert lock == {"holder": "x", "since": None, "run": "42", "by": None, "expires": None}


def test_read_absent_is_none(path):
    assert ml.read(str(path)) is None


def test_read_adds_path_and_mtime(path):
    path.write_text(lock_text())
    os.utime(path, (T0 - 5, T0 - 5))
    lock = ml.read(str(path))
    assert lock["path"] == str(path) and lock["mtime"] == T0 - 5 and lock["run"] == OTHER


def test_the_watchdog_reads_holder_and_since_of_what_the_playbooks_write(path):
    path.write_text(lock_text(holder="switch-model rollback"))
    assert wd.read_lock(str(path), T0, 7200)["holder"] == "switch-model rollback"
    assert wd.read_lock(str(path), T0, 7200)["since"] == T0 - 600


@pytest.mark.parametrize("text, mtime, now, expired, expires_in", [
    # The playbooks' lock: its own expiry, on this host's clock.
    (lock_text(expires=T0 + 3600), T0 - 600, T0, False, 3600.0),
    (lock_text(expires=T0 + 3600), T0 - 600, T0 + 3600, True, 0.0),
    (lock_text(expires=T0 - 1), T0 - 9999, T0, True, -1.0),
    # touch, by hand, an older playbook: lock_stale_after (here 7200 s) after its last write.
    ("", T0 - 600, T0, False, 6600.0),
    ("upgrading the firmware, Kim\n", T0 - 7300, T0, True, -100.0),
    ('{"holder": "switch-to-split", "since": 1795949000.0}\n', T0 - 7200, T0, True, 0.0),
])
def test_the_watchdog_judges_expiry_on_this_hosts_clock(path, text, mtime, now, expired, expires_in):
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    lock = wd.read_lock(str(path), now, 7200)
    assert (lock["expired"], lock["expires_in"]) == (expired, expires_in)


def test_expires_at():
    assert ml.expires_at({"expires": T0, "mtime": T0 - 5}, 7200) == T0
    assert ml.expires_at({"expires": None, "mtime": T0 - 5}, 7200) == T0 - 5 + 7200


# --- state_of() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lock, state", [
    (None, ml.FREE),
    ({"run": RUN, "expires": T0 - 1}, ml.OURS),          # ours even past its expiry
    ({"run": OTHER, "expires": T0 + 1}, ml.HELD),
    ({"run": OTHER, "expires": T0}, ml.EXPIRED),
    ({"run": OTHER, "expires": T0 - 1}, ml.EXPIRED),
    ({"run": OTHER, "expires": None}, ml.HELD),         # never expires
    ({"run": None, "expires": None}, ml.HELD),          # by hand, touch, an older playbook
    ({"run": None, "expires": T0 - 1}, ml.EXPIRED),
])
def test_state_of(lock, state):
    assert ml.state_of(lock, RUN, T0) == state


# --- describe() / held_message() ----------------------------------------------------------------


def test_held_message_says_who_since_when_until_when_and_what_to_do(path):
    path.write_text(lock_text(since=T0 - 2520, expires=T0 + 5400))
    message = ml.held_message(ml.read(str(path)), T0)
    assert message.startswith("The maintenance lock %s is held by switch-model (run %s, by ops@ctl), since " % (path, OTHER))
    assert "since %s (42 min ago); expires %s (in 90 min). " % (utc(T0 - 2520), utc(T0 + 5400)) in message
    assert message.endswith("If that run is dead (interrupted, its controller lost), remove the file (rm %s) and run again."
                            % path)


def test_describe_a_lock_by_hand_uses_the_file_time_and_never_expires(path):
    path.write_text("firmware\n")
    os.utime(path, (T0 - 3 * 3600, T0 - 3 * 3600))
    assert ml.describe(ml.read(str(path)), T0) == (
        "firmware, file written %s (3.0 h ago); no expiry: it stays until the file is removed" % utc(T0 - 3 * 3600))


def test_describe_an_expired_lock():
    assert ml.describe({"holder": "switch-to-split", "since": T0 - 30, "expires": T0 - 10}, T0) == (
        "switch-to-split, since %s (30 s ago); expired %s (10 s ago)" % (utc(T0 - 30), utc(T0 - 10)))


# --- take() -------------------------------------------------------------------------------------


def test_take_a_free_lock_creates_it(path):
    outcome = take(path)
    assert outcome == {"changed": True, "previous": None, "state": ml.FREE}
    assert json.loads(path.read_text()) == {"holder": "switch-model", "since": T0, "run": RUN, "by": "me@ctl",
                                            "expires": T0 + 14400}
    assert path.stat().st_mode & 0o777 == 0o644
    assert os.listdir(path.parent) == [path.name]     # no temporary file left


def test_take_twice_changes_nothing_and_keeps_the_expiry(path):
    take(path)
    outcome = take(path, expires=T0 + 99999, now=T0 + 60)
    assert outcome["changed"] is False and outcome["state"] == ml.OURS
    assert json.loads(path.read_text())["expires"] == T0 + 14400


def test_take_our_own_lock_for_another_step_rewrites_it(path):
    take(path)
    outcome = take(path, holder="switch-model rollback", expires=T0 + 600 + 14400, now=T0 + 600)
    assert outcome["changed"] is True and outcome["state"] == ml.OURS
    assert json.loads(path.read_text())["holder"] == "switch-model rollback"
    assert json.loads(path.read_text())["expires"] == T0 + 600 + 14400


@pytest.mark.parametrize("text", [lock_text(), lock_text(expires=None), "firmware\n", ""])
@pytest.mark.parametrize("check", [False, True])
def test_take_a_lock_another_run_holds_refuses_and_changes_nothing(path, text, check):
    path.write_text(text)
    with pytest.raises(ml.LockHeld) as refused:
        take(path, check=check)
    assert path.read_text() == text
    assert refused.value.lock["path"] == str(path)
    assert str(refused.value).startswith("The maintenance lock %s is held by " % path)


def test_take_over_an_expired_lock(path):
    path.write_text(lock_text(expires=T0 - 1))
    outcome = take(path)
    assert outcome["changed"] is True and outcome["state"] == ml.EXPIRED and outcome["previous"]["run"] == OTHER
    assert json.loads(path.read_text())["run"] == RUN


@pytest.mark.parametrize("text", ["", lock_text(), lock_text(expires=T0 - 1), lock_text(run=RUN)])
def test_take_in_check_mode_writes_nothing(path, text):
    if text:
        path.write_text(text)
    try:
        take(path, check=True)
    except ml.LockHeld:
        pass
    assert (path.read_text() if path.exists() else "") == text


def test_take_when_another_run_creates_it_between_look_and_write(path, monkeypatch):
    real_create = ml.create

    def create_after_the_other(target, content, mode=0o644):
        path.write_text(lock_text())          # the other run's write lands first
        return real_create(target, content, mode)

    monkeypatch.setattr(ml, "create", create_after_the_other)
    with pytest.raises(ml.LockHeld):
        take(path)
    assert json.loads(path.read_text())["run"] == OTHER


def test_take_over_an_expired_lock_another_run_takes_over_too(path, monkeypatch):
    path.write_text(lock_text(expires=T0 - 1))
    real_replace = ml.replace

    def replace_then_the_other(target, content, mode=0o644):
        real_replace(target, content, mode)
        path.write_text(lock_text(run="third-run", expires=T0 + 3600))   # the other run's write lands last

    monkeypatch.setattr(ml, "replace", replace_then_the_other)
    with pytest.raises(ml.LockHeld) as refused:
        take(path)
    assert refused.value.lock["run"] == "third-run"


def test_create_is_exclusive(path):
    assert ml.create(str(path), "one\n") is True
    assert ml.create(str(path), "two\n") is False
    assert path.read_text() == "one\n"
    assert os.listdir(path.parent) == [path.name]


def test_the_lock_is_on_disk_before_its_name_and_its_directory_is_not_made(path, monkeypatch):
    """The daemons' writer (``_daemon``), with ``sync``; /run is not the lock's to create."""
    synced, real_fsync = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    assert ml.create(str(path), "one\n") is True and len(synced) == 1
    ml.replace(str(path), "two\n")
    assert len(synced) == 2 and path.read_text() == "two\n" and os.listdir(path.parent) == [path.name]
    missing = path.parent / "missing" / path.name
    for write in (ml.create, ml.replace):
        with pytest.raises(FileNotFoundError):
            write(str(missing), "x\n")
    assert not missing.parent.exists()


# --- release() ----------------------------------------------------------------------------------


def test_release_our_lock_removes_it(path):
    take(path)
    outcome = ml.release(str(path), RUN, T0 + 60)
    assert outcome["changed"] is True and outcome["state"] == ml.OURS and outcome["previous"]["run"] == RUN
    assert not path.exists()


def test_release_in_check_mode_keeps_it(path):
    take(path)
    assert ml.release(str(path), RUN, T0, check=True)["changed"] is True
    assert path.exists()


@pytest.mark.parametrize("text, state", [
    (lock_text(), ml.HELD), (lock_text(expires=T0 - 1), ml.EXPIRED), ("firmware\n", ml.HELD)])
def test_release_leaves_anyone_elses_lock(path, text, state):
    path.write_text(text)
    outcome = ml.release(str(path), RUN, T0)
    assert outcome["changed"] is False and outcome["state"] == state
    assert path.read_text() == text


def test_release_absent_changes_nothing(path):
    assert ml.release(str(path), RUN, T0) == {"changed": False, "previous": None, "state": ml.FREE}
