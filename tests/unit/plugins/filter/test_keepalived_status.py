# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The keepalived_status filter as the keepalived role's status entry point uses it: on a
registered loop's results, in a real ansible-playbook run (a child process, as
test_vllm_probe_url.py explains). The summary itself is tested in test_keepalived.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

RESULTS = [
    {"__keepalived_host": "spark-a", "changed": False, "holds_address": False, "vrrp_state": "BACKUP",
     "vrrp_state_current": True, "service_state": "active", "interface": "eth0", "addresses": [],
     "invocation": {"module_args": {"interface": "eth0"}}},
    {"__keepalived_host": "spark-b", "changed": False, "holds_address": True, "vrrp_state": "MASTER",
     "vrrp_state_current": True, "service_state": "active", "interface": "eth0", "addresses": []},
    {"__keepalived_host": "spark-c", "unreachable": True, "msg": "ssh: connect to host spark-c port 22"},
    # A read that failed, under the status entry point's failed_when: false.
    {"__keepalived_host": "spark-d", "changed": False, "failed": False, "failed_when_result": False,
     "msg": "ip -j addr show failed (rc 1): boom"},
]

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    results: %s
  tasks:
    - ansible.builtin.debug:
        msg: "STATUS {{ (results | factory_floor.llm.keepalived_status('__keepalived_host', '10.89.7.100/24')) | to_json }}"
    - ansible.builtin.debug:
        msg: "{{ 'not a list' | factory_floor.llm.keepalived_status }}"
"""


def test_status_in_a_playbook(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK % json.dumps(RESULTS))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    done = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-c", "local",
                           str(tmp_path / "play.yml")], env=env, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout + done.stderr
    line = [x for x in out.splitlines() if '"msg": "STATUS ' in x]
    assert line, out
    status = json.loads(json.loads("{" + line[0].strip().rstrip(",") + "}")["msg"][len("STATUS "):])
    assert status["holders"] == ["spark-b"]
    assert status["ok"] is True
    assert status["message"] == ("The floating address 10.89.7.100 is on spark-b. spark-a BACKUP; spark-b MASTER; "
                                 "spark-c keepalived unknown (unreachable); spark-d keepalived unknown (ip -j addr show failed (rc 1): boom).")
    assert "invocation" not in status["hosts"]["spark-a"]
    assert "keepalived_status expects a loop's results (a list), got str" in out, out
    assert done.returncode != 0
