# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The site check's verdict (issue 35): every check judged, one line per host, the lines to paste."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.action.layout_check import inventory_errors, load_specs
from ansible_collections.factory_floor.llm.plugins.filter.site_check_report import site_check_report
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_check as sc
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr

LAB_FACTS = {"distribution": "Debian", "distribution_version": "12", "architecture": "x86_64", "virtualization": "podman"}
GB10_FACTS = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "aarch64", "virtualization": "none"}
SYNCED = {"time": {"ntp_synchronized": True, "services": ["systemd-timesyncd.service"]},
          "units": {"docker.service": {"load_state": "loaded", "active_state": "active"}}, "ports": []}
IMAGE = {"ok": True, "image": {"present": True, "ref": "vllm-gb10:0.32.0", "id": "sha256:" + "a" * 64,
                               "architecture": "arm64"}}
MEMORY = {"ok": True, "enabled": True,
          "model": {"weights_gib": 23.67, "weights_source": "11 checkpoint file(s) in /m / 2 ranks",
                    "min_kv_gib": 6.0, "min_kv_source": "config.json in /m: one full-context request of 262,144 tokens"},
          "plan": {"gpu_memory_utilization": 0.74, "reasoning": ["host spark-1: MemTotal 121.70 GiB"]}}


def engine(**over):
    record = {"groups": ["engine"], "reach": {"ok": True}, "facts": GB10_FACTS, "info": SYNCED,
              "runtime": {"runtime": "container", "engine": "docker", "gpus": "all"},
              "gpu": {"rc": 0, "stdout": "GPU 0: NVIDIA GB10 (UUID: GPU-1)\n"}, "image": IMAGE, "memory": MEMORY}
    record.update(over)
    return record


def test_two_ready_sparks_are_ok_and_say_what_was_found():
    out = sc.report({"spark-1": engine(), "spark-2": engine()})
    assert out["ok"]
    line = out["message"].splitlines()[1]
    assert line.startswith("spark-1: ok (")
    assert "Ubuntu 24.04 aarch64 (DGX OS's base" in line and "a container sees the GPU (GPU 0: NVIDIA GB10" in line
    assert "gpu_memory_utilization 0.74" in line


def test_the_lab_reports_its_os_and_the_gpu_as_not_applicable_by_inventory():
    lab = engine(facts=LAB_FACTS, runtime={"runtime": "container", "engine": "docker", "gpus": ""}, gpu=None)
    out = sc.report({"spark-a": lab})
    assert out["ok"], out["message"]
    notes = out["hosts"]["spark-a"]["notes"]
    assert "OS Debian 12 x86_64 (no GPU in the inventory: any OS the vLLM image runs on)" in notes
    assert any("not applicable by inventory (vllm_container_gpus is empty" in n for n in notes)
    assert any("keeps its host's clock" in n for n in notes)


@pytest.mark.parametrize("over, what, fix", [
    (dict(reach={"ok": False, "msg": "Missing sudo password"}), "not reachable with sudo: Missing sudo password",
     "--ask-become-pass"),
    (dict(info=dict(SYNCED, time={"ntp_synchronized": False, "services": []})), "the clock is not synchronised",
     "timedatectl set-ntp true"),
    (dict(info=dict(SYNCED, units={"docker.service": {"load_state": "not-found", "active_state": "inactive"}})),
     "docker is not running (docker.service inactive)", "systemctl enable --now docker"),
    (dict(gpu={"rc": 125, "stdout": "", "stderr": "could not select device driver \"\" with capabilities: [[gpu]]"}),
     "sees no GPU", "nvidia-ctk runtime configure"),
    (dict(info=dict(SYNCED, ports=[{"port": 8000, "free": False, "ours": False, "purpose": "vLLM's API",
                                    "variable": "vllm_port", "holders": [{"process": "python3", "pid": 42}]}])),
     "port 8000 (vLLM's API) is taken by python3 (pid 42)", "set vllm_port to a free port"),
    (dict(image={"ok": False, "msg": "spark-2: the vLLM image vllm-gb10:0.32.0 is not on this host ... `docker load -i "
                                     "FILE`. Nothing was changed."}),
     "the vLLM image vllm-gb10:0.32.0 is not on this host", ""),
    (dict(memory={"ok": False, "enabled": True, "msg": "Read the model: ... Set memory_guard_weights_gib ..."}),
     "Set memory_guard_weights_gib", ""),
])
def test_each_problem_names_the_host_and_its_fix(over, what, fix):
    out = sc.report({"spark-1": engine(), "spark-2": engine(**over)})
    assert not out["ok"]
    assert out["hosts"]["spark-1"]["ok"] and not out["hosts"]["spark-2"]["ok"]
    problem = out["hosts"]["spark-2"]["problems"][0]
    assert what in problem["what"] and fix in problem["fix"]
    assert "spark-2: problem" in out["message"] and "Nothing was changed" not in out["message"]


