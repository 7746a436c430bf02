# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.keepalived_info against a fake ip and systemctl (run_command)."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.action.keepalived_info import host_args
from ansible_collections.factory_floor.llm.plugins.module_utils._keepalived_input import host_settings
from ansible_collections.factory_floor.llm.plugins.modules import keepalived_info
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host.test_keepalived import IP_ADDR_HOLDER

CONF = """vrrp_instance factory_floor {
    virtual_ipaddress {
        10.89.9.100/24 dev eth0
    }
}
"""


@pytest.fixture
def host(monkeypatch, tmp_path):
    fake = {"ip": (0, IP_ADDR_HOLDER, ""), "state": (0, "ActiveState=active\n", ""), "calls": []}

    def run_command(self, args, **kwargs):
        fake["calls"].append(list(args))
        return fake["ip"] if args[0].endswith("/ip") else fake["state"]

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    fake["state_file"] = tmp_path / "keepalived.json"
    fake["state_file"].write_text(json.dumps({"type": "INSTANCE", "instance": "factory_floor", "state": "MASTER",
                                              "priority": 249, "since": 1796163659.47}) + "\n")
    fake["config"] = tmp_path / "keepalived.conf"
    fake["config"].write_text(CONF)
    return fake


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_holder(host, run_module, check_mode):
    code, result = run_module(keepalived_info, {
        "interface": "eth0", "virtual_ipaddress": "10.89.9.100/24", "state_file": str(host["state_file"]),
        "config": str(host["config"]), "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False
    assert result["holds_address"] is True
    assert (result["vrrp_state"], result["vrrp_state_current"], result["priority"]) == ("MASTER", True, 249)
    assert result["service_state"] == "active"
    assert result["configured_addresses"] == ["10.89.9.100"]
    assert [a["address"] for a in result["addresses"]] == ["10.89.9.11", "10.89.9.100"]
    assert set(result["all_addresses"]) == {"lo", "eth0", "enp1s0f0np0"}
    assert host["calls"] == [["/usr/bin/ip", "-j", "addr", "show"],
                             ["/usr/bin/systemctl", "show", "-p", "ActiveState", "--", "keepalived.service"]]


def test_no_state_file_no_config_keepalived_stopped(host, run_module, tmp_path):
    host["state"] = (0, "ActiveState=inactive\n", "")
    code, result = run_module(keepalived_info, {
        "interface": "eth0", "virtual_ipaddress": "10.89.9.101", "state_file": str(tmp_path / "none.json"),
        "config": str(tmp_path / "none.conf")})
    assert code == 0, result
    assert result["holds_address"] is False
    assert result["vrrp_state"] == "" and result["vrrp_state_current"] is False
    assert result["service_state"] == "inactive"
    assert result["configured_addresses"] == []


def test_missing_interface(host, run_module):
    code, result = run_module(keepalived_info, {"interface": "eth9", "state_file": str(host["state_file"])})
    assert code == 0, result
    assert result["interface_exists"] is False
    assert result["holds_address"] is None
    assert result["interfaces"] == ["enp1s0f0np0", "eth0", "lo"]


def test_ip_fails(host, run_module):
    host["ip"] = (1, "", "Cannot open netlink socket")
    code, result = run_module(keepalived_info, {"interface": "eth0"})
    assert code == 1
    assert result["msg"] == "ip -j addr show failed (rc 1): Cannot open netlink socket"


# --- settings_of: a delegated read with that host's interface and address (the action plugin; issue 36) ----------

@pytest.mark.parametrize("host_vars, expected", [
    # What this run's preflight noted there comes first...
    ({"__keepalived_settings": {"interface": "eth1"}, "__keepalived_address": "10.89.7.100/24",
      "keepalived_interface": "eth9", "keepalived_virtual_ipaddress": "10.0.0.9/24"}, ("eth1", "10.89.7.100/24")),
    # ...then the host's inventory...
    ({"__keepalived_settings": {}, "keepalived_interface": "eth9", "keepalived_virtual_ipaddress": "10.0.0.9/24"},
     ("eth9", "10.0.0.9/24")),
    # ...then the reader's own.
    ({}, ("eth0", "10.89.7.100/24")),
])
def test_settings_of_reads_that_hosts_interface_and_address(host_vars, expected):
    args = host_args({"settings_of": "spark-b", "interface": "eth0", "virtual_ipaddress": "10.89.7.100/24",
                      "state_file": "/run/x.json"}, {"spark-b": host_vars})
    assert (args["interface"], args["virtual_ipaddress"]) == expected
    assert "settings_of" not in args and args["state_file"] == "/run/x.json"
    assert host_settings(host_vars, "eth0", "10.89.7.100/24") == expected


def test_without_settings_of_the_arguments_go_as_given(host, run_module):
    args = host_args({"interface": "eth0", "virtual_ipaddress": "10.89.7.100/24"}, {})
    assert args == {"interface": "eth0", "virtual_ipaddress": "10.89.7.100/24"}
    code, result = run_module(keepalived_info, dict(args, state_file=str(host["state_file"]), config=str(host["config"])))
    assert code == 0 and result["interface"] == "eth0"
