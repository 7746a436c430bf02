# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.model_sync_check`` through its action plugin: what it reads from ``hostvars`` (each engine
host's SSH and link variables, each target's registered listing), its refusals reading as the fail tasks that said
them before, check mode, and its documentation against its argument spec. The decisions themselves are
tests/unit/plugins/module_utils/test_model_sync.py's and test_model_manifest.py's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from unittest import mock

import pytest
import yaml

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.model_sync_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.filter.model_manifest_diff import model_manifest_diff
from ansible_collections.factory_floor.llm.plugins.filter.model_sync_space import model_sync_space
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GIB = 1024 ** 3
PATH = "/models/Qwen3-8B"
SOURCE = {"config.json": 1000, "model-00001-of-00002.safetensors": 8 * GIB, "model-00002-of-00002.safetensors": 8 * GIB}


class Unreadable(dict):
    """A host's variables where reading ``secret_thing`` fails, as a template that cannot be rendered would."""

    def __getitem__(self, key):
        if key == "secret_thing":
            raise AssertionError("read a variable the plan does not need")
        return super().__getitem__(key)


HOSTVARS = {
    "spark-a": Unreadable(vllm_link_address="10.89.8.10", ansible_host="192.0.2.10", ansible_user="ops",
                          secret_thing="x"),
    "spark-b": Unreadable(vllm_link_address="10.89.8.11", ansible_host="192.0.2.11", ansible_user="ops",
                          secret_thing="x"),
}
GROUPS = {"all": ["spark-a", "spark-b", "gw"], "gb10": ["spark-a", "spark-b"]}


def run(args, hostvars=None, check_mode=False, variables=None):
    """The action plugin's run, as a task with ``args`` on a play whose hosts have ``hostvars``, the task's own
    variables ``variables``."""
    templar = Templar(loader=DataLoader(), variables=dict(variables or {}))
    task_vars = {"groups": GROUPS, "hostvars": HOSTVARS if hostvars is None else hostvars}
    return run_action(ActionModule, "model_sync_check", args, task_vars, check_mode=check_mode, templar=templar)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_plan_reads_each_engine_hosts_ssh_and_link_variables_only(check_mode):
    result = run({"check": "plan", "engine_group": "gb10", "path": PATH, "dry_run": check_mode}, check_mode=check_mode)
    assert result["changed"] is False and "failed" not in result
    assert result["ok"] and result["source"] == "spark-a" and result["source_host"] == "spark-a"
    (target,) = result["targets"]
    assert target["host"] == "spark-b" and target["address"] == "10.89.8.11"
    assert ("--dry-run" in target["argv"]) is check_mode
    # The same plan the filter made from the engine hosts' variables, each target with the SSH probe of its rsync.
    planned = ms.plan(["spark-a", "spark-b"], ms.plan_hostvars(["spark-a", "spark-b"], HOSTVARS), path=PATH,
                      dry_run=check_mode)["targets"]
    assert result["targets"] == [dict(one, probe=ms.ssh_probe(one)) for one in planned]
    rsh = next(arg for arg in target["argv"] if arg.startswith("--rsh=ssh "))
    assert target["probe"] == rsh[len("--rsh="):].split(" ") + ["10.89.8.11", "true"]


def test_a_plan_that_cannot_be_made_fails_listing_what_to_change():
    result = run({"check": "plan", "engine_group": "gb10", "path": "models/relative", "source": "nowhere"})
    assert result["failed"] is True and result["ok"] is False and len(result["errors"]) == 2
    assert result["msg"] == "The model cannot be copied as asked. Nothing was copied:\n- " + "\n- ".join(result["errors"])
    assert result["msg"] == ms.plan_refusal(result)
    assert run({"check": "plan", "engine_group": "none", "path": PATH})["errors"][0] == (
        "the inventory has no engine host (group gb10): nothing to copy to")


def _listed(files, available):
    return {"files": files, "filesystem": {"path": "/models", "bytes_available": available}}


