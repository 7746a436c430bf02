# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the topology_switch role's steps hand each other (``_switch_steps.py``) and its filter."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.switch_report_plan import switch_report_plan
from ansible_collections.factory_floor.llm.plugins.module_utils._switch_steps import gate_failure, outcome_reads, report_plan

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


# What switch_record and switch_release leave on the engine hosts: the comparison registered once for every host of
# the play, one host's failed write, the lost host's lock (the play's first host noted the release); spark-c was lost
# before switch_record and holds nothing; proxy-1 is no engine host.
HOSTVARS = {
    "spark-c": {},
    "spark-a": {"__vllm_switch_site": {"site": {"agree": False}, "inventory": {"topology": "split"}, "changed": False},
                "__vllm_switch_record_error": "read-only",
                "maintenance_window_unlocked": {"spark-c": {"released": False}}},
    "spark-b": {"__vllm_switch_site": {"site": {"agree": False}, "inventory": {"topology": "split"}},
                "__vllm_switch_record_error": ""},
    "proxy-1": {"__vllm_switch_record_error": "not an engine host"},
}


def test_the_report_reads_what_the_last_steps_left_on_the_engine_hosts():
    site, lost = outcome_reads(HOSTVARS, ["spark-c", "spark-a", "spark-b"])
    # What the set_facts on the first proxy host handed the report before (vllm_switch_site, vllm_switch_lost_locks).
    assert site == {"site": {"agree": False}, "inventory": {"topology": "split"}, "write_errors": {"spark-a": "read-only"}}
    assert lost == {"spark-c": {"released": False}}
    got = switch_report_plan(PLAN, HOSTVARS, ["spark-c", "spark-a", "spark-b"], "run-1", "", ["/inv/lab"])
    assert got == report_plan(PLAN, site, lost, "run-1", "", ["/inv/lab"])
    assert got["lost_hosts"] == ["spark-b", "spark-c"] and got["record_errors"] == {"spark-a": "read-only"}


@pytest.mark.parametrize("hostvars", [
    {},                                                                   # no engine host ran the last steps
    {"spark-a": {"__vllm_switch_site": {"failed": True, "msg": "boom"}}},  # the comparison failed
])
def test_nothing_left_reads_as_nothing_recorded_and_no_lock_kept(hostvars):
    assert outcome_reads(hostvars, ["spark-a", "spark-b"]) == ({"site": {}, "inventory": {}, "write_errors": {}}, {})


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


def test_the_gate_failure_is_truncated_as_the_report_had_it():
    from jinja2 import Environment
    long = " ".join(["refused"] * 200)
    expected = Environment().from_string("{{ ('the tool-calling gate could not test it: ' ~ m) | truncate(900) }}").render(m=long)
    assert gate_failure({"msg": long}) == expected and len(expected) <= 900


# A real run: the filter reads Ansible's own hostvars (lazy, templated when read) on the proxy host, after the engine
# hosts' plays registered and noted as switch_record and switch_release do (run_once: on every host of the play).
REAL_PLAY = """
- hosts: gb10
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __vllm_switch_record_error: "{{ 'read-only' if inventory_hostname == 'spark-b' else '' }}"
    - ansible.builtin.set_fact:
        __vllm_switch_site: {site: {agrees: "{{ true }}"}, inventory: {topology: replicas}}
      run_once: true
    - ansible.builtin.set_fact:
        maintenance_window_unlocked: {spark-c: {released: false, path: /run/lock, error: "host unreachable: gone"}}
      run_once: true
- hosts: proxy
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        dest: %s
        mode: "0644"
        content: >-
          {{ {'lost_hosts': ['spark-c']} | factory_floor.llm.switch_report_plan(hostvars, groups['gb10'], 'run-1', '',
          ['/inv']) | to_json }}
"""


def test_a_run_reads_what_the_engine_hosts_left_as_ansible_holds_it(tmp_path):
    import json
    import sys

    from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import run_playbook

    out = tmp_path / "out.json"
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gb10": {"hosts": {"spark-a": {}, "spark-b": {}, "spark-c": {}}},
                                      "proxy": {"hosts": {"proxy-a": {}}}}}}
    done = run_playbook(tmp_path, inventory, REAL_PLAY % out)
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(out.read_text())
    assert (got["site"], got["inventory"], got["record_errors"]) == ({"agrees": True}, {"topology": "replicas"},
                                                                     {"spark-b": "read-only"})
    assert got["lost_hosts"] == ["spark-c"] and got["lost_locks"]["spark-c"]["released"] is False
    assert got["run"] == "run-1" and got["inventory_sources"] == ["/inv"]
