# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Layouts ``_layout.check_layout`` accepts and every one it refuses, with what
each refusal must name."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._layout import (
    DEFAULTS,
    ENGINE_GROUP,
    PROXY_GROUP,
    SPLIT_GROUP,
    check_layout,
    format_errors,
    inventory_input,
    is_loopback,
    machine_of,
    prometheus_hosts,
    prometheus_hosts_errors,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def site(gb10, proxy, **hostvars):
    """groups and hostvars of a site; hostvars keys use _ for - in host names."""
    groups = {"gb10": list(gb10), "proxy": list(proxy)}
    return groups, {name.replace("_", "-"): values for name, values in hostvars.items()}


# --------------------------------------------------------------- valid layouts

SINGLE = site(["spark-1"], ["spark-1"],
              spark_1={"topology": "replicas", "ansible_host": "192.0.2.11", "vllm_port": 8000,
                       "site_proxy_port": 8080, "nginx_proxy_backend_address": "127.0.0.1"})
SINGLE_LOCAL = site(["spark-1"], ["spark-1"],
                    spark_1={"topology": "replicas", "ansible_connection": "local"})
TWO_REPLICAS = site(["spark-1", "spark-2"], ["spark-1"],
                    spark_1={"topology": "replicas", "ansible_host": "192.0.2.11"},
                    spark_2={"topology": "replicas", "ansible_host": "192.0.2.12"})
GROWN_SINGLE = site(["spark-1", "spark-2"], ["spark-1"],
                    spark_1={"topology": "replicas", "ansible_host": "192.0.2.11",
                             "nginx_proxy_backend_address": "127.0.0.1"},
                    spark_2={"topology": "replicas", "ansible_host": "192.0.2.12"})
LAB = site(["spark-a", "spark-b"], ["gateway"],
           spark_a={"topology": "replicas", "ansible_connection": "containers.podman.podman"},
           spark_b={"topology": "replicas", "ansible_connection": "containers.podman.podman"},
           gateway={"topology": "replicas", "ansible_connection": "containers.podman.podman"})
