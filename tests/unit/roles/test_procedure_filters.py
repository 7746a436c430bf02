# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The procedure roles' multi-line expressions moved to filters - rolling_restart's serving peers (serving_peers),
tool_gate's suite files (tool_gate_suite_files), tune_concurrency's run timeout (tune_run_timeout), maintenance_window's
probe URL (proxy_chat_url): each renders exactly what the Jinja it replaced rendered (kept here as it stood in the
roles), through Ansible's own templar."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables


def render(text, **variables):
    return with_filters(Templar(loader=DataLoader(), variables=variables)).template(trust_as_template(text))


def same(old, new, **variables):
    before, after = render(old, **variables), render(new, **variables)
    assert after == before and type(after) is type(before)
    return after


@pytest.mark.parametrize("results", [
    [],
    [{"item": "spark-b", "status": "serving"}, {"item": "spark-c", "status": "starting"}, {"item": "spark-d", "skipped": True}],
    [{"item": "spark-b", "status": "serving"}, {"item": "spark-c", "status": "serving"}],
    [{"item": "spark-b", "status": None}, {"item": "spark-c", "unreachable": True, "msg": "gone"}],
])
def test_serving_peers(results):
    old = """{{ __rolling_restart_peers.results | default([]) | selectattr('status', 'defined') | selectattr('status', 'equalto', 'serving')
   | map(attribute='item') | list }}"""
    new = "{{ __rolling_restart_peers.results | default([]) | factory_floor.llm.serving_peers }}"
    same(old, new, __rolling_restart_peers={"results": results})
    assert same(old, new) == []


@pytest.mark.parametrize("suite, extra", [
    ("default", []), ("default", ["/srv/suites/mine.yml", "b-2", "with space", "x.yml"]), ("my_suite-1", ["ünï"]),
    ("../escape", []),
])
def test_tool_gate_suite_files(suite, extra):
    old = """{{ ([tool_gate_suite] + tool_gate_suite_extra)
   | map('regex_replace', '^([A-Za-z0-9_-]+)$', role_path ~ '/files/suites/\\1.yml') | list }}"""
    new = "{{ ([tool_gate_suite] + tool_gate_suite_extra) | factory_floor.llm.tool_gate_suite_files(role_path) }}"
    found = same(old, new, tool_gate_suite=suite, tool_gate_suite_extra=extra, role_path="/c/roles/tool_gate")
    assert found[0] == ("/c/roles/tool_gate/files/suites/%s.yml" % suite if suite[0] != "." else suite)


@pytest.mark.parametrize("knobs", [
    dict(tune_concurrency=[1, 4, 8, 12, 16], tune_profiles=["short", "long"], tune_duration=120, tune_request_timeout=600),
    dict(tune_concurrency=[8], tune_profiles=["long"], tune_duration="60", tune_request_timeout="30.5"),
    dict(tune_concurrency=[], tune_profiles=["short"], tune_duration=1, tune_request_timeout=1),
    dict(tune_concurrency=[1, 2], tune_profiles=["short"], tune_duration="soon", tune_request_timeout=None),
])
def test_tune_run_timeout(knobs):
    old = """{{ (tune_concurrency | length) * (tune_profiles | length)
   * ((tune_duration | int) + (tune_request_timeout | int)) + 1800 }}"""
    new = "{{ tune_concurrency | factory_floor.llm.tune_run_timeout(tune_profiles, tune_duration, tune_request_timeout) }}"
    same(old, new, **knobs)


MAINTENANCE = role_variables("maintenance_window")


