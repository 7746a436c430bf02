# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.engine_cli_check`` through its action plugin, as the vllm role's image check runs it: the
role's variables read as the task sees them (Ansible's templar over the role's defaults and vars and an inventory),
``container_image_info`` answered as the host would, and ``vllm_cli_check`` run for real (the module, against the
fake build of test_vllm_cli_check.py: the real ``vllm serve --help=all`` of vLLM CPU 0.32.0) with the arguments
Ansible sends it, check mode included. The settings, the build's question and the refusal text are
tests/unit/plugins/module_utils/test_engine_cli.py's; the build's answers are test_vllm_cli_check.py's."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.engine_cli_check import ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_cli as cli
from ansible_collections.factory_floor.llm.plugins.modules import vllm_cli_check
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, role_variables

with open(os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "vllm_cli",
                       "vllm-0.32.0-cpu-serve-help-all.txt"), encoding="utf-8") as _handle:
    HELP = _handle.read()
IMAGE_ID = "sha256:" + "e" * 64
PROBE = {"vllm": "0.32.0", "torch": "2.13.0+cu130", "machine": "aarch64", "tool_parsers": ["hermes", "xlam"],
         "modules": {"fastsafetensors": True}, "nccl_library": "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"}
# container_image_info's answer on a host that holds the image, of its architecture.
IMAGE = {"changed": False, "image": {"present": True, "architecture_matches": True, "id": IMAGE_ID}, "containers": {}}


@pytest.fixture
def build(monkeypatch):
    """The fake build vllm_cli_check asks: answers ``vllm serve --help=all`` and the probe; records each question."""
    asked = []

    def run_with_timeout(argv, timeout, env=None):
        asked.append(argv)
        if "serve" in argv:
            return 0, HELP, "", False
        return 0, "startup noise\n" + cli.MARKER + json.dumps(PROBE) + "\n", "", False

    monkeypatch.setattr(vllm_cli_check, "run_with_timeout", run_with_timeout)
    return asked


@pytest.fixture
def run(run_module, build, tmp_path):
    """``run(check_mode=False, image=None, **inventory)`` (``image`` None: IMAGE): the plugin's run over the vllm role's variables and
    ``inventory`` (which wins); returns its result and the modules it ran (name, the arguments Ansible sends)."""

    def run(check_mode=False, image=None, **inventory):
        image = IMAGE if image is None else image
        variables = role_variables("vllm")
        variables.update(inventory_hostname="spark-a", groups={"all": ["spark-a"], "gb10": ["spark-a"]},
                         vllm_model="/models/Qwen3-Next", vllm_served_model_name="qwen3-next",
                         vllm_cli_cache_dir=str(tmp_path / "cache"))
        variables.update(inventory)
        task = mock.MagicMock(args={}, check_mode=check_mode, async_val=0, no_log=False, diff=False,
                              action="factory_floor.llm.engine_cli_check")
        connection = mock.MagicMock()
        connection._shell.tmpdir = None
        action = ActionModule(task, connection, mock.MagicMock(), DataLoader(),
                              with_filters(Templar(loader=DataLoader(), variables=variables)), None)
        calls = []

        def execute(module_name, module_args, task_vars):
            # The arguments as ActionBase._execute_module sends them: its internal ones added (check mode from the
            # task, refused for a plugin without check mode support); the module runs with check mode of those.
            sent = dict(module_args)
            action._update_module_args(module_name, sent, task_vars)
            calls.append((module_name, sent))
            if module_name == "factory_floor.llm.container_image_info":
                return dict(image)
            assert module_name == "factory_floor.llm.vllm_cli_check"
            return run_module(vllm_cli_check, dict(module_args, _ansible_check_mode=sent["_ansible_check_mode"])).result

        with mock.patch.object(action, "_execute_module", side_effect=execute):
            return action.run(task_vars=variables), calls

    return run


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_build_accepts_the_roles_command_line_and_is_asked_in_check_mode_too(run, build, tmp_path, check_mode):
    result, calls = run(check_mode=check_mode)
    (image, image_args), (module, args) = calls
    assert (image, module) == ("factory_floor.llm.container_image_info", "factory_floor.llm.vllm_cli_check")
    assert image_args["engine"] == "/usr/bin/docker" and image_args["image"] == "vllm/vllm-openai:v0.32.0"
    # The build is the image's ID the host read; the arguments are the role's settings rendered.
    assert args["image_id"] == IMAGE_ID and args["image"] == "vllm/vllm-openai:v0.32.0"
    assert args["argv"][0] == "/models/Qwen3-Next" and "--served-model-name" in args["argv"]
    assert "--headless" not in args["argv"]
    # Check mode reaches the modules: both only read (vllm_cli_check reads its cache, writes none then).
    assert image_args["_ansible_check_mode"] is check_mode and args["_ansible_check_mode"] is check_mode
    assert not result.get("failed") and not result.get("skipped") and result["problems"] == []
    assert result["changed"] is False and result["nccl_library"] == PROBE["nccl_library"]
    assert len(build) == 2 and result["cached"] is False
    assert os.path.exists(result["cache_file"]) is not check_mode
    # Asked again: from the cache a real run wrote; check mode wrote none, so the build is asked again.
    again, _calls = run(check_mode=check_mode)
    assert again["cached"] is not check_mode and len(build) == (4 if check_mode else 2)


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_flag_the_build_does_not_accept_fails_the_task_in_check_mode_too(run, check_mode):
    result, calls = run(check_mode=check_mode, vllm_extra_args=["--enforce-eager", "--no-such-flag"])
    assert "--no-such-flag" in calls[-1][1]["argv"]
    assert result["failed"] is True and result["changed"] is False and "problems" not in result
    assert result["msg"].startswith("spark-a: the vLLM that would serve cannot run what the inventory renders: ")
    assert "does not accept --no-such-flag (from vllm_extra_args)" in result["msg"] and "--enforce-eager" not in result["msg"]
    assert result["msg"].endswith(". Nothing was changed.")


def test_the_split_asks_the_build_about_its_ranks_flags(run):
    result, calls = run(topology="split")
    argv = calls[-1][1]["argv"]
    assert "--headless" in argv and argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--master-addr") + 1] == "127.0.0.1" and not result.get("failed")


@pytest.mark.parametrize("image", [{"changed": False, "image": {"present": False}},
                                   {"changed": False, "image": {"present": True, "architecture_matches": False}}],
                         ids=["missing", "another-architecture"])
def test_an_image_that_cannot_be_asked_is_skipped_and_the_build_not_asked(run, build, image):
    result, calls = run(check_mode=True, image=image)
    assert [call[0] for call in calls] == ["factory_floor.llm.container_image_info"] and build == []
    assert result["skipped"] is True and not result.get("failed") and "image check" in result["skip_reason"]


def test_the_image_read_failing_fails_the_task_with_its_message(run, build):
    result, calls = run(image={"failed": True, "msg": "docker: permission denied"})
    assert len(calls) == 1 and build == []
    assert result["failed"] is True and result["msg"] == "docker: permission denied"


def test_a_virtualenv_is_asked_without_reading_an_image(run, build):
    result, calls = run(check_mode=True, vllm_runtime="venv")
    ((module, args),) = calls
    assert module == "factory_floor.llm.vllm_cli_check" and args["runtime"] == "venv" and args["venv"] == "/opt/vllm"
    assert "image" not in args and args["image_id"] == "" and args["_ansible_check_mode"] is True
