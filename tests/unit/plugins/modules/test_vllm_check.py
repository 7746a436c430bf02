# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.vllm_check`` through its action plugin: the variables it reads as a task sees them (Ansible's
own templar), other hosts' facts from ``hostvars``, check mode, its documentation against its argument spec, the
vllm role's calls, and whole ``ansible-playbook`` runs. The refusals themselves are
tests/unit/plugins/module_utils/test_vllm_check.py's."""

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
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.vllm_check import ARGUMENT_SPEC, ActionModule
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_check as vc
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import assert_documents_the_spec, documented_options, run_action

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SECRET = "hf_SeCrEt4f1b9e77d0c2"
KEY = "lab-key-7f3e9a2c41d86b05"
ID_A = "sha256:" + "a" * 64
ID_B = "sha256:" + "b" * 64

with open(os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "vllm_check", "engine.yml"),
          encoding="utf-8") as _handle:
    ENGINE = yaml.safe_load(_handle)
ENGINE.update({
    "vllm_env": {"HF_TOKEN": SECRET},
    # As the role's vars/main.yml has them: templates, read when the check reads them.
    "_site_topologies": {"replicas": {"unit": "vllm-replica.service"}, "split": {"unit": "vllm-split.service"}},
    "_vllm_units": {"replicas": [trust_as_template("{{ _site_topologies.replicas.unit }}")],
                    "split": [trust_as_template("{{ _site_topologies.split.unit }}")]},
})
SEEN = {"model_dir": {"stat": {"exists": True, "isdir": True}}, "venv_vllm": {"skipped": True},
        "tool_parsers": {"skipped": True}, "units_active": {"rc": 3, "stdout_lines": ["inactive", "inactive"]},
        "port_listeners": {"rc": 0, "stdout": ""}, "port_units": {"skipped": True}}


def run(args, variables, check_mode=False):
    """The action plugin's run, with Ansible's templar over ``variables`` as the task's."""
    return run_action(ActionModule, "vllm_check", args, variables, check_mode=check_mode)


def test_the_engine_check_reads_the_settings_itself():
    result = run(dict(SEEN, check="engine"), ENGINE)
    assert result == {"changed": False, "errors": []}
    result = run(dict(SEEN, check="engine", port_listeners={"rc": 0, "stdout": "LISTEN 0 128 *:8000 users:((pid=7))"},
                      port_units={"rc": 0, "stdout_lines": ["vllm-replica.service"]}), ENGINE)
    # The port is held by the role's own unit, named through the role's templated _vllm_units.
    assert result["errors"] == []


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_refusal_fails_the_task_naming_the_variable_never_the_value(check_mode):
    variables = dict(ENGINE, vllm_port=0, vllm_env={"HF_TOKEN": SECRET + "\n"}, vllm_api_key_next="bad " + KEY)
    result = run(dict(SEEN, check="engine"), variables, check_mode=check_mode)
    assert result["failed"] is True and result["changed"] is False
    assert [error["check"] for error in result["errors"]] == ["settings", "api_key_next"]
    assert result["msg"].startswith("1) vLLM settings on spark-1 are not valid: vllm_port=0 (1-65535); vllm_env "
                                    "HF_TOKEN holds a newline")
    assert "2) vllm_api_key_next on spark-1 cannot be used" in result["msg"]
    assert SECRET not in repr(result) and KEY not in repr(result)


def _read_run(variables, results, check_mode=False):
    """The engine check given no observation: the plugin reads the host (``_execute_module`` answered from
    ``results`` by option), in check mode for real too."""
    task = mock.MagicMock(args={"check": "engine"}, check_mode=check_mode, async_val=0,
                          action="factory_floor.llm.vllm_check")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    templar = Templar(loader=DataLoader(), variables=variables)
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), templar, None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args["argv"][0] if "argv" in module_args else module_args["path"],
                      task.check_mode))
        return dict(results[len(calls) - 1])

    with mock.patch.object(action, "_execute_module", side_effect=execute):
        return action.run(task_vars=variables), calls, task


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_engine_check_reads_the_host_itself_when_given_nothing(check_mode):
    variables = dict(ENGINE, vllm_model="/models/m", vllm_port=8000, _vllm_tool_parser_probe="print()")
    held = {"rc": 0, "stdout": "LISTEN 0 128 *:8000 users:((\"jupyter\",pid=7,fd=3))"}
    result, calls, task = _read_run(variables, [
        {"stat": {"exists": True, "isdir": True}}, {"rc": 3, "stdout_lines": ["inactive", "inactive"]}, held,
        {"rc": 0, "stdout_lines": ["jupyter.service"]}], check_mode=check_mode)
    assert [call[:2] for call in calls] == [("ansible.legacy.stat", "/models/m"), ("ansible.legacy.command", "systemctl"),
                                            ("ansible.legacy.command", "ss"), ("ansible.legacy.command", "ps")]
    assert all(call[2] is False for call in calls) and task.check_mode is check_mode
    assert [error["check"] for error in result["errors"]] == ["port"] and result["failed"] is True
    assert result["msg"].startswith("Port 8000 on spark-1 is held by jupyter.service")