def test_a_port_held_by_the_collections_own_unit_is_fine():
    info = dict(SYNCED, ports=[{"port": 8000, "free": False, "ours": True, "owner_units": ["vllm-replica.service"],
                                "holders": [{"process": "vllm", "pid": 7}]}])
    out = sc.report({"spark-1": engine(info=info)})
    assert out["ok"] and "port 8000 held by vllm-replica.service" in out["hosts"]["spark-1"]["notes"]


def test_proxy_hosts_are_checked_for_their_part_only():
    proxy = {"groups": ["proxy"], "reach": {"ok": True}, "facts": LAB_FACTS, "info": {"time": {}, "ports": []}}
    out = sc.report({"gateway": proxy})
    notes = out["hosts"]["gateway"]["notes"]
    assert out["ok"] and "OS Debian 12 x86_64" in notes
    assert not any(n.startswith(("docker", "image", "GPU", "memory")) for n in notes)


def test_shared_problems_are_filed_under_each_host_they_name():
    shared = [{"host": "spark-a and spark-b", "what": "config.json differs", "fix": "copy it again"},
              {"host": "spark-b", "what": "the link interface eth1 has no carrier", "fix": "check the cable"}]
    out = sc.report({"spark-a": engine(), "spark-b": engine()}, shared)
    assert [p["what"] for p in out["hosts"]["spark-a"]["problems"]] == ["config.json differs"]
    assert len(out["hosts"]["spark-b"]["problems"]) == 2


def test_one_image_name_of_two_builds_is_a_problem_of_both_hosts():
    other = dict(IMAGE, image=dict(IMAGE["image"], id="sha256:" + "b" * 64))
    problems = sc.image_conflicts({"spark-1": engine(), "spark-2": engine(image=other)})
    assert problems[0]["host"] == "spark-1 and spark-2" and "different builds" in problems[0]["what"]


def test_the_lines_to_paste_are_yaml_with_the_figures_read_from_the_model():
    out = sc.report({"spark-1": engine(), "spark-2": engine()})
    pasted = yaml.safe_load(out["paste"])
    assert pasted == {"memory_guard_weights_gib": 23.67, "memory_guard_min_kv_gib": 6.0}
    assert "#   spark-1: 0.74" in out["paste"]


def test_figures_that_differ_go_to_host_vars_and_inventory_values_are_not_repeated():
    other = dict(MEMORY, model=dict(MEMORY["model"], weights_gib=30.0))
    kept = dict(MEMORY, model=dict(MEMORY["model"], min_kv_source="memory_guard_min_kv_gib"))
    text = sc.paste({"spark-1": engine(memory=kept), "spark-2": engine(memory=dict(other, model=dict(
        other["model"], min_kv_source="memory_guard_min_kv_gib")))})
    assert "# host_vars/spark-2.yml\nmemory_guard_weights_gib: 30.0" in text
    assert "memory_guard_min_kv_gib" not in text


# ------------------------------------------------------------------ the filter (across hosts)


def manifest(files):
    return {"path": "/m", "files": files, "sha256": {}, "weights_bytes": 0}


