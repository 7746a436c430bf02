# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The split watchdog's configuration as roles/vllm_watchdog/templates/watchdog.json.j2 renders it, with Ansible's
own templating, for a pair and for groups of three and four hosts, checked by the daemon's own load_config.

The head (rank 0) reads every other host of the split group in the group's order, a worker reads the head;
each address is the host's vllm_link_address, else its link interface's address from its facts, else its name.
"""

from __future__ import annotations

import json
import os

import pytest
from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils._host import watchdog_config
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, role_variables, templar

PORT = 8091


def render(host, hosts, topology="split", head=None, hostvars=None):
    """``host``'s watchdog configuration (a dict) in a split group of ``hosts``, rank 0 on ``head`` (default the first)."""
    variables = dict(role_variables("vllm"), **role_variables("vllm_watchdog"))
    inventory = {name: {"vllm_link_address": "10.10.10.%d" % (rank + 1)} for rank, name in enumerate(hosts)}
    for name, values in (hostvars or {}).items():
        inventory[name] = values
    variables.update(
        ansible_managed="Ansible managed: test", inventory_hostname=host, groups={"gb10": list(hosts)},
        hostvars=inventory, ansible_facts={}, vllm_watchdog_topology=topology, vllm_served_model_name="lab-chat",
        vllm_link_address=inventory[host].get("vllm_link_address", ""), vllm_watchdog_status_port=PORT,
        # The vllm role computes it with a filter of this collection, which a bare Templar does not load.
        _vllm_probe_url="http://127.0.0.1:8000")
    if head is not None:
        variables["vllm_watchdog_split_head"] = head
    with open(os.path.join(ROOT, "roles", "vllm_watchdog", "templates", "watchdog.json.j2"), encoding="utf-8") as handle:
        text = handle.read()
    return json.loads(templar(variables).template(trust_as_template(text)))


def url(address):
    return "http://%s:%d/state" % (address, PORT)


def checked(raw, tmp_path):
    """The daemon's own check of what the role rendered (its --check-config)."""
    return watchdog_config.load_config(dict(raw, state_file=str(tmp_path / "state.json"),
                                            status_file=str(tmp_path / "status.json")))


def test_a_pair_reads_the_other_host_as_before(tmp_path):
    head, worker = render("spark-1", ["spark-1", "spark-2"]), render("spark-2", ["spark-1", "spark-2"])
    assert (head["role"], head["peer_urls"]) == ("head", [url("10.10.10.2")])
    assert (worker["role"], worker["peer_urls"]) == ("worker", [url("10.10.10.1")])
    assert head["status_listen"] == {"address": "10.10.10.1", "port": PORT}
    for raw in (head, worker):
        assert "peer_url" not in raw
        assert checked(raw, tmp_path).peer_urls == raw["peer_urls"]


@pytest.mark.parametrize("hosts", [["spark-1", "spark-2", "spark-3"], ["spark-1", "spark-2", "spark-3", "spark-4"]])
def test_the_head_of_a_group_reads_every_other_rank_in_order_and_each_worker_reads_the_head(tmp_path, hosts):
    head = render(hosts[0], hosts)
    assert head["role"] == "head"
    assert head["peer_urls"] == [url("10.10.10.%d" % rank) for rank in range(2, len(hosts) + 1)]
    assert checked(head, tmp_path).peer_urls == head["peer_urls"]
    for name in hosts[1:]:
        worker = render(name, hosts)
        assert (worker["role"], worker["peer_urls"]) == ("worker", [url("10.10.10.1")])
        checked(worker, tmp_path)


def test_a_head_other_than_the_first_host_keeps_the_groups_order():
    hosts = ["spark-1", "spark-2", "spark-3"]
    assert render("spark-2", hosts, head="spark-2")["peer_urls"] == [url("10.10.10.1"), url("10.10.10.3")]
    assert render("spark-3", hosts, head="spark-2")["peer_urls"] == [url("10.10.10.2")]


def test_an_address_comes_from_the_link_interfaces_facts_else_the_name():
    hosts = ["spark-1", "spark-2", "spark-3"]
    hostvars = {"spark-2": {"vllm_link_interface": "enp1s0f1np1",
                            "ansible_facts": {"enp1s0f1np1": {"ipv4": {"address": "192.168.100.2"}}}},
                "spark-3": {}}
    assert render("spark-1", hosts, hostvars=hostvars)["peer_urls"] == [url("192.168.100.2"), url("spark-3")]


def test_replicas_read_no_other_rank(tmp_path):
    raw = render("spark-1", ["spark-1", "spark-2"], topology="replicas")
    assert (raw["role"], raw["peer_urls"], raw["status_listen"]) == ("replica", [], None)
    assert checked(raw, tmp_path).peer_urls == []


def watchdog_sec(host, hosts, topology="split"):
    """The watchdog unit's WatchdogSec= (the role's _vllm_watchdog_self_bound) for ``host``."""
    variables = dict(role_variables("vllm"), **role_variables("vllm_watchdog"))
    variables.update(inventory_hostname=host, groups={"gb10": list(hosts)}, vllm_watchdog_topology=topology,
                     hostvars={name: {} for name in hosts})
    return int(templar(variables).template(
        trust_as_template("{{ _vllm_watchdog_self_bound }}")))


def test_the_watchdogs_own_bound_counts_one_read_per_other_rank():
    # interval 5 + probe 15 + (3 engine reads + other ranks) x request 5 + ack wait 60, four times over.
    pair = ["spark-1", "spark-2"]
    assert watchdog_sec("spark-1", pair) == watchdog_sec("spark-2", pair) == 4 * (5 + 15 + 4 * 5 + 60) == 400
    assert watchdog_sec("spark-1", pair, topology="replicas") == 400
    four = ["spark-1", "spark-2", "spark-3", "spark-4"]
    assert watchdog_sec("spark-1", four) == 4 * (5 + 15 + 6 * 5 + 60)
    assert watchdog_sec("spark-3", four) == 400
