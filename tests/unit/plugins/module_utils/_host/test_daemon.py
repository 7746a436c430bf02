# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_host/daemon.py, the shell the collection's daemons share."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading

import pytest
import requests

from ansible_collections.factory_floor.llm.plugins.module_utils._host import daemon


def test_write_atomic(tmp_path):
    path = tmp_path / "run" / "state.json"
    daemon.write_atomic(str(path), "one\n")
    assert path.read_text() == "one\n" and stat.S_IMODE(path.stat().st_mode) == 0o644
    daemon.write_atomic(str(path), "two\n", mode=0o600)
    assert path.read_text() == "two\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(TypeError):
        daemon.write_atomic(str(path), b"not text")
    assert path.read_text() == "two\n" and os.listdir(path.parent) == ["state.json"]
    # A directory someone else owns (node_exporter's, /run for the lock) is not created.
    with pytest.raises(FileNotFoundError):
        daemon.write_atomic(str(tmp_path / "missing" / "x.prom"), "x\n", makedirs=False)
    assert not (tmp_path / "missing").exists()
    daemon.write_atomic(str(path), "three\n", sync=True)
    assert path.read_text() == "three\n" and os.listdir(path.parent) == ["state.json"]


def test_write_temp_is_hidden_and_ends_unlike_its_file(tmp_path):
    """Whoever reads ``*.prom`` or ``*.json`` in the directory passes the temporary file over."""
    tmp = daemon.write_temp(str(tmp_path / "factory_floor_x.prom"), "x 1\n", mode=0o600, sync=True)
    name = os.path.basename(tmp)
    assert os.path.dirname(tmp) == str(tmp_path) and name.startswith(".factory_floor_x.prom.")
    assert not name.endswith(".prom") and open(tmp, encoding="utf-8").read() == "x 1\n"
    assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600


def test_journal_lines_carry_their_priority():
    assert daemon.journal_line(daemon.ERR, "gave up") == "<3>gave up"
    line = daemon.event_line(daemon.INFO, "verdict", {"state": "busy", "at": 1.5})
    assert line.startswith("<6>") and json.loads(line[3:]) == {"event": "verdict", "state": "busy", "at": 1.5}


def test_sd_notify(tmp_path):
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(address)
        assert daemon.sd_notify("READY=1", environ={"NOTIFY_SOCKET": address}) is True
        assert server.recv(100) == b"READY=1"
    assert daemon.sd_notify("READY=1", environ={}) is False
    assert daemon.sd_notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone")}) is False


def test_parse_args():
    args = daemon.parse_args(["--config", "c.json", "--once"], "a daemon")
    assert (args.config, args.once, args.check_config) == ("c.json", True, False)
    assert daemon.parse_args(["--config", "c.json", "--dry-run"], "a daemon", dry_run=True).dry_run is True
    with pytest.raises(SystemExit):
        daemon.parse_args([], "a daemon")


def test_load_json(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"interval": 5}')
    assert daemon.load_json(str(path), lambda data: data["interval"]) == 5
    path.write_text("{")
    with pytest.raises(ValueError):
        daemon.load_json(str(path), dict)


def test_loop_ticks_tells_systemd_and_stops():
    stop, ticks, said = threading.Event(), [], []

    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            stop.set()

    daemon.loop(tick, 0.0, stop, notify=said.append)
    assert len(ticks) == 3 and said == ["READY=1", "WATCHDOG=1", "WATCHDOG=1", "WATCHDOG=1", "STOPPING=1"]


def test_status_server():
    server = daemon.status_server(lambda: b'{"state": "busy"}\n', "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    try:
        base = "http://127.0.0.1:%d" % server.server_address[1]
        answer = requests.get(base + "/state", timeout=5, proxies={"http": None})
        assert answer.status_code == 200 and answer.json() == {"state": "busy"}
        assert requests.get(base + "/other", timeout=5, proxies={"http": None}).status_code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_configure(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text('{"interval": 5}')
    args, config = daemon.configure(["--config", str(path)], "a daemon", dict, lambda p, c: "unused")
    assert args.config == str(path) and config == {"interval": 5}
    assert daemon.configure(["--config", str(path), "--check-config"], "a daemon", dict,
                            lambda p, c: "%s: every %ds" % (p, c["interval"]), prefix="guard: ") == (None, 0)
    assert capsys.readouterr().out == "guard: %s: every 5s\n" % path
    path.write_text("{")
    assert daemon.configure(["--config", str(path)], "a daemon", dict, str, prefix="guard: ") == (None, 2)
    assert capsys.readouterr().err.startswith("guard: %s: " % path)


def test_boot_id(tmp_path):
    path = tmp_path / "boot_id"
    path.write_text("3f1c2a9e-0d4b-4c55-9a52-0c2b1a7d8e61\n")
    assert daemon.boot_id(str(path)) == "3f1c2a9e-0d4b-4c55-9a52-0c2b1a7d8e61"
    assert daemon.boot_id(str(tmp_path / "missing")) == ""


@pytest.mark.parametrize("record, expected", [
    # Stamped in this boot: the monotonic clock decides, whatever the wall clock did since.
    ({"time": 5000.0, "mono": 100.0, "boot": "b1"}, 50.0),
    ({"time": 99999.0, "mono": 100.0, "boot": "b1"}, 50.0),
    # Another boot, or no monotonic reading: only its UNIX time tells.
    ({"time": 4000.0, "mono": 100.0, "boot": "b0"}, 1000.0),
    ({"time": 4000.0}, 1000.0),
    # In the future on the wall clock: no negative age.
    ({"time": 6000.0, "boot": "b0"}, 0.0),
])
def test_age_is_measured_on_this_boots_monotonic_clock(record, expected):
    assert daemon.age(record, mono=150.0, wall=5000.0, boot="b1") == expected


def test_stamp():
    assert daemon.stamp(lambda: 12.5, lambda: 1_796_000_000.0, "b1") == {
        "time": 1_796_000_000.0, "mono": 12.5, "boot": "b1"}
