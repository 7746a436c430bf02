# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm role's preflight refuses an environment value the env file cannot carry as it is.

The engine's env file is read by systemd (``EnvironmentFile=``: it unquotes a leading quote,
unescapes backslashes, strips outer whitespace) and, with the container runtime, by
``run --env-file`` (as written). A value either would read otherwise is refused, by its
name, before anything changes; values both read as written pass. (That systemd reads such
values as written was checked by running a unit under a real systemd user manager.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PLAYBOOK = """
- name: Preflight only
  hosts: engine
  gather_facts: false
  tasks:
    - name: Check the settings
      ansible.builtin.include_role:
        name: factory_floor.llm.vllm
        tasks_from: preflight
"""
REFUSED = "vLLM settings on spark-t are not valid"
TOKEN = "hf_SeCrEt4f1b9e77d0c2"


def _preflight(tmp_path, runtime, env, **more):
    (tmp_path / "inventory.yml").write_text(
        "engine:\n  hosts:\n    spark-t:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n"
        % sys.executable)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    extra = {"vllm_runtime": runtime, "vllm_model": "relative-name", "vllm_served_model_name": "m",
             "vllm_env_host": env, "vllm_container_image": "vllm/vllm-openai:v0.32.0"}
    extra.update(more)
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"), "-vvv",
                           "-e", json.dumps(extra)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                                   ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                                   ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"))
    return " ".join((done.stdout + done.stderr).split())


needs_ansible_playbook = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="no ansible-playbook")


BAD = {"BACKSLASH": TOKEN + "\\x", "DOUBLE_QUOTED": '"' + TOKEN + '"', "SINGLE_QUOTE": "'" + TOKEN,
       "LEADING_SPACE": " " + TOKEN, "TRAILING_SPACE": TOKEN + " ", "NEWLINE": TOKEN + "\n", "CR": TOKEN + "\r"}
GOOD = {"HF_TOKEN": TOKEN, "INNER_QUOTE": "it's ok", "HASH": "a#b ;c", "DOLLAR": "$HOME and ${x}",
        "PUNCTUATION": "plain/path:x,y=z"}


@needs_ansible_playbook
@pytest.mark.parametrize("runtime", ["venv", "container"])
def test_values_the_env_file_would_change_are_refused_by_name(tmp_path, runtime):
    output = _preflight(tmp_path, runtime, dict(BAD, **GOOD))
    assert REFUSED in output
    for name in BAD:
        assert "vllm_env_host %s holds a newline or a backslash, or starts with a quote" % name in output, name
    for name in GOOD:
        assert "vllm_env_host %s holds" % name not in output, name
    assert "4f1b9e77" not in output


@needs_ansible_playbook
def test_values_both_readers_take_as_written_pass(tmp_path):
    assert REFUSED not in _preflight(tmp_path, "venv", GOOD)


@needs_ansible_playbook
@pytest.mark.parametrize("args, flag", [
    (["-e", "HF_TOKEN=" + TOKEN], "-e"),
    (["--env=HF_TOKEN=" + TOKEN], "--env"),
    # docker's short flag with its value attached: the Jinja this check replaced read its '\\1' as
    # chr(1) and let it through, putting the value on the command line.
    (["-eHF_TOKEN=" + TOKEN], "-e"),
])
def test_an_environment_value_on_the_container_command_line_is_refused_by_its_flag(tmp_path, args, flag):
    output = _preflight(tmp_path, "container", GOOD, vllm_container_run_args=args)
    assert REFUSED in output
    assert "vllm_container_run_args has %s: set vllm_env or vllm_env_host instead" % flag in output
    assert "4f1b9e77" not in output
