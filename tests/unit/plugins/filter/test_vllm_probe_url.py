# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm_probe_url filter as a playbook uses it: on hostvars, in a real ansible-playbook run.

In a child process: importing Ansible's controller code (the filter's AnsibleFilterError) into
the test process would change how the other tests' modules report warnings. The logic itself
is tested in test_vllm_args.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

INVENTORY = """
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  hosts:
    specific: {vllm_listen_host: 10.0.0.5, vllm_port: "{{ 8000 + 2 }}"}
    wildcard: {}
    ipv6: {vllm_listen_host: "fd00::5"}
    chosen: {vllm_listen_host: 10.0.0.5, vllm_probe_host: 10.0.1.5}
    bad_port: {vllm_port: eighty}
"""

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.debug:
        msg: "URL {{ inventory_hostname }} {{ hostvars[inventory_hostname] | factory_floor.llm.vllm_probe_url }}"
"""


def test_playbook_on_hostvars(tmp_path):
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    done = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(tmp_path / "inventory.yml"),
                           str(tmp_path / "play.yml")], env=env, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout + done.stderr
    assert "URL specific http://10.0.0.5:8002" in out, out
    assert "URL wildcard http://127.0.0.1:8000" in out, out
    assert "URL ipv6 http://[fd00::5]:8000" in out, out
    assert "URL chosen http://10.0.1.5:8000" in out, out
    # A port that is no port fails the task, naming the variable.
    assert "vllm_port must be a port number, got 'eighty'" in out, out
    assert done.returncode != 0
