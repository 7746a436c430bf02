# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The floating address's watch (``_keepalived_watch``): its configuration, what one look says when a
read fails, and its command line. The file it writes is tested in test_textfile.py."""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._host import keepalived_watch as kw
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import host_layout
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host.test_textfile import ip_addr

CONFIG = {"virtual_ipaddress": "10.89.7.100/24", "interface": "eth0"}


def values(families):
    return {(name, tuple(sorted(labels.items()))): value for name, _kind, _help, samples in families
            for labels, value in samples if value is not None}  # None: left out of the file (render)


def test_the_configuration_gets_its_defaults():
    config = kw.load_config(CONFIG)
    assert config["interval"] == 5.0 and config["service"] == "keepalived.service"
    assert config["state_file"] == "/run/factory-floor/keepalived.json"


@pytest.mark.parametrize("raw, words", [
    ([], "a JSON object"),
    ({"virtual_ipaddress": "10.89.7.100/24", "interfce": "eth0"}, "unknown key(s): interfce"),
    ({"interface": "eth0"}, "virtual_ipaddress: empty"),
    ({"virtual_ipaddress": "vip"}, "virtual_ipaddress: 'vip' is not an IPv4 address"),
    (dict(CONFIG, interval=0), "interval must be a number of seconds above 0"),
    (dict(CONFIG, interval=True), "interval must be a number of seconds above 0"),
    (dict(CONFIG, interface=3), "interface must be a string"),
])
def test_a_wrong_configuration_is_named(raw, words):
    with pytest.raises(ValueError) as caught:
        kw.load_config(raw)
    assert words in str(caught.value)


def test_addresses_that_cannot_be_read_leave_the_holder_sample_out():
    # "Unknown" must not read as "not held": the sum over the proxies would say nobody holds it.
    found = values(kw.look(kw.load_config(CONFIG), None, "active", None, 5.0))
    assert ("factory_floor_keepalived_holds_address", (("address", "10.89.7.100"),)) not in found
    assert found[("factory_floor_keepalived_up", ())] == 1
    assert found[("factory_floor_keepalived_updated_timestamp_seconds", ())] == 5.0


def test_the_address_on_another_interface_is_not_held_there():
    # keepalived adds it to keepalived_interface only; the watch looks there, as keepalived_info does.
    other = json.dumps([{"ifname": "eth1", "addr_info": [{"family": "inet", "local": "10.89.7.100", "prefixlen": 24}]}])
    found = values(kw.look(kw.load_config(CONFIG), other, "active", None, 5.0))
    assert found[("factory_floor_keepalived_holds_address", (("address", "10.89.7.100"),))] == 0
    anywhere = values(kw.look(kw.load_config(dict(CONFIG, interface="")), other, "active", None, 5.0))
    assert anywhere[("factory_floor_keepalived_holds_address", (("address", "10.89.7.100"),))] == 1


def test_systemd_that_cannot_say_reads_as_keepalived_down():
    answers = {"ip": (0, ip_addr("10.89.7.21", "10.89.7.100"), ""), "systemctl": (1, "", "Failed to connect to bus")}
    written = []
    watch = kw.Watch(kw.load_config(CONFIG), run=lambda argv: answers[argv[0]], read=lambda path: None,
                     clock=lambda: 7.0, write=lambda name, families: written.append((name, families)))
    found = values(watch.tick())
    assert written and written[0][0] == "factory_floor_keepalived"
    assert found[("factory_floor_keepalived_up", ())] == 0
    assert found[("factory_floor_keepalived_holds_address", (("address", "10.89.7.100"),))] == 1


def test_check_config_on_the_command_line_as_installed(tmp_path):
    lib = host_layout.install(tmp_path / "lib")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(CONFIG))
    bad.write_text(json.dumps({"virtual_ipaddress": "10.89.7.100/24", "intervall": 5}))
    done = host_layout.run(lib, "keepalived_watch", "--check-config", "--config", good)
    assert done.returncode == 0 and "ok (10.89.7.100/24, a look every 5s)" in done.stdout, done.stderr
    done = host_layout.run(lib, "keepalived_watch", "--check-config", "--config", bad)
    assert done.returncode == 2 and "unknown key(s): intervall" in done.stderr