def test_a_failed_port_read_fails_the_engine_check_with_its_message():
    variables = dict(ENGINE, vllm_model="hub/name", vllm_port=8000, _vllm_tool_parser_probe="print()")
    result, calls, _task = _read_run(variables, [{"rc": 3, "stdout_lines": ["inactive"]},
                                                 {"failed": True, "rc": 1, "msg": "non-zero return code"}])
    assert len(calls) == 2 and result == {"failed": True, "msg": "non-zero return code"}


def test_an_include_var_is_what_the_check_reads():
    # vllm_split's preflight passes its model as vllm_model; an upgrade passes its candidate's.
    variables = dict(ENGINE, __split_model="/models/split", vllm_model=trust_as_template("{{ __split_model }}"))
    result = run(dict(SEEN, check="engine", model_dir={"stat": {"exists": False}}), variables)
    assert result["errors"][0]["message"].startswith("vllm_model=/models/split does not exist")


def test_an_undefined_setting_fails_naming_it():
    variables = dict(ENGINE)
    del variables["vllm_served_model_name"]
    with pytest.raises(AnsibleActionFail, match="vllm_check engine reads vllm_served_model_name, which is not defined"):
        run(dict(SEEN, check="engine"), variables)


def test_optional_variables_may_be_undefined():
    message = run({"check": "switch"}, {})["errors"][0]["message"]
    assert message.startswith("switch_to must be 'replicas' or 'split' (got '')")
    assert run({"check": "switch"}, {"switch_to": "split"})["errors"] == []


def test_an_unknown_check_or_option_is_refused_by_the_spec():
    with pytest.raises(AnsibleActionFail, match="check"):
        run({"check": "layout"}, {})
    with pytest.raises(AnsibleActionFail, match="Unsupported parameters"):
        run({"check": "switch", "switch_to": "split"}, {})


def test_image_builds_reads_every_play_hosts_fact_from_hostvars():
    def fact(image_id):
        return {"image": {"ref": "vllm/vllm-openai:v0.32.0", "present": True, "id": image_id}, "running": {}}

    variables = {"inventory_hostname": "spark-1", "vllm_runtime": "container", "vllm_image_check": fact(ID_A),
                 "vllm_deploy_image_change": False, "vllm_container_image": "vllm/vllm-openai:v0.32.0",
                 "_vllm_units": {"replicas": ["vllm-replica.service"], "split": ["vllm-split.service"]},
                 "ansible_play_hosts": ["spark-1", "spark-2", "gw"],
                 "hostvars": {"spark-1": {"vllm_image_check": fact(ID_A)}, "spark-2": {"vllm_image_check": fact(ID_B)},
                              "gw": {}}}
    result = run({"check": "image_builds"}, variables)
    assert "vllm/vllm-openai:v0.32.0 is spark-1 %s, spark-2 %s." % (ID_A, ID_B) in result["msg"]
    variables["hostvars"]["spark-2"] = {"vllm_image_check": fact(ID_A)}
    assert run({"check": "image_builds"}, variables)["errors"] == []


# ------------------------------------------------------------------ the documentation and the role's calls

def test_the_documentation_is_the_argument_spec():
    assert_documents_the_spec("vllm_check", ARGUMENT_SPEC)
    assert documented_options("vllm_check")[0]["check"]["choices"] == list(vc.CHECKS)


def test_the_module_file_is_documentation_only_and_the_action_supports_check_mode():
    _options, text = documented_options("vllm_check")
    assert "def main" not in text and "import" not in text.replace("from __future__ import annotations", "")
    assert ActionModule._supports_check_mode is True


def _role_calls():
    calls = []

    def walk(tasks, where):
        for task in tasks or []:
            if "factory_floor.llm.vllm_check" in task:
                calls.append((where, task))
            for key in ("block", "rescue", "always"):
                walk(task.get(key), where)

    # The engine base and the procedures that refuse before they change anything.
    for role in ("vllm", "topology_switch", "site_deploy"):
        tasks_dir = os.path.join(ROOT, "roles", role, "tasks")
        for name in sorted(os.listdir(tasks_dir)):
            with open(os.path.join(tasks_dir, name), encoding="utf-8") as handle:
                walk(yaml.safe_load(handle), name)
    return calls


