# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_plan through its action plugin, the host's modules run for real against a fake host.

The host: a fake ``systemctl`` and docker (``run_command``) and a fake ``/proc``; ``vllm_engine_info`` and
``container_image_info`` run as the plugin asks. What a user would check: whether the engine restarts and why, the
command line; that the environment, the keys and the fingerprint are never shown, and a refusal always is.
"""

from __future__ import annotations

import json
import re
from unittest import mock

import pytest
import yaml

from ansible.errors import AnsibleActionFail
from ansible.module_utils import basic

from ansible_collections.factory_floor.llm.plugins.action import engine_plan as action
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.plugins.modules import container_image_info, engine_plan, vllm_engine_info

KEY = "sk-7f3e9a2c41d86b05"
HF_TOKEN = "hf_SeCrEt4f1b9e77d0c2"
IMAGE = "vllm/vllm-openai:v0.32.0"
NEW_ID = "sha256:" + "a" * 64
OLD_ID = "sha256:" + "b" * 64
ARGS = {
    "unit": "vllm-replica.service", "runtime": "container",
    "settings": {"model": "/models/m", "served_model_name": "m", "port": 8000, "max_num_seqs": 12},
    "container_engine": "/usr/bin/docker", "container_image": IMAGE, "container_log_driver": "none",
    "container_resource_args": ["--gpus=all"], "env_file": "/etc/factory-floor/vllm-replica.service.env",
    "env": {"HF_TOKEN": HF_TOKEN, "VLLM_NO_USAGE_STATS": "1"}, "api_key": KEY,
}


class Host:
    """What the fake host runs: the unit's main process (its command line and environment), the image and the
    unit's container."""

    def __init__(self, tmp_path):
        self.proc = tmp_path / "proc"
        self.pid = 0
        self.image_id = NEW_ID
        self.container = None  # (image reference, image ID) of the running container
        self.calls = []

    def runs(self, args, container_id=NEW_ID, **changes):
        """The unit runs what engine_plan composes for ``args`` changed by ``changes``."""
        defaults = {name: spec.get("default") for name, spec in action.ARGUMENT_SPEC.items()}
        composed = ep.compose(dict(defaults, **dict(ARGS, **args), **changes))
        self.pid = 4242
        (self.proc / "4242").mkdir(parents=True, exist_ok=True)
        (self.proc / "4242" / "cmdline").write_bytes(("\0".join(composed["argv"]) + "\0").encode())
        (self.proc / "4242" / "environ").write_bytes(
            ("FACTORY_FLOOR_CONFIG=%s\0VLLM_API_KEY=%s\0" % (composed["fingerprint"], KEY)).encode())
        if args.get("runtime", ARGS["runtime"]) == "container":
            self.container = (IMAGE, container_id)

    def run_command(self, argv, **kwargs):
        self.calls.append(list(argv))
        if argv[0].endswith("systemctl"):
            state = "active" if self.pid else "inactive"
            return 0, "ActiveState=%s\nMainPID=%d\nNeedDaemonReload=no\n" % (state, self.pid), ""
        kind, name = argv[1], argv[3]
        if kind == "image":
            return 0, json.dumps([{"Id": self.image_id, "RepoTags": [IMAGE], "Config": {}}]), ""
        if self.container is None:
            return 1, "[]\n", "Error response from daemon: No such container: %s" % name
        return 0, json.dumps([{"Image": self.container[1], "Config": {"Image": self.container[0]},
                               "State": {"Running": True, "Pid": 77}}]), ""


