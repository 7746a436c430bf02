# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.layout_check``, and the site role's
``layout`` entry point against the collection's own inventories."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

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
    assert "1) topology 'split' runs one model over two or more machines" in result["msg"]
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
  vars: %s
  tasks:
    - name: Check the layout
      ansible.builtin.include_role:
        name: factory_floor.llm.site
        tasks_from: layout
        rolespec_validate: false
"""

ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def playbook(tmp_path, inventory, *extra, play_topology=None):
    """Run the layout entry point on ``inventory``; ``play_topology`` sets topology as a play variable, as the
    switch playbooks do."""
    path = tmp_path / "layout.yml"
    path.write_text(PLAYBOOK % ("{topology: %s}" % play_topology if play_topology else "{}"))
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
@pytest.mark.parametrize("inventory", ["example-single", "example", "lab", "lab-single", "lab-groups"])
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


@needs_ansible_playbook
def test_a_host_in_both_topology_groups_is_refused(tmp_path):
    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventory", "example"), inventory)
    with open(inventory / "hosts.yml", "a", encoding="utf-8") as handle:
        handle.write("    replicas:\n      hosts:\n        spark-1:\n        spark-2:\n"
                     "    split:\n      hosts:\n        spark-2:\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    assert "spark-2 is listed in both group 'replicas' and group 'split'" in output


# ------------------------------- the molecule scenario "single"'s layouts
# extensions/molecule/single/vars/layouts.yml: the impossible layouts the lab scenario
# runs with deploy.yml / switch-to-split.yml; here through the layout check alone,
# so the words the scenario looks for are what the check says.

SCENARIO = os.path.join(ROOT, "extensions", "molecule", "single")


def _scenario_layouts():
    path = os.path.join(SCENARIO, "vars", "layouts.yml")
    if not os.path.exists(path):  # a tree without extensions/ (the built collection)
        return [pytest.param(None, id="no-scenario", marks=pytest.mark.skip(reason="%s not present" % path))]
    with open(path, encoding="utf-8") as handle:
        return [pytest.param(layout, id=layout["name"]) for layout in yaml.safe_load(handle)["single_layouts"]]


def _grown(inventory):
    """inventory/lab-single with spark-b listed under gb10, the edit verify.yml makes."""
    shutil.copytree(os.path.join(ROOT, "inventory", "lab-single"), inventory)
    hosts = (inventory / "hosts.yml").read_text()
    anchor = "          nginx_proxy_backend_address: 127.0.0.1\n"
    assert hosts.count(anchor) == 1
    (inventory / "hosts.yml").write_text(hosts.replace(anchor, anchor + "        spark-b:\n"))
    return inventory


@needs_ansible_playbook
def test_the_single_scenario_grown_inventory_passes(tmp_path):
    rc, output = playbook(tmp_path, _grown(tmp_path / "grown"), "-v")
    assert rc == 0, output
    # the proxy on spark-a reaches its own replica over loopback, spark-b's by name
    assert "127.0.0.1:8000" in output and "spark-b:8000" in output, output


@needs_ansible_playbook
@pytest.mark.parametrize("layout", _scenario_layouts())
def test_the_single_scenario_layouts_are_refused(tmp_path, layout):
    inventory = tmp_path / layout["name"]
    if layout["base"] == "grown":
        _grown(inventory)
    else:
        shutil.copytree(os.path.join(ROOT, "inventory", "lab-single"), inventory)
    for path, content in (layout.get("files") or {}).items():
        (inventory / path).write_text(content)
    # The switch playbooks set topology to the target in the play (vars: topology: "{{ switch_to }}").
    playbook_name = layout.get("playbook", "deploy.yml")
    assert os.path.exists(os.path.join(ROOT, "playbooks", playbook_name))
    target = playbook_name[len("switch-to-"):-len(".yml")] if playbook_name.startswith("switch-to-") else None
    rc, output = playbook(tmp_path, inventory, *layout.get("args", []), play_topology=target)
    assert rc != 0, output
    flat = re.sub(r"\s+", " ", output)
    assert "The inventory describes a layout that cannot work" in flat
    for word in layout["words"]:
        assert re.sub(r"\s+", " ", word) in flat, (word, output)


# ------------------------------- values the roles cannot take as they are (issue 33)
# Refused before anything changes, naming the variable and the fix, never showing a value -
# not even at -vvv (the keys go to a no_log option, the other values only as their types).

SECRET = "sk-7f3e9a2c41d86b05"
HF_TOKEN = "hf_SeCrEt4f1b9e77d0c2"


def _site(tmp_path, base="example"):
    inventory = tmp_path / "site"
    shutil.copytree(os.path.join(ROOT, "inventory", base), inventory)
    return inventory


def _append(inventory, path, text):
    with open(inventory / path, "a", encoding="utf-8") as handle:
        handle.write(text)


def _no_secret(output):
    for secret in (SECRET, HF_TOKEN, "7f3e9a2c", "4f1b9e77"):
        assert secret not in output, "a secret is in the output"


@needs_ansible_playbook
@pytest.mark.parametrize("how", ["group_vars", "extra_vars"])
def test_a_list_given_as_a_string_is_refused(tmp_path, how):
    inventory = _site(tmp_path)
    args = ["-vvv"]
    if how == "group_vars":
        _append(inventory, "group_vars/gb10.yml", 'vllm_extra_args: "--enforce-eager"\n')
    else:
        args += ["-e", "vllm_extra_args=--enforce-eager"]
    rc, output = playbook(tmp_path, inventory, *args)
    assert rc != 0
    flat = re.sub(r"\s+", " ", output)
    assert "vllm_extra_args on spark-1, spark-2 is a string, not a list" in flat
    assert "character by character" in flat
    assert "vllm_extra_args: [first, second]" in flat
    assert "-e '{\"vllm_extra_args\": [\"...\"]}'" in flat


@needs_ansible_playbook
def test_every_roles_list_and_dict_variables_are_checked(tmp_path):
    # One variable of another role each: the check reads every role's argument_specs.
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/gb10.yml", "tool_gate_topologies: replicas\n")
    _append(inventory, "host_vars/spark-2.yml", "vllm_env_host: HF_TOKEN=%s\n" % HF_TOKEN)
    _append(inventory, "group_vars/proxy.yml", "nginx_proxy_affinity_body_fields: user\n")
    rc, output = playbook(tmp_path, inventory, "-vvv", "-e", '{"memory_guard_workloads": "builds"}')
    assert rc != 0
    flat = re.sub(r"\s+", " ", output)
    for words in ("tool_gate_topologies on spark-1, spark-2 is a string, not a list",
                  "memory_guard_workloads on spark-1, spark-2 is a string, not a list",
                  "vllm_env_host on spark-2 is a string, not a dict",
                  "nginx_proxy_affinity_body_fields on spark-1, spark-2 is a string, not a list"):
        assert words in flat, words
    _no_secret(output)


def _vault_string(tmp_path, name, text):
    """What `echo KEY | ansible-vault encrypt_string --stdin-name NAME` prints (the newline included)."""
    password = tmp_path / "vault-password"
    password.write_text("lab-vault-password\n")
    vault = os.path.join(os.path.dirname(sys.executable), "ansible-vault")
    done = subprocess.run([vault if os.path.exists(vault) else "ansible-vault", "encrypt_string",
                           "--vault-password-file", str(password), "--stdin-name", name],
                          input=text, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout, str(password)


@needs_ansible_playbook
def test_a_key_with_a_newline_is_refused_naming_the_variable_never_showing_it(tmp_path):
    inventory = _site(tmp_path)
    encrypted, password = _vault_string(tmp_path, "vllm_api_key", SECRET + "\n")
    _append(inventory, "group_vars/gb10.yml", encrypted)
    rc, output = playbook(tmp_path, inventory, "-vvv", "--vault-password-file", password)
    assert rc != 0
    flat = re.sub(r"\s+", " ", output)
    assert "vllm_api_key on spark-1, spark-2 ends with a newline" in flat
    assert "printf %s KEY | ansible-vault encrypt_string --stdin-name vllm_api_key" in flat
    _no_secret(output)


@needs_ansible_playbook
@pytest.mark.parametrize("key, words", [
    ('"\\"%s\\""' % SECRET, "holds a quote"),
    ("'a\\\\%s'" % SECRET, "holds a backslash"),
    ("' %s'" % SECRET, "holds whitespace"),
])
def test_keys_systemd_and_docker_read_differently_are_refused(tmp_path, key, words):
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/gb10.yml", "vllm_api_key: %s\n" % key)
    rc, output = playbook(tmp_path, inventory, "-vvv")
    assert rc != 0
    assert words in re.sub(r"\s+", " ", output)
    _no_secret(output)


@needs_ansible_playbook
def test_engines_that_disagree_on_the_key_or_the_model_name_are_refused(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/gb10.yml", "vllm_api_key: %s\n" % SECRET)
    _append(inventory, "host_vars/spark-2.yml", "vllm_api_key: %s0\nvllm_served_model_name: qwen3-next-b\n" % SECRET)
    rc, output = playbook(tmp_path, inventory, "-vvv")
    assert rc != 0
    flat = re.sub(r"\s+", " ", output)
    assert ("The engine hosts have different vllm_api_key (key 1 on spark-1; key 2 on spark-2; the keys are not "
            "shown)") in flat
    assert "The engine hosts serve different vllm_served_model_name ('qwen3-next' on spark-1; 'qwen3-next-b' on spark-2)" \
        in flat
    _no_secret(output)


@needs_ansible_playbook
def test_a_good_key_passes_and_is_never_shown(tmp_path):
    inventory = _site(tmp_path)
    encrypted, password = _vault_string(tmp_path, "vllm_api_key", SECRET)
    _append(inventory, "group_vars/gb10.yml", encrypted)
    rc, output = playbook(tmp_path, inventory, "-vvv", "--vault-password-file", password)
    assert rc == 0, output
    _no_secret(output)


# ------------------------------- typos and types of every inventory variable (issue 35)
# Every variable with one of the collection's prefixes that no role declares is refused with the
# closest declared name; a declared one whose value its option refuses says, in one line, what it
# must be. Before any host is touched (this play contacts none), with no argument-spec dump.

PLAYBOOKS_WITH_LAYOUT = ("deploy.yml", "switch.yml", "switch_model.yml", "memory_guard.yml")


def _problem_lines(output):
    """The numbered problem lines of the layout check's message, as the operator reads them."""
    return [line.strip() for line in output.splitlines() if re.match(r"\s*\d+\) ", line)]


