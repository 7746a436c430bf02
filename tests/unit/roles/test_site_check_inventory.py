# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""playbooks/site-check.yml runs deploy.yml's inventory checks and lists what they find (issue 35).

The trial: an inventory with ``vllm_max_num_seq: 16`` (for vllm_max_num_seqs) went through the site
check with no word about it; deploy.yml then refused it. Here site-check.yml is run by ansible-playbook
for real, for real and under --check, against inventories whose hosts are all at 127.0.0.1 port 1
(nothing listens: each host is reported unreachable, none is contacted), so only the controller's
checks see anything: the summary lists the misspelled name with the closest declared one and a value
of the wrong type in one line, and still reports every host (its other checks ran). The decision:
tests/unit/plugins/module_utils/test_site_check.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

HOSTS = """\
all:
  vars:
    ansible_connection: ssh
    ansible_port: 1
  children:
    gb10:
      hosts:
        spark-1: {ansible_host: 127.0.0.1}
        spark-2: {ansible_host: 127.0.0.2}
    proxy:
      hosts:
        gw: {ansible_host: 127.0.0.3}
"""
GOOD = "vllm_model: /models/M\n"
TYPO = GOOD + "vllm_max_num_seq: 16\n"
TYPE = GOOD + "vllm_gpu_memory_utilization: '80%'\n"

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                reason="ansible-playbook not installed next to this Python")


def _site_check(tmp_path, group_vars, *args):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(HOSTS)
    (tmp_path / "group_vars" / "all.yml").write_text("topology: replicas\n")
    (tmp_path / "group_vars" / "gb10.yml").write_text(group_vars)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path), os.path.join(ROOT, "playbooks", "site-check.yml")]
                          + list(args), cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    return done.returncode, done.stdout + done.stderr


def _summary(output):
    """The summary's lines as the report prints them (a debug msg: one quoted line each, from "Site check:")."""
    lines = []
    for line in output[output.index('\n        "Site check: '):].splitlines()[1:]:
        if not line.strip().startswith('"'):
            break
        lines.append(line.strip().rstrip(",")[1:-1])
    return lines


@pytest.mark.parametrize("args", [[], ["--check"]], ids=["real", "check"])
def test_a_misspelled_variable_is_listed_with_the_closest_name_and_every_host_is_still_checked(tmp_path, args):
    rc, output = _site_check(tmp_path, TYPO, *args)
    assert rc != 0, output
    lines = _summary(output)
    assert lines[0] == "Site check: the inventory has 1 problem (playbooks/deploy.yml refuses it); 3 of 3 hosts have problems"
    assert lines[1] == "inventory: problem"
    assert lines[2].startswith("  - vllm_max_num_seq (set for spark-1, spark-2) is not a variable of factory_floor.llm: "
                               "did you mean vllm_max_num_seqs?"), lines
    # The hosts' own checks still ran: each is reported.
    for host in ("gw", "spark-1", "spark-2"):
        assert "%s: problem" % host in lines
    assert sum(1 for line in lines if line.startswith("  - not reachable with sudo")) == 3
    assert "changed=1" not in output and "Traceback" not in output


def test_a_value_of_the_wrong_type_is_one_line_of_the_summary(tmp_path):
    rc, output = _site_check(tmp_path, TYPE, "--check")
    assert rc != 0, output
    lines = _summary(output)
    assert lines[1:3] == ["inventory: problem",
                          "  - vllm_gpu_memory_utilization on spark-1, spark-2 is '80%': must be a number between 0 and "
                          "1 (a fraction, e.g. 0.80)."], lines


def test_an_inventory_without_a_problem_says_so(tmp_path):
    rc, output = _site_check(tmp_path, GOOD)
    lines = _summary(output)
    assert rc != 0 and lines[0] == "Site check: 3 of 3 hosts have problems", output
    assert lines[1] == "inventory: ok (playbooks/deploy.yml's layout and inventory variable checks pass)"