TWO_SPLIT = site(["spark-1", "spark-2"], ["spark-1"],
                 spark_1={"topology": "split", "ansible_host": "192.0.2.11",
                          "vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 1},
                 spark_2={"topology": "split", "ansible_host": "192.0.2.12",
                          "vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 1})
TWO_ON_ONE_MACHINE = site(["spark-1", "spark-1b"], ["spark-1"],
                          spark_1={"ansible_host": "192.0.2.11", "vllm_port": 8000},
                          spark_1b={"ansible_host": "192.0.2.11", "vllm_port": 8001})


@pytest.mark.parametrize("topology, layout, serving, upstream", [
    pytest.param("replicas", SINGLE, ["spark-1"], ["127.0.0.1:8000"], id="one-host-replica-and-proxy"),
    pytest.param("replicas", SINGLE_LOCAL, ["spark-1"], ["spark-1:8000"], id="one-host-run-on-itself"),
    pytest.param("replicas", TWO_REPLICAS, ["spark-1", "spark-2"], ["spark-1:8000", "spark-2:8000"],
                 id="two-hosts-replicas"),
    pytest.param("replicas", GROWN_SINGLE, ["spark-1", "spark-2"], ["127.0.0.1:8000", "spark-2:8000"],
                 id="one-host-grown-to-two"),
    pytest.param("replicas", LAB, ["spark-a", "spark-b"], ["spark-a:8000", "spark-b:8000"],
                 id="two-hosts-replicas-proxy-on-gateway"),
    pytest.param("split", TWO_SPLIT, ["spark-1"], ["spark-1:8000"], id="two-hosts-split"),
    pytest.param("split", LAB, ["spark-a"], ["spark-a:8000"], id="two-hosts-split-switched-from-replicas"),
    pytest.param("replicas", TWO_ON_ONE_MACHINE, ["spark-1", "spark-1b"], ["spark-1:8000", "spark-1b:8001"],
                 id="two-replicas-one-machine-own-ports"),
    pytest.param("replicas", site(["spark-1"], ["spark-1"],
                                  spark_1={"ansible_host": "192.0.2.11", "vllm_listen_host": "192.0.2.11",
                                           "nginx_proxy_backend_address": "192.0.2.11"}),
                 ["spark-1"], ["192.0.2.11:8000"], id="one-host-vllm-on-its-own-address"),
    pytest.param("replicas", site(["spark-1"], ["spark-1"],
                                  spark_1={"vllm_listen_host": "::", "nginx_proxy_backend_address": "127.0.0.1"}),
                 ["spark-1"], ["127.0.0.1:8000"], id="one-host-vllm-on-every-ipv6-address"),
])
def test_valid_layouts(topology, layout, serving, upstream):
    groups, hostvars = layout
    result = check_layout(topology, groups, hostvars)
    assert result["errors"] == [], format_errors(result["errors"])
    assert result["layout"]["serving"] == serving
    assert result["layout"]["upstream"] == upstream
    assert result["layout"]["topology"] == topology


def test_split_layout_reports_head_and_sizes():
    result = check_layout("split", *TWO_SPLIT)
    assert result["layout"]["split"] == {"head": "spark-1", "tensor_parallel_size": 2, "pipeline_parallel_size": 1}
    assert check_layout("replicas", *TWO_REPLICAS)["layout"]["split"] is None


def test_machines_table():
    result = check_layout("replicas", *GROWN_SINGLE)
    assert result["layout"]["machines"] == {"ansible_host 192.0.2.11": ["spark-1"],
                                            "ansible_host 192.0.2.12": ["spark-2"]}


def test_named_split_group_equal_to_engines_is_fine():
    groups, hostvars = TWO_SPLIT
    groups = dict(groups, pair=["spark-2", "spark-1"])
    assert check_layout("split", groups, hostvars, split_group="pair")["errors"] == []


def test_head_can_be_the_second_host():
    groups, hostvars = TWO_SPLIT
    hostvars = {host: dict(values, vllm_split_head="spark-2") for host, values in hostvars.items()}
    result = check_layout("split", groups, hostvars)
    assert result["errors"] == []
    assert result["layout"]["serving"] == ["spark-2"]


@pytest.mark.parametrize("hosts, sizes, declared", [
    (["a", "b", "c"], {"vllm_split_tensor_parallel_size": 3}, {}),
    (["a", "b", "c", "d"], {"vllm_split_tensor_parallel_size": 4}, {}),
    (["a", "b", "c", "d"], {"vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 2}, {}),
    (["a", "b", "c", "d"], {"vllm_split_tensor_parallel_size": 4},
     {"site_engine_groups_num_attention_heads": 32, "site_engine_groups_num_key_value_heads": 8}),
    (["a", "b", "c", "d"], {"vllm_split_tensor_parallel_size": 4, "vllm_split_head": "c"},
     {"site_engine_groups": [["c", "a", "b", "d"]]}),
    (["a", "b", "c"], {"vllm_split_tensor_parallel_size": 3}, {"site_engine_groups": [["a", "b", "c"]]}),
])
def test_a_split_over_every_engine_host_is_one_group_of_n(hosts, sizes, declared):
    groups, hostvars = site(hosts, ["gw"], **{host: dict(sizes, **declared) for host in hosts})
    result = check_layout("split", groups, hostvars)
    assert result["errors"] == [], format_errors(result["errors"])
    assert result["layout"]["serving"] == [sizes.get("vllm_split_head", hosts[0])]


def test_ports_given_as_strings_are_numbers():
    groups, hostvars = site(["a"], ["a"], a={"vllm_port": "8000", "site_proxy_port": "8080"})
    assert check_layout("replicas", groups, hostvars)["errors"] == []


# ----------------------------------------------------------- impossible layouts
# (topology, groups, hostvars, the check that must fail, words its message must hold)

# Three ranks, a and b on one machine; four ranks of a model with 9 attention heads and 3 key/value heads.
TWO_OF_THREE_ON_ONE_MACHINE = {host: {"vllm_split_tensor_parallel_size": 3, "ansible_host": address}
                               for host, address in (("a", "10.0.0.1"), ("b", "10.0.0.1"), ("c", "10.0.0.2"))}
FOUR_WITH_NINE_HEADS = {host: {"vllm_split_tensor_parallel_size": 4, "site_engine_groups_num_attention_heads": 9,
                               "site_engine_groups_num_key_value_heads": 3} for host in "abcd"}

IMPOSSIBLE = [
    pytest.param("split", *site(["spark-1"], ["spark-1"]), "split_hosts", ["gb10", "spark-1", "1", "replicas"],
                 id="split-on-one-host"),
    pytest.param("split", *site(["a", "b", "c"], ["gw"]), "split_parallel",
                 ["= 2 ranks", "each of the 3 hosts", "a, b, c", "Make the product 3", "vllm_split_tensor_parallel_size 3"],
                 id="split-on-three-hosts-with-tensor-parallel-2"),
    pytest.param("split", *site(["a", "b", "c"], ["gw"], **TWO_OF_THREE_ON_ONE_MACHINE), "split_machines",
                 ["a", "b", "same machine", "one machine per rank, 3", "ansible_host"],
                 id="split-two-of-three-ranks-on-one-machine"),
    pytest.param("split", *site(["a", "b", "c", "d"], ["gw"], **FOUR_WITH_NINE_HEADS), "split_heads",
                 ["is 4 on a, b, c, d", "(9, site_engine_groups_num_attention_heads)", "(3, ", "split only over 3 ranks",
                  "make group 'gb10' (vllm_split_group) 3 machines"],
                 id="split-over-four-with-heads-that-do-not-split-four-ways"),
    pytest.param("replicas", *site([], ["spark-1"]), "no_engines", ["gb10", "spark-1", "proxy"],
                 id="proxy-with-no-replicas"),
    pytest.param("replicas", {"proxy": ["gw"]}, {}, "no_engines", ["gb10", "not in the inventory", "gw"],
                 id="proxy-with-no-engine-group"),
    pytest.param("replicas", *site(["spark-1"], []), "no_proxy", ["proxy", "GB10 host"],
                 id="no-proxy-host"),
    pytest.param("replicas", {"gb10": ["spark-1"]}, {}, "no_proxy", ["proxy", "not in the inventory"],
                 id="no-proxy-group"),
    pytest.param("replicas", *site(["spark-1", "spark-1b"], ["spark-1"],
                                   spark_1={"ansible_host": "192.0.2.11"}, spark_1b={"ansible_host": "192.0.2.11"}),
                 "port_shared", ["spark-1", "spark-1b", "vllm_port", "8000", "8001", "host_vars/spark-1b.yml"],
                 id="two-replicas-one-host-one-port"),
    pytest.param("replicas", *site(["spark-1", "spark-1b"], ["spark-1"], spark_1={"ansible_host": "192.0.2.11"},
                                   spark_1b={"ansible_host": "192.0.2.11", "ansible_port": "22"}),
                 "port_shared", ["spark-1 and spark-1b", "ansible_host 192.0.2.11", "vllm_port"],
                 id="two-replicas-one-host-one-port-ssh-port-spelled-out"),
    pytest.param("replicas", *site(["a", "b"], ["a"], a={"ansible_connection": "local"},
                                   b={"ansible_connection": "local"}),
                 "port_shared", ["a and b", "ansible_connection=local", "vllm_port"],
                 id="two-replicas-on-the-controller-one-port"),
    pytest.param("replicas", *site(["a", "b"], ["a"], a={"ansible_host": "localhost"},
                                   b={"ansible_host": "127.0.0.1"}),
                 "port_shared", ["a and b", "vllm_port"], id="two-replicas-loopback-names-one-port"),
    pytest.param("replicas", *site(["a", "b"], ["gw"], a={"nginx_proxy_backend_address": "10.0.0.5"},
                                   b={"nginx_proxy_backend_address": "10.0.0.5"}),
                 "upstream_shared", ["a and b", "10.0.0.5:8000", "nginx_proxy_backend_address"],
                 id="two-replicas-one-upstream-address"),
    pytest.param("replicas", *site(["spark-1"], ["spark-1"], spark_1={"site_proxy_port": 8000}),
                 "proxy_port_shared", ["spark-1", "site_proxy_port", "vllm_port", "8000"],
                 id="proxy-port-is-vllm-port-same-host"),
    pytest.param("replicas", *site(["spark-1"], ["spark-1"], spark_1={"site_proxy_port": 8001, "vllm_port": 8001}),
                 "proxy_port_shared", ["spark-1", "site_proxy_port", "vllm_port", "8001"],
                 id="proxy-port-is-a-moved-vllm-port-same-host"),
    pytest.param("replicas", *site(["spark-1"], ["proxy-1"], spark_1={"ansible_host": "192.0.2.11"},
                                   proxy_1={"ansible_host": "192.0.2.11", "site_proxy_port": 8000}),
                 "proxy_port_shared", ["proxy-1", "spark-1", "site_proxy_port", "same machine"],
                 id="proxy-port-is-vllm-port-same-machine-two-names"),
    pytest.param("replicas", *site(["a", "b"], ["gw"], a={"topology": "replicas"}, b={"topology": "split"},
                                   gw={"topology": "replicas"}),
                 "topology_differs", ["topology", "b", "'split'", "'replicas'", "group_vars/all.yml"],
                 id="host-in-both-topologies"),
    pytest.param("replicas", *site(["a", "b"], ["gw"], a={"topology": "replicas"}, b={"topology": "replicas"}),
                 "topology_differs", ["topology", "gw", "not set"], id="topology-not-set-on-the-proxy-host"),
    pytest.param("replicas", *site(["a", "b"], ["a"], a={"topology": "replicas"}, b={"topology": "split"}),
                 "topology_differs", ["topology", "'split' on b", "give b another value"],
                 id="host-in-both-topologies-one-to-one"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"topology": "replicas"}, b={"topology": "split"}),
                 "topology_differs", ["topology", "'replicas' on a", "give a another value"],
                 id="host-in-both-topologies-one-to-one-switching-to-split"),
    pytest.param("replicas", {"gb10": ["a", "b"], "proxy": ["a"], "replicas": ["a", "b"], "split": ["b"]}, {},
                 "topology_groups", ["b is listed in both group 'replicas' and group 'split'", "topology 'replicas'",
                                     "Remove b from group 'split'", "group_vars/all.yml"],
                 id="host-in-both-topology-groups"),
    pytest.param("split", {"gb10": ["a", "b"], "proxy": ["a"], "replicas": ["a", "b"], "split": ["a", "b"]}, {},
                 "topology_groups", ["a, b are listed in both", "topology 'split'", "Remove a, b from group 'replicas'"],
                 id="hosts-in-both-topology-groups-switching-to-split"),
    pytest.param("both", *site(["a"], ["a"]), "topology", ["topology", "'both'", "replicas", "split"],
                 id="topology-unknown"),
    pytest.param("", *site(["a"], ["a"]), "topology", ["topology", "replicas", "split"], id="topology-empty"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_tensor_parallel_size": 4},
                                b={"vllm_split_tensor_parallel_size": 4}),
                 "split_parallel", ["vllm_split_tensor_parallel_size", "vllm_split_pipeline_parallel_size", "4", "2"],
                 id="tensor-parallel-4-on-two-hosts"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_tensor_parallel_size": 1},
                                b={"vllm_split_tensor_parallel_size": 1}),
                 "split_parallel", ["vllm_split_tensor_parallel_size", "1", "2 hosts"],
                 id="tensor-parallel-1-on-two-hosts"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_pipeline_parallel_size": 2},
                                b={"vllm_split_pipeline_parallel_size": 2}),
                 "split_parallel", ["vllm_split_pipeline_parallel_size", "= 4 ranks"],
                 id="tensor-2-times-pipeline-2-on-two-hosts"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_tensor_parallel_size": "two"},
                                b={"vllm_split_tensor_parallel_size": "two"}),
                 "split_parallel", ["vllm_split_tensor_parallel_size", "'two'", "whole number"],
                 id="tensor-parallel-not-a-number"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_tensor_parallel_size": 0},
                                b={"vllm_split_tensor_parallel_size": 0}),
                 "split_parallel", ["vllm_split_tensor_parallel_size", "0"], id="tensor-parallel-zero"),
    pytest.param("split", *site(["a", "b"], ["a"], b={"vllm_split_tensor_parallel_size": 4}),
                 "split_settings_differ", ["vllm_split_tensor_parallel_size", "2 on a", "4 on b"],
                 id="ranks-disagree-on-tensor-parallel"),
    pytest.param("split", *site(["a", "b"], ["a"], a={"vllm_split_head": "c"}, b={"vllm_split_head": "c"}),
                 "split_head", ["vllm_split_head", "'c'", "a, b"], id="split-head-not-in-group"),
    pytest.param("split", *site(["a", "b"], ["gw"], a={"ansible_host": "10.0.0.1"}, b={"ansible_host": "10.0.0.1"}),
                 "split_machines", ["a", "b", "same machine", "ansible_host"], id="split-both-ranks-one-machine"),
    pytest.param("replicas", *site(["a", "b"], ["gw"], b={"nginx_proxy_backend_address": "127.0.0.1"}),
                 "loopback_backend", ["nginx_proxy_backend_address", "b", "gw", "127.0.0.1"],
                 id="loopback-backend-proxy-elsewhere"),
    pytest.param("replicas", *site(["a", "b"], ["a"], b={"nginx_proxy_backend_address": "localhost"}),
                 "loopback_backend", ["nginx_proxy_backend_address", "b", "localhost"],
                 id="loopback-backend-on-the-second-machine"),
    pytest.param("replicas", *site(["a"], ["gw"], a={"vllm_listen_host": "127.0.0.1"}),
                 "loopback_listen", ["vllm_listen_host", "a", "gw", "0.0.0.0"], id="vllm-on-loopback-proxy-elsewhere"),
    pytest.param("replicas", *site(["a"], ["a"], a={"nginx_proxy_backend_address": "127.0.0.1", "vllm_listen_host": "192.0.2.11"}),
                 "loopback_backend_listen_specific", ["nginx_proxy_backend_address", "a", "192.0.2.11", "0.0.0.0"],
                 id="loopback-backend-vllm-on-its-own-address"),
    pytest.param("replicas", *site(["a"], ["a"], a={"vllm_port": "eighty"}),
                 "port_value", ["vllm_port", "a", "'eighty'", "1-65535"], id="vllm-port-not-a-number"),
    pytest.param("replicas", *site(["a"], ["a"], a={"site_proxy_port": 70000}),
                 "port_value", ["site_proxy_port", "a", "70000"], id="proxy-port-out-of-range"),
]


