# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.model_upgrade_check`` through its action plugin: the variables it reads as the task sees them
(templated), its refusal as the task's message, and its documentation against its argument spec. The decisions
themselves are tests/unit/plugins/module_utils/test_model_upgrade.py's."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.model_upgrade_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action

UNIT = "vllm-replica.service"
VARIABLES = {
    "inventory_hostname": "spark-a", "playbook_dir": "/src/playbooks", "topology": "replicas",
    "groups": {"gb10": ["spark-a", "spark-b"], "proxy": ["gw"]}, "site_engine_group": "gb10",
    "site_proxy_group": "proxy", "model_upgrade_model": "/models/new", "model_upgrade_image": "",
    "vllm_model": "/models/old", "vllm_served_model_name": "qwen",
    # A role default that is a template: read as the task sees it.
    "model_upgrade_tool_call_parser": trust_as_template("{{ vllm_tool_call_parser }}"),
    "vllm_tool_call_parser": "hermes",
    "_site_topologies": {"replicas": {"unit": UNIT}},
    "_site_vllm_endpoint": {"url": "http://127.0.0.1:8000"},
}


def run(args, variables=None, check_mode=False):
    """The action plugin's run, with Ansible's templar over ``variables`` as the task's."""
    return run_action(ActionModule, "model_upgrade_check", args, dict(VARIABLES, **(variables or {})),
                      check_mode=check_mode)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_request_reads_the_variables_and_returns_the_settings(check_mode):
    result = run({"check": "request"}, check_mode=check_mode)
    assert "failed" not in result and result["errors"] == []
    # Registered as model_upgrade_replica: the builds are the result's own keys.
    assert result["candidate"] == {"model": "/models/new", "tool_call_parser": "hermes", "chat_template": ""}
    assert result["old"]["model"] == "/models/old"


def test_a_refused_request_fails_with_its_message():
    result = run({"check": "request"}, {"groups": {"gb10": ["spark-a"], "proxy": ["gw"]}})
    assert result["failed"] is True and result["msg"] == result["errors"][0]
    assert "at least two replicas in group gb10 (1) behind a proxy (1)" in result["msg"]


def test_the_replica_check_reads_the_noted_settings_and_the_endpoint():
    settings = run({"check": "request"})
    image = {"image": {"ref": "vllm:v1", "id": "sha256:1"}, "running": {UNIT: {"image": "vllm:v1", "image_id": "sha256:1"}}}
    down = {"status": "unreachable", "error": "connection refused"}
    result = run({"check": "replica", "old_image": image, "new_image": image, "models": down},
                 {"model_upgrade_replica": settings})
    assert result["failed"] is True
    assert result["msg"].startswith("spark-a does not serve qwen on port 8000 (connection refused); expected")
    serving = {"status": "serving", "model_roots": {"qwen": "/models/old"}}
    result = run({"check": "replica", "old_image": image, "new_image": image, "models": serving},
                 {"model_upgrade_replica": settings})
    assert "failed" not in result and result["running_image"] == "sha256:1"
    built = (result["candidate"]["image_id"], result["old"]["image_id"], result["running"])
    assert built == ("sha256:1", "sha256:1", "/models/old")


def test_the_served_check_fails_with_its_message():
    result = run({"check": "served", "model": "/models/new", "models": {"model_roots": {"qwen": "/models/old"}},
                  "after": "the restart"})
    assert result["msg"] == 'spark-a serves ["/models/old"] after the restart, not /models/new'


def test_an_unknown_check_is_refused_by_the_spec():
    with pytest.raises(AnsibleActionFail, match="check"):
        run({"check": "upgrade"})


def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("model_upgrade_check", ARGUMENT_SPEC)


