# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_model_sync.py: who sends the model, who receives it, over which
address, with which rsync; whether each target has room; what an rsync run changed."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms

ENGINES = ["spark-a", "spark-b"]
HOSTVARS = {
    "spark-a": {"ansible_host": "10.89.7.10", "vllm_link_address": "10.89.8.10"},
    "spark-b": {"ansible_host": "10.89.7.11", "vllm_link_address": "10.89.8.11/24", "ansible_user": "ops",
                "ansible_ssh_private_key_file": "/ctl/key", "ansible_port": 2222,
                "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null"},
}
PATH = "/models/Qwen3-8B"


def test_by_default_the_first_engine_host_sends_over_the_link():
    p = ms.plan(ENGINES, HOSTVARS, path=PATH)
    assert p["ok"] and p["source"] == "spark-a" and p["source_host"] == "spark-a"
    (target,) = p["targets"]
    assert target["host"] == "spark-b" and target["address"] == "10.89.8.11"
    argv = target["argv"]
    assert argv[0] == "rsync" and argv[-2:] == [PATH + "/", "10.89.8.11:" + PATH + "/"]
    for flag in ("--checksum", "--partial", "--partial-dir=.rsync-partial", "--copy-links", "--itemize-changes"):
        assert flag in argv
    assert "--delete" not in argv and "--dry-run" not in argv
    # The source's own key (none named), no prompt, the link address's new host key taken once; the
    # controller's port and key are not the source's way in.
    assert "--rsh=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -l ops" in argv


def test_deletes_only_when_asked_and_dry_run_in_check_mode():
    argv = ms.plan(ENGINES, HOSTVARS, path=PATH, delete=True, dry_run=True)["targets"][0]["argv"]
    assert "--delete" in argv and "--dry-run" in argv


def test_without_a_link_address_on_both_ends_the_inventory_address():
    hostvars = {"spark-a": {"ansible_host": "10.0.0.1"}, "spark-b": dict(HOSTVARS["spark-b"])}
    (target,) = ms.plan(ENGINES, hostvars, path=PATH)["targets"]
    assert target["address"] == "10.89.7.11"
    assert target["argv"][-1] == "10.89.7.11:%s/" % PATH
    assert "-p 2222" in next(a for a in target["argv"] if a.startswith("--rsh="))


def test_the_controller_sends_with_ansibles_own_ssh_to_every_engine_host():
    p = ms.plan(ENGINES, HOSTVARS, source="controller", path=PATH, source_path="/srv/models/Qwen3-8B")
    assert p["ok"] and p["source_host"] == "localhost"
    assert [t["host"] for t in p["targets"]] == ENGINES
    b = p["targets"][1]
    assert b["address"] == "10.89.7.11"
    rsh = next(a for a in b["argv"] if a.startswith("--rsh="))
    assert rsh == ("--rsh=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/dev/null "
                   "-i /ctl/key -p 2222 -l ops")
    assert b["argv"][-2] == "/srv/models/Qwen3-8B/"


def test_another_path_on_the_source_gives_the_source_a_local_copy_too():
    p = ms.plan(ENGINES, HOSTVARS, path=PATH,
                source_path="/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/abc123")
    local = p["targets"][0]
    assert local["host"] == "spark-a" and local["address"] is None
    assert local["argv"][-2:] == ["/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/abc123/", PATH + "/"]
    assert not any(a.startswith("--rsh=") for a in local["argv"])


def test_ipv6_link_addresses_are_bracketed():
    hostvars = {"spark-a": {"vllm_link_address": "fd00::1"}, "spark-b": {"vllm_link_address": "fd00::2"}}
    assert ms.plan(ENGINES, hostvars, path=PATH)["targets"][0]["argv"][-1] == "[fd00::2]:%s/" % PATH


@pytest.mark.parametrize("path, words", [
    ("", "is not set"),
    ("models/x", "not an absolute path"),
    ("/", "never the root"),
    ("/models/../etc", "without . or .."),
    ("/models/my model", "no spaces"),
    ("/models/$(reboot)", "no spaces"),
])
def test_paths_that_are_refused_before_anything(path, words):
    p = ms.plan(ENGINES, HOSTVARS, path=path)
    assert not p["ok"] and p["targets"] == []
    assert any("model_sync_path" in e and words in e for e in p["errors"]), p["errors"]


def test_a_source_that_is_no_engine_host_nor_the_controller_is_refused():
    p = ms.plan(ENGINES, HOSTVARS, source="gateway", path=PATH)
    assert not p["ok"] and "model_sync_source is 'gateway'" in p["errors"][0]


def test_one_engine_host_and_the_same_path_is_nothing_to_do():
    p = ms.plan(["spark-a"], HOSTVARS, path=PATH)
    assert not p["ok"] and "nothing to copy" in p["errors"][0]


def test_ssh_args_must_be_a_list():
    p = ms.plan(ENGINES, HOSTVARS, path=PATH, ssh_args="-o Foo=1")
    assert not p["ok"] and "model_sync_ssh_args must be a list" in p["errors"][0]
    p = ms.plan(ENGINES, HOSTVARS, path=PATH, ssh_args=["-o", "ConnectTimeout=5"])
    assert p["targets"][0]["argv"][-3].endswith("-l ops -o ConnectTimeout=5")