@pytest.mark.parametrize("topology, groups, hostvars, check, words", IMPOSSIBLE)
def test_impossible_layouts(topology, groups, hostvars, check, words):
    result = check_layout(topology, groups, hostvars)
    checks = [error["check"] for error in result["errors"]]
    assert check in checks, format_errors(result["errors"])
    error = result["errors"][checks.index(check)]
    for word in words:
        assert word in error["message"], (word, error["message"])
    # every host and variable the error lists is named in its message
    for name in error["hosts"] + error["variables"]:
        assert name in error["message"], (name, error["message"])
    assert format_errors(result["errors"]).startswith("The inventory describes a layout that cannot work")


@pytest.mark.parametrize("topology, groups, hostvars, check, words", IMPOSSIBLE)
def test_each_impossible_layout_says_only_what_is_wrong(topology, groups, hostvars, check, words):
    """One mistake, one kind of error: no follow-on noise that hides the fix."""
    result = check_layout(topology, groups, hostvars)
    assert {error["check"] for error in result["errors"]} == {check}, format_errors(result["errors"])


@pytest.mark.parametrize("pair", [["a"], ["a", "b", "c"], []])
def test_split_group_must_be_the_engines(pair):
    groups = {"gb10": ["a", "b"], "proxy": ["gw"], "pair": pair}
    result = check_layout("split", groups, {}, split_group="pair")
    assert [error["check"] for error in result["errors"]] == ["split_group"], format_errors(result["errors"])
    message = result["errors"][0]["message"]
    for word in ["vllm_split_group", "'pair'", "'gb10'"] + result["errors"][0]["hosts"]:
        assert word in message, (word, message)