def test_filter_names_the_host_and_the_file_whose_copy_differs():
    records = {"spark-a": engine(), "spark-b": engine()}
    out = site_check_report(records, manifests={"spark-a": manifest({"model.safetensors": 10, "tokenizer.json": 5}),
                                                "spark-b": manifest({"model.safetensors": 10, "tokenizer.json": 6})})
    assert not out["ok"]
    assert "tokenizer.json differs" in out["hosts"]["spark-b"]["problems"][0]["what"]
    assert "spark-b: problem" in out["message"]


def test_filter_leaves_out_hosts_that_did_not_answer_from_the_comparisons():
    records = {"spark-a": engine(), "spark-b": {"reach": {"ok": False, "msg": "unreachable"}}}
    out = site_check_report(records, manifests={"spark-a": manifest({"a": 1}), "spark-b": {}})
    assert [p["what"] for p in out["hosts"]["spark-b"]["problems"]] == ["not reachable with sudo: unreachable"]
    assert out["hosts"]["spark-a"]["ok"]


def test_filter_judges_the_link_with_the_link_checks_own_rules():
    seen = {"interface": {"name": "eth1", "exists": True, "admin_up": True, "carrier": False, "mtu": 9000},
            "address": "10.0.0.1", "peer_address": "10.0.0.2", "peer": {}, "ports": [], "rdma": {"mode": "disabled"},
            "nccl_library": {}}
    other = dict(seen, interface=dict(seen["interface"], carrier=True), address="10.0.0.2", peer_address="10.0.0.1")
    out = site_check_report({"spark-a": engine(), "spark-b": engine()}, link={"spark-a": seen, "spark-b": other},
                            mtu=9000)
    assert any("no carrier" in p["what"] for p in out["hosts"]["spark-a"]["problems"])


def test_filter_reads_the_records_manifests_and_link_from_hostvars_with_engines():
    from ansible.errors import AnsibleFilterError

    seen = {"interface": {"name": "eth1", "exists": True, "admin_up": True, "carrier": False, "mtu": 9000},
            "address": "10.0.0.1", "peer_address": "10.0.0.2", "peer": {}, "ports": [], "rdma": {"mode": "disabled"},
            "nccl_library": {}}
    other = dict(seen, interface=dict(seen["interface"], carrier=True), address="10.0.0.2", peer_address="10.0.0.1")
    hostvars = {"spark-a": {"site_check": engine(), "__vllm_split_link_seen": seen, "vllm_link_mtu": 9000},
                "spark-b": {"site_check": engine(), "__vllm_split_link_seen": other},
                "spark-c": {}}
    out = site_check_report(hostvars, engines=["spark-a", "spark-b", "spark-c"], proxies=[])
    assert out == site_check_report({"spark-a": engine(), "spark-b": engine()}, link={"spark-a": seen, "spark-b": other},
                                    manifests={"spark-a": {}, "spark-b": {}}, mtu=9000)
    assert any("no carrier" in p["what"] for p in out["hosts"]["spark-a"]["problems"])
    with pytest.raises(AnsibleFilterError, match="reads manifests, link, mtu and runtime from hostvars"):
        site_check_report(hostvars, engines=["spark-a"], mtu=9000)
    with pytest.raises(AnsibleFilterError, match="takes proxies with engines only"):
        site_check_report({}, proxies=["proxy-1"])
    with pytest.raises(AnsibleFilterError, match="with engines expects hostvars"):
        site_check_report(["spark-a"], engines=["spark-a"])


# ------------------------------------------------------------------ what the hosts are on, next to the inventory
# What deploy.yml's preflight compares (factory_floor.llm.deploy_topology_check in roles/site_deploy/tasks/
# deploy_preflight.yml): the topology_record module's result on
# each engine host - its record and which engine unit runs - against the inventory's topology and model.

SOURCES = ["/srv/ff/inventory/site"]
CHECKOUT = "/srv/ff/playbooks"  # run from a checkout: the fixes name playbooks/<file>.yml
T0 = 1795950000.0


