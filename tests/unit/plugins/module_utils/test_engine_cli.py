# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_engine_cli`` and ``factory_floor.llm.engine_cli_check``: the settings asked about per topology, the build's
question's arguments as the vllm role's ``cli_check`` tasks built them in Jinja, the image that cannot be asked, the
refusal message, and the action plugin's steps on the host."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleActionFail
from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.engine_cli_check import ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_cli as ec
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, run_action_answering

ROLE = {"inventory_hostname": "spark-a", "vllm_runtime": "container", "_vllm_container_engine_path": "/usr/bin/docker",
        "vllm_container_image": "vllm-gb10:0.32.0", "vllm_venv": "/opt/vllm", "vllm_cli_cache_dir": "/var/cache/ff",
        "_vllm_settings": {"model": "/models/m", "max_num_seqs": 12, "kv_cache_dtype": None, "dtype": ""},
        "_vllm_cli_check_settings": {"replicas": {}, "split": {"tensor_parallel_size": 2, "headless": True}},
        "vllm_extra_args": ["--enforce-eager"], "vllm_tool_call_parser": None,
        "vllm_allow_mtp_prefix_caching": "no"}


def test_the_settings_are_the_engines_with_the_topologys_flags_over_them():
    assert ec.settings(ROLE) == ROLE["_vllm_settings"]
    assert ec.settings(dict(ROLE, topology="split"))["tensor_parallel_size"] == 2
    # An include's own (the split's preflight, its rank's flags) win over the topology's.
    assert ec.settings(dict(ROLE, topology="split", vllm_cli_check_settings={"node_rank": 1})) == dict(
        ROLE["_vllm_settings"], node_rank=1)


def test_the_builds_question():
    args = ec.module_args(ROLE, "sha256:" + "a" * 64)
    assert args == {"runtime": "container", "engine": "/usr/bin/docker", "image": "vllm-gb10:0.32.0",
                    "image_id": "sha256:" + "a" * 64, "venv": "/opt/vllm", "cache_dir": "/var/cache/ff",
                    "argv": ["/models/m", "--max-num-seqs", "12", "--enforce-eager"],
                    # Null and empty settings are not rendered: not named either.
                    "settings_keys": ["model", "max_num_seqs"], "tool_call_parser": "", "load_format": "",
                    "allow_mtp_prefix_caching": False}
    venv = ec.module_args(dict(ROLE, vllm_runtime="venv", vllm_allow_mtp_prefix_caching=True, vllm_load_format="auto"))
    assert "image" not in venv and venv["image_id"] == "" and venv["allow_mtp_prefix_caching"] is True
    assert venv["load_format"] == "auto"


@pytest.mark.parametrize("image, askable", [
    ({"image": {"present": True, "architecture_matches": True}}, True),
    ({"image": {"present": True, "architecture_matches": None}}, True),   # architecture not known: asked
    ({"image": {"present": True, "architecture_matches": False}}, False),
    ({"image": {"present": False}}, False),
])
def test_an_image_missing_or_of_another_architecture_is_left_to_the_image_check(image, askable):
    assert ec.askable(image) is askable


def test_the_refusal():
    assert ec.refusal("spark-a", {"problems": []}) == ""
    assert ec.refusal("spark-a", {"problems": ["--foo is unknown to vLLM 0.32.0 (vllm_extra_args)", "x"]}) == (
        "spark-a: the vLLM that would serve cannot run what the inventory renders: --foo is unknown to vLLM 0.32.0 "
        "(vllm_extra_args); x. Nothing was changed.")


def run(variables, results):
    return run_action_answering(ActionModule, "engine_cli_check", {}, variables, results)


IMAGE = {"image": {"present": True, "architecture_matches": True, "id": "sha256:" + "b" * 64}}


def test_the_plugin_reads_the_image_then_asks_the_build():
    variables = dict(ROLE, __rank={"node_rank": 1}, vllm_cli_check_settings=trust_as_template("{{ __rank }}"))
    result, calls = run(variables, [IMAGE, {"problems": [], "nccl_library": "/x/libnccl.so.2"}])
    assert [call[0] for call in calls] == ["factory_floor.llm.container_image_info", "factory_floor.llm.vllm_cli_check"]
    assert calls[0][1] == {"engine": "/usr/bin/docker", "image": "vllm-gb10:0.32.0"}
    assert calls[1][1]["image_id"] == IMAGE["image"]["id"] and "--node-rank" in calls[1][1]["argv"]
    assert result["nccl_library"] == "/x/libnccl.so.2" and not result.get("failed")


def test_the_plugin_refuses_with_the_message_and_skips_an_image_it_cannot_ask():
    result, _calls = run(ROLE, [IMAGE, {"problems": ["bad"]}])
    assert result["failed"] and result["msg"].startswith("spark-a: the vLLM that would serve cannot run") \
        and "problems" not in result
    result, calls = run(ROLE, [{"image": {"present": False}}])
    assert len(calls) == 1 and result["skipped"] is True
    result, calls = run(dict(ROLE, vllm_runtime="venv"), [{"problems": []}])
    assert [call[0] for call in calls] == ["factory_floor.llm.vllm_cli_check"] and not result.get("failed")
    result, _calls = run(dict(ROLE, _vllm_settings={"model": "/m", "no_such_flag": 1}), [IMAGE])
    assert result["failed"] and "no_such_flag" in result["msg"]


def test_an_undefined_variable_fails_naming_it():
    variables = dict(ROLE)
    del variables["vllm_venv"]
    with pytest.raises(AnsibleActionFail, match="engine_cli_check reads vllm_venv, which is not defined"):
        run(variables, [])


def test_the_documentation_has_no_options_and_the_module_no_code():
    assert_documents_the_spec("engine_cli_check", {})