@pytest.fixture
def host(tmp_path, monkeypatch):
    fake = Host(tmp_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", fake.run_command)
    monkeypatch.setattr(container_image_info.os, "access", lambda path, mode: path == "/usr/bin/docker")
    return fake


def plan(run_module, host, check_mode=False, **changes):
    """The action's result for ARGS changed by ``changes``, and the module runs it asked for (name, arguments)."""
    task = mock.MagicMock(async_val=0, check_mode=check_mode, no_log=False, action="factory_floor.llm.engine_plan",
                          args=dict(ARGS, **changes))
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    plugin = action.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    runs = []
    modules = {"factory_floor.llm.vllm_engine_info": vllm_engine_info,
               "factory_floor.llm.container_image_info": container_image_info}

    def execute(module_name=None, module_args=None, task_vars=None, **kwargs):
        runs.append((module_name, dict(module_args)))
        args = dict(module_args, _ansible_check_mode=check_mode)
        if module_name.endswith("vllm_engine_info"):
            args["proc"] = str(host.proc)
        return run_module(modules[module_name], args).result

    plugin._execute_module = execute
    plugin._remove_tmp_path = lambda path: None
    return plugin.run(task_vars={"inventory_hostname": "spark-t"}), runs


def shown(result):
    """What a callback shows of a result: nothing but its censored note when it says no_log."""
    return "censored" if result.get("_ansible_no_log") else json.dumps(result)


@pytest.mark.parametrize("check_mode", [False, True])
def test_nothing_runs_a_start_is_no_restart(run_module, host, check_mode):
    result, runs = plan(run_module, host, check_mode=check_mode, runtime="venv")
    assert not result.get("failed"), result
    assert result["plan"] == {"running": False, "restart_pending": False, "args_removed": [], "args_added": [],
                              "image": {}, "change": ""}
    assert result["argv"] == ["/opt/vllm/bin/vllm", "serve", "/models/m", "--served-model-name", "m", "--port", "8000",
                              "--max-num-seqs", "12"]
    assert result["changed"] is False
    # venv: only the unit's process is read, no container engine.
    assert [name for name, _args in runs] == ["factory_floor.llm.vllm_engine_info"]


def test_the_engine_runs_this_configuration(run_module, host):
    host.runs({})
    result, runs = plan(run_module, host)
    assert result["plan"]["running"] is True and result["plan"]["restart_pending"] is False
    assert result["plan"]["image"] == {"wanted": IMAGE, "wanted_id": NEW_ID, "running": IMAGE, "running_id": NEW_ID,
                                       "changed": False}
    assert runs[1] == ("factory_floor.llm.container_image_info",
                       {"engine": "/usr/bin/docker", "image": IMAGE, "containers": ["vllm-replica"]})
    # Inspect only: nothing pulled, started or removed.
    docker = [call[1:3] for call in host.calls if call[0] == "/usr/bin/docker"]
    assert docker == [["image", "inspect"], ["container", "inspect"]]


@pytest.mark.parametrize("started_with,change", [
    ({"settings": dict(ARGS["settings"], max_num_seqs=10)}, "was --max-num-seqs 10, now --max-num-seqs 12"),
    ({"env": {"HF_TOKEN": "hf_old", "VLLM_NO_USAGE_STATS": "1"}}, "the environment, the API key or the container options changed"),
    ({"api_key": "sk-old"}, "the environment, the API key or the container options changed"),
    ({"api_key_next": "sk-next"}, "the environment, the API key or the container options changed"),
    ({"container_resource_args": []}, "the environment, the API key or the container options changed"),
], ids=["a vLLM argument", "the environment", "the API key", "a key rotation ended", "a container option"])
def test_another_configuration_is_a_pending_restart(run_module, host, started_with, change):
    host.runs(started_with)
    result, _runs = plan(run_module, host)
    assert result["plan"]["restart_pending"] is True
    assert result["plan"]["change"] == change


def test_a_tag_pulled_again_to_another_build_is_a_pending_restart(run_module, host):
    host.runs({}, container_id=OLD_ID)
    result, _runs = plan(run_module, host)
    assert result["plan"]["restart_pending"] is True
    assert result["plan"]["change"] == "image %s (%s) -> %s (%s)" % (IMAGE, OLD_ID[:19], IMAGE, NEW_ID[:19])


def test_secrets_are_never_shown_the_command_line_is_the_next_tasks(run_module, host):
    host.runs({})
    result, runs = plan(run_module, host)
    assert result["environment"]["HF_TOKEN"] == HF_TOKEN and re.fullmatch("[0-9a-f]{64}", result["fingerprint"])
    # The result holds the environment and the fingerprint: it says no_log itself.
    assert result["_ansible_no_log"] is True and HF_TOKEN not in shown(result) and KEY not in shown(result)
    # On the host: the fingerprint only, as vllm_engine_info's no_log option; never the key or the environment.
    sent = json.dumps(runs)
    assert KEY not in sent and HF_TOKEN not in sent
    assert runs[0][1]["fingerprint"] == result["fingerprint"]
    assert "fingerprint" in [name for name, spec in vllm_engine_info_spec().items() if spec.get("no_log")]


def vllm_engine_info_spec():
    source = open(vllm_engine_info.__file__, encoding="utf-8").read()
    return {name: {"no_log": "no_log=True" in line} for name, line in re.findall(r"^\s+(\w+)=(dict\(.*\)),$", source, re.M)}


REFUSALS = [
    ("vllm_env as text", {"env": "HF_TOKEN=" + HF_TOKEN},
     "vllm_env (str), vllm_env_host (dict) and the role's vllm_service_env (dict) must be mappings (NAME: value) on "
     "spark-t: write vllm_env: {NAME: value} in the inventory."),
    ("a vLLM setting that does not exist", {"service_settings": {"max_num_seq": 8}}, "unknown vLLM setting(s) max_num_seq"),
    ("vllm_extra_args as text", {"extra_args": "--enforce-eager"}, "extra args (vllm_extra_args) must be a list"),
]


@pytest.mark.parametrize("what,changes,words", REFUSALS, ids=[row[0] for row in REFUSALS])
def test_a_refusal_is_shown_and_names_the_variable_never_a_value(run_module, host, what, changes, words):
    result, runs = plan(run_module, host, **changes)
    assert result["failed"] is True and words in result["msg"], what
    assert not result.get("_ansible_no_log") and HF_TOKEN not in shown(result) and KEY not in shown(result)
    assert not runs  # refused before the host is read


def test_a_host_that_cannot_be_read_is_a_failure_with_its_reason(run_module, host, monkeypatch):
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (1, "", "Failed to connect to bus"))
    result, _runs = plan(run_module, host)
    assert result["failed"] is True
    assert result["msg"].startswith("Could not read the main process of vllm-replica.service") and "bus" in result["msg"]
    assert not result.get("_ansible_no_log") and KEY not in shown(result)