def test_split_group_missing_from_the_inventory():
    result = check_layout("split", {"gb10": ["a", "b"], "proxy": ["gw"]}, {}, split_group="pair")
    assert [error["check"] for error in result["errors"]] == ["split_group"]
    assert "only in gb10: a, b" in result["errors"][0]["message"]


@pytest.mark.parametrize("split_group", ["split", "replicas"])
def test_topology_named_group_in_use_is_not_a_topology_list(split_group):
    """A group the layout uses (here as vllm_split_group) is not read as the hosts of a topology."""
    groups = {"gb10": ["a", "b"], "proxy": ["a"], "replicas": ["a", "b"], "split": ["a", "b"]}
    assert check_layout("split", groups, {}, split_group=split_group)["errors"] == []


def test_topology_groups_without_overlap_are_fine():
    groups = {"gb10": ["a", "b"], "proxy": ["a"], "replicas": ["a", "b"], "split": []}
    assert check_layout("replicas", groups, {})["errors"] == []


def test_topology_groups_with_an_unknown_topology():
    groups = {"gb10": ["a"], "proxy": ["a"], "replicas": ["a"], "split": ["a"]}
    result = check_layout("both", groups, {})
    assert [error["check"] for error in result["errors"]] == ["topology", "topology_groups"]
    assert "remove a from one of them" in result["errors"][1]["message"]


