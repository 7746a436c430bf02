# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm role's ``settings`` entry point exports its defaults without a warning (issue 35).

vllm_replica, vllm_split, vllm_watchdog, tool_gate and the site check include it with ``public: true`` to see the
shared ``vllm_*`` defaults, often under a condition (an include with ``when``, a block's). Its one task was
``ansible.builtin.meta: noop``, which inherits that condition and made every switch print "[WARNING]: noop task
does not support when conditional". A real ansible-playbook run on this machine, included as they include it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.factory_floor.llm.tests.unit.roles.test_unit_freshness import ROOT

PLAY = """
- name: Include the shared settings as the roles do, under a condition
  hosts: localhost
  gather_facts: false
  tasks:
    - name: A block with a condition, as vllm_replica's leave.yml is included
      when: inventory_hostname == 'localhost'
      block:
        - name: Load the shared vLLM settings
          ansible.builtin.include_role:
            name: factory_floor.llm.vllm
            tasks_from: settings
            public: true

    - name: The role's defaults are visible after it
      ansible.builtin.assert:
        that:
          - vllm_port | int == 8000
          - vllm_runtime == 'container'
"""


def test_settings_exports_the_defaults_and_warns_nothing(tmp_path):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c",
                           "local", "-e", "ansible_python_interpreter=" + sys.executable, str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "does not support when conditional" not in output, output
    assert "[WARNING]" not in output, output
