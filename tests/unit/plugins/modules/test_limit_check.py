# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.limit_check``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.action.limit_check import inventory_args, task_args
from ansible_collections.factory_floor.llm.plugins.modules import limit_check as module

LAB = {"engines": ["spark-a", "spark-b"], "proxies": ["gateway"], "inventory": ["spark-a", "spark-b", "gateway"],
       "limit": "spark-a"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_deploy_limited_to_one_engine_names_the_proxy_to_read(run_module, check_mode):
    result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], _ansible_check_mode=check_mode)).result
    assert result["changed"] is False
    assert result["errors"] == []
    assert result["gather"] == ["gateway"]
    assert result["outside"] == ["spark-b", "gateway"]


def test_the_split_limited_to_one_rank_is_refused(run_module):
    code, result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], topology="split"))
    assert code == 1 and result["failed"] is True
    assert "Use --limit spark-a,spark-b, or no --limit. Nothing has changed." in result["msg"]
    assert result["errors"][0]["limit"] == "spark-a,spark-b"


def test_an_unreadable_proxy_is_refused_after_the_gather(run_module):
    result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], gathered=True,
                                     gather_errors={"gateway": "unreachable"})).result
    assert result["failed"] is True
    assert "the address of gateway could not be read (gateway: unreachable)" in result["msg"]


def test_unknown_playbook_is_refused_by_the_argument_spec(run_module):
    result = run_module(module, dict(LAB, playbook="nope", hosts=[])).result
    assert result["failed"] is True and "value of playbook must be one of" in result["msg"]


# ------------------------------------------------------------------ the action plugin: what it reads from hostvars

def test_the_action_reads_keepalived_addresses_and_gather_errors_from_hostvars(run_module):
    task_vars = {"groups": {"all": ["spark-a", "spark-b", "gw-1", "gw-2"]},
                 "hostvars": {"spark-a": {"__site_limit_gathered": {"results": [
                     {"item": "gw-2", "unreachable": True, "msg": "unreachable"}]}},
                     "spark-b": {"ansible_facts": {"default_ipv4": {"address": "192.0.2.12"}}},
                     "gw-1": {"keepalived_enabled": "no", "ansible_facts": {"default_ipv4": {"address": "192.0.2.1"}}},
                     "gw-2": {}}}
    args = dict(LAB, playbook="deploy", hosts=["spark-a"], proxies=["gw-1", "gw-2"], gathered=True,
                gather_register="__site_limit_gathered")
    del args["inventory"]  # every inventory host, from groups['all']
    read = inventory_args(args, task_vars)
    assert read["keepalived"] is False and read["addresses"] == ["spark-b", "gw-1"]
    assert read["gather_errors"] == {"gw-2": "unreachable"} and "gather_register" not in read
    result = run_module(module, read).result
    assert "the address of gw-2 could not be read (gw-2: unreachable)" in result["msg"]
    # keepalived_enabled unset: the role's default, true; given ones are kept.
    del task_vars["hostvars"]["gw-1"]["keepalived_enabled"]
    assert inventory_args(args, task_vars)["keepalived"] is True
    given = inventory_args(dict(args, keepalived=False, addresses=["gw-2"], gather_errors={}), task_vars)
    assert (given["keepalived"], given["addresses"], given["gather_errors"]) == (False, ["gw-2"], {})


def test_the_action_reads_the_options_the_task_leaves_out_from_its_variables(run_module):
    variables = {"site_limit_playbook": "deploy", "ansible_play_hosts_all": ["spark-a"], "ansible_limit": "spark-a",
                 "topology": "split", "site_limit_reader": "", "_site_limit_gathered": True,
                 "site_engine_group": "engines", "site_proxy_group": "gateways", "playbook_dir": "/srv/ff/playbooks",
                 "groups": {"all": ["spark-a", "spark-b", "gw-1"], "engines": ["spark-a", "spark-b"],
                            "gateways": ["gw-1"]}}
    read = task_args({"gather_register": "__g"}, variables.get)
    assert read == {"gather_register": "__g", "playbook": "deploy", "hosts": ["spark-a"], "limit": "spark-a",
                    "topology": "split", "gathered": True, "engine_group": "engines", "proxy_group": "gateways",
                    "playbook_dir": "/srv/ff/playbooks", "engines": ["spark-a", "spark-b"], "proxies": ["gw-1"],
                    "split_hosts": ["spark-a", "spark-b"]}  # an empty reader and an undefined vllm_firewall: defaults
    # Explicit arguments win; vllm_split_group names the split's hosts.
    given = task_args({"topology": "replicas", "proxies": [], "gathered": False},
                      dict(variables, vllm_split_group="all", vllm_firewall=False).get)
    assert (given["topology"], given["proxies"], given["gathered"]) == ("replicas", [], False)
    assert given["split_hosts"] == ["spark-a", "spark-b", "gw-1"] and given["firewall"] is False
    # Without the entry point's variables, the module says what to set.
    result = run_module(module, task_args({}, {}.get))
    assert result.code == 1 and "with site_limit_playbook set" in result.result["msg"]


# ------------------------------------------------------------------ the site role's limit entry point, run
# As a playbook's first play does (hosts: all, no facts): no host is contacted, the check runs on the controller.

LIMIT_PLAY = """
- name: Limit check only
  hosts: all
  gather_facts: false
  tasks:
    - name: Check the limit
      ansible.builtin.include_role:
        name: factory_floor.llm.site
        tasks_from: limit
        rolespec_validate: false
      vars:
        site_limit_playbook: deploy
"""


def _limit_playbook(tmp_path, *extra):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    runner = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(runner):
        runner = shutil.which("ansible-playbook")
    if not runner:
        pytest.skip("ansible-playbook not installed next to this Python")
    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(root, "inventory", "example"), inventory, dirs_exist_ok=True)
    path = tmp_path / "limit.yml"
    path.write_text(LIMIT_PLAY)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([runner, "-i", str(inventory), str(path)] + list(extra), cwd=root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_the_entry_point_reads_keepalived_from_the_first_proxy_host(tmp_path):
    # Both machines run the proxy, which shares a floating address: a run limited to one is refused.
    rc, output = _limit_playbook(tmp_path, "--limit", "spark-1")
    assert rc != 0
    assert "the proxy hosts share a floating address" in output and "Use --limit spark-1,spark-2" in output
    # Without keepalived (set for the first proxy host), the other proxy's address is read instead.
    rc, output = _limit_playbook(tmp_path, "--limit", "spark-1", "-e", "keepalived_enabled=false")
    assert rc == 0, output