def test_options_left_out_are_read_from_the_roles_variables_as_the_task_sees_them(run_module, host):
    task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.engine_plan",
                          args={"runtime": "container"})
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    role = {"vllm_runtime": "venv", "vllm_service_name": ARGS["unit"], "_vllm_settings": ARGS["settings"],
            "_vllm_config_dir": "/etc/factory-floor"}
    templar = mock.MagicMock()
    templar.resolve_variable_expression.side_effect = role.get
    plugin = action.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), templar, mock.MagicMock())
    seen = []
    plugin._execute_module = lambda module_name=None, module_args=None, task_vars=None, **kw: seen.append(
        module_args) or {"failed": True, "msg": "stop here"}
    plugin._remove_tmp_path = lambda path: None
    result = plugin.run(task_vars=dict(role, inventory_hostname="spark-t"))
    # The task's runtime wins over vllm_runtime; the unit, settings and env file come from the role's variables.
    argv = seen[0]["argv"]
    assert seen[0]["unit"] == "vllm-replica.service" and result["msg"] == "stop here"
    assert argv[:2] == ["/usr/bin/docker", "run"] and "/models/m" in argv
    assert argv[argv.index("--env-file") + 1] == "/etc/factory-floor/vllm-replica.service.env"
    assert task.args == {"runtime": "container"}  # the task's own arguments are left as they were


def test_an_option_of_another_type_is_refused_by_its_name(run_module, host):
    with pytest.raises(AnsibleActionFail) as refused:
        plan(run_module, host, runtime="docker")
    assert "runtime" in str(refused.value) and "venv, container" in str(refused.value)


def test_the_options_and_returns_are_the_documented_ones(run_module, host):
    documented = yaml.safe_load(engine_plan.DOCUMENTATION)["options"]
    assert set(documented) == set(action.ARGUMENT_SPEC)
    for name, spec in action.ARGUMENT_SPEC.items():
        doc = documented[name]
        assert (doc["type"], doc.get("required", False), doc.get("default"), doc.get("choices")) == (
            spec["type"], spec.get("required", False), spec.get("default"), spec.get("choices")), name
    host.runs({})
    result, _runs = plan(run_module, host)
    returned = yaml.safe_load(engine_plan.RETURN)
    assert set(result) - {"changed", "_ansible_no_log"} == set(returned)
    assert set(result["plan"]) == set(returned["plan"]["contains"])