@pytest.mark.parametrize("inventory", [
    {}, {"site_proxy_port": 8443}, {"nginx_proxy_tls_certificate": "/etc/ssl/p.pem"},
    {"nginx_proxy_tls_certificate": "/etc/ssl/p.pem", "nginx_proxy_tls_server_name": "llm.example.org", "site_proxy_port": "443"},
    {"nginx_proxy_tls_certificate": "/etc/ssl/p.pem", "nginx_proxy_tls_server_name": ""},
    {"nginx_proxy_tls_certificate": "", "nginx_proxy_tls_server_name": "llm.example.org"},
    {"site_proxy_port": 9000},
])
def test_proxy_chat_url(inventory):
    old = """{{ ('https://' ~ (nginx_proxy_tls_server_name | default(inventory_hostname, true)))
   if nginx_proxy_tls_certificate | default('') | length > 0 else 'http://127.0.0.1'
}}:{{ site_proxy_port }}/v1/chat/completions"""
    same(old, "{{ _maintenance_window_probe_url }}", **dict(MAINTENANCE, inventory_hostname="gw", **inventory))


@pytest.mark.parametrize("variables", [
    {"maintenance_window_startup_record": {"split": 131.0}},
    {"maintenance_window_startup_record": {"split": 131.0}, "__maintenance_window_startup_file": {"skipped": True}},
    {"maintenance_window_startup_record": {"split": 131.0, "split_gate": 150},
     "__maintenance_window_startup_file": {"content": "eyJyZXBsaWNhcyI6IDQ4LjUsICJzcGxpdCI6IDE0MC4wfQ=="}},
    {"maintenance_window_startup_record": {}, "__maintenance_window_startup_file": {"content": "eyJ6IjogMSwgImEiOiAyfQ=="}},
])
def test_startup_record(variables):
    old = """{{ (__maintenance_window_startup_file.content | default('e30=') | b64decode | from_json)
   | combine(maintenance_window_startup_record) | to_json }}"""
    new = ("{{ __maintenance_window_startup_file | default({})"
           " | factory_floor.llm.startup_record(maintenance_window_startup_record) | to_json }}")
    same(old, new, **variables)


TOOL_GATE = role_variables("tool_gate")


@pytest.mark.parametrize("variables", [
    dict(tool_gate_store_dir="/srv/gate", tool_gate_build={"id": "0123456789abcdef0123"}, __tool_gate_run={"suite_digest": "f" * 64}),
    dict(tool_gate_store_dir="/srv/gate dir/", tool_gate_build={"id": "short"}, __tool_gate_run={"suite_digest": "ab"},
         _tool_gate_id_chars=4),
    dict(tool_gate_store_dir="gate", tool_gate_build={"id": "9" * 64}, __tool_gate_run={"suite_digest": "e" * 64},
         _tool_gate_id_chars=64),
])
def test_tool_gate_record_file(variables):
    old = """{{ tool_gate_store_dir }}/{{ tool_gate_build.id[:_tool_gate_id_chars] }}.{{ \
__tool_gate_run.suite_digest[:_tool_gate_id_chars] }}.{{ inventory_hostname }}.json"""
    same(old, "{{ _tool_gate_record_file }}", **dict(TOOL_GATE, inventory_hostname="spark-a", **variables))


LONG = " ".join(["word%03d" % i for i in range(120)])


@pytest.mark.parametrize("variables", [
    {}, {"maintenance_window_host": {"reason": "tool gate failed on spark-b"}},
    {"maintenance_window_host": {}, "ansible_failed_result": {"msg": "the engine did not serve in 900 s"}},
    {"maintenance_window_host": {"reason": "x"}, "ansible_failed_result": {"msg": LONG}},
    {"ansible_failed_result": {"msg": LONG[:403]}}, {"ansible_failed_result": {"msg": LONG[:406]}},
    {"ansible_failed_result": {"msg": "y" * 500}},
])
def test_rollback_reason(variables):
    old = """{{ maintenance_window_host.reason | default('') }}; rollback failed on {{ inventory_hostname }}: \
{{ ansible_failed_result.msg | default('') | truncate(400) }}"""
    # Now the maintenance_note action's failure=switch_rollback (it reads the same three variables itself).
    noted = variables.get("maintenance_window_host", {})
    assert mw.failure_note("switch_rollback", "spark-a", noted, variables.get("ansible_failed_result", {})) == {
        "rollback_failed": True, "reason": render(old, inventory_hostname="spark-a", **variables)}
