# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.keepalived_check (the decision itself: test_keepalived.py)."""

from __future__ import annotations

import json

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.action.keepalived_check import group_args
from ansible_collections.factory_floor.llm.plugins.modules import keepalived_check
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host.test_keepalived import pair


def test_a_good_pair(run_module):
    code, result = run_module(keepalived_check, {"hosts": pair(), "_ansible_check_mode": True})
    assert code == 0, result.get("msg")
    assert result["changed"] is False
    assert result["errors"] == []
    assert result["virtual_ipaddress"] == "10.89.7.100/24"
    assert result["hosts"]["spark-b"] == {"unicast_src_ip": "10.89.7.11", "unicast_peer": ["10.89.7.10"]}


def test_refusal_names_the_variable_and_numbers_the_problems(run_module):
    hosts = pair(spark_a={"virtual_ipaddress": "10.99.0.1/24"}, spark_b={"virtual_ipaddress": "10.99.0.1/24"})
    code, result = run_module(keepalived_check, {"hosts": hosts, "reserved": {"gateway": ["10.89.7.20"]}})
    assert code == 1
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"].startswith("The floating address (keepalived) cannot work with these settings; "
                                    "nothing was changed. Change them and run again:\n1) 10.99.0.1 (keepalived_virtual_ipaddress)")
    assert "\n2) " in result["msg"]
    assert [error["check"] for error in result["errors"]] == ["outside_subnet", "outside_subnet"]
    assert result["hosts"] == {}


def test_hosts_must_be_dicts(run_module):
    code, result = run_module(keepalived_check, {"hosts": {"spark-a": "eth0", "spark-b": {}}})
    assert code == 1
    assert result["msg"] == "hosts must map each proxy host to a dict of its settings; not a dict for: spark-a"


def test_different_auth_is_refused_and_no_secret_is_printed(run_module):
    secrets = {"spark-a": "Vr9-aaaa", "spark-b": "Vr9-bbbb"}
    code, result = run_module(keepalived_check, {"hosts": pair(), "auth_pass": secrets})
    assert code == 1
    assert [error["check"] for error in result["errors"]] == ["auth_differs"]
    assert "The proxy hosts do not have the same keepalived_auth_pass" in result["msg"]
    assert not any(secret in json.dumps(result) for secret in secrets.values())


def test_auth_pass_must_name_every_host(run_module):
    code, result = run_module(keepalived_check, {"hosts": pair(), "auth_pass": {"spark-a": "Vr9-aaaa"}})
    assert code == 1
    assert result["msg"] == ("auth_pass must map every proxy host to its keepalived_auth_pass (a string); "
                             "missing for: spark-b")
    assert "Vr9-aaaa" not in json.dumps(result)


# --- the action plugin: the group's input read from hostvars (issue 36) ------------------------------------------

def _task_vars(settings, secrets, facts=None):
    hostvars = {host: {"__keepalived_settings": value, "__keepalived_auth_pass": secrets[host]}
                for host, value in settings.items()}
    hostvars["gateway"] = {"ansible_facts": facts or {}}
    hostvars["spark-c"] = {"__keepalived_settings": {"interface": "other"}}  # in the group, not in this play
    return {"hostvars": hostvars, "ansible_play_hosts": ["spark-a", "spark-b", "gateway"],
            "groups": {"all": ["spark-a", "spark-b", "gateway", "spark-c"], "proxy": ["spark-b", "spark-a", "spark-c"]}}


def test_the_action_reads_the_play_hosts_settings_and_secrets_and_the_hosts_own_addresses(run_module):
    secrets = {"spark-a": "Vr9-aaaa", "spark-b": "Vr9-aaaa"}
    task_vars = _task_vars(pair(), secrets, facts={"default_ipv4": {"address": "10.89.7.100"}})
    args = group_args({"settings_fact": "__keepalived_settings", "auth_pass_fact": "__keepalived_auth_pass",
                       "group": "proxy"}, task_vars)
    assert list(args["hosts"]) == ["spark-a", "spark-b"] and args["hosts"] == pair()
    assert args["auth_pass"] == secrets and args["reserved"] == {"gateway": ["10.89.7.100"]}
    assert "settings_fact" not in args and "auth_pass_fact" not in args
    code, result = run_module(keepalived_check, args)
    # The gateway's own address is the floating one: refused, naming it; the secret never shown.
    assert code == 1 and "gateway" in result["msg"] and "Vr9-aaaa" not in json.dumps(result)
    task_vars["hostvars"]["gateway"]["ansible_facts"] = {}
    code, result = run_module(keepalived_check, group_args({"settings_fact": "__keepalived_settings",
                                                            "auth_pass_fact": "__keepalived_auth_pass"}, task_vars))
    assert code == 0, result.get("msg")


def test_the_action_keeps_what_the_task_gives_and_needs_one_or_the_other():
    task_vars = _task_vars(pair(), {"spark-a": "", "spark-b": ""})
    given = group_args({"hosts": {"spark-a": {}}, "reserved": {}}, task_vars)
    assert given == {"hosts": {"spark-a": {}}, "reserved": {}}
    with pytest.raises(AnsibleActionFail, match="needs hosts, or settings_fact"):
        group_args({}, task_vars)
