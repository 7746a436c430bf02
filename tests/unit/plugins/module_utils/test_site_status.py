# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_site_status``: one view of the site from what each host's status entry points read.

The observations are shaped as the roles register them (systemctl show text, the modules'
results, the daemons' status files as text); their figures are the lab's after a switch
to replicas.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _site_status as site
from ansible_collections.factory_floor.llm.plugins.module_utils._host import keepalived as ka

NOW = 1796158800.0  # 2026-12-01 21:00:00 UTC
IMAGE = "sha256:" + "ab12cd34ef56" + "0" * 52


def show(*units):
    """systemctl show text of (name, active, sub[, file state]) units."""
    blocks = []
    for unit in units:
        name, active, sub = unit[:3]
        load = "not-found" if active == "missing" else "loaded"
        blocks.append("Id=%s\nLoadState=%s\nActiveState=%s\nSubState=%s\nResult=success\nUnitFileState=%s\nNRestarts=0" % (
            name, load, "inactive" if active == "missing" else active, "dead" if active == "missing" else sub,
            unit[3] if len(unit) > 3 else "enabled"))
    return "\n\n".join(blocks) + "\n"


def watchdog_status(verdict="healthy", used=0, gave_up=None, updated=NOW - 12):
    return json.dumps({"verdict": verdict, "reason": "tokens moved", "updated": updated, "gave_up": gave_up,
                       "budget": {"max_restarts": 3, "restart_window": 3600, "used": used, "allowed_now": used < 3}})


def engine(host, topology="replicas", serving=True, lock=None, others=(), watchdog=None, memory=None):
    unit = "vllm-%s.service" % ("replica" if topology == "replicas" else "split")
    other = "vllm-split.service" if topology == "replicas" else "vllm-replica.service"
    return {
        "host": host, "reachable": True, "runtime": "container",
        "units": show((unit, "active", "running"), (other, "inactive", "dead", "disabled")),
        "record": {"state": "agrees" if topology == "replicas" else "differs", "recorded": topology, "message": "",
                   "record": {"topology": topology, "since": NOW - 600, "by": "ops@ctl",
                              "playbook": "switch-to-%s.yml" % topology, "run": "20261201T210000Z-3f9a1c"}},
        "health": ({"status": "serving", "error": None, "models": ["lab-chat"], "version": "0.32.0"} if serving else
                   {"status": "loading", "error": "GET http://127.0.0.1:8000/health: connection refused", "models": []}),
        "engine": [{"item": unit, "running": True, "main_pid": 812,
                    "args_now": ["/opt/models/SmolLM2-135M-Instruct", "--served-model-name lab-chat",
                                 "--gpu-memory-utilization 0.74", "--tool-call-parser xlam"]},
                   {"item": other, "running": False, "main_pid": 0, "args_now": []}],
        "containers": {unit[:-8]: {"exists": True, "running": True, "image_id": IMAGE}},
        "watchdog": watchdog or {"units": show(("vllm-replica-watchdog.service", "active", "running"),
                                               ("vllm-split-watchdog.service", "inactive", "dead", "disabled")),
                                 "status": {"vllm-replica-watchdog.service": watchdog_status(),
                                            "vllm-split-watchdog.service": ""}},
        "memory": memory or {"enabled": True, "unit": show(("factory-floor-memory-guard.service", "missing", "")),
                             "watch": "", "share": {"gpu_memory_utilization": 0.74, "hosts": [
                                 {"mem_available_gib": 30.5, "floor_gib": 2.0, "spare_gib": 3.1}]}},
        "lock": lock or {"state": "free", "lock": None, "holder": None},
        "peers": {"peers": [{"address": "10.89.7.20", "class": "allowed", "connections": 2}]
                  + [{"address": a, "class": "other", "connections": 1} for a in others], "others": list(others)},
    }


def proxy(in_rotation=("spark-a", "spark-b"), drained=(), updated=NOW - 2):
    return {"host": "gateway", "reachable": True,
            "rotation": {"mode": "live", "members": ["spark-a", "spark-b"], "in_rotation": list(in_rotation),
                         "drained": list(drained), "statuses": {"spark-a": "serving", "spark-b": "serving"},
                         "updated": updated},
            "checker": show(("factory-floor-upstream.service", "active", "running"), ("nginx.service", "active", "running"))}


GATE = {"spark-a": {"host": "spark-a", "role": "candidate", "passed": True, "score": 38.9, "measured_at": "2026-12-01T21:05:00Z",
                    "build_id": "b" * 64, "build": {"model_path": "/opt/models/SmolLM2-135M-Instruct", "tool_call_parser": "xlam",
                                                    "image": {"id": IMAGE}}}}


def view(engines=None, proxies=None, inventory="replicas", gate=None, floating=None, keepalived=None):
    engines = engines if engines is not None else {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")}
    proxies = proxies if proxies is not None else {"gateway": proxy()}
    return site.build(engines, proxies, inventory, gate=gate if gate is not None else GATE, floating=floating, now=NOW,
                      keepalived=keepalived)


def test_after_a_switch_to_replicas_both_serve_in_rotation_with_their_gate_score():
    result = view()
    assert result["topology"]["running"] == "replicas" and result["topology"]["agrees"]
    a, b = result["engines"]
    assert (a["host"], a["unit"], a["unit_state"], a["serving"]) == ("spark-a", "vllm-replica.service", "active (running)",
                                                                     "serving")
    assert a["rotation"] == {"gateway": "in"} and b["rotation"] == {"gateway": "in"}
    assert a["served_model"] == "lab-chat" and a["model"] == "/opt/models/SmolLM2-135M-Instruct"
    assert a["image_id"] == IMAGE and a["vllm_version"] == "0.32.0" and a["gpu_memory_utilization"] == "0.74"
    assert a["gate"]["score"] == 38.9 and a["gate"]["verdict"] == "passed" and a["gate"]["running_build"] is True
    assert b["gate"] is None
    assert result["attention"] == []


def test_the_table_reads_topology_engines_gate_watchdogs_memory_locks_peers_proxies():
    result = view()
    lines = site.table(result, NOW)
    text = "\n".join(lines)
    assert lines[0] == "Factory Floor status, 2026-12-01 21:00:00 UTC"
    assert lines[1].startswith("topology: the hosts run replicas (recorded replicas: switch-to-replicas.yml by ops@ctl, "
                               "2026-12-01 20:50 UTC (10 min ago)); the inventory says replicas")
    engine_lines = [line for line in lines if line.startswith("  spark-a  vllm-replica.service")]
    assert len(engine_lines) == 1
    assert "gateway: in" in engine_lines[0] and "38.9 passed 2026-12-01T21:05:00Z, this build" in engine_lines[0]
    assert "vLLM 0.32.0, image ab12cd34ef56" in engine_lines[0]
    assert re.search(r"spark-a +vllm-replica-watchdog.service +active \(running\) +healthy \(2026-12-01 20:59 UTC "
                     r"\(12 s ago\)\) +3 of 3 in 3600 s", text)
    assert re.search(r"spark-a +vllm-split-watchdog.service +inactive \(dead\), disabled +none \(no status file\) +-", text)
    assert re.search(r"spark-a +0.74 +0.74 +30.5 GiB +2.0 GiB +28.5 GiB +gpu_memory_utilization", text)
    assert "  spark-a: free" in text and "  spark-b: allowed 2" in text
    assert ("gateway: nginx active (running), checker active (running), state 2026-12-01 20:59 UTC (2 s ago); "
            "in rotation: spark-a, spark-b") in text
    assert "floating proxy address: none configured" in text
    assert lines[-1] == "attention: none"


def test_a_held_lock_is_named_with_its_holder():
    lock = {"state": "held", "lock": {"holder": "molecule-status"},
            "holder": "molecule-status (run r1, by lab@ctl), since 2026-12-01 20:59:00 UTC (60 s ago); expires ..."}
    result = view(engines={"spark-a": engine("spark-a", lock=lock), "spark-b": engine("spark-b")})
    assert result["locks"][0]["state"] == "held" and result["locks"][0]["holder"].startswith("molecule-status")
    text = "\n".join(site.table(result, NOW))
    assert "  spark-a: held, molecule-status (run r1, by lab@ctl)" in text
    assert "spark-a: maintenance lock held by molecule-status (run r1" in text


def test_an_unreachable_host_shows_as_such_and_the_rest_is_read():
    result = view(engines={"spark-a": engine("spark-a"),
                           "spark-b": {"host": "spark-b", "reachable": False, "error": "ssh: connect to host 10.89.7.11 port 22"},
                           "spark-c": None})
    assert [e["host"] for e in result["engines"]] == ["spark-a"]
    assert [u["host"] for u in result["not_read"]] == ["spark-b", "spark-c"]
    assert "spark-b could not be read: ssh: connect to host 10.89.7.11 port 22" in result["attention"]
    lines = site.table(result, NOW)
    rows = [line.split()[0] for line in lines[lines.index("engines:") + 2:lines.index("engines:") + 5]]
    assert rows == ["spark-a", "spark-b", "spark-c"]
    assert any(line.startswith("  spark-b ") and line.endswith("could not be read (see attention)") for line in lines)
    assert "  - spark-c could not be read: not read (no observation from this host)" in lines


def test_an_engine_that_serves_but_is_not_in_rotation_needs_attention():
    result = view(proxies={"gateway": proxy(in_rotation=["spark-a"], drained=["spark-b"])})
    assert result["engines"][1]["rotation"] == {"gateway": "drained"}
    assert "spark-b serves but is drained on gateway" in result["attention"]


def test_an_engine_unit_that_runs_but_does_not_serve_needs_attention():
    result = view(engines={"spark-a": engine("spark-a", serving=False), "spark-b": engine("spark-b")})
    assert result["engines"][0]["serving"].startswith("loading (GET http://127.0.0.1:8000/health: connection refused")
    assert result["attention"][0].startswith("spark-a: vllm-replica.service is active (running) but does not serve")


def test_hosts_that_record_another_topology_than_the_inventory():
    engines = {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")}
    engines["spark-a"]["record"]["message"] = "This host is on replicas, not split: ... change the inventory line"
    result = view(engines=engines, inventory="split")
    assert not result["topology"]["agrees"] and result["topology"]["advice"].startswith("This host is on replicas")
    assert "topology: the hosts run replicas (recorded replicas), the inventory says split" in result["attention"]
    assert " - DIFFERS" in site.table(result, NOW)[1]


def test_a_record_that_is_not_what_runs_is_named():
    # Issue 33, item 2: after a half-failed switch spark-a recorded split, spark-b replicas; both ran replicas.
    engines = {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")}
    engines["spark-a"]["record"]["record"]["topology"] = "split"
    result = view(engines=engines)
    assert result["topology"]["disagreements"] == ["spark-a records split but runs replicas",
                                                   "the hosts' records differ: spark-a split, spark-b replicas"]
    assert "topology records: spark-a records split but runs replicas" in result["attention"]
    assert "topology records: the hosts' records differ: spark-a split, spark-b replicas" in result["attention"]
    assert view()["topology"]["disagreements"] == []


def test_the_split_head_serves_and_rank_1_is_headless():
    engines = {"spark-a": engine("spark-a", "split"), "spark-b": engine("spark-b", "split")}
    result = site.build(engines, {"gateway": proxy(in_rotation=["spark-a"])}, "split", split_head="spark-a", now=NOW)
    head, rank1 = result["engines"]
    assert head["unit"] == "vllm-split.service" and head["api"] and head["rotation"] == {"gateway": "in"}
    assert not rank1["api"] and rank1["serving"] == "headless rank (the split's rank 1)" and rank1["rotation"] == {}
    assert result["topology"]["running"] == "split" and result["attention"] == []


@pytest.mark.parametrize("head, ranks", [("spark-a", [None, 1, 2, 3]), ("spark-c", [1, 2, None, 3])])
def test_a_split_over_four_names_each_headless_ranks_number(head, ranks):
    names = ["spark-a", "spark-b", "spark-c", "spark-d"]
    engines = {name: engine(name, "split") for name in names}
    result = site.build(engines, {"gateway": proxy(in_rotation=[head])}, "split", split_head=head, now=NOW)
    assert [row["serving"] if not row["api"] else None for row in result["engines"]] == [
        None if rank is None else "headless rank (the split's rank %d)" % rank for rank in ranks]
    assert [row["host"] for row in result["engines"] if row["api"]] == [head]


def test_both_topologies_running_is_named():
    engines = {"spark-a": engine("spark-a"), "spark-b": engine("spark-b", "split")}
    assert view(engines=engines)["topology"]["running"] == "both (replicas and split)"


def test_a_watchdog_that_gave_up_or_has_no_restart_left_needs_attention():
    gave_up = {"units": show(("vllm-replica-watchdog.service", "active", "running")),
               "status": {"vllm-replica-watchdog.service": watchdog_status("dead", used=3,
                                                                           gave_up={"why": "restart budget exhausted"})}}
    tired = {"units": show(("vllm-replica-watchdog.service", "active", "running")),
             "status": {"vllm-replica-watchdog.service": watchdog_status("healthy", used=3)}}
    result = view(engines={"spark-a": engine("spark-a", watchdog=gave_up), "spark-b": engine("spark-b", watchdog=tired)})
    assert result["watchdogs"][0]["restarts_left"] == 0 and result["watchdogs"][0]["gave_up"] == "restart budget exhausted"
    assert "spark-a: vllm-replica-watchdog.service gave up: restart budget exhausted" in result["attention"]
    assert "spark-b: vllm-replica-watchdog.service has no restart left in its budget" in result["attention"]


def test_a_watchdog_status_that_stopped_moving_is_stale():
    stale = {"units": show(("vllm-replica-watchdog.service", "active", "running")),
             "status": {"vllm-replica-watchdog.service": watchdog_status(updated=NOW - 900)}}
    result = view(engines={"spark-a": engine("spark-a", watchdog=stale), "spark-b": engine("spark-b")})
    assert result["watchdogs"][0]["stale"]
    assert any("has not written its verdict since" in item for item in result["attention"])


def test_the_other_topologys_stopped_watchdog_is_not_stale():
    # After a switch to replicas the split's watchdog is disabled and stopped; its last verdict stays old.
    switched = {"units": show(("vllm-replica-watchdog.service", "active", "running"),
                              ("vllm-split-watchdog.service", "inactive", "dead")),
                "status": {"vllm-replica-watchdog.service": watchdog_status(),
                           "vllm-split-watchdog.service": watchdog_status(updated=NOW - 900)}}
    result = view(engines={"spark-a": engine("spark-a", watchdog=switched), "spark-b": engine("spark-b")})
    assert [wd["stale"] for wd in result["watchdogs"]
            if (wd["host"], wd["unit"]) == ("spark-a", "vllm-split-watchdog.service")] == [False]
    assert not any("has not written its verdict since" in item for item in result["attention"])


def test_memory_from_the_guards_watch_and_below_the_floor():
    memory = {"enabled": True, "unit": show(("factory-floor-memory-guard.service", "active", "running")),
              "watch": json.dumps({"mem_available_gib": 1.5, "floor_gib": 2.0, "below_floor": True,
                                   "workloads": [{"name": "site build", "state": "paused", "used_gib": 6.1, "peak_gib": 6.0}]}),
              "share": {"failed": True, "msg": "the model does not fit: 71.2 GiB of weights ..."}}
    result = view(engines={"spark-a": engine("spark-a", memory=memory), "spark-b": engine("spark-b")})
    m = result["memory"][0]
    assert (m["mem_available_gib"], m["floor_gib"], m["headroom_gib"], m["below_floor"]) == (1.5, 2.0, -0.5, True)
    assert m["share_largest_safe"] is None and m["share_error"].startswith("the model does not fit")
    assert m["source"] == "memory guard watch" and m["workloads"][0]["state"] == "paused"
    assert "spark-a: MemAvailable is below the memory guard's floor" in result["attention"]
    text = "\n".join(site.table(result, NOW))
    assert "-0.5 GiB BELOW FLOOR" in text and "- (below)" in text
    assert "  spark-a: the largest safe share was not computed: the model does not fit: 71.2 GiB" in text


def test_the_memory_guard_off():
    result = view(engines={"spark-a": engine("spark-a", memory={"enabled": False}), "spark-b": engine("spark-b")})
    assert result["memory"][0] == {"host": "spark-a", "enabled": False}
    assert "spark-a  memory guard off (memory_guard_enabled: false)" in "\n".join(site.table(result, NOW))


def test_clients_that_bypass_the_proxy():
    result = view(engines={"spark-a": engine("spark-a", others=["10.89.7.99"]), "spark-b": engine("spark-b")})
    assert result["peers"][0]["bypassing"] == ["10.89.7.99"] and result["peers"][0]["counts"] == {"allowed": 2, "other": 1}
    assert "spark-a: clients bypass the proxy: 10.89.7.99" in result["attention"]
    assert "BYPASSING THE PROXY: 10.89.7.99" in "\n".join(site.table(result, NOW))


def test_failed_reads_show_their_reason():
    engines = {"spark-a": engine("spark-a"), "spark-b": engine("spark-b")}
    engines["spark-a"]["peers"] = {"failed": True, "msg": "ss: command not found"}
    engines["spark-a"]["lock"] = {"failed": True, "msg": "Permission denied"}
    engines["spark-a"]["health"] = {"failed": True, "msg": "missing requests"}
    result = view(engines=engines)
    assert result["peers"][0]["error"] == "ss: command not found"
    assert result["locks"][0] == {"host": "spark-a", "state": "unknown", "holder": None, "error": "Permission denied",
                                  "lock": None}
    assert result["engines"][0]["serving"] == "not probed: missing requests"


def test_proxies_unreachable_stale_or_empty():
    proxies = {"gateway": {"host": "gateway", "reachable": False, "error": "timed out"},
               "gateway-2": proxy(updated=NOW - 600), "gateway-3": None,
               "gateway-4": proxy(in_rotation=[])}
    result = view(proxies=proxies)
    assert result["engines"][0]["rotation"] == {"gateway": "unknown (proxy unreachable)", "gateway-2": "in",
                                                "gateway-3": "unknown (proxy unreachable)", "gateway-4": "out (serving)"}
    attention = "\n".join(result["attention"])
    assert "proxy gateway could not be read: timed out" in attention
    assert "proxy gateway-2: the membership checker's state is from" in attention
    assert "proxy gateway-4 has no engine in its rotation" in attention


def test_a_gate_record_of_another_build_says_so():
    gate = {"spark-a": dict(GATE["spark-a"], build={"model_path": "/opt/models/old", "tool_call_parser": "xlam"}),
            "spark-b": dict(GATE["spark-a"], host="spark-b", passed=False, score=0.0)}
    result = view(gate=gate)
    assert result["engines"][0]["gate"]["running_build"] is False
    assert "another build (/opt/models/old)" in "\n".join(site.table(result, NOW))
    assert "spark-b: the last tool-calling gate here failed (0.0, 2026-12-01T21:05:00Z)" in result["attention"]


def test_floating_addresses_have_their_row():
    result = view(floating=[{"name": "proxy", "address": "10.89.7.30", "holder": "gateway", "state": "MASTER"}])
    assert "floating proxy address: proxy 10.89.7.30 on gateway (MASTER)" in site.table(result, NOW)


def keepalived(holders):
    """The keepalived role's keepalived_status (_keepalived.summarize) for two proxy hosts, spark-a and spark-b."""
    statuses = {name: {"holds_address": name in holders, "vrrp_state": "MASTER" if name in holders else "BACKUP",
                       "vrrp_state_current": True, "service_state": "active"} for name in ("spark-a", "spark-b")}
    return ka.summarize(statuses, "10.89.7.100/24")


def test_the_floating_address_names_its_holder_and_each_proxys_vrrp_state():
    result = view(keepalived=keepalived(["spark-b"]))
    assert ("floating proxy address: keepalived 10.89.7.100 on spark-b (spark-a BACKUP; spark-b MASTER)"
            in site.table(result, NOW))
    assert result["floating_addresses"][0]["holder"] == "spark-b" and result["floating_addresses"][0]["ok"] is True
    assert result["attention"] == []


@pytest.mark.parametrize("holders, words, attention", [
    ([], "on nobody (NO HOLDER; spark-a BACKUP; spark-b BACKUP)", "No proxy holds the floating address 10.89.7.100"),
    (["spark-a", "spark-b"], "on spark-a and spark-b (TWO HOLDERS; spark-a MASTER; spark-b MASTER)",
     "spark-a and spark-b hold the floating address 10.89.7.100 at once"),
])
def test_no_holder_or_two_holders_need_attention(holders, words, attention):
    result = view(keepalived=keepalived(holders))
    assert "floating proxy address: keepalived 10.89.7.100 " + words in site.table(result, NOW)
    assert [item for item in result["attention"] if item.startswith("floating address: " + attention)]


def test_without_a_floating_address_none_is_configured():
    # One proxy host: the keepalived role does not run, status.yml passes no keepalived_status.
    assert "floating proxy address: none configured" in site.table(view(keepalived=None), NOW)


def _record(directory, name, record, mtime):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.utime(path, (mtime, mtime))
    return path


def test_read_gate_records_takes_each_hosts_newest_passing_or_failed(tmp_path):
    (tmp_path / "failed").mkdir()
    _record(str(tmp_path), "aaaa.dddd.spark-a.json", {"host": "spark-a", "score": 38.9, "passed": True}, NOW - 300)
    failed = _record(str(tmp_path / "failed"), "bbbb.dddd.spark-a.20261201T210000Z.json",
                     {"host": "spark-a", "score": 0.0, "passed": False}, NOW - 100)
    _record(str(tmp_path), "aaaa.dddd.spark-b.json", {"host": "spark-b", "score": 33.3}, NOW - 50)
    _record(str(tmp_path), "aaaa.dddd.spark-b.example.com.json", {"host": "spark-b.example.com", "score": 1.0}, NOW)
    (tmp_path / "broken.spark-c.json").write_text("{")
    found = site.read_gate_records(str(tmp_path), ["spark-a", "spark-b", "spark-c"])
    assert found["spark-a"]["score"] == 0.0 and found["spark-a"]["file"] == failed
    assert found["spark-b"]["score"] == 33.3 and "spark-c" not in found


def test_read_gate_records_without_a_store(tmp_path):
    assert site.read_gate_records(str(tmp_path / "none"), ["spark-a"]) == {}
    assert site.read_gate_records("", ["spark-a"]) == {}


@pytest.mark.parametrize("args, flag, value", [
    (["/m", "--gpu-memory-utilization 0.74"], "--gpu-memory-utilization", "0.74"),
    (["/m", "--enforce-eager"], "--enforce-eager", True),
    (["/m"], "--tool-call-parser", None),
    (None, "--x", None),
])
def test_arg_value(args, flag, value):
    assert site.arg_value(args, flag) == value


def test_parse_units_and_words():
    units = site.parse_units(show(("a.service", "active", "running"), ("b.service", "missing", ""),
                                  ("c.service", "inactive", "dead", "disabled")))
    assert site.unit_words(units["a.service"]) == "active (running)"
    assert site.unit_words(units["b.service"]) == "not installed"
    assert site.unit_words(units["c.service"]) == "inactive (dead), disabled"
    assert site.unit_words(None) == "unknown" and units["a.service"]["n_restarts"] == 0


def test_columns_align():
    assert site.columns([["A", "BB", "C"], ["long", "x", "yyy"], ["z"]]) == ["A     BB  C", "long  x   yyy", "z"]


def test_a_proxy_whose_nginx_is_down_or_not_reloading_needs_attention():
    """Seen: nginx's master stopped from outside, nginx.service inactive (dead), the checker failing its reload
    every second; the status view showed the checker running and nothing else."""
    down = proxy(in_rotation=[])
    down["checker"] = show(("factory-floor-upstream.service", "active", "running"), ("nginx.service", "inactive", "dead"))
    down["rotation"]["nginx"] = {"up": False, "reload_failures": 42, "io_error": None}
    full = proxy()
    full["host"] = "gateway-2"
    full["checker"] = show(("factory-floor-upstream.service", "active", "running"), ("nginx.service", "active", "running"))
    full["checker"] = full["checker"].replace("NRestarts=0", "NRestarts=3", 2)
    full["rotation"]["nginx"] = {"up": True, "reload_failures": 0,
                                 "io_error": "/etc/nginx/factory-floor-upstream.conf: No space left on device"}
    result = view(proxies={"gateway": down, "gateway-2": full})
    attention = result["attention"]
    assert ("proxy gateway: nginx.service is inactive (dead): this proxy answers nothing (systemctl status nginx.service)"
            in attention)
    assert any(line.startswith("proxy gateway: nginx has not loaded the membership checker's upstream for 42 passes")
               for line in attention)
    assert ("proxy gateway-2: the membership checker cannot write its files: "
            "/etc/nginx/factory-floor-upstream.conf: No space left on device") in attention
    assert not any(line.startswith("proxy gateway-2: nginx") for line in attention)
    text = "\n".join(site.table(result, NOW))
    assert "gateway: nginx inactive (dead), checker active (running)" in text
    assert "gateway-2: nginx active (running), restarted 3 times, checker active (running)" in text


def test_a_checker_that_found_nginx_down_is_named_without_the_unit_read():
    stopped = proxy()
    stopped["rotation"]["nginx"] = {"up": False, "reload_failures": 0, "io_error": None}
    result = view(proxies={"gateway": stopped})
    assert ("proxy gateway: the membership checker found nginx's master not running at its last pass"
            in result["attention"])
    # A healthy proxy: nothing about nginx.
    assert not [line for line in view()["attention"] if "nginx" in line]
