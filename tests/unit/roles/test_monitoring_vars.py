# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The monitoring role's thresholds and skipped rule groups, now filters (plugins/module_utils/_monitoring_inputs.py):
each renders exactly what the Jinja it replaced rendered (kept here as it stood in roles/monitoring/vars/main.yml),
through Ansible's own templar over the role's variables and an inventory."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _monitoring_inputs as mi
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

OLD_WATCHED = """\
{%- set found = namespace(on=false) -%}
{%- for host in groups[site_engine_group] | default([]) -%}
{%-   set engine = hostvars[host] -%}
{%-   set workloads = engine.memory_guard_workloads | default([]) -%}
{%-   if engine.memory_guard_enabled | default(true) | bool and engine.memory_guard_watch | default(true) | bool
        and (workloads | selectattr('unit', 'defined') | list + workloads | selectattr('slice', 'defined') | list)
            | length > 0 -%}
{%-     set found.on = true -%}
{%-   endif -%}
{%- endfor -%}
{{ found.on }}"""
OLD = {
    "_monitoring_thresholds": """\
{{ {'VLLMQueueDeep': monitoring_queue_waiting_max, 'VLLMTimeToFirstTokenHigh': monitoring_ttft_p95_seconds}
   | combine(monitoring_alert_thresholds) }}""",
    "_monitoring_skip_groups": """\
{{ ([] if _monitoring_memory_guard_watched | bool else ['factory-floor-memory-guard-watch'])
   + ([] if groups[site_proxy_group] | default([]) | length >= 2 else ['factory-floor-floating-address']) }}""",
}

ROLE = role_variables("monitoring")
UNIT = [{"name": "db", "unit": "postgresql.service"}]
SLICE = [{"name": "builds", "slice": "b.slice"}]
NONE = [{"name": "peak", "peak_gib": 4}]

INVENTORIES = [
    ({}, {}),
    ({"spark-a": {}, "spark-b": {}}, {"proxy": ["gw"]}),
    ({"spark-a": {"memory_guard_workloads": UNIT}, "spark-b": {}}, {"proxy": ["gw", "gw2"]}),
    ({"spark-a": {"memory_guard_workloads": SLICE}}, {"proxy": ["gw", "gw2", "gw3"]}),
    ({"spark-a": {"memory_guard_workloads": NONE}}, {"proxy": []}),
    ({"spark-a": {"memory_guard_workloads": [{"unit": None}]}}, {}),
    ({"spark-a": {"memory_guard_workloads": UNIT, "memory_guard_enabled": False}}, {}),
    ({"spark-a": {"memory_guard_workloads": UNIT, "memory_guard_watch": "no"}}, {}),
    ({"spark-a": {"memory_guard_workloads": UNIT, "memory_guard_watch": "yes", "memory_guard_enabled": "True"}}, {}),
    ({"spark-a": {"memory_guard_workloads": UNIT, "memory_guard_enabled": 0},
      "spark-b": {"memory_guard_workloads": SLICE, "memory_guard_enabled": 1}}, {}),
    ({"spark-a": {"memory_guard_workloads": UNIT + SLICE, "memory_guard_watch": "off"}}, {"proxy": ["gw", "gw2"]}),
]
SETTINGS = [
    {},
    {"monitoring_queue_waiting_max": 12, "monitoring_ttft_p95_seconds": 2.5},
    {"monitoring_alert_thresholds": {"VLLMQueueDeep": 3, "VLLMKvCacheFull": 0.9}},
    {"monitoring_queue_waiting_max": "20", "monitoring_alert_thresholds": {"VLLMTimeToFirstTokenHigh": 1}},
]


def templar(hosts, groups, **settings):
    variables = dict(ROLE, site_max_num_seqs=8, hostvars=hosts, groups=dict(groups, gb10=sorted(hosts)))
    variables.update(settings)
    return with_filters(Templar(loader=DataLoader(), variables=variables))


@pytest.mark.parametrize("hosts, groups", INVENTORIES)
def test_the_skipped_groups_are_what_the_old_jinja_rendered(hosts, groups):
    tpl = templar(hosts, groups)
    watched = tpl.template(trust_as_template(OLD_WATCHED))
    tpl = templar(hosts, groups, _monitoring_memory_guard_watched=watched)
    old = tpl.template(trust_as_template(OLD["_monitoring_skip_groups"]))
    assert tpl.template(trust_as_template("{{ _monitoring_skip_groups }}")) == old


@pytest.mark.parametrize("settings", SETTINGS)
def test_the_thresholds_are_what_the_old_jinja_rendered(settings):
    tpl = templar({}, {}, **settings)
    old = tpl.template(trust_as_template(OLD["_monitoring_thresholds"]))
    assert tpl.template(trust_as_template("{{ _monitoring_thresholds }}")) == old


def test_the_groups_follow_what_the_site_runs():
    assert mi.skip_groups(mi.memory_guard_watched([{}]), ["gw"]) == [mi.GROUP_MEMORY_GUARD_WATCH, mi.GROUP_FLOATING_ADDRESS]
    assert mi.skip_groups(mi.memory_guard_watched([{"memory_guard_workloads": SLICE}]), ["gw", "gw2"]) == []
    assert mi.memory_guard_watched([{"memory_guard_workloads": ["unit"]}]) is False


def test_the_sites_thresholds_win():
    assert mi.thresholds(1, 2, {"VLLMQueueDeep": 3}) == {"VLLMQueueDeep": 3, "VLLMTimeToFirstTokenHigh": 2}
    with pytest.raises(TypeError, match="monitoring_alert_thresholds must be a dict"):
        mi.thresholds(1, 2, ["VLLMQueueDeep"])
