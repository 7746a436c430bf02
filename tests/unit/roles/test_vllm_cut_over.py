# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The switch's cut-over (the topology_switch role's ``switch_cut_over`` entry point) in a real ansible-playbook run.

One "engine host" on a local connection; ``systemctl`` is a stand-in on the PATH (and for
``factory_floor.llm.vllm_engine_info``) that starts nothing and says the unit's main process is
PID 4242, whose command line and environment are files under a fake ``/proc``. What the run noted
for the switch's report (the fact ``maintenance_window_host``) is written out at the end:

* the process the new unit runs is checked against what the switch rendered for it (its command
  line and fingerprint), the way deploy checks a (re)started engine: a process that runs something
  else is a failed start, noted for the rollback;
* ``old_stopped`` is a time on the controller's clock, whatever time zone the engine host is in
  (the modules run with another ``TZ`` than the controller here), and each host's own: its stop's
  time after ``drained``, not the slowest host's (the stand-in ``systemctl enable`` sleeps per host).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
RENDERED = ["/opt/vllm/bin/vllm", "serve", "/models/B", "--max-num-seqs", "10"]
DIGEST = "0" * 63 + "1"

PLAYBOOK = """
- name: Cut over one engine host
  hosts: gb10
  gather_facts: false
  environment:
    TZ: %(host_tz)s
    STOP_SECONDS: "{{ stop_seconds | default(0) }}"
  module_defaults:
    factory_floor.llm.vllm_engine_info:
      systemctl: %(systemctl)s
      proc: %(proc)s
      settle: 0
  tasks:
    - name: Stop the old topology and start the new one
      ansible.builtin.include_role:
        name: factory_floor.llm.topology_switch
        tasks_from: switch_cut_over
      vars:
        switch_to: replicas
        vllm_switch_plan: {unit: vllm-replica.service, other_unit: vllm-split.service, other: split, gated: true,
                           admit_at_cut_over: false}
    - name: Keep what it noted for the test
      ansible.builtin.copy:
        content: "{{ ansible_facts.maintenance_window_host | default({}) | to_json }}"
        dest: "%(noted)s{{ '' if inventory_hostname == 'spark-t' else '.' ~ inventory_hostname }}"
        mode: "0644"
"""

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def cut_over(tmp_path, runs, host_tz="UTC", stop_seconds=None):
    """Run the cut-over with the engine process running ``runs`` (argv, fingerprint); what the host noted."""
    for sub in ("bin", "units", "proc/4242"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    argv, fingerprint = runs
    (tmp_path / "proc" / "4242" / "cmdline").write_bytes(("\0".join(argv) + "\0").encode())
    (tmp_path / "proc" / "4242" / "environ").write_bytes(("FACTORY_FLOOR_CONFIG=%s\0" % fingerprint).encode())
    systemctl = tmp_path / "bin" / "systemctl"
    systemctl.write_text("#!/bin/sh\ncase \"$1\" in show) echo ActiveState=active; echo MainPID=4242; "
                         "echo NeedDaemonReload=no;; enable) sleep \"${STOP_SECONDS:-0}\";; esac\nexit 0\n")
    systemctl.chmod(0o755)
    hosts = stop_seconds or {"spark-t": 0}
    (tmp_path / "inventory.yml").write_text("gb10:\n  hosts:\n%sproxy:\n  hosts: {}\n" % "".join(
        "    %s: {ansible_connection: local, ansible_python_interpreter: %s, stop_seconds: %s}\n"
        % (host, sys.executable, seconds) for host, seconds in hosts.items()))
    (tmp_path / "play.yml").write_text(PLAYBOOK % {"host_tz": host_tz, "systemctl": systemctl, "proc": tmp_path / "proc",
                                                   "noted": tmp_path / "noted.json"})
    # No watchdog unit to disable, no textfile directory: the old topology's watchdog is not there.
    extra = {"_vllm_unit_dir": str(tmp_path / "units"), "_vllm_watchdog_unit_dir": str(tmp_path / "units"),
             "vllm_watchdog_textfile_dir": "", "__vllm_argv": RENDERED, "__vllm_plan": {"fingerprint": DIGEST}}
    # The controller in UTC; the engine host's modules in host_tz (the play's environment).
    env = dict(os.environ, TZ="UTC", PATH="%s:%s" % (tmp_path / "bin", os.environ.get("PATH", "/usr/bin:/bin")),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    before = time.time()
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    after = time.time()
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return json.loads((tmp_path / "noted.json").read_text()), before, after, output


@needs_tools
def test_the_new_engine_running_what_was_rendered_passes(tmp_path):
    noted, _before, _after, output = cut_over(tmp_path, (RENDERED, DIGEST))
    assert not noted.get("failed"), (noted, output)
    assert "old_stopped" in noted["events"]


@needs_tools
@pytest.mark.parametrize("runs, why", [
    # systemd ran an older definition of the unit (a drop-in setting ExecStart=, a unit it had not reloaded).
    ((RENDERED[:-1] + ["12"], DIGEST), "its vLLM arguments differ (runs --max-num-seqs 12; rendered --max-num-seqs 10)"),
    ((RENDERED, "f" * 64), "configuration fingerprint (FACTORY_FLOOR_CONFIG) is not the rendered one"),
])
def test_a_new_engine_that_runs_something_else_is_a_failed_start(tmp_path, runs, why):
    noted, _before, _after, output = cut_over(tmp_path, runs)
    assert noted.get("failed") is True, (noted, output)
    assert noted["reason"].startswith("spark-t: vllm-replica.service was just started, and it does not run the "
                                      "configuration rendered for it"), noted["reason"]
    assert why in noted["reason"]


@needs_tools
@pytest.mark.parametrize("host_tz", ["UTC", "Pacific/Kiritimati", "America/Los_Angeles"])
def test_old_stopped_is_on_the_controllers_clock_whatever_the_hosts_time_zone(tmp_path, host_tz):
    noted, before, after, output = cut_over(tmp_path, (RENDERED, DIGEST), host_tz=host_tz)
    old_stopped = float(noted["events"]["old_stopped"])
    assert before <= old_stopped <= after, (host_tz, old_stopped - before, output)


@needs_tools
def test_each_host_notes_its_own_stop_not_the_slowest_hosts(tmp_path):
    # A split's headless rank stops seconds after its head: the task ends on both once the slower is done.
    _noted, _before, _after, output = cut_over(tmp_path, (RENDERED, DIGEST), stop_seconds={"spark-t": 0, "spark-u": 3})
    quick = json.loads((tmp_path / "noted.json").read_text())["events"]
    slow = json.loads((tmp_path / "noted.json.spark-u").read_text())["events"]
    assert slow["old_stopped"] - slow["drained"] >= 3.0, output
    # Measured here: 0.05-0.2 s for the quick host's no-op command (spawn, module wrapper); 2 s leaves room for a busy
    # machine and stays under the 3 s the slow host's stop takes.
    assert quick["old_stopped"] - quick["drained"] < 2.0, (quick, slow)