def seen(recorded=None, runs="none", model=None, playbook="switch-to-split.yml", text=None):
    """topology_record's result on a host (read with the engine units), as the site check registers it."""
    record = None
    if text is not None or recorded is not None:
        fields = {"topology": recorded, "since": T0, "by": "ops@ctl", "playbook": playbook, "run": "r1"}
        if model:
            fields["model"] = model
        record = dict(tr.parse(text if text is not None else json.dumps(fields)), path=tr.PATH, mtime=T0)
    return {"changed": False, "runs": runs, "record": record, "recorded": (record or {}).get("topology") or ""}


def on(result, topology="replicas", model="/models/M"):
    return engine(topology={"seen": result, "topology": topology, "model": model})


def judged(records, **kwargs):
    return site_check_report(records, sources=SOURCES, playbook_dir=CHECKOUT, **kwargs)


@pytest.mark.parametrize("runs, asks, what, fix", [
    ("split", "replicas", "runs split (vllm-split.service is active), but the inventory asks for replicas",
     ["`topology: split` in /srv/ff/inventory/site/group_vars/all.yml",
      "ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-replicas.yml"]),
    ("replicas", "split", "runs replicas (vllm-replica.service is active), but the inventory asks for split",
     ["`topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml",
      "ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-split.yml"]),
])
def test_hosts_on_another_topology_than_the_inventory_asks_are_problems_naming_the_switch(runs, asks, what, fix):
    out = judged({"spark-a": on(seen(runs, runs), asks), "spark-b": on(seen(runs, runs), asks)})
    assert not out["ok"]
    for host in ("spark-a", "spark-b"):
        problem = out["hosts"][host]["problems"][0]
        assert what in problem["what"] and "deploy.yml would refuse it" in problem["what"]
        assert all(words in problem["fix"] for words in fix)
    assert "spark-a: problem" in out["message"] and "spark-b: problem" in out["message"]
    assert "Site check: 2 of 2 hosts have problems" in out["message"]


def test_what_runs_decides_over_the_record_as_in_deploy():
    out = judged({"spark-a": on(seen("replicas", "split"), "replicas")})
    problem = out["hosts"]["spark-a"]["problems"][0]
    assert problem["what"].startswith("runs split (vllm-split.service is active; its record says replicas)")


def test_a_record_of_the_other_topology_is_a_problem_when_nothing_runs():
    out = judged({"spark-a": on(seen("split", "none"), "replicas")}, )
    what = out["hosts"]["spark-a"]["problems"][0]["what"]
    assert what.startswith("is on split by its record (switched to split by ops@ctl with switch-to-split.yml")
    assert "no engine runs now" in what and "the inventory asks for replicas" in what


def test_a_first_deploy_is_not_a_problem():
    out = judged({"spark-a": on(seen(None, "none")), "spark-b": on(seen(None, "none"))})
    assert out["ok"], out["message"]
    assert any(n.startswith("topology: nothing deployed yet") for n in out["hosts"]["spark-a"]["notes"])


def test_a_host_on_the_inventorys_topology_is_ok_and_says_so():
    out = judged({"spark-a": on(seen("replicas", "replicas"))})
    assert out["ok"], out["message"]
    assert "topology replicas as the inventory says (vllm-replica.service is active, recorded replicas)" in \
        out["hosts"]["spark-a"]["notes"]


def test_an_unreadable_record_with_nothing_running_is_a_problem_with_both_ways_on():
    out = judged({"spark-a": on(seen(text="{oops", runs="none"), "split")})
    problem = out["hosts"]["spark-a"]["problems"][0]
    assert "topology record /var/lib/factory-floor/topology.json cannot be read (not JSON" in problem["what"]
    assert "if it is on split, remove /var/lib/factory-floor/topology.json" in problem["fix"]
    assert "change the line to `topology: replicas`" in problem["fix"]


def test_another_model_than_switch_model_put_there_is_a_problem_naming_switch_model():
    result = seen("replicas", "replicas", model="/models/New", playbook="switch-model.yml")
    out = judged({"spark-a": on(result, "replicas", "/models/Old")})
    problem = out["hosts"]["spark-a"]["problems"][0]
    assert "brought to /models/New (by switch-model.yml), but the inventory's vllm_model is /models/Old" in problem["what"]
    assert "`vllm_model: /models/New` in /srv/ff/inventory/site/group_vars/gb10.yml" in problem["fix"]
    assert "playbooks/switch-model.yml -e switch_model=/models/Old" in problem["fix"]


