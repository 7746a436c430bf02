# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nginx_proxy role's ``drain_proxies`` entry point in a real ansible-playbook run, in check mode.

Two engine hosts and two proxy hosts, all on a local connection; the drain directory and the
checker's state file are under a temporary directory. Included once (``run_once``) from the engine
hosts, as the topology switch's cut-over and gate do, it runs ``drain`` once per proxy host,
delegated there, for the first engine host only; included on each engine host (the switch's
rollback), once per engine host and proxy host.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

PLAYBOOK = """
- name: Drain from the engine hosts
  hosts: gb10
  gather_facts: false
  tasks:
    - name: Drain the engines on every proxy host
      ansible.builtin.include_role:
        name: factory_floor.llm.nginx_proxy
        tasks_from: drain_proxies
      vars:
        nginx_proxy_drain: %(drain)s
        nginx_proxy_drain_state: present
        nginx_proxy_drain_holder: switch-to-split
      run_once: %(run_once)s
"""

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def drain_proxies(tmp_path, drain, run_once):
    """The (host, delegated host) pairs the drain ran for, in check mode."""
    (tmp_path / "drain").mkdir()
    local = "{ansible_connection: local, ansible_python_interpreter: %s}" % sys.executable
    (tmp_path / "inventory.yml").write_text(
        "gb10:\n  hosts:\n    spark-a: %s\n    spark-b: %s\nproxy:\n  hosts:\n    proxy-1: %s\n    proxy-2: %s\n"
        % (local, local, local, local))
    (tmp_path / "play.yml").write_text(PLAYBOOK % {"drain": drain, "run_once": run_once})
    extra = {"_nginx_proxy_drain_dir": str(tmp_path / "drain"), "_nginx_proxy_state_file": str(tmp_path / "none.json")}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "--check", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert not os.listdir(tmp_path / "drain"), output  # check mode: nothing written
    return sorted(re.findall(r"^changed: \[(\S+) -> (\S+)\]", output, re.MULTILINE)), output


@needs_tools
def test_included_once_it_drains_the_list_on_every_proxy_host(tmp_path):
    ran, output = drain_proxies(tmp_path, '["spark-a", "spark-b"]', "true")
    assert ran == [("spark-a", "proxy-1"), ("spark-a", "proxy-2")], output


@needs_tools
def test_included_on_each_engine_host_each_drains_itself_on_every_proxy_host(tmp_path):
    ran, output = drain_proxies(tmp_path, '["{{ inventory_hostname }}"]', "false")
    assert ran == [("spark-a", "proxy-1"), ("spark-a", "proxy-2"), ("spark-b", "proxy-1"), ("spark-b", "proxy-2")], output