def test_the_role_runs_every_check_where_it_refused_before():
    where = {(name, task["factory_floor.llm.vllm_check"]["check"]) for name, task in _role_calls()}
    # deploy_preflight.yml's restart check is deploy_restart_check's (it asks the engine itself, then this check's rule).
    assert where == {("preflight.yml", "engine"), ("deploy_preflight.yml", "deploy"), ("switch_preflight.yml", "switch"),
                     ("switch_preflight.yml", "switch_incumbent"), ("switch_preflight.yml", "switch_hosts"),
                     ("switch_preflight.yml", "switch_proxy"),
                     ("image_check.yml", "image"), ("image_check.yml", "image_builds")}
    for name, task in _role_calls():
        assert set(task["factory_floor.llm.vllm_check"]) <= set(ARGUMENT_SPEC), name
        # Once per run where the Jinja ran once: the checks over the whole inventory.
        assert bool(task.get("run_once")) is (task["factory_floor.llm.vllm_check"]["check"]
                                              in ("deploy", "switch", "switch_hosts", "switch_proxy")), name


def test_the_tasks_keep_no_refusal_of_their_own():
    for role, name in (("vllm", "preflight.yml"), ("site_deploy", "deploy_preflight.yml"), ("vllm", "image_check.yml")):
        with open(os.path.join(ROOT, "roles", role, "tasks", name), encoding="utf-8") as handle:
            text = handle.read()
        assert "ansible.builtin.assert" not in text and "ansible.builtin.fail" not in text, name
    with open(os.path.join(ROOT, "roles", "topology_switch", "tasks", "switch_preflight.yml"), encoding="utf-8") as handle:
        fails = [task for task in yaml.safe_load(handle) if "ansible.builtin.fail" in task]
    # The gate's refusal is _switch_plan's message, printed as it is.
    assert [task["ansible.builtin.fail"]["msg"] for task in fails] == ["{{ vllm_switch_plan.refusal }}"]


# ------------------------------------------------------------------ whole runs

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
needs_ansible_playbook = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                            reason="ansible-playbook not installed next to this Python")
PLAYBOOK = """
- name: Two engine hosts
  hosts: gb10
  gather_facts: false
  vars:
    vllm_runtime: container
    vllm_container_image: vllm/vllm-openai:v0.32.0
  tasks:
    - name: The vllm role's settings (its defaults and vars)
      ansible.builtin.include_role:
        name: factory_floor.llm.vllm
        tasks_from: settings
        public: true
    - name: What each host's image check found
      ansible.builtin.set_fact:
        vllm_image_check: {image: {ref: vllm/vllm-openai:v0.32.0, present: true, id: "%s"}, running: {}}
    - name: The deploy's topology check, once
      factory_floor.llm.vllm_check:
        check: deploy
      run_once: true
    - name: The image's builds across the hosts
      factory_floor.llm.vllm_check:
        check: image_builds
"""


@needs_ansible_playbook
@pytest.mark.parametrize("topology, refused", [
    ("split", "vllm_container_image names different builds on different hosts: vllm/vllm-openai:v0.32.0 is spark-a "
              "%s, spark-b %s." % (ID_A, ID_B)),
    ("both", "Set topology to 'replicas' or 'split' in the inventory (now 'both'), and list at least one machine in "
             "group gb10 (now 2) and one proxy host in group proxy (now 1)."),
])
def test_whole_runs(tmp_path, topology, refused):
    python = sys.executable
    (tmp_path / "hosts.yml").write_text(
        "gb10:\n  hosts:\n    spark-a: {ansible_connection: local, ansible_python_interpreter: %s, id: '%s'}\n"
        "    spark-b: {ansible_connection: local, ansible_python_interpreter: %s, id: '%s'}\n"
        "proxy:\n  hosts:\n    gw: {ansible_connection: local, ansible_python_interpreter: %s}\n"
        % (python, ID_A, python, ID_B, python))
    (tmp_path / "play.yml").write_text(PLAYBOOK % "{{ id }}")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                           "-e", "topology=" + topology], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                                   ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                                   ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"))
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, output
    assert refused in output, output[-3000:]


SWITCH_PLAY = """
- name: The switch's target check
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Refuse a target other than replicas or split
      factory_floor.llm.vllm_check:
        check: switch
      vars:
        switch_to: sideways
"""


@needs_ansible_playbook
@pytest.mark.parametrize("where, named", [
    # A checkout's playbooks directory: the file, as its README runs it.
    ("playbooks", "use playbooks/switch-to-replicas.yml or playbooks/switch-to-split.yml."),
    # An installed collection's, and an operator's own playbook: what ansible-playbook runs from anywhere.
    ("collections/ansible_collections/factory_floor/llm/playbooks",
     "use factory_floor.llm.switch_to_replicas or factory_floor.llm.switch_to_split."),
    ("site", "use factory_floor.llm.switch_to_replicas or factory_floor.llm.switch_to_split."),
])
def test_a_refusal_names_the_playbook_the_way_it_runs_there(tmp_path, where, named):
    (tmp_path / where).mkdir(parents=True)
    (tmp_path / where / "play.yml").write_text(SWITCH_PLAY)
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(tmp_path / where / "play.yml")],
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                                   ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"))
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, output
    assert "switch_to must be 'replicas' or 'split' (got 'sideways'); " + named in output, output[-3000:]
