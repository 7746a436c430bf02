# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.split_link`` through its action plugin, as the vllm_split role runs it: the vllm and vllm_split
roles' variables read as the task sees them (Ansible's templar over the roles' defaults and vars and a two-host
inventory: the peer's address from its facts, the head's ports), ``link_check`` answered as the host would, the
``link`` fact the rank's unit renders, and the judge over what each host registered, in ``hostvars``, passing or
failing the task. The arguments, the verdicts and their texts are tests/unit/plugins/module_utils/test_split_link.py's
and test_link_check.py's."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.split_link import ActionModule
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

LINK = "enp1s0f1np1"
ADDRESSES = {"spark-a": "10.10.10.1", "spark-b": "10.10.10.2"}


def facts(host):
    return {LINK: {"ipv4": {"address": ADDRESSES[host]}}}


def seen(host, mtu=9000, received=3):
    """``link_check``'s result on ``host`` (as registered in __vllm_split_link_seen): the link up at ``mtu``, the
    other rank's don't-fragment ping ``received`` of 3."""
    peer = ADDRESSES["spark-b" if host == "spark-a" else "spark-a"]
    return {"changed": False, "address": ADDRESSES[host], "peer_address": peer, "address_holder": LINK,
            "interface": {"name": LINK, "exists": True, "admin_up": True, "carrier": True, "operstate": "UP",
                          "mtu": mtu, "addresses": [ADDRESSES[host] + "/24"]},
            "route": {"dev": LINK, "prefsrc": ADDRESSES[host]},
            "peer": {"sent": 3, "received": received, "rtt_ms": 0.2},
            "rdma": {"mode": "auto", "hca": ["rocep1s0f1"], "devices": [{"name": "rocep1s0f1", "up": True}],
                     "device_nodes": ["/dev/infiniband/uverbs0"]},
            "nccl_library": {"path": "/usr/lib/aarch64-linux-gnu/libnccl.so.2"}, "ports": []}


def run(args, check_mode=False, host="spark-a", results=(), **inventory):
    """The plugin's run on ``host`` over the roles' variables and ``inventory`` (which wins); the module runs answer
    ``results`` in turn. Returns the result and the modules run (name, arguments, the task's check mode)."""
    variables = role_variables("vllm")
    variables.update(role_variables("vllm_split"))
    variables.update(inventory_hostname=host, groups={"all": ["spark-a", "spark-b", "gateway"], "gb10": ["spark-a", "spark-b"]},
                     vllm_link_interface=LINK, ansible_facts=facts(host),
                     hostvars={name: {"ansible_facts": facts(name)} for name in ADDRESSES})
    variables.update(inventory)
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0, action="factory_floor.llm.split_link")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(),
                          with_filters(Templar(loader=DataLoader(), variables=variables)), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args), action._task.check_mode))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars=variables), calls


@pytest.mark.parametrize("check_mode", [False, True])
def test_read_runs_link_check_with_the_roles_settings_and_notes_the_link(check_mode):
    result, calls = run({"step": "read"}, check_mode=check_mode, results=[seen("spark-a")])
    ((module, args, checking),) = calls
    assert module == "factory_floor.llm.link_check" and checking is check_mode
    # The head: its own address from its facts, the other rank's from its hostvars, the rendezvous and the
    # all-reduce check's ports, owned by the split's unit.
    assert args == {"interface": LINK, "address": "10.10.10.1", "peer_address": "10.10.10.2",
                    "ports": [{"port": 29500, "variable": "vllm_split_master_port",
                               "purpose": "the split's rendezvous (--master-port) on the head"},
                              {"port": 29501, "variable": "vllm_split_link_collective_port",
                               "purpose": "the link check's all-reduce"}],
                    "port_owner_units": ["vllm-split.service"], "rdma": "auto", "nccl_ib_hca": [],
                    "rdma_devices": ["/dev/infiniband"], "nccl_library": "auto"}
    # What link_check returned is the task's result; ``link`` is what the rank's unit renders (vllm_split_link).
    assert result["peer"] == seen("spark-a")["peer"] and not result.get("failed")
    assert result["link"] == {"hca": ["rocep1s0f1"], "device_nodes": ["/dev/infiniband/uverbs0"],
                              "nccl_library": "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
                              "interface": seen("spark-a")["interface"], "peer": seen("spark-a")["peer"]}


