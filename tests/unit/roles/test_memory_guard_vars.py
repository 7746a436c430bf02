# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's derived variables, now filters (plugins/module_utils/_memory_guard_vars.py): each renders
exactly what the Jinja it replaced rendered (kept here as it stood in roles/memory_guard/vars/main.yml), both
through Ansible's own templar over the role's variables and an inventory."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_vars as mv
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

OLD = {
    "_memory_guard_engine_log_cmd": """\
for u in {{ memory_guard_engine_units | map('quote') | join(' ') }}; do \
t=$(systemctl show -p ExecMainStartTimestampMonotonic --value "$u" 2>/dev/null); \
i=$(systemctl show -p InvocationID --value "$u" 2>/dev/null); \
[ -n "$i" ] && [ "${t:-0}" != 0 ] && echo "$t $i"; done | sort -n | tail -n 1 | \
while read -r t i; do journalctl -q -o cat "_SYSTEMD_INVOCATION_ID=$i" | \
grep -E 'Model loading took|KV cache memory|CUDA graph|Free memory on device|GiB for KV cache|KV cache size' || true; done""",
    "_memory_guard_inside": """\
{{ _memory_guard_unit_workloads
   + (_memory_guard_slice_workloads | selectattr('slice', 'match', _memory_guard_slice_prefix | regex_escape) | list) }}""",
    "_memory_guard_validate_slice": """\
/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ memory_guard_slice }}" \
&& out=$(systemd-analyze verify --man=no "$d/{{ memory_guard_slice }}" 2>&1); r=$?; rm -rf "$d"; echo "$out"; \
test "$r" -eq 0 && ! echo "$out" | grep -q "{{ memory_guard_slice }}:[0-9]"'""",
    "_memory_guard_validate_unit": """\
/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ _memory_guard_watch_unit }}" \
&& out=$(systemd-analyze verify --man=no "$d/{{ _memory_guard_watch_unit }}" 2>&1); r=$?; rm -rf "$d"; echo "$out"; \
test "$r" -eq 0 && ! echo "$out" | grep -q "{{ _memory_guard_watch_unit }}:[0-9]"'""",
    "_memory_guard_model_dir": """\
{{ (vllm_split_model | default(vllm_model | default(''))) if _memory_guard_split | bool
   else vllm_model | default('') }}""",
    "_memory_guard_weights_gib": """\
{{ memory_guard_weights_gib if memory_guard_weights_gib is not none
   else __memory_guard_model.weights_gib | default(none) }}""",
    "_memory_guard_min_kv_gib": """\
{{ memory_guard_min_kv_gib if memory_guard_min_kv_gib is not none
   else __memory_guard_model.min_kv_gib | default(none) }}""",
    "_memory_guard_weights_source": """\
{{ 'memory_guard_weights_gib' if memory_guard_weights_gib is not none
   else __memory_guard_model.weights_source | default('unknown') }}""",
    "_memory_guard_min_kv_source": """\
{{ 'memory_guard_min_kv_gib' if memory_guard_min_kv_gib is not none
   else __memory_guard_model.min_kv_source | default('unknown') }}""",
}

READ = {"weights_gib": 23.67, "weights_source": "11 checkpoint file(s) in /m", "min_kv_gib": 6.0,
        "min_kv_source": "config.json in /m"}
WORKLOADS = [
    {"name": "db", "unit": "postgresql.service", "peak_gib": 8},
    {"name": "builds", "slice": "factory-floor-workloads-builds.slice"},
    {"name": "outside", "slice": "other.slice"},
    {"name": "both", "unit": "ci.service", "slice": "factory-floor-workloads-ci.slice"},
    {"name": "empty", "unit": None, "slice": ""},
    {"name": "bare"},
    {"name": "stem", "slice": "factory-floor-workloads.slice"},
    {"name": "dotted", "slice": "factory-floor-workloadsXslice-a.slice"},
]

