# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A directory another installer owns is created when missing and otherwise left as it is (issue 35).

node_exporter's textfile directory is node_exporter's installer's (prometheus.prometheus's node_exporter role
makes it node-exp's, 0775); the roles used to set root and 0755 on it at every run, and that role set its own
back. A real run of the site role's ``dir_if_missing`` entry point on this machine, and every role that writes
into such a directory goes through it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles.test_unit_freshness import ROOT, tasks

PLAY = """
- name: The roles' directory task
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Create it when it is missing
      ansible.builtin.include_role:
        name: factory_floor.llm.site
        tasks_from: dir_if_missing
      vars:
        site_dir_path: "{{ item }}"
      loop: %s
"""


def test_an_existing_directory_keeps_its_owner_and_mode_and_a_missing_one_is_made(tmp_path):
    existing, missing = tmp_path / "node_exporter", tmp_path / "new" / "textfile"
    existing.mkdir()
    existing.chmod(0o775)
    os.chown(existing, 65534, 65534)
    (tmp_path / "play.yml").write_text(PLAY % yaml.safe_dump([str(existing), str(missing)], default_flow_style=True))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c",
                           "local", "-e", "ansible_python_interpreter=" + sys.executable, str(tmp_path / "play.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = existing.stat()
    assert (stat.S_IMODE(kept.st_mode), kept.st_uid, kept.st_gid) == (0o775, 65534, 65534)
    made = missing.stat()
    assert stat.S_IMODE(made.st_mode) == 0o755 and made.st_uid == os.getuid()


@pytest.mark.parametrize("path, variable", [
    ("roles/nginx_proxy/tasks/install.yml", "nginx_proxy_textfile_dir"),
    ("roles/site/tasks/daemon.yml", "site_daemon.textfile_dir"),
])
def test_every_textfile_directory_goes_through_it(path, variable):
    made = [task.get("ansible.builtin.file", {}) for task in tasks(path)]
    found = [task for task, file in zip(tasks(path), made)
             if variable in str(file.get("path", "")) and file.get("state") == "directory"
             or variable in str(task.get("vars", {}).get("site_dir_path", ""))]
    assert len(found) == 1, found
    include = found[0].get("ansible.builtin.include_role") or {}
    assert (include.get("name"), include.get("tasks_from")) == ("factory_floor.llm.site", "dir_if_missing") \
        or found[0].get("ansible.builtin.include_tasks") == "dir_if_missing.yml"


# The memory guard's and keepalived's watches and the vLLM watchdog write their metrics through the site role's daemon
# entry point.
@pytest.mark.parametrize("role, daemon, variable", [("memory_guard", "_memory_guard_watch_daemon", "memory_guard_textfile_dir"),
                                                    ("keepalived", "_keepalived_watch_daemon", "keepalived_textfile_dir"),
                                                    ("vllm_watchdog", "_vllm_watchdog_daemon", "vllm_watchdog_textfile_dir")])
def test_the_watches_textfile_directory_is_the_daemon_steps(role, daemon, variable):
    with open(os.path.join(ROOT, "roles", role, "vars", "main.yml"), encoding="utf-8") as handle:
        daemon = yaml.safe_load(handle)[daemon]
    assert daemon["textfile_dir"] == "{{ %s }}" % variable