def test_the_other_rank_reads_with_its_own_address_and_no_ports_and_the_inventory_wins():
    _result, calls = run({"step": "read"}, host="spark-b", results=[seen("spark-b")],
                         vllm_split_rdma="required", vllm_split_nccl_ib_hca=["rocep1s0f1"])
    args = calls[0][1]
    assert (args["address"], args["peer_address"], args["ports"]) == ("10.10.10.2", "10.10.10.1", [])
    assert args["rdma"] == "required" and args["nccl_ib_hca"] == ["rocep1s0f1"]


def test_a_failed_read_is_the_tasks_failure_and_notes_no_link():
    result, _calls = run({"step": "read"}, results=[{"failed": True, "msg": "ip: command not found"}])
    assert result["failed"] is True and result["msg"] == "ip: command not found" and "link" not in result


def test_read_engine_reads_the_running_splits_log_only():
    result, calls = run({"step": "read", "kind": "engine"}, check_mode=True, results=[{"engine_transport": {}}])
    assert calls == [("factory_floor.llm.link_check", {"interface": LINK, "rdma": "disabled", "nccl_library": "",
                                                       "engine_unit": "vllm-split.service"}, True)]
    assert result["engine_transport"] == {} and "link" not in result


@pytest.mark.parametrize("check_mode", [False, True])
def test_judge_passes_a_link_both_hosts_read_and_says_what_each_saw(check_mode):
    hostvars = {name: {"ansible_facts": facts(name), "__vllm_split_link_seen": seen(name)} for name in ADDRESSES}
    result, calls = run({"step": "judge", "kind": "link"}, check_mode=check_mode, hostvars=hostvars, vllm_link_mtu=9000)
    assert calls == [] and not result.get("failed") and result["changed"] is False
    assert result["report"]["ok"] is True and result["report"]["problems"] == []
    assert [line.split(":")[0] for line in result["say"]] == ["spark-a", "spark-b"]
    assert result["say"][1].startswith("spark-b: enp1s0f1np1 up, MTU 9000, 10.10.10.2; peer 10.10.10.1 3/3")


@pytest.mark.parametrize("check_mode", [False, True])
def test_judge_refuses_a_link_that_cannot_carry_the_split_failing_the_task(check_mode):
    # spark-b's link is at 1500 where the inventory says 9000; spark-a's 9000-byte ping to it is lost.
    hostvars = {"spark-a": {"__vllm_split_link_seen": seen("spark-a", received=0)},
                "spark-b": {"__vllm_split_link_seen": seen("spark-b", mtu=1500)}}
    result, calls = run({"step": "judge", "kind": "link"}, check_mode=check_mode, hostvars=hostvars, vllm_link_mtu=9000)
    assert calls == [] and result["failed"] is True and result["changed"] is False
    assert "report" not in result and "say" not in result
    assert result["msg"].startswith("The direct link cannot carry the split. Nothing was changed.\n- ")
    assert "- spark-b: the MTU of enp1s0f1np1 is 1500, not vllm_link_mtu 9000. Fix: " in result["msg"]


def test_judge_reads_only_the_split_hosts_and_refuses_one_that_registered_nothing():
    # The gateway's result is not the split's; spark-b registered nothing: refused as unread, not as a missing interface.
    hostvars = {"spark-a": {"__vllm_split_link_seen": seen("spark-a")}, "spark-b": {},
                "gateway": {"__vllm_split_link_seen": {"failed": True}}}
    result, _calls = run({"step": "judge", "kind": "link"}, hostvars=hostvars)
    assert result["failed"] is True and "gateway" not in result["msg"]
    assert "- spark-b: it did not read its link in this run" in result["msg"] and "does not exist" not in result["msg"]
