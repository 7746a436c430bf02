# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""plugins/module_utils/_host/textfile.py: the daemons' verdicts as node_exporter textfiles.

The ``*_textfile`` functions drive each daemon through its own unit-test world (a hung
engine the watchdog gives up on, MemAvailable under the guard's floor with nothing left
to act on, a proxy whose engines all fail) and return the file the daemon wrote. The
alert rules' tests (tests/unit/extras/test_prometheus_alerts.py) use the same files as
their samples of those faults.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.factory_floor.llm.plugins.module_utils._host import keepalived_watch as kw
from ansible_collections.factory_floor.llm.plugins.module_utils._host import textfile
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as vh
from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog as wd
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import test_memory_guard_watch as mgw
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import test_upstream as tu
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import test_watchdog as tw


def samples(text):
    """{(name, frozenset(labels)): value} as Prometheus would read the file."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _environment(monkeypatch, directory, host):
    directory.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv(textfile.ENV_DIR, str(directory))
    monkeypatch.setenv(textfile.ENV_HOST, host)


# ------------------------------------------------------------- the daemons' files


def watchdog_textfile(tmp_path, monkeypatch, fault):
    """The watchdog's file after a hung engine exhausted its budget (``fault`` true), while its engine
    starts (``"starting"``: a restarted unit whose port is still closed), while a maintenance lock holds
    (``"maintenance"``), with the lock of a dead run expired (``"lock_expired"``), when its own request cannot be
    sent (``"config_error"``: its API key ends with a newline; the engine may serve), or while it serves."""
    _environment(monkeypatch, tmp_path / "textfile", "spark-a")
    clock, lines = tw.Clock(), []
    world = tw.World(clock)
    dog = world.watchdog(tw.config(tmp_path, max_restarts=2, backoff=0), lines)
    if fault in ("maintenance", "lock_expired"):
        expires = tw.WALL0 + (3600 if fault == "maintenance" else -3600)
        (tmp_path / "maintenance").write_text(json.dumps({"holder": "switch-model", "run": "r1", "expires": expires}))
        world.counters = tw.counters(running=0)
        assert dog.tick().state == (wd.MAINTENANCE if fault == "maintenance" else wd.SERVING)
    elif fault == "config_error":
        world.health = wd.Probe("config_error", error="GET http://127.0.0.1:8000/health not sent: the api_key ends "
                                                      "with a newline")
        assert dog.tick().state == wd.CONFIG_ERROR
    elif fault == "starting":
        world.run(["systemctl", "restart", tw.UNIT])
        assert dog.tick().state == wd.STARTING
    elif fault:
        for _round in range(3):
            world.health, world.counters, world.generate = wd.Probe("serving"), tw.counters(gen=5, running=1), tw.TIMEOUT
            verdicts = tw.run_until(dog, clock, clock.now + 300, stop=lambda v: v.action in (wd.RESTART, wd.GIVE_UP))
        assert verdicts[-1].state == wd.GAVE_UP
    else:
        world.counters = tw.counters(running=0)
        assert dog.tick().state == wd.SERVING
    return (tmp_path / "textfile" / "factory_floor_watchdog_vllm-replica.prom").read_text()


def memory_guard_textfile(tmp_path, monkeypatch, fault):
    """The memory guard's file with MemAvailable at 1 GiB under its 2 GiB floor and no declared workload
    running to act on (``fault``), or at 10 GiB."""
    _environment(monkeypatch, tmp_path / "textfile", "spark-a")
    (tmp_path / "host").mkdir()
    fake = mgw.FakeHost(tmp_path / "host")
    fake.unit("mg-database.service", "/system.slice/mg-database.service", state="inactive")
    fake.unit("mg-site-build.service", "/system.slice/mg-site-build.service", state="inactive")
    fake.set_available(1 if fault else 10)
    guard = fake.guard()
    guard.tick()
    guard.tick()
    return (tmp_path / "textfile" / "factory_floor_memory_guard.prom").read_text()


def upstream_textfile(tmp_path, monkeypatch, fault):
    """The proxy's membership file with both engines' ports closed (``fault`` true: refused, known gone), both
    serving but drained (``"drained"``: a switch), both serving with spark-b drained (``"one_drained"``: an
    operator's drain left behind), or both serving."""
    _environment(monkeypatch, tmp_path / "textfile", "gateway")
    (tmp_path / "proxy").mkdir(parents=True)
    world = tu.World(tmp_path / "proxy")
    if fault == "drained":
        for name in world.statuses:
            world.drain(name)
    elif fault == "one_drained":
        world.drain("spark-b")
    for _look in range(3):  # joins after 2 passed probes; leaves at once when refused (known gone)
        for name in world.statuses:
            world.statuses[name] = vh.LOADING if fault is True else vh.SERVING
        world.once()
    return (tmp_path / "textfile" / "factory_floor_upstream.prom").read_text()


# `ip -j addr show` on a proxy host, with the floating address 10.89.7.100 on eth0 or not.
def ip_addr(*addresses):
    return json.dumps([{"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
                       {"ifname": "eth0", "addr_info": [{"family": "inet", "local": a, "prefixlen": 24}
                                                        for a in addresses]}])


def keepalived_textfile(tmp_path, monkeypatch, host, holds, vrrp="BACKUP", active="active"):
    """The floating address's watch's file on ``host`` after one look: the address on its eth0 (``holds``)
    or not, keepalived.service ``active`` or not, the notify script's last state ``vrrp``."""
    _environment(monkeypatch, tmp_path / "textfile", host)
    own = {"gateway-a": "10.89.7.21", "gateway-b": "10.89.7.22"}.get(host, "10.89.7.23")
    answers = {"ip": (0, ip_addr(own, *(["10.89.7.100"] if holds else [])), ""),
               "systemctl": (0, "ActiveState=%s\n" % active, "")}
    state = json.dumps({"type": "INSTANCE", "instance": "factory_floor", "state": vrrp, "priority": 250, "since": 1.0})
    config = kw.load_config({"virtual_ipaddress": "10.89.7.100/24", "interface": "eth0"})
    kw.Watch(config, run=lambda argv: answers[argv[0]], read=lambda path: state, clock=lambda: 1_796_000_000.0).tick()
    return (tmp_path / "textfile" / "factory_floor_keepalived.prom").read_text()


# ------------------------------------------------------------------- the writer


def test_render_escapes_labels_and_skips_unknown_values():
    text = textfile.render([
        ("factory_floor_x", "gauge", "A help\\text.", [({"unit": 'a"b\\c\nd'}, 1), ({"unit": "none"}, None)]),
        ("factory_floor_y_seconds", "gauge", "Y.", [({}, 1795950000.25), ({"z": "1"}, 3.0)]),
    ], host="spark-a")
    assert text == (
        "# HELP factory_floor_x A help\\\\text.\n# TYPE factory_floor_x gauge\n"
        'factory_floor_x{host="spark-a",unit="a\\"b\\\\c\\nd"} 1\n'
        "# HELP factory_floor_y_seconds Y.\n# TYPE factory_floor_y_seconds gauge\n"
        'factory_floor_y_seconds{host="spark-a"} 1795950000.25\nfactory_floor_y_seconds{host="spark-a",z="1"} 3\n')
    parsed = samples(text)
    assert parsed[("factory_floor_x", frozenset({("host", "spark-a"), ("unit", 'a"b\\c\nd')}))] == 1


def test_write_is_atomic_world_readable_and_needs_a_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(textfile.ENV_DIR, raising=False)
    families = [("factory_floor_x", "gauge", "X.", [({}, 1)])]
    assert textfile.write_textfile("factory_floor_x", families) is None   # no directory: nothing written
    path = textfile.write_textfile("factory_floor_x", families, directory=str(tmp_path), host="h")
    assert path == str(tmp_path / "factory_floor_x.prom")
    assert os.listdir(str(tmp_path)) == ["factory_floor_x.prom"]           # the temporary file was renamed
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert textfile.remove_textfile("factory_floor_x", directory=str(tmp_path)) is True
    assert textfile.remove_textfile("factory_floor_x", directory=str(tmp_path)) is False
    # A directory that cannot be written: no exception, one line on stderr however often it fails.
    missing = str(tmp_path / "missing")
    assert textfile.write_textfile("factory_floor_x", families, directory=missing) is None
    assert textfile.write_textfile("factory_floor_x", families, directory=missing) is None
    err = capsys.readouterr().err
    assert err.count("not written") == 1 and err.rstrip().endswith("not written: No such file or directory")


def test_watchdog_names_its_file_after_the_engine_unit():
    assert textfile.watchdog_name("vllm-replica.service") == "factory_floor_watchdog_vllm-replica"
    assert textfile.watchdog_name("vllm-split.service") == "factory_floor_watchdog_vllm-split"


# ------------------------------------------------------------ each daemon's file


@pytest.mark.parametrize("fault", [True, False])
def test_watchdog_writes_its_verdict(tmp_path, monkeypatch, fault):
    found = samples(watchdog_textfile(tmp_path, monkeypatch, fault))
    labels = {("unit", "vllm-replica.service"), ("role", "replica"), ("host", "spark-a")}
    verdict = "gave_up" if fault else "serving"
    assert found[("factory_floor_watchdog_verdict", frozenset(labels | {("verdict", verdict)}))] == 1
    assert [k for k in found if k[0] == "factory_floor_watchdog_verdict"] == [
        ("factory_floor_watchdog_verdict", frozenset(labels | {("verdict", verdict)}))]
    assert found[("factory_floor_watchdog_gave_up", frozenset(labels))] == (1 if fault else 0)
    assert found[("factory_floor_watchdog_restarts", frozenset(labels))] == (2 if fault else 0)
    assert found[("factory_floor_watchdog_max_restarts", frozenset(labels))] == 2
    assert found[("factory_floor_watchdog_updated_timestamp_seconds", frozenset(labels))] >= tw.WALL0


@pytest.mark.parametrize("fault", [True, False])
def test_memory_guard_writes_its_state(tmp_path, monkeypatch, fault):
    found = samples(memory_guard_textfile(tmp_path, monkeypatch, fault))
    host = frozenset({("host", "spark-a")})
    assert found[("factory_floor_memory_available_bytes", host)] == (1 if fault else 10) * 1024 ** 3
    assert found[("factory_floor_memory_floor_bytes", host)] == 2 * 1024 ** 3
    assert found[("factory_floor_memory_below_floor", host)] == (1 if fault else 0)
    assert found[("factory_floor_memory_guard_nothing_left", host)] == (1 if fault else 0)
    database = frozenset(host | {("workload", "database"), ("unit", "mg-database.service"), ("action", "none")})
    assert found[("factory_floor_memory_workload_acted", database)] == 0


@pytest.mark.parametrize("fault, verdict, expired", [("maintenance", "maintenance", 0), ("lock_expired", "serving", 1)])
def test_watchdog_says_when_a_maintenance_lock_has_expired(tmp_path, monkeypatch, fault, verdict, expired):
    found = samples(watchdog_textfile(tmp_path, monkeypatch, fault))
    labels = frozenset({("unit", "vllm-replica.service"), ("role", "replica"), ("host", "spark-a")})
    assert [dict(k[1])["verdict"] for k in found if k[0] == "factory_floor_watchdog_verdict"] == [verdict]
    assert found[("factory_floor_watchdog_lock_expired", labels)] == expired


def test_watchdog_says_starting_while_its_engine_starts(tmp_path, monkeypatch):
    found = samples(watchdog_textfile(tmp_path, monkeypatch, "starting"))
    assert [dict(k[1])["verdict"] for k in found if k[0] == "factory_floor_watchdog_verdict"] == ["starting"]


def test_membership_checker_counts_drained_engines(tmp_path, monkeypatch):
    found = samples(upstream_textfile(tmp_path, monkeypatch, "drained"))
    host = frozenset({("host", "gateway")})
    assert found[("factory_floor_upstream_engines_in_rotation", host)] == 0
    assert found[("factory_floor_upstream_engines_drained", host)] == 2


def test_membership_checker_says_which_engine_is_drained(tmp_path, monkeypatch):
    found = samples(upstream_textfile(tmp_path, monkeypatch, "one_drained"))
    host = frozenset({("host", "gateway")})
    assert found[("factory_floor_upstream_engines_in_rotation", host)] == 1
    assert found[("factory_floor_upstream_in_rotation", host | {("backend", "spark-a")})] == 1
    assert found[("factory_floor_upstream_in_rotation", host | {("backend", "spark-b")})] == 0
    assert found[("factory_floor_upstream_drained", host | {("backend", "spark-b")})] == 1


@pytest.mark.parametrize("fault", [True, False])
def test_membership_checker_writes_the_rotation(tmp_path, monkeypatch, fault):
    found = samples(upstream_textfile(tmp_path, monkeypatch, fault))
    host = frozenset({("host", "gateway")})
    assert found[("factory_floor_upstream_engines_in_rotation", host)] == (0 if fault else 2)
    for backend in ("spark-a", "spark-b"):
        labels = frozenset(host | {("backend", backend)})
        assert found[("factory_floor_upstream_in_rotation", labels)] == (0 if fault else 1)
        assert found[("factory_floor_upstream_probe_serving", labels)] == (0 if fault else 1)
        assert found[("factory_floor_upstream_drained", labels)] == 0


@pytest.mark.parametrize("holds, vrrp, active", [
    (True, "MASTER", "active"), (False, "BACKUP", "active"), (True, "MASTER", "failed")])
def test_the_floating_address_watch_says_whether_this_host_holds_it(tmp_path, monkeypatch, holds, vrrp, active):
    found = samples(keepalived_textfile(tmp_path, monkeypatch, "gateway-a", holds, vrrp, active))
    host = frozenset({("host", "gateway-a")})
    assert found[("factory_floor_keepalived_holds_address", host | {("address", "10.89.7.100")})] == (1 if holds else 0)
    assert found[("factory_floor_keepalived_up", host)] == (1 if active == "active" else 0)
    states = {state: found[("factory_floor_keepalived_vrrp_state", host | {("state", state)})]
              for state in ("MASTER", "BACKUP", "FAULT", "STOP")}
    # A state the notify script wrote before keepalived died is not keepalived's now.
    assert states == {s: (1 if s == vrrp and active == "active" else 0) for s in states}
    assert found[("factory_floor_keepalived_updated_timestamp_seconds", host)] == 1_796_000_000


# ------------------------------------------------------- installed with each daemon


@pytest.mark.parametrize("daemon", ["watchdog", "memory_guard_watch", "upstream", "keepalived_watch"])
def test_each_daemon_imports_the_textfile_of_its_installed_package(tmp_path, daemon):
    """The daemon imports as the site role installs the package: no collection, no Ansible, one textfile."""
    lib = host_layout.install(tmp_path / "lib")
    done = subprocess.run([sys.executable, "-s", "-c", "import _host.%s as d, _host.textfile as t; print(d.textfile is t)"
                           % daemon], capture_output=True, text=True, cwd="/", env=host_layout.env(lib), timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
