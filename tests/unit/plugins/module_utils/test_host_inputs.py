# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the switch_plan and site_status action plugins read from hostvars (``_host_inputs``)."""

from __future__ import annotations

import copy
import json
import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _host_inputs as hi
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import run_playbook

HOSTVARS = {
    "spark-a": {
        "__vllm_switch_units": {"stdout_lines": ["active", "inactive"], "rc": 3},
        "__vllm_switch_records_seen": {"runs": "replicas"},
        "__vllm_switch_record_seen": {"runs": "split"},
        "maintenance_window_host": {"failed": True},
        "tool_gate_gated": True,
        "tool_gate_bar": {"min_score": 80.0},
        "topology": "split",
        "vllm_split_head": "spark-b",
        "vllm_status": {"reachable": True},
    },
    # A skipped read (no stdout_lines), a note set to null, the incumbent's score.
    "spark-b": {"__vllm_switch_units": {"skipped": True}, "maintenance_window_host": None,
                "tool_gate_incumbent": {"score": 91.0}, "tool_gate_known": {"known": True, "score": 94.4}},
    "proxy-1": {"nginx_proxy_drained": {"spark-b": "switch-to-replicas"}, "nginx_proxy_rotation": {"in_rotation": ["spark-a"]},
                "nginx_proxy_status": {"reachable": True}},
    "proxy-2": {"keepalived_status": {"address": "10.0.0.9"}},
}


def test_a_switch_reads_every_engine_and_proxy_host_in_order():
    read = hi.switch_inputs(HOSTVARS, ["spark-a", "spark-b", "spark-c"], ["proxy-1", "proxy-2"], "spark-b")
    assert read == {
        # spark-b's read was skipped, spark-c is not in the inventory: neither runs a unit.
        "units": {"spark-a": ["active", "inactive"], "spark-b": [], "spark-c": []},
        "drains": [{"spark-b": "switch-to-replicas"}, {}],
        "gated": True,
        "min_score": 80.0,
        "incumbent_score": {"score": 91.0},
        # The new build's stored score, looked up on the incumbent's host: when the gate runs.
        "known_build": {"known": True, "score": 94.4},
        # A note set to null stays null (Jinja's default() replaces only what is not there).
        "notes": {"spark-a": {"failed": True}, "spark-b": None, "spark-c": {}},
        "records": {"spark-a": {"runs": "replicas"}, "spark-b": {}, "spark-c": {}},
    }


def test_a_switch_without_a_bar_or_an_incumbent():
    read = hi.switch_inputs(HOSTVARS, ["spark-b", "spark-a"], [], "")
    assert "min_score" not in read and read["gated"] is False and read["incumbent_score"] == {}
    assert read["known_build"] == {}
    assert read["drains"] == []
    assert hi.switch_inputs(HOSTVARS, ["spark-a"], incumbent_host="spark-a")["incumbent_score"] == {}
    assert hi.switch_inputs(HOSTVARS, ["spark-a"], incumbent_host="gone")["incumbent_score"] == {}
    assert "min_score" not in hi.switch_inputs({"spark-a": {"tool_gate_bar": {"min_score": None}}}, ["spark-a"])
    assert hi.switch_inputs({}, [])["units"] == {}


def test_the_records_and_the_rotations():
    assert hi.record_inputs(HOSTVARS, ["spark-a", "spark-b"]) == {"records": {"spark-a": {"runs": "split"}, "spark-b": {}}}
    assert hi.restart_inputs(HOSTVARS, ["proxy-1", "proxy-2"]) == {"rotations": [{"in_rotation": ["spark-a"]}, {}]}