INVENTORIES = [
    {},
    {"memory_guard_workloads": WORKLOADS},
    {"memory_guard_workloads": WORKLOADS, "memory_guard_slice": "a+b.slice"},
    {"memory_guard_workloads": WORKLOADS + [{"slice": "a+b-x.slice"}, {"slice": "aab-x.slice"}], "memory_guard_slice": "a+b.slice"},
    {"memory_guard_workloads": WORKLOADS, "memory_guard_slice": "factory-floor.slice.slice"},
    {"memory_guard_workloads": [{"unit": "u.service"}, {"slice": "factory-floor-workloads-x.slice"}],
     "memory_guard_slice": "factory-floor-workloads"},
    {"memory_guard_engine_units": ["vllm-replica.service"]},
    {"memory_guard_engine_units": ["a b.service", "it's.service", "$(x).service"]},
    {"memory_guard_engine_units": []},
    {"_memory_guard_watch_unit": "x y.service", "memory_guard_slice": "site\\x2dbuilds.slice"},
    {"topology": "replicas", "vllm_model": "/m/a", "vllm_split_model": "/m/b"},
    {"topology": "split", "vllm_model": "/m/a", "vllm_split_model": "/m/b"},
    {"topology": "split", "vllm_model": "/m/a"},
    {"topology": "split"},
    {"topology": "replicas"},
    {"topology": "split", "vllm_model": "/m/a", "vllm_split_model": None},
    {"topology": "replicas", "switch_to": "split", "vllm_model": "/m/a", "vllm_split_model": "/m/b"},
    {"topology": "split", "switch_to": "replicas", "vllm_model": "/m/a", "vllm_split_model": "/m/b"},
    {"__memory_guard_model": READ},
    {"__memory_guard_model": {"skipped": True}},
    {"__memory_guard_model": {"weights_gib": None, "weights_source": None}},
    {"__memory_guard_model": READ, "memory_guard_weights_gib": 48, "memory_guard_min_kv_gib": 0},
    {"__memory_guard_model": READ, "memory_guard_weights_gib": "12.5"},
    {"memory_guard_weights_gib": 0.0, "memory_guard_min_kv_gib": 3},
    {"__memory_guard_model": {"skipped": True}, "memory_guard_min_kv_gib": 2.5},
]


ROLE = role_variables("memory_guard")


def templar(**inventory):
    found = dict(ROLE, inventory_hostname="spark-a")
    found.update(inventory)
    return with_filters(Templar(loader=DataLoader(), variables=found))


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("name", sorted(OLD))
def test_the_filter_renders_what_the_old_jinja_rendered(name, inventory):
    tpl = templar(**inventory)
    old = tpl.template(trust_as_template(OLD[name]))
    new = tpl.template(trust_as_template("{{ %s }}" % name))
    assert new == old and type(new) is type(old)


def test_inside_units_first_then_the_slices_named_inside():
    assert mv.inside(WORKLOADS, "factory-floor-workloads.slice") == [WORKLOADS[0], WORKLOADS[3], WORKLOADS[1], WORKLOADS[3]]
    assert mv.inside([{"slice": "a+b-x.slice"}, {"slice": "aab-x.slice"}], "a+b.slice") == [{"slice": "a+b-x.slice"}]
    assert mv.inside([], "x.slice") == []


def test_the_engine_log_command_quotes_each_unit():
    command = mv.engine_log_command(["a b.service", "v.service"])
    assert command.startswith("for u in 'a b.service' v.service; do ")
    assert mv.ENGINE_LOG_PATTERN in command


@pytest.mark.parametrize("split, expected", [(True, "/m/b"), (False, "/m/a")])
def test_the_model_dir_follows_the_topology(split, expected):
    assert mv.model_dir(split, "/m/a", "/m/b") == expected


def test_figures_set_win_else_read_else_unknown():
    assert mv.figures(READ, 48, None) == {"weights_gib": 48, "weights_source": "memory_guard_weights_gib",
                                          "min_kv_gib": 6.0, "min_kv_source": "config.json in /m"}
    assert mv.figures({}) == {"weights_gib": None, "weights_source": "unknown", "min_kv_gib": None,
                              "min_kv_source": "unknown"}
    assert mv.figures({"weights_source": None}, None, 0)["weights_source"] is None
    assert mv.figures({"weights_source": None}, None, 0)["min_kv_gib"] == 0
