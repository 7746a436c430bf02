# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The prometheus_hosts and link_check_findings filters, against the Jinja monitoring.yml and link_check.yml held."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.link_check_findings import link_check_findings
from ansible_collections.factory_floor.llm.plugins.filter.prometheus_hosts import prometheus_hosts

# monitoring.yml's __monitoring_hosts and link_check.yml's findings file before the filters.
OLD_MONITORING = """{{ groups['gb10'] | default([]) | map('extract', hostvars)
         | map(attribute='vllm_prometheus_hosts', default=[]) | flatten | unique }}"""
OLD_FINDINGS = """{{ {'hosts': dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars)
                                                      | map(attribute='vllm_split_link', default={}))),
              'collective': vllm_split_link_collective_report | default({}),
              'transport': vllm_split_transport_report | default({})} | to_nice_json }}"""
# The new tasks' arguments to the filters, and what link_check.yml does with the findings.
NEW_FINDINGS_ARGS = ("{{ vllm_split_link_collective_report | default({}) }}", "{{ vllm_split_transport_report | default({}) }}")
NEW_FINDINGS = "{{ findings | to_nice_json }}"


def render(text, **variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


@pytest.mark.parametrize("hostvars, groups", [
    ({"spark-a": {"vllm_prometheus_hosts": ["prom-1"]}, "spark-b": {"vllm_prometheus_hosts": ["prom-1", "prom-2"]}},
     {"gb10": ["spark-a", "spark-b"]}),
    # Unset, null, a nested list, a null item, a bare string, names differing in case only (unique keeps the first).
    ({"spark-a": {}, "spark-b": {"vllm_prometheus_hosts": None}}, {"gb10": ["spark-a", "spark-b"]}),
    ({"spark-a": {"vllm_prometheus_hosts": [["prom-2", None], "Prom-1"]}, "spark-b": {"vllm_prometheus_hosts": "prom-1"}},
     {"gb10": ["spark-a", "spark-b"]}),
    ({"spark-a": {"vllm_prometheus_hosts": ["prom-1", "null", "None"]}}, {"gb10": ["spark-a"]}),
    # An item Jinja's unique cannot hash: Ansible's own unique, letter case kept.
    ({"spark-a": {"vllm_prometheus_hosts": ["Prom-1", {"host": "x"}, "prom-1", {"host": "x"}]}}, {"gb10": ["spark-a"]}),
    ({}, {}),
    ({}, {"gb10": []}),
])
def test_prometheus_hosts_is_what_monitoring_yml_computed(hostvars, groups):
    old = render(OLD_MONITORING, hostvars=hostvars, groups=groups)
    assert prometheus_hosts(hostvars, render("{{ groups['gb10'] | default([]) }}", groups=groups)) == old


@pytest.mark.parametrize("hostvars, reports", [
    ({"spark-a": {"vllm_split_link": {"interface": {"name": "eth1"}}}, "spark-b": {}}, {}),
    ({"spark-a": {"vllm_split_link": None}, "spark-b": {"vllm_split_link": {"address": "10.0.0.2"}}},
     {"vllm_split_link_collective_report": {"ok": True, "busbw_gb_s": 11.5},
      "vllm_split_transport_report": {"level": "ok"}}),
    ({"spark-a": {}}, {"vllm_split_link_collective_report": None, "vllm_split_transport_report": {}}),
])
def test_link_check_findings_is_what_link_check_yml_saved(hostvars, reports):
    variables = dict(reports, hostvars=hostvars, ansible_play_hosts=list(hostvars))
    old = render(OLD_FINDINGS, **variables)
    collective, transport = (render(text, **variables) for text in NEW_FINDINGS_ARGS)
    findings = link_check_findings(hostvars, variables["ansible_play_hosts"], collective, transport)
    assert render(NEW_FINDINGS, findings=findings) == old


def test_link_check_findings_defaults_and_refusals():
    assert link_check_findings({"a": {}}, ["a"]) == {"hosts": {"a": {}}, "collective": {}, "transport": {}}
    with pytest.raises(AnsibleFilterError, match="expects the hosts"):
        link_check_findings({}, "spark-a")
    with pytest.raises(AnsibleFilterError, match="expects hostvars"):
        link_check_findings([], [])
    with pytest.raises(AnsibleFilterError, match="expects the engine hosts"):
        prometheus_hosts({}, "spark-a")
    with pytest.raises(AnsibleFilterError, match="expects hostvars"):
        prometheus_hosts(None, [])