def test_the_site_status_reads_each_hosts_status_and_the_first_keepalived_status():
    read = hi.site_status_inputs(HOSTVARS, ["spark-a", "spark-b"], ["proxy-1", "proxy-2"])
    assert read == {"engines": {"spark-a": {"reachable": True}, "spark-b": {}},
                    "proxies": {"proxy-1": {"reachable": True}, "proxy-2": {}},
                    "inventory_topology": "split", "split_head": "spark-b",
                    "keepalived": {"address": "10.0.0.9"}}
    # Defaults: replicas, the first engine host as head, no floating address.
    read = hi.site_status_inputs(HOSTVARS, ["spark-b"], ["proxy-1"])
    assert (read["inventory_topology"], read["split_head"], "keepalived" in read) == ("replicas", "spark-b", False)
    # A keepalived_status set to null counts as set (Jinja's "defined").
    assert hi.site_status_inputs({"p": {"keepalived_status": None}}, [], ["p"]) == {
        "engines": {}, "proxies": {"p": {}}, "keepalived": None}


# --- a real run: the plugins and filters read Ansible's own hostvars (lazy, templated when read) -------------------

INVENTORY = {"all": {"vars": {"ansible_connection": "local"}, "children": {
    "gb10": {"hosts": {"spark-a": {"vllm_port": 8001, "topology": "split"},
                       "spark-b": {"metrics_address": "10.1.1.2"}}},
    "proxy": {"hosts": {"proxy-a": {}}}}}}

PLAY = """
- hosts: gb10
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        __vllm_switch_units: {stdout_lines: ["{{ 'active' }}", inactive]}
        tool_gate_gated: "{{ inventory_hostname == 'spark-a' }}"
        vllm_status: {reachable: true, error: "{{ inventory_hostname }}"}
        vllm_service_plan: {restart_pending: "{{ inventory_hostname == 'spark-b' }}", change: "image {{ inventory_hostname }}"}
- hosts: proxy
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        nginx_proxy_drained: {spark-b: "switch-to-{{ 'replicas' }}"}
- hosts: localhost
  gather_facts: false
  tasks:
    - factory_floor.llm.switch_plan:
        topology: replicas
        engines: "{{ groups['gb10'] }}"
        head: spark-a
        read_hosts: true
        proxies: "{{ groups['proxy'] }}"
      register: plan
    - factory_floor.llm.site_status:
        engine_hosts: "{{ groups['gb10'] }}"
        proxy_hosts: "{{ groups['proxy'] }}"
      register: status
    - factory_floor.llm.serving_engines:
        topology: replicas
      register: serving
    - ansible.builtin.copy:
        dest: %s
        mode: "0644"
        content: >-
          {{ {'plan': plan, 'status': status,
              'engines': serving.engines,
              'restart': groups['gb10'] | factory_floor.llm.restart_announcement(hostvars)} | to_json }}
"""


def test_a_run_reads_each_hosts_facts_as_ansible_holds_them(tmp_path):
    out = tmp_path / "out.json"
    inventory = copy.deepcopy(INVENTORY)
    inventory["all"]["vars"]["ansible_python_interpreter"] = sys.executable
    done = run_playbook(tmp_path, inventory, PLAY % out)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(out.read_text())
    plan = seen["plan"]
    # Already on replicas (both run it), spark-b drained by an interrupted switch: healed, gated (spark-a's fact).
    assert (plan["on_target"], plan["heal_hosts"], plan["gated"]) == (True, ["spark-b"], True)
    assert plan["announcement"].startswith("Already on replicas, but spark-b is still drained")
    assert seen["status"]["table"][1] == "topology: the hosts run none (no topology record); the inventory says split"
    assert seen["engines"] == [{"name": "spark-a", "address": "spark-a", "port": 8001, "url": "http://spark-a:8001"},
                               {"name": "spark-b", "address": "10.1.1.2", "port": 8000, "url": "http://10.1.1.2:8000"}]
    assert seen["restart"].startswith("Configuration changed on spark-b (image spark-b). ")


# switch_model.yml's arguments before the switch_plan action plugin read them (read_hosts, procedure upgrade).
OLD_UPGRADE = {
    "incumbents": "{{ dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars)"
                  " | map(attribute='tool_gate_incumbent', default={}))) }}",
    "notes": "{{ dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars)"
             " | map(attribute='maintenance_window_host', default={}))) }}",
    "min_score": """{{ groups['gb10'] | map('extract', hostvars) | selectattr('tool_gate_bar', 'defined') | map(attribute='tool_gate_bar')
             | map(attribute='min_score') | first | default(omit) }}""",
}
OMITTED = "<omitted>"