@needs_ansible_playbook
def test_a_typo_on_the_command_line_is_refused_with_the_closest_name(tmp_path):
    rc, output = playbook(tmp_path, os.path.join(ROOT, "inventory", "example"), "-e", "vllm_max_num_seq=16")
    assert rc != 0
    assert _problem_lines(output) == [
        "1) vllm_max_num_seq (set for spark-1, spark-2) is not a variable of factory_floor.llm: did you mean "
        "vllm_max_num_seqs? No role reads vllm_max_num_seq, so as written it would change nothing. Rename it where it is "
        "set (group_vars, host_vars or -e)."]
    # No argument spec dumped: the whole run's output stays small.
    assert "argument_spec_data" not in output and "validate_args_context" not in output
    assert len(output) < 8000, len(output)


@needs_ansible_playbook
def test_a_typo_in_one_hosts_file_names_that_host(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "host_vars/spark-2.yml", "nginx_proxy_balancing: least_conn\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    [line] = _problem_lines(output)
    assert line.startswith("1) nginx_proxy_balancing (set for spark-2) is not a variable of factory_floor.llm: "
                           "did you mean nginx_proxy_balance?")


@needs_ansible_playbook
@pytest.mark.parametrize("where, args, hosts", [
    # spark-1's host_vars set 0.80, which wins over group_vars: only spark-2 takes the group's value
    ("group_vars", [], "spark-2"),
    ("extra_vars", ["-e", "vllm_gpu_memory_utilization=80%"], "spark-1, spark-2"),
])
def test_a_percentage_for_a_fraction_says_what_it_must_be(tmp_path, where, args, hosts):
    inventory = _site(tmp_path)
    if where == "group_vars":
        _append(inventory, "group_vars/gb10.yml", 'vllm_gpu_memory_utilization: "80%"\n')
    rc, output = playbook(tmp_path, inventory, *args)
    assert rc != 0
    assert _problem_lines(output) == [
        "1) vllm_gpu_memory_utilization on %s is '80%%': must be a number between 0 and 1 (a fraction, e.g. 0.80)." % hosts]
    assert "argument_spec_data" not in output and "AnsibleUnsafe" not in output and "class '" not in output


@needs_ansible_playbook
def test_every_problem_is_one_line_of_its_own(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/all.yml", "switch_dryrun: true\n")
    _append(inventory, "group_vars/proxy.yml", "keepalived_virtual_router_id: 300\n")
    _append(inventory, "group_vars/gb10.yml", "vllm_runtime: docker\nvllm_max_num_seqs: sixteen\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    assert _problem_lines(output) == [
        "1) switch_dryrun (set for spark-1, spark-2) is not a variable of factory_floor.llm: did you mean switch_dry_run? "
        "No role reads switch_dryrun, so as written it would change nothing. Rename it where it is set (group_vars, "
        "host_vars or -e).",
        "2) keepalived_virtual_router_id on spark-1, spark-2 is 300: must be a whole number from 1 to 255.",
        "3) vllm_max_num_seqs on spark-1, spark-2 is 'sixteen': must be a whole number (for example 12, the default).",
        "4) vllm_runtime on spark-1, spark-2 is 'docker': must be one of: container, venv."]


@needs_ansible_playbook
def test_another_collections_variable_listed_as_such_passes(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/proxy.yml", "keepalived_instances: {}\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0 and "keepalived_instances (set for spark-1, spark-2)" in output
    _append(inventory, "group_vars/all.yml", "vllm_layout_foreign_variables: [keepalived_instances]\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc == 0, output


@pytest.mark.parametrize("name", PLAYBOOKS_WITH_LAYOUT)
def test_the_playbooks_let_the_check_validate_first(name):
    # Ansible's own argument check of the layout entry point would refuse first, with the spec dumped.
    with open(os.path.join(ROOT, "playbooks", name), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    # plays[0] checks that the inventory has the hosts (tests/unit/roles/test_playbook_inventory.py).
    [first] = [task["ansible.builtin.include_role"] for task in plays[1]["tasks"]
               if task.get("ansible.builtin.include_role", {}).get("tasks_from") == "layout"]
    assert first["rolespec_validate"] is False


# ------------------------------- vllm_prometheus_hosts (read by the action plugin, refused by the entry point)

@needs_ansible_playbook
@pytest.mark.parametrize("names, words", [
    ("[mon-1]", "vllm_prometheus_hosts names mon-1, which the inventory does not list (set for spark-2): add it to the "
                "inventory, or remove it from vllm_prometheus_hosts."),
    ("[mon-1, mon-2, spark-1, mon-1]",
     "vllm_prometheus_hosts names mon-1, mon-2, which the inventory does not list (set "
     "for spark-2): add them to the inventory, or remove them from vllm_prometheus_hosts."),
])
def test_a_prometheus_host_the_inventory_does_not_list_is_refused(tmp_path, names, words):
    inventory = _site(tmp_path)
    _append(inventory, "host_vars/spark-2.yml", "vllm_prometheus_hosts: %s\n" % names)
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0
    assert words in re.sub(r"\s+", " ", output)


@needs_ansible_playbook
def test_a_listed_prometheus_host_passes(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "host_vars/spark-2.yml", "vllm_prometheus_hosts: [spark-1]\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc == 0, output


# ------------------------------- site_engine_groups (issue 37): the site's one grouping, checked before anything changes
# Read by the action plugin from the inventory itself; each refusal names the host or the group and what to set.

def _four(tmp_path):
    """inventory/example grown to four Sparks (spark-3, spark-4 in gb10, each its own machine)."""
    inventory = _site(tmp_path)
    hosts = (inventory / "hosts.yml").read_text()
    anchor = "        spark-2:\n          ansible_host: 192.0.2.12\n"
    assert hosts.count(anchor) == 1
    (inventory / "hosts.yml").write_text(hosts.replace(anchor, anchor + (
        "        spark-3:\n          ansible_host: 192.0.2.13\n        spark-4:\n          ansible_host: 192.0.2.14\n")))
    return inventory


@needs_ansible_playbook
@pytest.mark.parametrize("topology, groups", [
    (None, "[[spark-1], [spark-2]]"),
    ("split", "[[spark-1, spark-2]]"),
    (None, "[]"),
])
def test_the_topologys_own_grouping_passes(tmp_path, topology, groups):
    inventory = _site(tmp_path)
    _append(inventory, "group_vars/all.yml", "site_engine_groups: %s\n" % groups)
    rc, output = playbook(tmp_path, inventory, play_topology=topology)
    assert rc == 0, output


@needs_ansible_playbook
@pytest.mark.parametrize("groups, extra", [
    ("[]", "vllm_split_tensor_parallel_size: 4\n"),
    ("[[spark-1, spark-2, spark-3, spark-4]]",
     "vllm_split_tensor_parallel_size: 4\nsite_engine_groups_num_attention_heads: 32\n"
     "site_engine_groups_num_key_value_heads: 8\n"),
    ("[]", "vllm_split_tensor_parallel_size: 2\nvllm_split_pipeline_parallel_size: 2\n"),
])
def test_a_split_over_all_four_sparks_passes(tmp_path, groups, extra):
    inventory = _four(tmp_path)
    _append(inventory, "group_vars/all.yml", "site_engine_groups: %s\n%s" % (groups, extra))
    rc, output = playbook(tmp_path, inventory, play_topology="split")
    assert rc == 0, output


@needs_ansible_playbook
@pytest.mark.parametrize("site, groups, extra, topology, words", [
    ("four", "[[spark-1, spark-2], [spark-3, spark-4]]", "", None,
     "site_engine_groups is [[spark-1, spark-2], [spark-3, spark-4]]: the deploy and the two-topology switches run only "
     "the two topologies' groupings (every host its own group, or one group of every engine host), so this playbook "
     "cannot bring the site to it; a group move does, one move at a time (factory_floor.llm.move_groups -e "
     "'{\"move_to\": [[\"spark-1\", \"spark-2\"], [\"spark-3\", \"spark-4\"]]}'). For this playbook, remove "
     "site_engine_groups and set topology: replicas (a full copy on each engine host) or topology: split (one model "
     "over all the engine hosts) in group_vars/all.yml."),
    ("four", "[[spark-1, spark-2], [spark-3], [spark-4]]", "", None,
     "site_engine_groups is [[spark-1, spark-2], [spark-3], [spark-4]]: the deploy and the two-topology switches run "
     "only the two topologies' groupings"),
    ("four", "[[spark-1, spark-2], [spark-3]]", "", None,
     "spark-4 is in the engine group 'gb10' but in no group of site_engine_groups: add [spark-4] as a group of its own "
     "or put it in a group (in group_vars/all.yml)."),
    ("four", "[[spark-1], [spark-2], [spark-3], [spark-4], [spark-1]]", "", None,
     "spark-1 is in group 1 and in group 5 of site_engine_groups: list every engine host in exactly one group"),
    ("four", "[[spark-1], [spark-2], [spark-3], [spark-4], [spark-9]]", "", None,
     "site_engine_groups names spark-9 in group 5, which is not in the engine group 'gb10': add it to that group or "
     "take it out of site_engine_groups"),
    ("four", "[[spark-1, spark-2], [spark-3, spark-4]]",
     "site_engine_groups_num_attention_heads: 9\nsite_engine_groups_num_key_value_heads: 3\n", None,
     "group 1 (spark-1, spark-2) has 2 hosts, and tensor parallelism over 2 needs the model's attention heads (9) and "
     "key/value heads (3) to split evenly: make its groups 1 or 3 hosts"),
    ("four", "spark-1", "", None, "site_engine_groups must be a non-empty list of host lists"),
    ("four", "[]", "vllm_split_tensor_parallel_size: 4\nsite_engine_groups_num_attention_heads: 9\n"
     "site_engine_groups_num_key_value_heads: 3\n", "split",
     "vllm_split_tensor_parallel_size is 4 on spark-1, spark-2, spark-3, spark-4, but the model's attention heads (9, "
     "site_engine_groups_num_attention_heads) and key/value heads (3, site_engine_groups_num_key_value_heads) split "
     "only over 3 ranks"),
    ("example", "[[spark-1, spark-2]]", "", None,
     "site_engine_groups is [[spark-1, spark-2]], the split grouping, but this run brings the site to topology "
     "'replicas', whose grouping is [[spark-1], [spark-2]]. Make them agree: set site_engine_groups to [[spark-1], "
     "[spark-2]], or remove it (the topology's own grouping), in group_vars/all.yml."),
    ("example", "[[spark-2, spark-1]]", "", "split",
     "site_engine_groups is [[spark-2, spark-1]], whose first host spark-2 is the group's rank 0 (the host that serves "
     "the API), but vllm_split_head is spark-1. Put spark-1 first in the group, or set vllm_split_head to spark-2"),
])
def test_a_grouping_that_cannot_run_is_refused(tmp_path, site, groups, extra, topology, words):
    inventory = _four(tmp_path) if site == "four" else _site(tmp_path)
    _append(inventory, "group_vars/all.yml", "site_engine_groups: %s\n%s" % (groups, extra))
    rc, output = playbook(tmp_path, inventory, play_topology=topology)
    assert rc != 0, output
    assert words in re.sub(r"\s+", " ", output), output


@needs_ansible_playbook
def test_a_group_on_one_machine_is_refused(tmp_path):
    inventory = _four(tmp_path)
    _append(inventory, "host_vars/spark-4.yml", "---\nansible_host: 192.0.2.13\nvllm_port: 8001\n")
    _append(inventory, "group_vars/all.yml", "site_engine_groups: [[spark-1], [spark-2], [spark-3, spark-4]]\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0, output
    assert ("group 3 puts spark-3 and spark-4 on one machine (192.0.2.13): a group spreads one model over machines; "
            "give each host of the group its own machine") in re.sub(r"\s+", " ", output), output


@needs_ansible_playbook
def test_engine_hosts_that_disagree_on_the_grouping_are_refused(tmp_path):
    inventory = _site(tmp_path)
    _append(inventory, "host_vars/spark-2.yml", "site_engine_groups: [[spark-1], [spark-2]]\n")
    rc, output = playbook(tmp_path, inventory)
    assert rc != 0, output
    assert ("The engine hosts disagree on site_engine_groups (not set on spark-1; [[spark-1], [spark-2]] on "
            "spark-2): the site has one grouping. Set it once, in group_vars/all.yml") in re.sub(r"\s+", " ", output)


@needs_ansible_playbook
@pytest.mark.parametrize("topology, extra, words", [
    (None, "", None),
    ("split", "", None),
    (None, "site_engine_groups: [[spark-1, spark-2], [spark-3, spark-4]]\n",
     "the deploy and the two-topology switches run only the two topologies' groupings"),
    ("split", "vllm_split_tensor_parallel_size: 3\n", "= 3 ranks, but the split runs one rank on each of the 4 hosts"),
])
def test_the_four_spark_example_runs_replicas_or_one_split_of_four(tmp_path, topology, extra, words):
    inventory = _site(tmp_path, "example-four")
    _append(inventory, "group_vars/%s.yml" % ("gb10" if extra.startswith("vllm_") else "all"), extra)
    rc, output = playbook(tmp_path, inventory, play_topology=topology)
    if words is None:
        assert rc == 0, output
    else:
        assert rc != 0 and words in re.sub(r"\s+", " ", output), output
