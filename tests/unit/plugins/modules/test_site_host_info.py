# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.site_host_info: what the site check reads on a host, with the host's commands faked."""

from __future__ import annotations

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.modules import site_host_info as module

SS = ('LISTEN 0 4096 0.0.0.0:8000 0.0.0.0:* users:(("python3",pid=42,fd=3))\n'
      'LISTEN 0 511 0.0.0.0:8080 0.0.0.0:* users:(("nginx",pid=7,fd=6))\n')


@pytest.fixture
def host(monkeypatch):
    """Fake answers: ``active`` units, the NTP state, the virtualization; every command run is recorded."""
    state = {"active": {"docker.service", "systemd-timesyncd.service"}, "ntp": "yes", "virt": "none", "argv": []}

    def run_command(self, argv, **kwargs):
        state["argv"].append(argv)
        if argv[0] == "systemd-detect-virt":
            return (0 if state["virt"] != "none" else 1), state["virt"] + "\n", ""
        if argv[0] == "timedatectl":
            return 0, "NTPSynchronized=%s\nNTP=yes\n" % state["ntp"], ""
        if argv[0] == "ss":
            return 0, SS, ""
        if argv[:2] == ["systemctl", "show"]:
            active = argv[-1] in state["active"]
            return 0, "LoadState=loaded\nActiveState=%s\n" % ("active" if active else "inactive"), ""
        raise AssertionError(argv)

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)
    return state


PORTS = [{"port": 8000, "purpose": "vLLM's API", "variable": "vllm_port", "owner_units": ["vllm-replica.service"]},
         {"port": 8091, "purpose": "the watchdog", "variable": "vllm_watchdog_status_port", "owner_units": []}]


def test_reads_time_units_and_ports(host, run_module):
    result = run_module(module, {"units": ["docker.service"], "ports": PORTS}).result
    assert result["time"]["ntp_synchronized"] is True
    assert result["time"]["services"] == ["systemd-timesyncd.service"]
    assert result["units"]["docker.service"]["active_state"] == "active"
    taken, free = result["ports"]
    assert (taken["free"], taken["ours"], taken["holders"][0]["process"]) == (False, False, "python3")
    assert free["free"] is True
    assert result["virtualization"] == "none" and result["changed"] is False


def test_a_port_held_while_its_owner_unit_is_active_is_ours(host, run_module):
    host["active"].add("vllm-replica.service")
    result = run_module(module, {"ports": PORTS[:1]}).result
    assert result["ports"][0]["ours"] is True


def test_check_mode_reads_in_full_and_runs_only_reads(host, run_module):
    host["ntp"], host["virt"] = "no", "podman"
    result = run_module(module, {"units": ["docker.service"], "ports": PORTS, "_ansible_check_mode": True}).result
    assert result["time"]["ntp_synchronized"] is False and result["virtualization"] == "podman"
    assert {argv[0] for argv in host["argv"]} == {"systemd-detect-virt", "timedatectl", "ss", "systemctl"}
    assert all(argv[1] == "show" for argv in host["argv"] if argv[0] in ("systemctl", "timedatectl"))


# site_check.yml's units and ports before the module listed them from the host's groups (engine, proxy).
OLD_UNITS = "{{ ['docker.service'] if __site_check_engine else [] }}"
OLD_PORTS = """{{ ([{'port': vllm_port | int, 'purpose': "vLLM's API", 'variable': 'vllm_port',
                'owner_units': _site_engine_units},
               {'port': site_watchdog_status_port | int, 'purpose': "the watchdog's state (GET /state)",
                'variable': 'vllm_watchdog_status_port',
                'owner_units': _site_topologies.values() | map(attribute='watchdog_unit') | list}]
              if __site_check_engine else [])
             + ([{'port': site_proxy_port | int, 'purpose': 'the proxy (nginx)', 'variable': 'site_proxy_port',
                  'owner_units': ['nginx.service']}] if 'proxy' in site_check.groups else []) }}"""
TOPOLOGIES = {"replicas": {"unit": "vllm-replica.service", "watchdog_unit": "vllm-watchdog.service"},
              "split": {"unit": "vllm-split.service", "watchdog_unit": "vllm-split-watchdog.service"}}


@pytest.mark.parametrize("engine, proxy, vllm_port, proxy_port", [
    (True, False, 8000, 8080), (False, True, 8000, "8080"), (True, True, "8001", 9000), (False, False, 8000, 8080)])
def test_the_ports_are_the_ones_site_check_yml_listed(host, run_module, engine, proxy, vllm_port, proxy_port):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    variables = {"__site_check_engine": engine, "site_check": {"groups": (["engine"] if engine else []) + (["proxy"] if proxy else [])},
                 "vllm_port": vllm_port, "site_watchdog_status_port": 8091, "site_proxy_port": proxy_port,
                 "_site_topologies": TOPOLOGIES, "_site_engine_units": ["vllm-replica.service", "vllm-split.service"]}
    templar = Templar(loader=DataLoader(), variables=variables)
    old_ports = templar.template(trust_as_template(OLD_PORTS))
    old_units = templar.template(trust_as_template(OLD_UNITS))
    args = {"engine": engine, "proxy": proxy, "vllm_port": vllm_port, "watchdog_status_port": 8091,
            "engine_units": variables["_site_engine_units"],
            "watchdog_units": [t["watchdog_unit"] for t in TOPOLOGIES.values()], "proxy_port": proxy_port}
    result = run_module(module, args).result
    assert [{key: port[key] for key in ("port", "purpose", "variable", "owner_units")} for port in result["ports"]] == old_ports
    assert list(result["units"]) == old_units
    old = run_module(module, {"units": old_units, "ports": old_ports}).result
    assert result["ports"] == old["ports"] and result["units"] == old["units"]


def test_engine_and_proxy_replace_units_and_ports(host, run_module):
    refused = [run_module(module, args) for args in (
        {"engine": True, "proxy": False, "ports": PORTS, "vllm_port": 1, "watchdog_status_port": 2},
        {"engine": True}, {"engine": True, "proxy": False}, {"engine": False, "proxy": True})]
    assert [(run.code, run.result.get("failed")) for run in refused] == [(1, True)] * 4
    assert "mutually exclusive" in refused[0].result["msg"] and "vllm_port" in refused[2].result["msg"]