def old_upgrade_inputs(hostvars, engines):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables={"groups": {"gb10": engines}, "hostvars": hostvars, "omit": OMITTED})
    rendered = {key: templar.template(trust_as_template(text)) for key, text in OLD_UPGRADE.items()}
    if rendered["min_score"] == OMITTED:
        del rendered["min_score"]
    return rendered


@pytest.mark.parametrize("hostvars", [
    HOSTVARS,
    {"spark-a": {}, "spark-b": {}},
    # The first engine host without a bar, the second with one; a bar of 0; a bar without min_score; a null score.
    {"spark-a": {"maintenance_window_host": {"events": []}}, "spark-b": {"tool_gate_bar": {"min_score": 0}}},
    {"spark-a": {"tool_gate_bar": {"min_score": 72.5}}, "spark-b": {"tool_gate_bar": {"min_score": 99.0}}},
    {"spark-a": {"tool_gate_bar": {}}, "spark-b": {"tool_gate_bar": {"min_score": 99.0}}},
    {"spark-a": {"tool_gate_bar": {"min_score": None}}, "spark-b": {"tool_gate_incumbent": None}},
])
def test_a_model_upgrade_reads_what_switch_model_yml_read(hostvars):
    engines = ["spark-a", "spark-b"]
    assert hi.upgrade_inputs(hostvars, engines) == old_upgrade_inputs(hostvars, engines)


def test_a_model_upgrade_reads_the_first_bar_held():
    read = hi.upgrade_inputs(HOSTVARS, ["spark-b", "spark-a"])
    assert read == {"incumbents": {"spark-b": {"score": 91.0}, "spark-a": {}},
                    "notes": {"spark-b": None, "spark-a": {"failed": True}}, "min_score": 80.0}
    assert hi.upgrade_inputs(HOSTVARS, []) == {"incumbents": {}, "notes": {}}


# site_check.yml's report task before the site_check_report filter read hostvars itself (its vars and arguments).
OLD_SITE_CHECK_VARS = {
    "__all": "{{ (groups['gb10'] + groups['proxy'] | default([])) | unique }}",
    "__hosts": "{{ __all | map('extract', hostvars) | selectattr('site_check', 'defined')"
               " | map(attribute='inventory_hostname') | list }}",
    "__engines": "{{ __hosts | select('in', groups['gb10']) | list }}",
}
OLD_SITE_CHECK = {
    "records": "{{ dict(__hosts | zip(__hosts | map('extract', hostvars) | map(attribute='site_check'))) }}",
    "manifests": """{{ dict(__engines | zip(__engines | map('extract', hostvars)
                                                | map(attribute='__site_check_manifest', default={}))) }}""",
    "link": """{{ dict(__engines | zip(__engines | map('extract', hostvars)
                                           | map(attribute='__vllm_split_link_seen', default={}))) }}""",
    "mtu": "{{ (hostvars[__engines[0]].vllm_link_mtu | default(none)) if __engines else none }}",
    "runtime": "{{ (hostvars[__engines[0]].vllm_runtime | default('container')) if __engines else 'container' }}",
}


# The groups each host's site_check record held (site_check.yml's third play) before the report filed them itself.
OLD_SITE_CHECK_GROUPS = """{{ (['engine'] if inventory_hostname in groups['gb10'] else [])
               + (['proxy'] if inventory_hostname in groups['proxy'] | default([]) else []) }}"""


# ... and the facts and site_host_info's result it noted on each host that got as far (the runtime part stays).
OLD_SITE_CHECK_READ = """{{ site_check | combine({
               'facts': {'distribution': ansible_facts.distribution | default(''),
                         'distribution_version': ansible_facts.distribution_version | default(''),
                         'architecture': ansible_facts.architecture | default(''),
                         'virtualization': __site_check_info.virtualization},
               'info': __site_check_info}) }}"""