def test_all_problems_reported_at_once():
    groups, hostvars = site(["a", "a2", "b"], ["a"], a={"ansible_host": "h", "site_proxy_port": 8000},
                            a2={"ansible_host": "h", "topology": "split"}, b={"vllm_listen_host": "127.0.0.1"})
    result = check_layout("split", groups, hostvars)
    checks = [error["check"] for error in result["errors"]]
    assert checks == ["topology_differs", "split_parallel", "split_machines", "proxy_port_shared"], \
        format_errors(result["errors"])
    message = format_errors(result["errors"])
    assert message.splitlines()[1].startswith("1) ")
    assert message.splitlines()[3].startswith("3) ")


def test_replicas_ignore_split_settings():
    """Split settings only matter for split (a switch to replicas must not trip on them)."""
    groups, hostvars = site(["a", "b", "c"], ["a"], a={"vllm_split_tensor_parallel_size": 4})
    assert check_layout("replicas", groups, hostvars)["errors"] == []


def test_split_headless_rank_may_share_the_proxy_port():
    """Only the split's head serves vLLM's API port; the other rank does not listen there."""
    groups, hostvars = site(["a", "b"], ["b"], b={"vllm_port": 8080})
    assert check_layout("split", groups, hostvars)["errors"] == []


# ------------------------------------------------------------------- helpers