def run_on_host(args, answers, variables=None):
    """``run`` with the modules the check runs on the host answering ``answers`` (by module name); returns the
    result and the calls (module name, arguments)."""
    calls = []

    def execute(self, module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return dict(answers[module_name])

    with mock.patch.object(ActionModule, "_execute_module", execute), \
            mock.patch.object(ActionModule, "_remove_tmp_path"):
        return run(args, variables), calls


def test_the_replica_check_asks_the_replica_itself_and_names_one_that_does_not_answer():
    settings = run({"check": "request"})
    down = {"failed": True, "status": "unreachable", "error": "connection refused", "msg": "no answer"}
    endpoint = {"_site_vllm_endpoint": {"url": "http://127.0.0.1:8000", "api_key": "k", "model": "qwen"},
                "model_upgrade_replica": settings}
    result, calls = run_on_host({"check": "replica"}, {"factory_floor.llm.vllm_health": down}, endpoint)
    assert calls == [("factory_floor.llm.vllm_health", {"url": "http://127.0.0.1:8000", "api_key": "k",
                                                        "model": "qwen", "probe": "models", "timeout": 0})]
    assert result["msg"].startswith("spark-a does not serve qwen on port 8000 (connection refused); expected")


BUILD = {"check": "served", "model": "/models/new", "image": "vllm:v2", "after": "the restart"}
SERVING = {"status": "serving", "model_roots": {"qwen": "/models/new"}}


def test_the_served_check_reads_the_replica_and_its_container_and_returns_the_container():
    container = {"image": {"id": "sha256:2"}, "containers": {"vllm-replica": {"image": "vllm:v2", "image_id": "sha256:2"}}}
    result, calls = run_on_host(BUILD, {"factory_floor.llm.vllm_health": SERVING,
                                        "factory_floor.llm.container_image_info": container},
                                {"_model_upgrade_container": "vllm-replica", "vllm_container_engine": "podman"})
    assert "failed" not in result and result["container"]["image"]["id"] == "sha256:2"
    assert calls == [("factory_floor.llm.vllm_health", {"url": "http://127.0.0.1:8000", "probe": "models", "timeout": 10}),
                     ("factory_floor.llm.container_image_info", {"engine": "/usr/bin/podman", "image": "vllm:v2",
                                                                 "containers": ["vllm-replica"]})]
    # The restore names the ID noted before the upgrade: only the container is read.
    result, calls = run_on_host(dict(BUILD, image_id="sha256:1", after="the restore"),
                                {"factory_floor.llm.vllm_health": SERVING,
                                 "factory_floor.llm.container_image_info": container})
    assert calls[1][1] == {"engine": "/usr/bin/docker", "containers": ["vllm-replica"]}
    assert result["msg"] == "spark-a's vllm-replica container runs sha256:2 after the restore, not vllm:v2 (sha256:1)"


def test_the_served_check_reads_no_container_without_an_image():
    result, calls = run_on_host(dict(BUILD, image=""), {"factory_floor.llm.vllm_health": SERVING})
    assert "failed" not in result and result["container"] == {} and len(calls) == 1


@pytest.mark.parametrize("answers, message", [
    ({"factory_floor.llm.vllm_health": {"failed": True, "msg": "spark-a: no answer on /v1/models within 10 s"}},
     "spark-a: no answer on /v1/models within 10 s"),
    ({"factory_floor.llm.vllm_health": SERVING,
      "factory_floor.llm.container_image_info": {"failed": True, "msg": "docker inspect failed: no such image"}},
     "docker inspect failed: no such image"),
])
def test_a_read_that_fails_fails_the_served_check_with_its_own_message(answers, message):
    result, _calls = run_on_host(BUILD, answers)
    assert result["failed"] is True and result["msg"] == message


@pytest.mark.parametrize("answer, model", [
    ({"status": "serving", "model_roots": {"qwen": "/models/new"}}, "/models/new"),
    ({"status": "serving", "model_roots": {"other": "/models/new"}}, ""),
    ({"failed": True, "status": "unreachable", "error": "connection refused"}, ""),
])
def test_the_serving_check_names_the_directory_the_replica_serves_and_never_fails(answer, model):
    result, calls = run_on_host({"check": "serving"}, {"factory_floor.llm.vllm_health": answer})
    assert "failed" not in result and result["model"] == model
    assert calls == [("factory_floor.llm.vllm_health", {"url": "http://127.0.0.1:8000", "probe": "models", "timeout": 0})]