def test_a_target_without_room_fails_with_the_verdicts_message_only():
    hostvars = {"spark-b": {"__before": _listed(None, 10 * GIB)}, "spark-c": {"__before": _listed(dict(SOURCE), 9 * GIB)}}
    args = {"check": "space", "targets": ["spark-b", "spark-c"], "listing": "__before", "source_files": SOURCE,
            "path": PATH, "margin_bytes": GIB}
    result = run(args, hostvars)
    verdict = model_sync_space(SOURCE, {"spark-b": _listed(None, 10 * GIB), "spark-c": _listed(dict(SOURCE), 9 * GIB)},
                               PATH, GIB)
    # As the fail task said it: the message, nothing else.
    assert result == {"failed": True, "changed": False, "msg": verdict["message"]}
    assert result["msg"].startswith("Not enough room for the model. Nothing was copied.\n- spark-b: ")
    assert "spark-c" not in result["msg"]
    hostvars["spark-b"]["__before"] = _listed(None, 40 * GIB)
    passed = run(args, hostvars)
    assert passed["ok"] is True and "failed" not in passed and set(passed["hosts"]) == {"spark-b", "spark-c"}


def test_a_target_that_could_not_be_listed_has_no_room_known():
    result = run({"check": "space", "targets": ["spark-b"], "listing": "__before", "source_files": SOURCE,
                  "path": PATH}, {"spark-b": {}})
    assert result["failed"] is True and "spark-b" in result["msg"]


def test_copies_that_differ_fail_naming_the_files_and_the_hosts():
    source = {"files": {"config.json": 1000}, "sha256": {"config.json": "a" * 64}}
    same, other = dict(source), {"files": {"config.json": 999}, "sha256": {"config.json": "b" * 64}}
    args = {"check": "copies", "targets": ["spark-b", "spark-c"], "listing": "__after", "source": "spark-a",
            "source_path": PATH, "source_manifest": source}
    hostvars = {"spark-b": {"__after": same}, "spark-c": {"__after": other}}
    result = run(args, hostvars)
    expected = model_manifest_diff({"source spark-a:" + PATH: source, "spark-b": same, "spark-c": other})
    assert not expected["ok"] and result == {"failed": True, "changed": False, "msg": expected["message"]}
    assert "spark-c" in result["msg"]
    hostvars["spark-c"]["__after"] = dict(source)
    assert run(args, hostvars)["ok"] is True
    # A target without a listing is compared as one that could not be listed.
    assert run(args, {"spark-b": {"__after": same}})["failed"] is True


def test_an_unknown_check_is_refused_by_the_spec():
    with pytest.raises(AnsibleActionFail, match="check"):
        run({"check": "copy"})


# ------------------------------------------------------------------ the documentation and the role's calls

def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("model_sync_check", ARGUMENT_SPEC)
    assert ActionModule._supports_check_mode is True and ActionModule._requires_connection is True  # pylint: disable=protected-access


