# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_split_link`` and ``factory_floor.llm.split_link``: link_check's arguments from the vllm_split role's variables,
the verdict over every host's registered result (the refusals are test_link_check.py's rows), what the task fails
with and what it shows, and the action plugin's steps as a task runs them (Ansible's templar over its variables)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleActionFail
from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.split_link import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _split_link as sl
from ansible_collections.factory_floor.llm.plugins.module_utils._link_check import nccl_transport
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action_answering

IB = ["NCCL version 2.28.9+cuda13.0", "x NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE; OOB e",
      "x NCCL INFO Using network IB"]
SOCKETS = ["x NCCL INFO Using network Socket"]
ROLE = {"vllm_link_interface": "enp1s0f1np1", "vllm_link_address": "10.10.10.1", "_vllm_split_peer_address": "10.10.10.2",
        "_vllm_split_link_ports": [{"port": 29500}], "_vllm_split_unit": "vllm-split.service", "vllm_split_rdma": "auto",
        "vllm_split_nccl_ib_hca": "", "vllm_split_rdma_devices": ["/dev/infiniband"], "vllm_split_nccl_library": "auto",
        "_vllm_split_hosts": ["spark-a", "spark-b"], "vllm_link_mtu": 9000, "vllm_runtime": "container",
        "vllm_split_head": "spark-a", "_vllm_split_head_address": "10.10.10.1",
        "vllm_split_link_collective_port": 29501, "vllm_split_link_min_bandwidth": 0,
        "ansible_play_batch": ["spark-a", "spark-b"]}
RANK = {"ok": True, "backend": "gloo", "rank": 0, "size_mib": 64, "iterations": 20, "seconds_per_iteration": 0.1,
        "busbw_gb_s": 0.6}


def test_the_reads_take_the_roles_settings():
    assert sl.read_args("link", ROLE) == {
        "interface": "enp1s0f1np1", "address": "10.10.10.1", "peer_address": "10.10.10.2", "ports": [{"port": 29500}],
        "port_owner_units": ["vllm-split.service"], "rdma": "auto", "nccl_ib_hca": "",
        "rdma_devices": ["/dev/infiniband"], "nccl_library": "auto"}
    assert sl.read_args("engine", ROLE) == {"interface": "enp1s0f1np1", "rdma": "disabled", "nccl_library": "",
                                            "engine_unit": "vllm-split.service"}


def test_the_link_fact_is_what_the_unit_renders():
    seen = {"rdma": {"hca": ["rocep1s0f1"], "device_nodes": ["/dev/infiniband/uverbs0"]},
            "nccl_library": {"path": "/usr/lib/libnccl.so.2"}, "interface": {"name": "enp1s0f1np1"},
            "peer": {"received": 3}}
    assert sl.link_fact(seen) == {"hca": ["rocep1s0f1"], "device_nodes": ["/dev/infiniband/uverbs0"],
                                  "nccl_library": "/usr/lib/libnccl.so.2", "interface": {"name": "enp1s0f1np1"},
                                  "peer": {"received": 3}}


def test_the_engine_verdict_reads_only_this_batch():
    assert sl.hosts("engine", dict(ROLE, ansible_play_batch=["spark-b", "gw"])) == ["spark-b"]
    assert sl.hosts("link", dict(ROLE, ansible_play_batch=["spark-b"])) == ["spark-a", "spark-b"]
    assert sl.settings("collective", ROLE)["master"] == "10.10.10.1:29501"
    assert sl.settings("link", ROLE) == {"mtu": 9000, "runtime": "container"}


