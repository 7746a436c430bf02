# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The link_report filter: the kinds the roles use and their messages (the rows are test_link_check.py's)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.link_report import link_report

IB = ["NCCL version 2.28.9+cuda13.0", "x NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE; OOB e",
      "x NCCL INFO Using network IB"]


def test_engine_kind_ignores_hosts_that_did_not_read():
    # switch_serving reads the head only; the other host has no result.
    from ansible_collections.factory_floor.llm.plugins.module_utils._link_check import nccl_transport
    report = link_report({"spark-a": {"engine_transport": nccl_transport(IB)}, "spark-b": {}}, kind="engine", rdma="required")
    assert report["ok"] and report["level"] == "ok"
    assert report["text"].startswith("spark-a: NCCL 2.28.9+cuda13.0 runs over RDMA (rocep1s0f1, roceP2p1s0f1)")


def test_engine_kind_refuses_sockets_when_rdma_is_required():
    from ansible_collections.factory_floor.llm.plugins.module_utils._link_check import nccl_transport
    sockets = nccl_transport(["x NCCL INFO Using network Socket"])
    assert link_report({"spark-a": {"engine_transport": sockets}}, kind="engine", rdma="required")["level"] == "refuse"
    assert link_report({"spark-a": {"engine_transport": sockets}}, kind="engine", rdma="auto")["level"] == "warn"


def test_collective_kind_reports_the_lowest_rank_bandwidth():
    ok = {"ok": True, "backend": "gloo", "rank": 0, "size_mib": 64, "iterations": 20, "seconds_per_iteration": 0.1,
          "busbw_gb_s": 0.6}
    report = link_report({"spark-a": ok, "spark-b": dict(ok, rank=1, busbw_gb_s=0.5)}, kind="collective")
    assert report["ok"] and report["busbw_gb_s"] == 0.5 and len(report["summary"]) == 2


def test_bad_input():
    with pytest.raises(AnsibleFilterError):
        link_report(["spark-a"])
    with pytest.raises(AnsibleFilterError):
        link_report({}, kind="cable")


def test_hosts_and_what_each_registered_read_from_hostvars():
    """hostvars + registered: the filter reads each host's result (issue 36); the same report as the dict's."""
    from ansible_collections.factory_floor.llm.plugins.module_utils._link_check import nccl_transport
    hostvars = {"spark-a": {"__t": {"engine_transport": nccl_transport(IB)}}, "spark-b": {"other": 1}}
    read = link_report(["spark-a", "spark-b"], hostvars, "__t", kind="engine", rdma="required")
    assert read == link_report({"spark-a": hostvars["spark-a"]["__t"], "spark-b": {}}, kind="engine", rdma="required")
    assert read["level"] == "ok" and read["text"].startswith("spark-a: ")
    with pytest.raises(AnsibleFilterError, match="hostvars and registered together"):
        link_report(["spark-a"], hostvars=hostvars)
    with pytest.raises(AnsibleFilterError, match="expects host names"):
        link_report("spark-a", hostvars=hostvars, registered="__t")