# ------------------------------------------------------------------ free space

GIB = 2 ** 30
MOUNTS = [{"mount": "/", "size_available": 50 * GIB}, {"mount": "/models", "size_available": 20 * GIB},
          {"mount": "/modelsx", "size_available": 1000 * GIB}]
SOURCE = {"config.json": 1000, "a.safetensors": 8 * GIB, "b.safetensors": 8 * GIB}


def test_the_mount_that_holds_the_path():
    assert ms.mount_of("/models/Qwen3-8B", MOUNTS)["mount"] == "/models"
    assert ms.mount_of("/modelsx/y", MOUNTS)["mount"] == "/modelsx"
    assert ms.mount_of("/srv/y", MOUNTS)["mount"] == "/"


def test_needed_bytes_count_what_is_missing_and_the_largest_rewrite():
    assert ms.needed_bytes(SOURCE, None) == 16 * GIB + 1000
    assert ms.needed_bytes(SOURCE, {"config.json": 1000, "a.safetensors": 3}) == 8 * GIB + 8 * GIB
    assert ms.needed_bytes(SOURCE, dict(SOURCE)) == 8 * GIB


def test_a_target_without_room_is_refused_naming_host_mount_and_sizes():
    verdict = ms.space(SOURCE, {"spark-b": {"files": None, "mounts": [{"mount": "/models", "size_available": 10 * GIB}]},
                                "spark-c": {"files": None, "mounts": MOUNTS}}, PATH, margin_bytes=GIB)
    assert not verdict["ok"]
    (problem,) = verdict["problems"]
    assert problem["host"] == "spark-b" and "10.00 GiB free on /models" in problem["what"]
    assert "17.00 GiB" in problem["what"] and "free 7.00 GiB on /models" in problem["fix"]
    assert verdict["hosts"]["spark-c"] == {"needed": 16 * GIB + 1000 + GIB, "available": 20 * GIB, "mount": "/models"}


def test_a_second_run_needs_room_for_one_rewrite_only():
    verdict = ms.space(SOURCE, {"spark-b": {"files": dict(SOURCE),
                                            "mounts": [{"mount": "/", "size_available": 9 * GIB}]}}, PATH)
    assert verdict["ok"], verdict


def test_no_mount_facts_is_a_problem_not_a_pass():
    verdict = ms.space(SOURCE, {"spark-b": {"files": None, "mounts": []}}, PATH)
    assert not verdict["ok"] and "could not be read" in verdict["problems"][0]["what"]


def test_the_filesystem_model_manifest_read_decides_over_mount_facts():
    # A lab host's root is podman's overlay, which Ansible's mount facts leave out: the model_sync scenario's
    # first run refused every target ("no mounted filesystem found"). model_manifest's statvfs reading has it.
    target = {"files": None, "mounts": [], "filesystem": {"path": "/srv", "bytes_available": 59 * GIB}}
    verdict = ms.space(SOURCE, {"spark-b": target}, PATH)
    assert verdict["ok"], verdict
    assert verdict["hosts"]["spark-b"] == {"needed": 16 * GIB + 1000, "available": 59 * GIB, "mount": "/srv"}
    short = dict(target, filesystem={"path": "/srv", "bytes_available": GIB})
    (problem,) = ms.space(SOURCE, {"spark-b": short}, PATH)["problems"]
    assert "1.00 GiB free on /srv" in problem["what"]


# ------------------------------------------------------------------ the result

FIRST = """sending incremental file list
cd+++++++++ ./
>f+++++++++ config.json
>f+++++++++ model.safetensors

Number of files: 3 (reg: 2, dir: 1)
Number of created files: 2 (reg: 2)
Number of deleted files: 0
Number of regular files transferred: 2
Total file size: 8,389,608 bytes
Total transferred file size: 8,389,608 bytes
Literal data: 8,389,608 bytes
Matched data: 0 bytes
File list size: 0
File list generation time: 0.001 seconds
File list transfer time: 0.000 seconds
Total bytes sent: 8,392,000
Total bytes received: 73

sent 8,392,000 bytes  received 73 bytes  5,594,715.33 bytes/sec
total size is 8,389,608  speedup is 1.00
"""

AGAIN = """sending incremental file list

Number of files: 3 (reg: 2, dir: 1)
Number of created files: 0
Number of deleted files: 0
Number of regular files transferred: 0
Total file size: 8,389,608 bytes
Total transferred file size: 0 bytes
Literal data: 0 bytes
Matched data: 0 bytes

sent 150 bytes  received 12 bytes  324.00 bytes/sec
total size is 8,389,608  speedup is 51,787.70
"""

REPAIRED = """sending incremental file list
>fc.t...... model.safetensors
*deleting   stale.bin

Number of deleted files: 1 (reg: 1)
Number of regular files transferred: 1
Total file size: 8,389,608 bytes
Total transferred file size: 8,388,608 bytes
"""


