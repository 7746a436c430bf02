# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm role's ``service`` entry point as a run renders it, on this machine, at -vvv.

The real tasks (plan, the env file, the unit with its ``systemd-analyze verify``), with the
engine's files under a temporary directory and a stand-in ``systemctl`` (nothing runs). What
a user would check:

- what the inventory says is what vLLM gets: systemd's own parser (``systemd --test``) reads
  the unit's ``ExecStart=`` as exactly the rendered command line, backslashes, ``$``, ``%``,
  quotes and all;
- no secret at any verbosity: the API key, a ``vllm_env`` value (``HF_TOKEN``) and the
  configuration fingerprint (derived from them) appear nowhere in the output;
- files: the key, the environment and the fingerprint are in the root-only env file; the
  world-readable unit holds none of them (``systemctl show`` would give them to anyone).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.tests.unit.plugins import systemd_dump

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
SECRET = "sk-7f3e9a2c41d86b05"
HF_TOKEN = "hf_SeCrEt4f1b9e77d0c2"
ADVERSARIAL = ["a\\b", "${HOME}", "$x", "%h", '"q"', "it's", "sp ace", "tab\\there", "100%", "--opt=${x}", ""]

PLAYBOOK = """
- name: Render one engine
  hosts: engine
  gather_facts: false
  module_defaults:
    factory_floor.llm.vllm_engine_info:
      systemctl: %(systemctl)s
    factory_floor.llm.engine_plan:
      systemctl: %(systemctl)s
  tasks:
    - name: Load the shared settings
      ansible.builtin.include_role:
        name: factory_floor.llm.vllm
        tasks_from: settings
        public: true
    - name: Render the engine (state present, nothing started)
      ansible.builtin.include_role:
        name: factory_floor.llm.vllm
        tasks_from: service
      vars:
        vllm_service_name: vllm-replica.service
        vllm_service_description: test
        vllm_service_conflicts: []
        vllm_service_env: {}
        vllm_service_settings: {}
        vllm_service_state: present
        vllm_service_restart: false
    - name: Keep the rendered command line for the test
      ansible.builtin.copy:
        content: "{{ __vllm_argv | to_json }}"
        dest: %(argv)s
        mode: "0644"
"""

needs_tools = pytest.mark.skipif(
    not os.path.exists(ANSIBLE_PLAYBOOK) or not shutil.which("systemd-analyze") or not systemd_dump.AVAILABLE,
    reason="needs ansible-playbook next to this Python, systemd-analyze and systemd")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engine")
    for sub in ("bin", "venv/bin", "etc", "units"):
        (tmp / sub).mkdir(parents=True)
    # Nothing runs: `systemctl show` says so, every other call succeeds.
    (tmp / "bin" / "systemctl").write_text("#!/bin/sh\ncase \"$1\" in show) echo ActiveState=inactive; "
                                           "echo MainPID=0;; esac\nexit 0\n")
    (tmp / "venv" / "bin" / "vllm").write_text("#!/bin/sh\nexit 0\n")
    for path in (tmp / "bin" / "systemctl", tmp / "venv" / "bin" / "vllm"):
        path.chmod(0o755)
    (tmp / "inventory.yml").write_text(
        "engine:\n  hosts:\n    spark-t:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n"
        % sys.executable)
    (tmp / "play.yml").write_text(PLAYBOOK % {"systemctl": tmp / "bin" / "systemctl", "argv": tmp / "argv.json"})
    extra = {"vllm_runtime": "venv", "vllm_venv": str(tmp / "venv"), "_vllm_config_dir": str(tmp / "etc"),
             "_vllm_unit_dir": str(tmp / "units"), "vllm_model": "/models/m", "vllm_served_model_name": "m",
             "vllm_api_key": SECRET, "vllm_env": {"HF_TOKEN": HF_TOKEN}, "vllm_extra_args": ADVERSARIAL}
    env = dict(os.environ, PATH="%s:%s" % (tmp / "bin", os.environ.get("PATH", "/usr/bin:/bin")),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp / "inventory.yml"), str(tmp / "play.yml"), "-vvv",
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return {"output": output, "env": tmp / "etc" / "vllm-replica.service.env",
            "unit": tmp / "units" / "vllm-replica.service", "argv": json.loads((tmp / "argv.json").read_text()),
            "venv": str(tmp / "venv")}


def _digest(rendered):
    """The fingerprint, wherever the role wrote it."""
    text = rendered["env"].read_text() + rendered["unit"].read_text()
    found = re.findall(r"^(?:Environment=)?FACTORY_FLOOR_CONFIG=([0-9a-f]{64})$", text, re.M)
    assert len(found) == 1
    return found[0]


@needs_tools
def test_systemd_runs_exactly_the_inventorys_arguments(rendered):
    argv = rendered["argv"]
    assert argv[:3] == [rendered["venv"] + "/bin/vllm", "serve", "/models/m"]
    assert argv[-len(ADVERSARIAL):] == ADVERSARIAL
    assert systemd_dump.exec_start(rendered["unit"].read_text()) == argv


@needs_tools
def test_no_secret_at_any_verbosity(rendered):
    output = rendered["output"]
    for secret in (SECRET, HF_TOKEN, "7f3e9a2c", "4f1b9e77", _digest(rendered)):
        assert secret not in output
    # The run did show what it may: the command line (anyone can read it in /proc).
    assert "--served-model-name" in output


@needs_tools
def test_secrets_are_in_the_root_only_env_file_and_not_in_the_unit(rendered):
    env, unit = rendered["env"], rendered["unit"]
    assert stat.S_IMODE(env.stat().st_mode) == 0o600 and env.stat().st_uid == 0
    text = env.read_text()
    assert "VLLM_API_KEY=%s\n" % SECRET in text and "HF_TOKEN=%s\n" % HF_TOKEN in text
    # World-readable, as systemd expects unit files to be: nothing secret or derived from a secret.
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    for secret in (SECRET, HF_TOKEN, _digest(rendered), "FACTORY_FLOOR_CONFIG="):
        assert secret not in unit.read_text()
    assert "EnvironmentFile=%s\n" % env in unit.read_text()