def test_a_host_whose_units_could_not_be_read_is_a_problem():
    out = judged({"spark-a": on({"failed": True, "msg": "systemctl: not found"})})
    assert "what this host runs could not be read (systemctl: not found)" in out["hosts"]["spark-a"]["problems"][0]["what"]


def test_hosts_whose_records_disagree_are_problems_of_the_hosts_named():
    out = judged({"spark-a": on(seen("split", "split"), "split"), "spark-b": on(seen("replicas", "split"), "split")})
    assert not out["ok"]
    a = [p["what"] for p in out["hosts"]["spark-a"]["problems"]]
    b = [p["what"] for p in out["hosts"]["spark-b"]["problems"]]
    assert a == ["the engine hosts disagree: the hosts' records differ: spark-a split, spark-b replicas"]
    assert "the engine hosts disagree: spark-b records replicas but runs split" in b
    fix = out["hosts"]["spark-b"]["problems"][0]["fix"]
    assert "deploy.yml writes that record again on every engine host" in fix


def test_hosts_that_run_different_topologies_are_each_told():
    out = judged({"spark-a": on(seen("split", "split"), "split"), "spark-b": on(seen("replicas", "replicas"), "split")})
    b = out["hosts"]["spark-b"]["problems"]
    assert b[0]["what"].startswith("runs replicas") and "switch-to-split.yml" in b[0]["fix"]
    assert any("the hosts run different topologies: spark-a split, spark-b replicas" in p["what"]
               for p in out["hosts"]["spark-a"]["problems"])


def test_hosts_without_a_topology_read_are_left_out_of_the_comparison():
    out = judged({"spark-a": on(seen("split", "split"), "split"), "spark-b": engine(),
                  "spark-c": {"reach": {"ok": False, "msg": "unreachable"}}})
    assert out["hosts"]["spark-a"]["ok"] and out["hosts"]["spark-b"]["ok"], out["message"]


# ------------------------------------------------------------------ deploy.yml's inventory checks, in the summary


def test_a_typod_variable_is_listed_first_with_the_closest_name_and_the_hosts_are_still_checked():
    hostvars = {"spark-a": {"vllm_max_num_seq": 16, "vllm_max_num_seqs": 8}, "spark-b": {"vllm_max_num_seq": 16}}
    errors = inventory_errors(hostvars, ["spark-a", "spark-b"], load_specs())
    out = judged({"spark-a": engine(), "spark-b": engine()}, inventory={"ok": False, "errors": errors})
    assert not out["ok"] and not out["inventory"]["ok"]
    lines = out["message"].splitlines()
    assert lines[0] == ("Site check: the inventory has 1 problem (playbooks/deploy.yml refuses it); every host is "
                        "ready otherwise")
    assert lines[1] == "inventory: problem"
    assert lines[2].startswith("  - vllm_max_num_seq (set for spark-a, spark-b) is not a variable of factory_floor.llm: "
                               "did you mean vllm_max_num_seqs?")
    assert lines[2].endswith("Rename it where it is set (group_vars, host_vars or -e).")
    assert lines[3].startswith("spark-a: ok (") and lines[4].startswith("spark-b: ok (")


def test_a_value_of_the_wrong_type_is_one_readable_line():
    errors = inventory_errors({"spark-a": {"vllm_gpu_memory_utilization": "80%"}}, ["spark-a"], load_specs())
    out = judged({"spark-a": engine()}, inventory={"ok": False, "errors": errors})
    assert [p["what"] for p in out["inventory"]["problems"]] == [
        "vllm_gpu_memory_utilization on spark-a is '80%': must be a number between 0 and 1 (a fraction, e.g. 0.80)"]
    assert ("  - vllm_gpu_memory_utilization on spark-a is '80%': must be a number between 0 and 1 (a fraction, e.g. "
            "0.80).\nspark-a: ok (") in out["message"]


