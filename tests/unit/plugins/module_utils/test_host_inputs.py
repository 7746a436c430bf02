# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the switch_plan and site_status action plugins read from hostvars (``_host_inputs``)."""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _host_inputs as hi

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
                "tool_gate_incumbent": {"score": 91.0}},
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
        # A note set to null stays null (Jinja's default() replaces only what is not there).
        "notes": {"spark-a": {"failed": True}, "spark-b": None, "spark-c": {}},
        "records": {"spark-a": {"runs": "replicas"}, "spark-b": {}, "spark-c": {}},
    }


def test_a_switch_without_a_bar_or_an_incumbent():
    read = hi.switch_inputs(HOSTVARS, ["spark-b", "spark-a"], [], "")
    assert "min_score" not in read and read["gated"] is False and read["incumbent_score"] == {}
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