@pytest.mark.parametrize("address, expected", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST", True), ("10.0.0.1", False), ("spark-1", False), ("", False), (None, False),
])
def test_is_loopback(address, expected):
    assert is_loopback(address) is expected


@pytest.mark.parametrize("name, hostvars, key", [
    ("spark-1", {}, "spark-1"),
    ("spark-1", {"ansible_host": "192.0.2.11"}, "192.0.2.11"),
    ("Spark-1", {}, "spark-1"),
    ("spark-1", {"ansible_host": "127.0.0.1", "ansible_port": 2222}, "127.0.0.1:2222"),
    ("spark-1", {"ansible_host": "127.0.0.1"}, "local"),
    ("spark-1", {"ansible_host": "192.0.2.11", "ansible_port": 22}, "192.0.2.11"),
    ("spark-1", {"ansible_host": "192.0.2.11", "ansible_port": "2222"}, "192.0.2.11:2222"),
    ("spark-1", {"ansible_connection": "local", "ansible_host": "192.0.2.11"}, "local"),
])
def test_machine_of(name, hostvars, key):
    assert machine_of(name, hostvars)[0] == key


# ----------------------------------------------------- one truth for defaults


def _yaml(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_defaults_are_the_roles_defaults():
    # The module works without the roles, so it keeps its own copy of the site role's
    # defaults (and of vllm's and vllm_split's own): this keeps them equal.
    site = _yaml("roles", "site", "defaults", "main.yml")
    vllm = _yaml("roles", "vllm", "defaults", "main.yml")
    split = _yaml("roles", "vllm_split", "defaults", "main.yml")
    proxy = _yaml("roles", "nginx_proxy", "defaults", "main.yml")
    assert DEFAULTS["vllm_port"] == site["site_engine_port"]
    assert vllm["vllm_port"] == "{{ site_engine_port }}"
    assert DEFAULTS["vllm_listen_host"] == vllm["vllm_listen_host"]
    assert PROXY_GROUP == site["site_proxy_group"]
    # One name per group: the roles read the site role's, and have none of their own.
    assert "site_proxy_group" not in vllm and "site_engine_group" not in vllm and "site_engine_group" not in proxy
    assert DEFAULTS["vllm_split_tensor_parallel_size"] == split["vllm_split_tensor_parallel_size"]
    assert DEFAULTS["vllm_split_pipeline_parallel_size"] == split["vllm_split_pipeline_parallel_size"]
    assert ENGINE_GROUP == SPLIT_GROUP == site["site_engine_group"]
    assert split["vllm_split_group"] == "{{ site_engine_group }}"
    assert site["site_proxy_port"] == DEFAULTS["site_proxy_port"]
    assert "site_proxy_port" not in proxy and "nginx_proxy_port" not in proxy


# --------------------------------------------------------------- what the check reads from the inventory

def test_inventory_input_reads_the_groups_the_check_needs_and_their_hosts_set_variables():
    groups = {"all": ["spark-1", "spark-2", "gw", "mon"], "gb10": ["spark-1", "spark-2"], "proxy": ["gw"],
              "split": ["spark-2"], "monitoring": ["mon"]}
    hostvars = {"spark-1": {"vllm_port": 8001, "vllm_api_key": "k1", "other": 1},
                "spark-2": {"topology": "split", "site_api_key": "k2"}, "gw": {"ansible_host": "192.0.2.1"},
                "mon": {"vllm_port": 1}}
    wanted, host_vars, api_keys = inventory_input(groups, hostvars, engine_group="gb10", proxy_group="proxy",
                                                  split_group="gb10", key_vars=("vllm_api_key", "site_api_key"))
    assert wanted == {"gb10": ["spark-1", "spark-2"], "proxy": ["gw"], "split": ["spark-2"]}
    assert host_vars == {"spark-1": {"vllm_port": 8001}, "spark-2": {"topology": "split"},
                         "gw": {"ansible_host": "192.0.2.1"}}
    assert api_keys == {"spark-1": {"vllm_api_key": "k1"}, "spark-2": {"site_api_key": "k2"}, "gw": {}}
    # A group the inventory lacks is left out: the check reports it.
    assert inventory_input({"gb10": ["a"]}, {"a": {}}, proxy_group="edge")[0] == {"gb10": ["a"]}


def test_prometheus_hosts_names_the_setters_and_the_names_the_inventory_lacks():
    hostvars = {"spark-1": {"vllm_prometheus_hosts": ["mon", ["mon-2"], None]}, "spark-2": {},
                "spark-3": {"vllm_prometheus_hosts": ["mon-2", "spark-1"]}}
    assert prometheus_hosts(["spark-1", "spark-2", "spark-3"], hostvars, ["spark-1", "spark-2", "spark-3", "mon"]) == {
        "setters": ["spark-1", "spark-3"], "unlisted": ["mon-2"]}
    assert prometheus_hosts(None, hostvars, []) == {"setters": [], "unlisted": []}


@pytest.mark.parametrize("found, message", [
    ({"setters": [], "unlisted": []}, None),
    ({"setters": ["spark-2"], "unlisted": ["mon-1"]},
     "vllm_prometheus_hosts names mon-1, which the inventory does not list (set for spark-2): add it to the inventory, "
     "or remove it from vllm_prometheus_hosts."),
    ({"setters": ["spark-1", "spark-2"], "unlisted": ["mon-1", "mon-2"]},
     "vllm_prometheus_hosts names mon-1, mon-2, which the inventory does not list (set for spark-1, spark-2): add them "
     "to the inventory, or remove them from vllm_prometheus_hosts."),
])
def test_prometheus_hosts_the_inventory_lacks_are_one_refusal(found, message):
    errors = prometheus_hosts_errors(found)
    assert [error["message"] for error in errors] == ([message] if message else [])
    assert all(error["check"] == "prometheus_hosts" and error["variables"] == ["vllm_prometheus_hosts"] for error in errors)


# --------------------------------------------------------------- a group move (move_groups.yml, issue 37)

THREE = {"gb10": ["spark-a", "spark-b", "spark-c"], "proxy": ["gw"]}


def _three(declared=None):
    values = {"topology": "replicas"}
    if declared is not None:
        values["site_engine_groups"] = declared
    hostvars = {host: dict(values, ansible_host="192.0.2.%d" % number)
                for number, host in enumerate(THREE["gb10"], 11)}
    hostvars["gw"] = {"ansible_host": "192.0.2.1", "topology": "replicas"}
    return hostvars


@pytest.mark.parametrize("declared", [[["spark-a", "spark-b"], ["spark-c"]], [["spark-a"], ["spark-b", "spark-c"]]])
def test_a_move_runs_a_grouping_the_two_topology_playbooks_refuse(declared):
    refused = check_layout("replicas", THREE, _three(declared))["errors"]
    assert [error["check"] for error in refused] == ["engine_groups_unsupported"]
    assert "a group move does" in refused[0]["message"] and "factory_floor.llm.move_groups" in refused[0]["message"]
    assert check_layout("replicas", THREE, _three(declared), move=True)["errors"] == []


@pytest.mark.parametrize("move_to, words", [
    ([["spark-a", "spark-b"], ["spark-c"]], None),
    ([["spark-a", "spark-b"]], "spark-c is in the engine group 'gb10' but in no group of move_to"),
    ([["spark-a", "spark-b"], ["spark-b", "spark-c"]], "spark-b is in group 1 and in group 2 of move_to"),
])
def test_a_moves_target_is_checked_as_a_declared_grouping(move_to, words):
    errors = check_layout("replicas", THREE, _three(), move=True, move_to=move_to)["errors"]
    if words is None:
        assert errors == []
    else:
        assert [error["check"] for error in errors] == ["move_to"] and words in errors[0]["message"]


def test_outside_a_move_the_target_is_not_read():
    assert check_layout("replicas", THREE, _three(), move_to=[["spark-a"]])["errors"] == []