@pytest.mark.parametrize("kind, results, rdma, refused, said", [
    ("engine", {"spark-a": {"engine_transport": nccl_transport(IB)}, "spark-b": {}}, "required", "",
     "spark-a: NCCL 2.28.9+cuda13.0 runs over RDMA (rocep1s0f1, roceP2p1s0f1)"),
    ("engine", {"spark-a": {"engine_transport": nccl_transport(SOCKETS)}}, "required",
     "spark-a: NCCL  fell back to sockets (TCP) for the split", None),
    ("engine", {"spark-a": {"engine_transport": nccl_transport(SOCKETS)}}, "auto", "",
     "WARNING: spark-a: NCCL  fell back to sockets (TCP) for the split"),
    ("collective", {"spark-a": RANK, "spark-b": dict(RANK, rank=1)}, "auto", "", "spark-a (rank 0): 64 MiB all-reduce"),
    ("collective", {"spark-a": RANK, "spark-b": {"ok": False, "error": "connection refused", "rank": 1}}, "auto",
     "The all-reduce between the ranks over the link failed. Nothing was changed.\n- spark-b: the all-reduce over the "
     "link failed: connection refused. Fix: both ranks must run at once", None),
], ids=["engine-rdma", "engine-sockets-required", "engine-sockets-auto", "collective-ok", "collective-refused"])
def test_what_the_task_refuses_and_shows(kind, results, rdma, refused, said):
    verdict = sl.report(kind, results, **dict(sl.settings(kind, dict(ROLE, vllm_split_rdma=rdma))))
    assert sl.refusal(kind, verdict).startswith(refused) and bool(sl.refusal(kind, verdict)) is bool(refused)
    if said is not None:
        shown = sl.say(kind, verdict)
        assert (shown if isinstance(shown, str) else shown[0]).startswith(said)


def test_a_link_that_cannot_carry_the_split_is_refused_with_the_title():
    verdict = sl.report("link", {"spark-a": {}, "spark-b": {}}, mtu=9000)
    assert not verdict["ok"]
    assert sl.refusal("link", verdict).startswith("The direct link cannot carry the split. Nothing was changed.\n- ")
    with pytest.raises(ValueError):
        sl.report("cable", {})


# ------------------------------------------------------------------ the action plugin


def run(args, variables, results=()):
    return run_action_answering(ActionModule, "split_link", args, variables, results)


def test_read_runs_link_check_with_the_roles_settings_as_the_task_sees_them():
    variables = dict(ROLE, __peer="10.10.10.9", _vllm_split_peer_address=trust_as_template("{{ __peer }}"))
    seen = {"changed": False, "rdma": {"hca": ["x"], "device_nodes": []}, "nccl_library": {"path": ""},
            "interface": {}, "peer": {}}
    result, calls = run({"step": "read"}, variables, [seen])
    assert calls == [("factory_floor.llm.link_check", dict(sl.read_args("link", ROLE), peer_address="10.10.10.9"))]
    assert result["link"]["hca"] == ["x"] and result["rdma"] == seen["rdma"]
    result, calls = run({"step": "read", "kind": "engine"}, ROLE, [{"engine_transport": {}}])
    assert calls[0][1]["engine_unit"] == "vllm-split.service" and "link" not in result


def test_judge_reads_each_hosts_registered_result_and_fails_with_the_refusal():
    hostvars = {"spark-a": {"__vllm_split_transport": {"engine_transport": nccl_transport(SOCKETS)}}, "spark-b": {}}
    result, calls = run({"step": "judge", "kind": "engine"}, dict(ROLE, vllm_split_rdma="required", hostvars=hostvars))
    assert calls == [] and result["failed"] is True and set(result) >= {"failed", "msg", "changed"}
    assert result["msg"].startswith("spark-a: NCCL  fell back to sockets") and "report" not in result
    result, _calls = run({"step": "judge", "kind": "engine"}, dict(ROLE, hostvars=hostvars))
    assert result["report"]["level"] == "warn" and result["say"].startswith("WARNING: spark-a: ")
    hostvars = {"spark-a": {"__vllm_split_collective": RANK}, "spark-b": {"__vllm_split_collective": dict(RANK, rank=1)}}
    result, _calls = run({"step": "judge", "kind": "collective"}, dict(ROLE, hostvars=hostvars))
    assert result["report"]["ok"] and len(result["say"]) == 2


def test_an_undefined_variable_or_a_read_of_the_collective_fails_naming_it():
    variables = dict(ROLE)
    del variables["_vllm_split_unit"]
    with pytest.raises(AnsibleActionFail, match="split_link read engine reads _vllm_split_unit, which is not defined"):
        run({"step": "read", "kind": "engine"}, variables)
    with pytest.raises(AnsibleActionFail, match="kind link or engine"):
        run({"step": "read", "kind": "collective"}, ROLE)


def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("split_link", ARGUMENT_SPEC)