def test_the_role_reads_what_it_registered():
    with open(os.path.join(ROOT, "roles", "model_sync", "tasks", "main.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    registered = {task.get("register") for task in tasks}
    calls = [task["factory_floor.llm.model_sync_check"] for task in tasks if "factory_floor.llm.model_sync_check" in task]
    assert [call["check"] for call in calls] == ["plan", "source", "space", "reach", "copies"]
    for call in calls:
        assert call.get("listing", "__model_sync") in registered
    assert set(calls[0]) - {"check", "engine_group"} <= set(ARGUMENT_SPEC)


# ------------------------------------------------------------------ the model_sync role, run
# Up to its refusals before any host is read: the plan is made on the controller, no host is contacted.

PLAY = """
- name: Model copy, its refusals only
  hosts: gb10
  gather_facts: false
  tasks:
    - name: Copy the model
      ansible.builtin.include_role:
        name: factory_floor.llm.model_sync
        rolespec_validate: false
"""


def _playbook(tmp_path, *extra):
    runner = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(runner):
        runner = shutil.which("ansible-playbook")
    if not runner:
        pytest.skip("ansible-playbook not installed next to this Python")
    path = tmp_path / "model_sync.yml"
    path.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([runner, "-i", os.path.join(ROOT, "inventory", "example"), str(path)] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr


def test_the_entry_point_refuses_a_plan_and_a_left_out_target_from_the_registered_plan(tmp_path):
    rc, output = _playbook(tmp_path, "-e", "model_sync_path=models/x")
    assert rc != 0 and "The model cannot be copied as asked. Nothing was copied:\\n- model_sync_path" in output
    rc, output = _playbook(tmp_path, "-e", "model_sync_path=/models/x", "--limit", "spark-1")
    assert rc != 0
    assert "spark-2 would receive the model but is not in this run (--limit, or not answering)." in output


def test_the_source_and_reach_refusals_read_as_the_fail_tasks_that_said_them():
    result = run({"check": "source", "source": "spark-a", "source_path": PATH, "source_manifest": {"msg": "gone"}})
    assert result["failed"] is True and result["msg"] == ms.source_refusal("spark-a", PATH, {"msg": "gone"})
    assert "failed" not in run({"check": "source", "source": "spark-a", "source_path": PATH,
                                "source_manifest": {"files": {"config.json": 1}}})
    probes = [{"item": {"host": "spark-b", "via": "x"}, "rc": 255, "stderr": "denied"}]
    result = run({"check": "reach", "source": "spark-a", "results": probes})
    assert result["failed"] is True and result["msg"].startswith("spark-a cannot log in to spark-b over SSH")
    assert "failed" not in run({"check": "reach", "source": "spark-a", "results": [dict(probes[0], rc=0)]})


def test_the_plan_names_a_target_left_out_of_the_run():
    result = run({"check": "plan", "engine_group": "gb10", "path": PATH, "play_hosts": ["spark-a"]})
    assert result["failed"] is True and result["left_out"].startswith("spark-b would receive the model but is not")
    assert result["msg"] == result["left_out"]
    assert run({"check": "plan", "engine_group": "gb10", "path": PATH, "play_hosts": ["spark-a", "spark-b"]})[
        "left_out"] == ""


def test_the_plan_reads_the_roles_variables_the_task_leaves_out():
    variables = {"model_sync_delete": "true", "ansible_check_mode": True, "model_sync_ssh_user": "copier",
                 "topology": "replicas", "vllm_model": PATH,
                 "ansible_play_hosts": ["spark-a"], "site_engine_group": "gb10"}
    result = run({"check": "plan"}, variables=variables)
    (target,) = result["targets"]
    assert result["path"] == PATH and "--delete" in target["argv"] and "--dry-run" in target["argv"]
    assert any("-l copier" in arg for arg in target["argv"]) and result["left_out"].startswith("spark-b would receive")
    # What the task gives wins over the variable.
    result = run({"check": "plan", "path": "/models/other", "delete": False}, variables=variables)
    assert result["path"] == "/models/other" and "--delete" not in result["targets"][0]["argv"]


def test_the_plan_works_out_the_topologys_model_as_the_vllm_role_does():
    variables = {"ansible_play_hosts": ["spark-a", "spark-b"], "site_engine_group": "gb10", "vllm_model": PATH}
    assert run({"check": "plan"}, variables=dict(variables, topology="split"))["path"] == PATH
    split = dict(variables, topology="split", vllm_split_model="/models/split")
    assert run({"check": "plan"}, variables=split)["path"] == "/models/split"
    assert run({"check": "plan"}, variables=dict(split, topology="replicas"))["path"] == PATH
    # Without a model: the plan's own refusal, naming the variable to set.
    result = run({"check": "plan"}, variables={"ansible_play_hosts": ["spark-a", "spark-b"]})
    assert result["failed"] and "model_sync_path is not set" in result["msg"]


def test_the_later_checks_take_the_source_paths_and_targets_from_the_plan():
    planned = run({"check": "plan", "engine_group": "gb10", "path": PATH})
    assert planned["target_hosts"] == ["spark-b"] and planned["copy_hosts"] == ["spark-a", "spark-b"]
    planned.pop("failed", None)
    result = run({"check": "source", "plan": planned, "source_manifest": {}})
    assert result["msg"] == ms.source_refusal("spark-a", PATH, {})
    needed = {"spark-b": {"__before": {"files": {}, "filesystem": {"available": 1, "mount": "/"}}}}
    result = run({"check": "space", "plan": planned, "listing": "__before", "source_files": SOURCE},
                 hostvars=needed)
    assert result["failed"] is True and "spark-b" in result["msg"]
    controller = run({"check": "plan", "engine_group": "gb10", "path": PATH, "source": "controller"})
    assert controller["copy_hosts"] == ["spark-a", "spark-b"] == controller["target_hosts"]


def run_on_source(args, answers, hostvars=None):
    """``run`` with the modules the check runs on the source answering from ``answers`` (by module name, a list
    taken in turn); returns the result and the calls (module name, arguments)."""
    calls = []

    def execute(self, module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(answers[module_name].pop(0))

    with mock.patch.object(ActionModule, "_execute_module", execute), \
            mock.patch.object(ActionModule, "_remove_tmp_path"):
        return run(args, hostvars), calls


def test_the_source_check_lists_the_source_itself_and_returns_the_listing():
    planned = run({"check": "plan", "engine_group": "gb10", "path": PATH})
    listing = {"files": {"config.json": 1}, "summary": "1 file"}
    result, calls = run_on_source({"check": "source", "plan": planned},
                                  {"factory_floor.llm.model_manifest": [listing]})
    assert calls == [("factory_floor.llm.model_manifest", {"path": PATH, "checksum": "none"})]
    assert "failed" not in result and result["source_manifest"] == listing
    result, _calls = run_on_source({"check": "source", "plan": planned},
                                   {"factory_floor.llm.model_manifest": [{"failed": True, "msg": "gone"}]})
    assert result["msg"] == ms.source_refusal("spark-a", PATH, {"msg": "gone"})


def test_the_reach_check_runs_each_targets_probe_on_the_source():
    planned = run({"check": "plan", "engine_group": "gb10", "path": PATH})
    (target,) = planned["targets"]
    result, calls = run_on_source({"check": "reach", "plan": planned},
                                  {"ansible.legacy.command": [{"rc": 255, "stderr": "denied", "failed": True}]})
    assert calls == [("ansible.legacy.command", {"argv": target["probe"]})]
    assert result["msg"] == ms.reach_refusal("spark-a", [{"item": target, "rc": 255, "stderr": "denied"}])
    result, _calls = run_on_source({"check": "reach", "plan": planned}, {"ansible.legacy.command": [{"rc": 0}]})
    assert "failed" not in result


def test_the_copies_check_lists_the_source_hashed_and_fails_with_that_listings_message():
    planned = run({"check": "plan", "engine_group": "gb10", "path": PATH})
    listing = {"files": {"config.json": 1}, "sha256": {"config.json": "ab"}, "summary": "1 file, hashed"}
    hostvars = {"spark-b": {"__after": dict(listing)}}
    result, calls = run_on_source({"check": "copies", "plan": planned, "listing": "__after", "manifest_checksum": "all"},
                                  {"factory_floor.llm.model_manifest": [dict(listing)]}, hostvars)
    assert calls == [("factory_floor.llm.model_manifest", {"path": PATH, "checksum": "all"})]
    assert "failed" not in result and result["source_manifest"]["summary"] == "1 file, hashed"
    result, _calls = run_on_source({"check": "copies", "plan": planned, "listing": "__after"},
                                   {"factory_floor.llm.model_manifest": [{"failed": True, "msg": "permission denied"}]},
                                   hostvars)
    assert result["failed"] is True and result["msg"] == "permission denied"


def test_a_controller_source_without_rsync_fails_with_the_commands_message():
    planned = run({"check": "plan", "engine_group": "gb10", "path": PATH, "source": "controller"})
    answers = {"ansible.legacy.command": [{"failed": True, "rc": 2, "msg": "[Errno 2] No such file or directory: b'rsync'"}],
               "factory_floor.llm.model_manifest": [{"files": {"config.json": 1}}]}
    result, calls = run_on_source({"check": "source", "plan": planned}, answers)
    assert calls == [("ansible.legacy.command", {"argv": ["rsync", "--version"]})]
    assert result["failed"] is True and result["msg"] == "[Errno 2] No such file or directory: b'rsync'"
    answers["ansible.legacy.command"] = [{"rc": 0, "stdout": "rsync  version 3.2.7"}]
    result, calls = run_on_source({"check": "source", "plan": planned}, answers)
    assert "failed" not in result and [call[0] for call in calls] == ["ansible.legacy.command",
                                                                      "factory_floor.llm.model_manifest"]
