# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The site check's verdict (issue 35): every check judged, one line per host, the lines to paste."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.filter.site_check_report import site_check_report
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_check as sc

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