def test_a_first_copy_is_a_change():
    r = ms.rsync_result(FIRST)
    assert r["changed"] and r["files_transferred"] == 2 and r["bytes_transferred"] == 8389608
    assert r["items"] == ["cd+++++++++ ./", ">f+++++++++ config.json", ">f+++++++++ model.safetensors"]


def test_a_second_run_changes_nothing():
    r = ms.rsync_result(AGAIN)
    assert not r["changed"] and r["files_transferred"] == 0 and r["items"] == []
    assert r["summary"].startswith("0 files sent")


def test_a_repaired_file_and_a_deletion_are_changes():
    r = ms.rsync_result(REPAIRED)
    assert r["changed"] and r["files_transferred"] == 1 and r["deleted"] == 1
    assert r["items"] == [">fc.t...... model.safetensors", "*deleting   stale.bin"]


# ------------------------------------------------------------------ refusals before the copy

TARGETS = [{"host": "spark-2", "address": "10.10.0.2", "via": "the direct link (vllm_link_address 10.10.0.2)"},
           {"host": "spark-3", "address": "10.10.0.3", "via": "10.10.0.3 (ansible_host; no vllm_link_address on both ends)"}]


def test_a_run_with_every_target_leaves_none_out():
    assert ms.left_out(TARGETS, ["spark-1", "spark-2", "spark-3"]) == ""
    assert ms.left_out([], ["spark-1"]) == ""


def test_a_run_that_leaves_out_targets_is_refused_naming_them():
    assert ms.left_out(TARGETS, ["spark-1", "spark-2"]) == (
        "spark-3 would receive the model but are not in this run (--limit, or not answering). Nothing was copied.")
    assert ms.left_out(TARGETS[:1], ["spark-1"]) == (
        "spark-2 would receive the model but is not in this run (--limit, or not answering). Nothing was copied.")


def test_a_source_with_the_model_passes():
    assert ms.source_refusal("spark-1", "/models/x", {"files": {"config.json": 10}}) == ""


@pytest.mark.parametrize("manifest, why", [({"files": {}, "msg": ""}, ""), ({"msg": "/models/x does not exist"},
                                                                            "/models/x does not exist"),
                                           ({}, "no manifest")])
def test_a_source_without_the_model_is_refused(manifest, why):
    assert ms.source_refusal("spark-1", "/models/x", manifest) == (
        "The source spark-1 has no model directory at /models/x (%s). Nothing was copied: set model_sync_source to the "
        "host that holds the model (or controller), or model_sync_source_path to where it is there." % why)


def test_targets_the_source_reaches_pass():
    results = [{"item": TARGETS[0], "rc": 0}, {"item": {"host": "spark-1", "address": None}, "skipped": True}]
    assert ms.reach_refusal("spark-1", results) == ""


@pytest.mark.parametrize("source, words", [("spark-1", "the user Ansible connects as there"),
                                           ("controller", "you, with your own SSH key")])
def test_targets_the_source_cannot_reach_are_refused_naming_what_to_set_up(source, words):
    results = [{"item": TARGETS[0], "rc": 0},
               {"item": TARGETS[1], "rc": 255, "stderr": "Permission denied (publickey).\n"},
               {"item": TARGETS[0], "unreachable": True, "msg": "no SSH to the source"}]
    assert ms.reach_refusal(source, results) == (
        "%s cannot log in to spark-3, spark-2 over SSH without a password (%s; %s: Permission denied (publickey).; ). "
        "Nothing was copied. rsync runs on the source as %s: put that user's public key (ssh-keygen -t ed25519 on %s) "
        "in the target user's ~/.ssh/authorized_keys, or forward your SSH agent (ansible_ssh_common_args: -o "
        "ForwardAgent=yes), or copy from the controller (-e model_sync_source=controller). model_sync_ssh_user, "
        "model_sync_ssh_key_file and model_sync_ssh_args choose the user, the key and further ssh options."
        % (source, TARGETS[1]["via"], TARGETS[0]["via"], words, source))


def test_the_ssh_probe_logs_in_as_the_rsync_will():
    (target,) = ms.plan(["spark-1", "spark-2"], {"spark-2": {"ansible_host": "192.0.2.2", "ansible_user": "ops"}},
                        path="/models/x")["targets"]
    assert ms.ssh_probe(target) == ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-l", "ops",
                                    "192.0.2.2", "true"]


@pytest.mark.parametrize("topology, split_model, expected", [
    ("replicas", "/models/split", "/models/one"),   # the replicas serve vllm_model
    ("split", "/models/split", "/models/split"),    # the split its own model, where defined
    ("split", None, "/models/one"),                 # else vllm_model (vllm_split_model | default(vllm_model))
    ("split", "", ""),                              # defined empty stays empty, as default() leaves it
    ("", None, "/models/one"),                      # no topology: replicas
])
def test_the_topologys_model_is_the_vllm_roles(topology, split_model, expected):
    assert ms.topology_model(topology, "/models/one", split_model) == expected