def old_site_check_inputs(hostvars, groups):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def old_groups(host):
        templar = Templar(loader=DataLoader(), variables={"groups": groups, "inventory_hostname": host})
        return templar.template(trust_as_template(OLD_SITE_CHECK_GROUPS))

    hostvars = {host: dict(values, inventory_hostname=host) for host, values in hostvars.items()}
    for host, values in hostvars.items():
        if "site_check" in values:
            values["site_check"] = dict({"groups": old_groups(host)}, **values["site_check"])
        if "__site_check_info" in values:
            templar = Templar(loader=DataLoader(), variables=values)
            values["site_check"] = templar.template(trust_as_template(OLD_SITE_CHECK_READ))
    variables = {"groups": groups, "hostvars": hostvars}
    variables.update({key: trust_as_template(text) for key, text in OLD_SITE_CHECK_VARS.items()})
    templar = Templar(loader=DataLoader(), variables=variables)
    return {key: templar.template(trust_as_template(text)) for key, text in OLD_SITE_CHECK.items()}


INFO = {"time": {"ntp_synchronized": True}, "virtualization": "podman", "units": {}, "ports": []}
SITE_HOSTVARS = {
    "spark-a": {"site_check": {"reach": {"ok": True}, "runtime": {"runtime": "container"}},
                "__site_check_manifest": {"files": 3}, "vllm_link_mtu": 9000,
                "vllm_runtime": "container", "__vllm_split_link_seen": {"interface": "enp1"},
                "__site_check_info": INFO,
                "ansible_facts": {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "aarch64"}},
    "spark-b": {"site_check": {"reach": {"ok": False}}, "vllm_link_mtu": None, "vllm_runtime": "pip"},
    "spark-c": {"vllm_runtime": "pip"},
    # Facts without the OS's version, a null architecture; no facts at all.
    "proxy-1": {"site_check": {"groups": ["proxy"]}, "__site_check_info": dict(INFO, virtualization="none"),
                "ansible_facts": {"distribution": "Debian", "architecture": None}},
    "spark-d": {"site_check": {"reach": {"ok": True}}, "__site_check_info": INFO},
    "both-1": {"site_check": {"groups": ["engine", "proxy"]}, "vllm_runtime": "pip"},
}


@pytest.mark.parametrize("groups", [
    {"gb10": ["spark-a", "spark-b", "spark-c"], "proxy": ["proxy-1"]},
    {"gb10": ["spark-d", "spark-a"], "proxy": ["proxy-1"]},
    # No proxy group; the first engine host without a record; a host in both groups; no record at all.
    {"gb10": ["spark-c", "spark-b", "spark-a"]},
    {"gb10": ["both-1", "spark-a"], "proxy": ["proxy-1", "both-1"]},
    {"gb10": ["spark-c"], "proxy": []},
    {"gb10": [], "proxy": ["proxy-1"]},
])
def test_the_site_check_report_reads_what_site_check_yml_read(groups):
    read = hi.site_check_inputs(SITE_HOSTVARS, groups["gb10"], groups.get("proxy", []))
    hostvars = {host: SITE_HOSTVARS[host] for host in groups["gb10"] + groups.get("proxy", [])}
    assert read == old_site_check_inputs(hostvars, groups)
    assert list(read["records"]) == list(old_site_check_inputs(hostvars, groups)["records"])


def test_the_notes_are_read_from_ansible_facts_first():
    hostvars = {"spark-a": {"ansible_facts": {"maintenance_window_host": {"failed": True}},
                            "maintenance_window_host": {"events": {"stale": 1.0}}},
                "spark-b": {"ansible_facts": {}, "maintenance_window_host": None}}
    assert hi.switch_inputs(hostvars, ["spark-a", "spark-b", "spark-c"])["notes"] == {
        "spark-a": {"failed": True}, "spark-b": None, "spark-c": {}}
    assert hi.upgrade_inputs(hostvars, ["spark-a"])["notes"] == {"spark-a": {"failed": True}}