def test_an_inventory_refusal_without_a_list_is_its_message():
    refusal = "vllm_prometheus_hosts names mon-1, which the inventory does not list."
    out = judged({"spark-a": engine()}, inventory={"ok": False, "msg": refusal})
    assert [p["what"] for p in out["inventory"]["problems"]] == [
        "vllm_prometheus_hosts names mon-1, which the inventory does not list"]
    assert "2 of" not in out["message"] and "1 problem" in out["message"]


def test_an_inventory_that_passes_says_so_and_a_report_without_it_is_as_before():
    passed = judged({"spark-a": engine()}, inventory={"ok": True, "errors": []})
    assert passed["ok"] and "inventory: ok (" in passed["message"]
    assert "inventory:" not in judged({"spark-a": engine()})["message"]


def test_the_inventorys_problems_come_with_the_hosts_own():
    errors = inventory_errors({"spark-a": {"vllm_max_num_seq": 16}}, ["spark-a"], load_specs())
    out = judged({"spark-a": engine(reach={"ok": False, "msg": "Connection refused"})},
                 inventory={"ok": False, "errors": errors})
    assert out["message"].splitlines()[0] == ("Site check: the inventory has 1 problem (playbooks/deploy.yml refuses it); "
                                              "1 of 1 hosts have problems")
    assert "not reachable with sudo: Connection refused" in out["message"]


def test_a_site_that_runs_another_topology_is_not_ready():
    # The trial (issue 35): every check passed and "every host is ready", then deploy.yml refused.
    out = site_check_report({"spark-a": on(seen("split", "split"), "replicas")})
    assert not out["ok"] and "Site check: every host is ready" not in out["message"]
    # Without playbook_dir (a playbook of the operator's own) the playbooks are named as the installed collection's.
    assert "ansible-playbook -i inventory/<site> factory_floor.llm.switch_to_replicas" in out["message"]


def test_from_an_installed_collection_the_fixes_name_its_playbooks():
    installed = "/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks"
    out = site_check_report({"spark-a": on(seen("split", "split"), "replicas")}, sources=SOURCES,
                            playbook_dir=installed)
    problem = out["hosts"]["spark-a"]["problems"][0]
    assert "factory_floor.llm.deploy would refuse it" in problem["what"]
    assert "ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.switch_to_replicas" in problem["fix"]
    assert "playbooks/" not in out["message"]


PLANNED = {"changed": False, "max_model_len": 4096,
           "groupings": [{"sizes": [1, 1]}, {"sizes": [2]}],
           "groupings_table": ["grouping  groups  ...", "1+1 (replicas)  2  ...", "2 (split)  1  ...", "full-context = ..."],
           "site_read": {"model_dir": "/opt/models/tiny-random", "engine_hosts": 2,
                         "sweeps": ["/src/build/tune-concurrency/spark-a.json"]}}


def test_the_site_check_prints_the_groupings_table_of_the_first_engine_host_never_as_a_problem():
    out = sc.report({"spark-1": engine(groupings=PLANNED), "spark-2": engine()})
    assert out["ok"]
    assert out["groupings"] == [
        "engine groupings of 2 engine host(s) for /opt/models/tiny-random (max_model_len 4,096; kv_cache_plan, one row "
        "per grouping):"] + PLANNED["groupings_table"] + ["sweeps read: /src/build/tune-concurrency/spark-a.json"]
    assert sc.report({"spark-1": engine()})["groupings"] == []
    none_saved = dict(PLANNED, site_read=dict(PLANNED["site_read"], sweeps=[]))
    assert sc.groupings_lines(none_saved)[-1] == ("sweeps read: none (the concurrency tuning saves one per engine "
                                                  "group it sweeps)")


def test_a_plan_that_could_not_be_made_is_a_note():
    failed = {"failed": True, "msg": "Planning the KV cache of /m: gpu_memory_utilization is not set"}
    out = sc.report({"spark-1": engine(groupings=failed)})
    assert out["ok"] and out["groupings"] == [
        "engine groupings: not planned (Planning the KV cache of /m: gpu_memory_utilization is not set)"]
    assert sc.groupings_lines({"changed": False, "groupings": None, "groupings_table": None})[0].startswith(
        "engine groupings: not planned (no model directory to read")
