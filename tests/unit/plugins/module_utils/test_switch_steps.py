# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the topology_switch role's steps hand each other (``_switch_steps.py``) and its filter."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.switch_report_plan import switch_report_plan
from ansible_collections.factory_floor.llm.plugins.filter.switch_gate_failure import switch_gate_failure
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure, report_plan

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


@pytest.mark.parametrize("failure, gate, why", [
    # The gate ran and failed: its own verdict's message.
    ({"msg": "assertion failed"}, {"passed": False, "message": "scored 0.50, below tool_gate_min_score 0.80"},
     "scored 0.50, below tool_gate_min_score 0.80"),
    ({"msg": "async task did not complete", "timedout": {"period": 600}}, {},
     "the tool-calling test took longer than tool_gate_run_timeout: async task did not complete"),
    ({"msg": "Status code was -1"}, {"passed": True},
     "the tool-calling gate could not test it: Status code was -1"),
    ({}, {}, "the tool-calling gate could not test it: no message"),
])
def test_why_an_engine_did_not_pass_the_gate(failure, gate, why):
    assert gate_failure(failure, gate) == why
    assert switch_gate_failure(failure, gate) == why


def test_the_gate_failure_is_truncated_as_the_report_had_it():
    from jinja2 import Environment
    long = " ".join(["refused"] * 200)
    expected = Environment().from_string("{{ ('the tool-calling gate could not test it: ' ~ m) | truncate(900) }}").render(m=long)
    assert gate_failure({"msg": long}) == expected and len(expected) <= 900
    with pytest.raises(AnsibleFilterError, match="a dict"):
        switch_gate_failure("failed")
