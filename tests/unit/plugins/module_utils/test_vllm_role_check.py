# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What ``_vllm_role_check`` refuses - one row per refusal - and what it lets through.

The split's, the watchdog's and the firewall's refusals were ``assert`` tasks with Jinja messages in the roles; the
messages below are those tasks' words, rendered for the row's values."""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_role_check as rc

SPLIT = {"inventory_hostname": "spark-1", "vllm_split_group": "gb10", "_vllm_split_hosts": ["spark-1", "spark-2"],
         "vllm_split_head": "spark-1", "vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 1,
         "vllm_link_interface": "enp1s0f0np0", "vllm_link_address": "10.10.10.1", "vllm_split_model": "/models/q"}
WATCHDOG = {"inventory_hostname": "spark-1", "vllm_watchdog_topology": "replicas", "vllm_served_model_name": "lab-chat",
            "vllm_watchdog_interval": 5, "vllm_watchdog_stall_window": 60, "vllm_watchdog_probe_timeout": 10,
            "vllm_watchdog_startup_grace": 900, "vllm_watchdog_dead_confirm": 15, "vllm_watchdog_down_confirm": 0,
            "vllm_watchdog_max_restarts": 3, "vllm_watchdog_restart_window": 3600, "vllm_watchdog_backoff": 30,
            "vllm_watchdog_backoff_max": 600, "vllm_watchdog_request_timeout": 600,
            "vllm_watchdog_lock_stale_after": 7200}
PAIR = dict(WATCHDOG, vllm_watchdog_topology="split", vllm_watchdog_split_group="gb10",
            _vllm_watchdog_split_hosts=["spark-1", "spark-2"], vllm_watchdog_split_head="spark-1",
            vllm_link_address="10.10.10.1", vllm_watchdog_status_port=8091, vllm_watchdog_pair_ack_timeout=30,
            vllm_watchdog_pair_skew=5)


def config(**values):
    return {"content": base64.b64encode(json.dumps(values).encode()).decode()}


def messages(name, variables, observed=None):
    return [error["message"] for error in rc.check(name, variables, observed)]


LAYOUT = ("The split topology needs exactly two machines in group 'gb10' (it has {n}: {hosts}), vllm_split_head "
          "({head}) among them, vllm_split_tensor_parallel_size x vllm_split_pipeline_parallel_size ({tp} x {pp}) equal "
          "to the number of machines, and vllm_link_interface / vllm_link_address (the direct link) set on spark-1 "
          "(now '{iface}' / '{addr}').")


def layout(n=2, hosts="spark-1, spark-2", head="spark-1", tp=2, pp=1, iface="enp1s0f0np0", addr="10.10.10.1"):
    return LAYOUT.format(n=n, hosts=hosts, head=head, tp=tp, pp=pp, iface=iface, addr=addr)


@pytest.mark.parametrize("changes, expected", [
    ({"_vllm_split_hosts": ["spark-1"]}, layout(n=1, hosts="spark-1")),
    ({"_vllm_split_hosts": ["spark-1", "spark-2", "spark-3"], "vllm_split_tensor_parallel_size": 3},
     layout(n=3, hosts="spark-1, spark-2, spark-3", tp=3)),
    ({"vllm_split_head": "spark-9"}, layout(head="spark-9")),
    ({"vllm_split_pipeline_parallel_size": 2}, layout(pp=2)),
    ({"vllm_split_tensor_parallel_size": 1, "vllm_split_pipeline_parallel_size": 2}, None),
    ({"vllm_link_interface": ""}, layout(iface="")),
    ({"vllm_link_address": ""}, layout(addr="")),
    ({}, None),
])
def test_the_split_layout(changes, expected):
    assert messages("split", dict(SPLIT, **changes)) == ([expected] if expected else [])


HEADS = ("/models/q has {heads} attention heads, which vllm_split_tensor_parallel_size={tp} cannot divide: vLLM would "
         "refuse to start. Use a tensor-parallel size that divides {heads}, or split by layers "
         "(vllm_split_pipeline_parallel_size) instead.")


@pytest.mark.parametrize("observed, tp, expected", [
    ({"model_config": config(num_attention_heads=14)}, 2, None),
    ({"model_config": config(num_attention_heads=15)}, 2, HEADS.format(heads=15, tp=2)),
    ({"model_config": config(text_config={"num_attention_heads": 15})}, 2, HEADS.format(heads=15, tp=2)),
    ({"model_config": config(architectures=["X"])}, 2, None),     # names no heads: vLLM decides
    ({"model_config": {"skipped": True}}, 2, None),                # a model by name, not read
    ({"model_config": {"failed": False, "msg": "file not found"}}, 2, None),
    ({}, 2, None),
])
def test_the_tensor_parallel_size_divides_the_heads(observed, tp, expected):
    assert messages("split", dict(SPLIT, vllm_split_tensor_parallel_size=tp), observed) == (
        [expected] if expected else [])


def test_a_bad_layout_and_bad_heads_are_both_named():
    errors = rc.check("split", dict(SPLIT, _vllm_split_hosts=["spark-1"]), {"model_config": config(num_attention_heads=7)})
    assert [error["check"] for error in errors] == ["split_layout", "split_heads"]
    assert rc.format_errors(errors).startswith("1) The split topology needs exactly two machines")


def test_the_split_layout_is_a_function_of_the_hosts_list():
    hosts = ["a", "b", "c"]
    assert rc.split_layout_ok(hosts, "a", 3, 1, "eth1", "10.0.0.1", needed=3)
    assert not rc.split_layout_ok(hosts, "a", 3, 1, "eth1", "10.0.0.1")       # today: exactly SPLIT_HOSTS
    assert rc.SPLIT_HOSTS == 2


SETTINGS = ("The watchdog on spark-1 needs vllm_watchdog_topology 'replicas' or 'split' (now '{topology}'), "
            "vllm_served_model_name set (the 1-token probe asks for it; now '{name}'), vllm_watchdog_interval > 0 s "
            "({interval}), vllm_watchdog_stall_window >= the interval ({stall}), and vllm_watchdog_probe_timeout, "
            "_startup_grace, _dead_confirm, _restart_window, _backoff_max, _request_timeout, _lock_stale_after > 0 s, "
            "_down_confirm and _backoff >= 0 s, _max_restarts >= 1 (now {now}).")


def settings(topology="replicas", name="lab-chat", interval=5, stall=60, now="10, 900, 15, 3600, 600, 600, 7200, 0, 30, 3"):
    return SETTINGS.format(topology=topology, name=name, interval=interval, stall=stall, now=now)


@pytest.mark.parametrize("changes, expected", [
    ({}, None),
    ({"vllm_watchdog_topology": "both"}, settings(topology="both")),
    ({"vllm_served_model_name": ""}, settings(name="")),
    ({"vllm_watchdog_interval": 0}, settings(interval=0)),
    ({"vllm_watchdog_stall_window": 4}, settings(stall=4)),
    ({"vllm_watchdog_probe_timeout": 0}, settings(now="0, 900, 15, 3600, 600, 600, 7200, 0, 30, 3")),
    ({"vllm_watchdog_startup_grace": "soon"}, settings(now="10, soon, 15, 3600, 600, 600, 7200, 0, 30, 3")),
    ({"vllm_watchdog_dead_confirm": 0}, settings(now="10, 900, 0, 3600, 600, 600, 7200, 0, 30, 3")),
    ({"vllm_watchdog_restart_window": 0}, settings(now="10, 900, 15, 0, 600, 600, 7200, 0, 30, 3")),
    ({"vllm_watchdog_backoff_max": 0}, settings(now="10, 900, 15, 3600, 0, 600, 7200, 0, 30, 3")),
    ({"vllm_watchdog_request_timeout": 0}, settings(now="10, 900, 15, 3600, 600, 0, 7200, 0, 30, 3")),
    ({"vllm_watchdog_lock_stale_after": 0}, settings(now="10, 900, 15, 3600, 600, 600, 0, 0, 30, 3")),
    ({"vllm_watchdog_down_confirm": -1}, settings(now="10, 900, 15, 3600, 600, 600, 7200, -1, 30, 3")),
    ({"vllm_watchdog_backoff": -0.5}, settings(now="10, 900, 15, 3600, 600, 600, 7200, 0, -0.5, 3")),
    ({"vllm_watchdog_max_restarts": 0}, settings(now="10, 900, 15, 3600, 600, 600, 7200, 0, 30, 0")),
])
def test_the_watchdog_settings(changes, expected):
    assert messages("watchdog", dict(WATCHDOG, **changes)) == ([expected] if expected else [])


SPLIT_WATCHDOG = ("The split watchdog needs two or more machines in group 'gb10' (now {hosts}) with spark-1 and "
                  "vllm_watchdog_split_head ({head}) among them, this host's direct-link address vllm_link_address "
                  "(now '{addr}'; gather facts or set it), vllm_watchdog_status_port in 1-65535 ({port}) and "
                  "vllm_watchdog_pair_ack_timeout, vllm_watchdog_pair_skew > 0 s.")


def pair(hosts="spark-1, spark-2", head="spark-1", addr="10.10.10.1", port=8091):
    return SPLIT_WATCHDOG.format(hosts=hosts, head=head, addr=addr, port=port)


@pytest.mark.parametrize("changes, expected", [
    ({}, None),
    ({"_vllm_watchdog_split_hosts": ["spark-1", "spark-2", "spark-3"]}, None),     # a group of more ranks
    ({"_vllm_watchdog_split_hosts": ["spark-1"]}, pair(hosts="spark-1")),
    ({"_vllm_watchdog_split_hosts": []}, pair(hosts="none")),
    ({"_vllm_watchdog_split_hosts": ["spark-2", "spark-3"], "vllm_watchdog_split_head": "spark-2"},
     pair(hosts="spark-2, spark-3", head="spark-2")),
    ({"vllm_watchdog_split_head": "spark-9"}, pair(head="spark-9")),
    ({"vllm_link_address": ""}, pair(addr="")),
    ({"vllm_watchdog_status_port": 0}, pair(port=0)),
    ({"vllm_watchdog_status_port": 65536}, pair(port=65536)),
    ({"vllm_watchdog_pair_ack_timeout": 0}, pair()),
    ({"vllm_watchdog_pair_skew": 0}, pair()),
])
def test_the_split_watchdog_group(changes, expected):
    assert messages("watchdog", dict(PAIR, **changes)) == ([expected] if expected else [])


def test_replicas_need_no_split_group():
    assert messages("watchdog", dict(WATCHDOG, _vllm_watchdog_split_hosts=[])) == []


@pytest.mark.parametrize("topology, expected", [
    ("replicas", None), ("split", None),
    ("both", "vllm_watchdog_topology must be 'replicas' or 'split', got 'both'."),
])
def test_the_watchdog_topology(topology, expected):
    assert messages("watchdog_topology", {"vllm_watchdog_topology": topology}) == ([expected] if expected else [])


@pytest.mark.parametrize("clients, expected", [
    ([], None),
    (["10.0.0.5", "192.168.1.0/24", "fd00::1", "fd00::/64"], None),
    (["gw.example", "10.0.0.5", "10.0.0/24"],
     "vllm_allowed_clients must hold IPv4/IPv6 addresses or CIDRs (nftables matches addresses); "
     "not addresses: ['gw.example', '10.0.0/24']."),
])
def test_the_firewall_clients(clients, expected):
    assert messages("firewall", {"vllm_allowed_clients": clients}) == ([expected] if expected else [])


def test_an_unknown_check_is_an_error():
    with pytest.raises(ValueError):
        rc.check("nope", {})
