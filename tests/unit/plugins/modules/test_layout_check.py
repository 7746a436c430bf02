# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.layout_check``, and the vllm role's
``layout`` entry point against the collection's own inventories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import layout_check as module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def test_one_host_with_its_proxy_passes(run_module):
    code, result = run_module(module, {
        "topology": "replicas", "groups": {"gb10": ["spark-1"], "proxy": ["spark-1"]},
        "hostvars": {"spark-1": {"topology": "replicas", "nginx_proxy_backend_address": "127.0.0.1"}}})
    assert code == 0, result.get("msg")
    assert result["changed"] is False
    assert result["errors"] == []
    assert result["layout"]["upstream"] == ["127.0.0.1:8000"]


def test_split_on_one_host_fails_naming_the_group(run_module):
    code, result = run_module(module, {"topology": "split", "groups": {"gb10": ["spark-1"], "proxy": ["spark-1"]}})
    assert code == 1
    assert result["failed"] is True
    assert result["changed"] is False
    assert result["msg"].startswith("The inventory describes a layout that cannot work")
    assert "1) topology 'split' runs one model over exactly two machines" in result["msg"]
    assert "group 'gb10' (vllm_split_group) has 1: spark-1" in result["msg"]
    assert [error["check"] for error in result["errors"]] == ["split_hosts"]


def test_groups_and_split_group_options(run_module):
    code, result = run_module(module, {
        "topology": "split", "groups": {"engines": ["a", "b"], "lb": ["a"], "pair": ["a", "b"]},
        "engine_group": "engines", "proxy_group": "lb", "split_group": "pair"})
    assert code == 0, result.get("msg")
    assert result["layout"]["serving"] == ["a"]


@pytest.mark.parametrize("args, words", [
    ({"hostvars": {"spark-1": "vllm_port=8000"}}, ["hostvars", "spark-1"]),
    ({"groups": {"gb10": "spark-1"}}, ["groups", "gb10"]),
])
def test_malformed_arguments(args, words, run_module):
    full = {"topology": "replicas", "groups": {"gb10": ["spark-1"], "proxy": ["spark-1"]}}
    full.update(args)
    code, result = run_module(module, full)
    assert code == 1
    assert result["failed"] is True
    for word in words:
        assert word in result["msg"]


def test_check_mode_runs_in_full(run_module):
    code, result = run_module(module, {"topology": "split", "groups": {"gb10": ["a"], "proxy": ["a"]},
                                       "_ansible_check_mode": True})
    assert code == 1
    assert result["failed"] is True
    assert result["errors"][0]["check"] == "split_hosts"


# ----------------------------------- the role's entry point on real inventories
# The vllm role's "layout" entry point builds the module's arguments from the
# inventory with Jinja; run it as a playbook would (no host is contacted: the
# play gathers no facts and the check is delegated to the controller).

PLAYBOOK = """
- name: Layout check only
  hosts: gb10:proxy
  gather_facts: false
  tasks:
    - name: Check the layout
      ansible.builtin.include_role:
        name: factory_floor.llm.vllm
        tasks_from: layout
"""

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def playbook(tmp_path, inventory, *extra):
    path = tmp_path / "layout.yml"
    path.write_text(PLAYBOOK)
    env = dict(os.environ,
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), str(path)] + list(extra),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr


needs_ansible_playbook = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                            reason="ansible-playbook not installed next to this Python")


@needs_ansible_playbook
@pytest.mark.parametrize("inventory", ["example-single", "example", "lab", "lab-single"])
def test_shipped_inventories_pass(tmp_path, inventory):
    rc, output = playbook(tmp_path, os.path.join(ROOT, "inventory", inventory))
    assert rc == 0, output


@needs_ansible_playbook
def test_switching_one_host_to_split_is_refused(tmp_path):
    rc, output = playbook(tmp_path, os.path.join(ROOT, "inventory", "example-single"), "-e", "topology=split")
    assert rc != 0
    assert "group 'gb10' (vllm_split_group) has 1: spark-1" in output


@needs_ansible_playbook
def test_a_host_pinned_to_the_other_topology_is_refused(tmp_path):
    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventory", "example"), inventory)
    with open(inventory / "host_vars" / "spark-2.yml", "a", encoding="utf-8") as handle:
        handle.write("topology: split\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    assert "The hosts disagree on topology" in output
    assert "'split' on spark-2" in output


@needs_ansible_playbook
def test_second_replica_on_the_same_machine_and_port_is_refused(tmp_path):
    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventory", "example-single"), inventory)
    hosts = (inventory / "hosts.yml").read_text()
    hosts = hosts.replace("        # spark-2:\n        #   ansible_host: 192.0.2.12\n",
                          "        spark-1b:\n          ansible_host: 192.0.2.11\n")
    (inventory / "hosts.yml").write_text(hosts)
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    assert "spark-1 and spark-1b are the same machine (ansible_host 192.0.2.11)" in output
    assert "vllm_port" in output
