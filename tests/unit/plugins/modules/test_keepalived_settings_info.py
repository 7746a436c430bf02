# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.keepalived_settings_info`` through its action plugin: the keepalived role's variables read as the
task sees them (Ansible's own templar over the role's defaults and vars), ``keepalived_info`` and ``vrrp_info`` run on
the host, and what is noted for ``keepalived_check`` (which reads it back as ``settings_fact``). What is noted from the
variables: tests/unit/plugins/module_utils/test_keepalived_input.py."""

from __future__ import annotations

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.keepalived_check import group_args
from ansible_collections.factory_floor.llm.plugins.action.keepalived_settings_info import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils._keepalived_input import host_settings
from ansible_collections.factory_floor.llm.plugins.modules import keepalived_check
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action_answering
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

OBSERVED = {"changed": False, "interface_exists": True, "interfaces": ["eth0", "lo"], "service_state": "inactive",
            "addresses": [{"address": "10.89.7.10", "prefixlen": 24, "secondary": False}], "configured_addresses": []}
HEARD = {"changed": False, "routers": [{"virtual_router_id": 7, "source": "10.89.7.50"}]}


def run(check_mode=False, results=(OBSERVED, HEARD), **inventory):
    """The action plugin's run over the keepalived role's variables on spark-a; the modules answer ``results``."""
    variables = role_variables("keepalived")
    variables.update(inventory_hostname="spark-a", keepalived_virtual_ipaddress="10.89.7.100/24",
                     ansible_facts={"default_ipv4": {"interface": "eth0", "address": "10.89.7.10"}})
    variables.update(inventory)
    templar = with_filters(Templar(loader=DataLoader(), variables=variables))
    return run_action_answering(ActionModule, "keepalived_settings_info", {}, variables, results,
                                check_mode=check_mode, templar=templar)


def test_reads_the_host_then_listens_and_notes_the_settings_also_in_check_mode():
    result, calls = run(check_mode=True)
    assert calls == [("factory_floor.llm.keepalived_info", {"interface": "eth0", "virtual_ipaddress": "10.89.7.100/24",
                                                            "state_file": "/run/factory-floor/keepalived.json"}),
                     ("factory_floor.llm.vrrp_info", {"interface": "eth0", "seconds": 3})]
    assert not result.get("failed") and result["changed"] is False
    assert result["interface"] == "eth0" and result["virtual_ipaddress"] == "10.89.7.100/24"
    assert result["priority"] == "250" and result["nopreempt"] in (True, False)
    assert result["observed"] == OBSERVED and result["routers"] == HEARD["routers"]


@pytest.mark.parametrize("inventory, observed", [
    ({"keepalived_preflight_listen": 0}, OBSERVED),
    ({}, dict(OBSERVED, interface_exists=False)),
])
def test_no_listen_without_the_interface_or_with_a_listen_of_0(inventory, observed):
    result, calls = run(results=(observed,), **inventory)
    assert [module for module, _args in calls] == ["factory_floor.llm.keepalived_info"]
    assert result["routers"] is None and result["observed"] == observed


@pytest.mark.parametrize("results, message", [
    (({"failed": True, "msg": "ip -j addr show failed: no ip"},), "ip -j addr show failed: no ip"),
    ((OBSERVED, {"failed": True, "msg": "Listening for VRRP needs root (a raw socket)."}),
     "Listening for VRRP needs root (a raw socket)."),
])
def test_a_read_that_fails_fails_the_task_with_its_message(results, message):
    result, _calls = run(results=results)
    assert result["failed"] is True and result["msg"] == message


def test_what_is_noted_is_what_the_group_decision_and_the_status_read(run_module):
    noted = {}
    for host, address, own in (("spark-a", "10.89.7.10", "10.89.7.11"), ("spark-b", "10.89.7.11", "10.89.7.10")):
        observed = dict(OBSERVED, addresses=[{"address": address, "prefixlen": 24, "secondary": False}])
        result, _calls = run(results=(observed, {"changed": False, "routers": []}), inventory_hostname=host,
                             ansible_facts={"default_ipv4": {"interface": "eth0", "address": address}})
        noted[host] = {"__keepalived_settings": dict(result, failed=False), "__keepalived_auth_pass": ""}
        assert own not in str(result["observed"])
    args = group_args({"settings_fact": "__keepalived_settings", "auth_pass_fact": "__keepalived_auth_pass",
                       "group": "proxy"},
                      {"hostvars": noted, "groups": {"proxy": ["spark-a", "spark-b"]},
                       "ansible_play_hosts": ["spark-a", "spark-b"]})
    code, checked = run_module(keepalived_check, args)
    assert code == 0, checked.get("msg")
    assert checked["hosts"]["spark-a"] == {"unicast_src_ip": "10.89.7.10", "unicast_peer": ["10.89.7.11"]}
    assert host_settings(noted["spark-b"]) == ("eth0", "")


def test_documents_the_spec():
    assert_documents_the_spec("keepalived_settings_info", ARGUMENT_SPEC)
