# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the topology_switch role's steps hand each other (``_switch_steps.py``) and its filter."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.switch_report_plan import switch_report_plan
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import report_plan

PLAN = {"on_target": False, "lost_hosts": ["spark-b"], "outcome": "switched"}
SITE = {"site": {"agree": False}, "inventory": {"topology": "split"}, "write_errors": {"spark-a": "read-only"},
        "unrecorded": []}


def test_the_report_reads_the_decision_with_what_the_last_steps_saw():
    lost = {"spark-c": {"released": False}, "spark-b": {"released": True}}
    got = report_plan(PLAN, SITE, lost, "20261206T220000Z-0a0b0c", "not in rotation", ["/inv/lab"])
    assert got == dict(PLAN, inventory={"topology": "split"}, site={"agree": False},
                       record_errors={"spark-a": "read-only"}, lost_hosts=["spark-b", "spark-c"], lost_locks=lost,
                       run="20261206T220000Z-0a0b0c", rotation_error="not in rotation", inventory_sources=["/inv/lab"])
    assert PLAN["lost_hosts"] == ["spark-b"]  # the decision itself is not changed


def test_a_switch_that_recorded_nothing_and_lost_no_host():
    got = report_plan({"lost_hosts": []}, None, None)
    assert (got["inventory"], got["site"], got["record_errors"], got["lost_hosts"], got["lost_locks"]) == ({}, {}, {}, [], {})
    assert switch_report_plan({"lost_hosts": []}) == got
    with pytest.raises(AnsibleFilterError, match="a dict"):
        switch_report_plan("plan")
