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


GROUP = "group 'gb10' (vllm_split_group)"
THREE = ["spark-1", "spark-2", "spark-3"]
FOUR = THREE + ["spark-4"]


@pytest.mark.parametrize("changes, check, words", [
    # the group: two or more machines, this host one of them, the head among them
    ({"_vllm_split_hosts": ["spark-1"]}, "split_hosts",
     "The split runs one model over two or more machines, one rank each, but %s has 1: spark-1. Add machines to it, "
     "or run topology 'replicas' (one full copy per machine)." % GROUP),
    ({"_vllm_split_hosts": []}, "split_hosts", "but %s has 0: none." % GROUP),
    ({"_vllm_split_hosts": ["spark-2", "spark-3"], "vllm_split_head": "spark-2"}, "split_member",
     "spark-1 would run a rank of the split but is not in %s (spark-2, spark-3): each rank runs on one host of the "
     "group. Add spark-1 to the group, or leave it out of the play (--limit)." % GROUP),
    ({"vllm_split_head": "spark-9"}, "split_head",
     "vllm_split_head (spark-9) is not in %s (spark-1, spark-2): set it to one of them, or remove it (the group's "
     "first host is the head, rank 0)." % GROUP),
    # tensor x pipeline parallel size = the group's size
    ({"vllm_split_pipeline_parallel_size": 2}, "split_parallel",
     "vllm_split_tensor_parallel_size x vllm_split_pipeline_parallel_size (2 x 2) must equal the number of machines "
     "in %s (2, one rank each): set vllm_split_tensor_parallel_size 2 and vllm_split_pipeline_parallel_size 1 (or "
     "another pair whose product is 2)." % GROUP),
    ({"_vllm_split_hosts": THREE}, "split_parallel", "(2 x 1) must equal the number of machines in %s (3, one rank "
                                                     "each): set vllm_split_tensor_parallel_size 3" % GROUP),
    # every rank's link: its own settings, and the head's address it meets at
    ({"vllm_link_interface": ""}, "split_link",
     "Every rank needs its direct link: vllm_link_interface / vllm_link_address on spark-1 are '' / '10.10.10.1'. Set "
     "both in its host_vars (the interface of the link and this host's address on it)."),
    ({"vllm_link_address": ""}, "split_link", "on spark-1 are 'enp1s0f0np0' / ''."),
    ({"_vllm_split_head_address": "", "inventory_hostname": "spark-2", "vllm_link_address": "10.10.10.2"},
     "split_head_link",
     "The head spark-1 has no known address on the direct link, so rank spark-2 cannot meet it (--master-addr): set "
     "vllm_link_address in spark-1's host_vars, or gather its facts in this run (its vllm_link_interface's address)."),
])
def test_each_split_refusal(changes, check, words):
    errors = rc.check("split", dict(SPLIT, **changes))
    assert [error["check"] for error in errors] == [check]
    assert words in errors[0]["message"]


@pytest.mark.parametrize("changes", [
    {},
    {"vllm_split_tensor_parallel_size": 1, "vllm_split_pipeline_parallel_size": 2},
    {"_vllm_split_hosts": THREE, "vllm_split_tensor_parallel_size": 3},
    {"_vllm_split_hosts": FOUR, "vllm_split_tensor_parallel_size": 4, "inventory_hostname": "spark-4"},
    {"_vllm_split_hosts": FOUR, "vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 2},
    {"_vllm_split_hosts": FOUR, "vllm_split_tensor_parallel_size": 4, "vllm_split_head": "spark-3"},
    {"_vllm_split_head_address": "10.10.10.1"},
])
def test_a_group_of_two_three_or_four_passes(changes):
    assert messages("split", dict(SPLIT, **changes)) == []


HEADS = ("/models/q has num_attention_heads {heads} and num_key_value_heads {kv}, which "
         "vllm_split_tensor_parallel_size={tp} cannot split: vLLM would refuse to start. Tensor-parallel sizes that "
         "work: {sizes}. Over the {n} machines of group 'gb10' (vllm_split_group): {shapes}{larger}.")


def heads(heads, kv, tp, sizes, n=2, shapes="vllm_split_tensor_parallel_size 1 x vllm_split_pipeline_parallel_size 2",
          larger=None):
    return HEADS.format(heads=heads, kv=kv, tp=tp, sizes=sizes, n=n, shapes=shapes, larger=(
        "; or make the group %s machines (tensor parallelism alone)" % larger if larger else ""))


@pytest.mark.parametrize("observed, tp, hosts, expected", [
    ({"model_config": config(num_attention_heads=14)}, 2, 2, None),
    ({"model_config": config(num_attention_heads=15)}, 2, 2, heads(15, 15, 2, "1, 3, 5", larger="3 or 5")),
    ({"model_config": config(text_config={"num_attention_heads": 15})}, 2, 2,
     heads(15, 15, 2, "1, 3, 5", larger="3 or 5")),
    # key/value heads: split when at least as many as ranks, else replicated (the size a multiple of them)
    ({"model_config": config(num_attention_heads=32, num_key_value_heads=8)}, 4, 4, None),
    ({"model_config": config(num_attention_heads=32, num_key_value_heads=8)}, 3, 3,
     heads(32, 8, 3, "1, 2, 4, 8", n=3, shapes="vllm_split_tensor_parallel_size 1 x vllm_split_pipeline_parallel_size 3",
           larger="2 or 4 or 8")),
    ({"model_config": config(num_attention_heads=12, num_key_value_heads=3)}, 2, 2,
     heads(12, 3, 2, "1, 3, 6", larger="3 or 6")),
    ({"model_config": config(num_attention_heads=12, num_key_value_heads=3)}, 3, 3, None),
    ({"model_config": config(num_attention_heads=9, num_key_value_heads=3)}, 4, 4,
     heads(9, 3, 4, "1, 3", n=4, shapes="vllm_split_tensor_parallel_size 1 x vllm_split_pipeline_parallel_size 4",
           larger="3")),
    ({"model_config": config(architectures=["X"])}, 2, 2, None),     # names no heads: vLLM decides
    ({"model_config": {"skipped": True}}, 2, 2, None),                # a model by name, not read
    ({"model_config": {"failed": False, "msg": "file not found"}}, 2, 2, None),
    ({}, 2, 2, None),
])
def test_the_tensor_parallel_size_splits_the_heads(observed, tp, hosts, expected):
    variables = dict(SPLIT, vllm_split_tensor_parallel_size=tp, _vllm_split_hosts=FOUR[:hosts])
    assert messages("split", variables, observed) == ([expected] if expected else [])


def test_a_bad_layout_and_bad_heads_are_both_named():
    errors = rc.check("split", dict(SPLIT, _vllm_split_hosts=["spark-1"]), {"model_config": config(num_attention_heads=7)})
    assert [error["check"] for error in errors] == ["split_hosts", "split_heads"]
    assert rc.format_errors(errors).startswith("1) The split runs one model over two or more machines")
    assert errors[1]["message"].endswith("Tensor-parallel sizes that work: 1, 7.")


def test_the_split_layout_is_a_function_of_the_hosts_list():
    hosts = ["a", "b", "c"]
    assert rc.split_layout_ok(hosts, "a", 3, 1, "eth1", "10.0.0.1", needed=3)
    assert rc.split_layout_ok(hosts, "a", 3, 1, "eth1", "10.0.0.1")            # two or more
    assert not rc.split_layout_ok(hosts, "a", 3, 1, "eth1", "10.0.0.1", needed=2)
    assert not rc.split_layout_ok(["a"], "a", 1, 1, "eth1", "10.0.0.1")
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
