# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every inventory variable with one of the collection's prefixes against every role's argument specs
(plugins/module_utils/_inventory_values.py: option_table, prefixes, check_names, check_values), on
the roles' real specs. Whole runs through a playbook: tests/unit/plugins/modules/test_layout_check.py."""

from __future__ import annotations

import glob
import os
import re
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _inventory_values as iv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _docs():
    docs = {}
    for role in sorted(os.listdir(os.path.join(ROOT, "roles"))):
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            docs[role] = yaml.safe_load(handle)
    return docs


DOCS = _docs()
TABLE = iv.option_table(DOCS)
PREFIXES = iv.prefixes(DOCS, TABLE)


def names(host_vars):
    return iv.check_names(TABLE, PREFIXES, host_vars)


def values(host_vars):
    return iv.check_values(TABLE, host_vars, skip=("topology",) + iv.KEY_VARS)


# ----------------------------------------------------------------------------- the prefixes

def test_prefixes_are_the_roles_and_the_playbooks_words():
    for prefix in ("vllm_", "nginx_proxy_", "keepalived_", "memory_guard_", "tool_gate_", "maintenance_window_",
                   "site_", "switch_", "metrics_", "tune_", "status_", "vllm_replica_", "vllm_watchdog_"):
        assert prefix in PREFIXES, prefix
    # prometheus.prometheus's; the collection's own prometheus_* options are known by their full name.
    assert "prometheus_" not in PREFIXES
    assert "prometheus_job" in TABLE


def test_an_option_declared_twice_has_one_type():
    kinds = {}
    for doc in DOCS.values():
        for spec in doc["argument_specs"].values():
            for name, option in (spec.get("options") or {}).items():
                kinds.setdefault(name, set()).add((option.get("type", "str"), option.get("elements")))
    assert {name: kind for name, kind in kinds.items() if len(kind) > 1} == {}


# ----------------------------------------------------------------------------- names

@pytest.mark.parametrize("name, guess", [
    ("vllm_max_num_seq", "vllm_max_num_seqs"),
    ("vllm_gpu_memory_utilisation", "vllm_gpu_memory_utilization"),
    ("nginx_proxy_balancing", "nginx_proxy_balance"),
    ("memory_guard_workload", "memory_guard_workloads"),
    ("switch_dryrun", "switch_dry_run"),
    ("tune_writ", "tune_write"),
    ("site_proxy_prot", "site_proxy_port"),
    ("keepalived_virtual_ip", "keepalived_virtual_ipaddress"),
])
def test_a_typo_is_refused_with_the_closest_declared_name(name, guess):
    [error] = names({"spark-1": [name], "spark-2": [name, "vllm_port"]})
    assert error["check"] == "variable_name" and error["variables"] == [name] and error["hosts"] == ["spark-1", "spark-2"]
    assert error["message"] == (
        "%s (set for spark-1, spark-2) is not a variable of factory_floor.llm: did you mean %s? No role reads %s, so as "
        "written it would change nothing. Rename it where it is set (group_vars, host_vars or -e)." % (name, guess, name))


def test_a_name_close_to_nothing_says_so():
    [error] = names({"spark-1": ["vllm_frobnicate_everything"]})
    assert "no declared name is close" in error["message"] and "did you mean" not in error["message"]
    assert "vllm_layout_foreign_variables" in error["message"]


@pytest.mark.parametrize("name", [
    "vllm_max_num_seqs", "switch_to", "switch_dry_run", "tune_write", "metrics_window", "site_proxy_port",
    "nginx_proxy_backend_address", "vllm_layout_foreign_variables", "prometheus_job",
    # not the collection's: no prefix of its own, another collection's prefix, magic and connection variables
    "topology", "prometheus_web_listen_address", "node_exporter_textfile_dir", "ansible_host", "ansible_port",
    "inventory_hostname", "group_names", "vllm", "site",
])
def test_known_and_foreign_names_pass(name):
    assert names({"spark-1": [name]}) == []


def test_names_the_inventory_says_are_anothers():
    assert iv.check_names(TABLE, PREFIXES, {"gw": ["keepalived_instances"]}, foreign=["keepalived_instances"]) == []


def _documented_extra_vars():
    """Every -e NAME a playbook, a role README or a doc tells the operator to pass."""
    found = set()
    for path in (glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))
                 + glob.glob(os.path.join(ROOT, "docs", "*.md")) + [os.path.join(ROOT, "README.md")]):
        with open(path, encoding="utf-8") as handle:
            # Not the typos the docs show on purpose ("-e vllm_max_num_seq=16 ... did you mean ...").
            text = "\n".join(line for line in handle if "did you mean" not in line)
        found.update(re.findall(r"""-e '?\{?"?([a-z][a-z0-9_]+)""", text))
    return sorted(name for name in found if iv.is_ours(name, PREFIXES))


@pytest.mark.parametrize("name", _documented_extra_vars())
def test_every_documented_extra_var_is_declared(name):
    assert name in TABLE


def test_the_shipped_inventories_use_declared_names_only():
    for path in glob.glob(os.path.join(ROOT, "inventory", "**", "*.yml"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle) or {}
        top = set(doc) if "all" not in doc else set()
        hosts = doc.get("all", {}) if isinstance(doc, dict) else {}
        stack = [hosts]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key in ("vars",):
                    top.update((node.get(key) or {}).keys())
                for host in (node.get("hosts") or {}).values():
                    top.update((host or {}).keys())
                stack.extend((node.get("children") or {}).values())
        assert names({path: sorted(top)}) == [], path


# ----------------------------------------------------------------------------- values

def test_a_percentage_for_a_fraction():
    [error] = values({"spark-1": {"vllm_gpu_memory_utilization": "80%"}, "spark-2": {"vllm_gpu_memory_utilization": "80%"}})
    assert error["check"] == "value_type" and error["hosts"] == ["spark-1", "spark-2"]
    assert error["message"] == ("vllm_gpu_memory_utilization on spark-1, spark-2 is '80%': must be a number between 0 and 1 "
                                "(a fraction, e.g. 0.80).")


@pytest.mark.parametrize("name, value, words", [
    # fractions and ranges the specs document
    ("vllm_gpu_memory_utilization", 80, "is 80: must be a number between 0 and 1 (a fraction, e.g. 0.80)"),
    ("vllm_gpu_memory_utilization", "1", "is '1': must be a number between 0 and 1 (a fraction, e.g. 0.80)"),
    ("vllm_gpu_memory_utilization", 0, "is 0: must be a number between 0 and 1 (a fraction, e.g. 0.80)"),
    ("memory_guard_memory_high_ratio", 1.5, "is 1.5: must be a number above 0 and at most 1 (a fraction, e.g. 0.9)"),
    ("keepalived_virtual_router_id", 256, "is 256: must be a whole number from 1 to 255"),
    ("keepalived_priority", "high", "is 'high': must be a whole number from 1 to 254"),
    ("tool_gate_min_score", 101, "is 101: must be a number from 0 to 100 (percent of cases passed)"),
    ("tool_gate_repeat", 0, "is 0: must be a whole number, 1 or more"),
    ("nginx_proxy_affinity_balance_factor", 0.5, "is 0.5: must be a number of at least 1 (a ratio, e.g. 1.5)"),
    # every int the spec calls a TCP port
    ("vllm_port", 70000, "is 70000: must be a TCP port, a whole number from 1 to 65535"),
    ("site_split_master_port", "29500/tcp", "is '29500/tcp': must be a TCP port, a whole number from 1 to 65535"),
    ("site_proxy_port", 0, "is 0: must be a TCP port, a whole number from 1 to 65535"),
    # types
    ("vllm_max_num_seqs", "sixteen", "is 'sixteen': must be a whole number (for example 12, the default)"),
    ("vllm_max_num_seqs", 16.5, "is 16.5: must be a whole number (for example 12, the default)"),
    ("vllm_max_num_seqs", True, "is true: must be a whole number (for example 12, the default)"),
    ("vllm_max_num_seqs", [16], "must be a whole number (for example 12, the default) (its value is not shown)"),
    ("memory_guard_os_reserve_gib", "4 GiB", "is '4 GiB': must be a number (for example 4.0, the default)"),
    ("vllm_restart_force", "maybe", "is 'maybe': must be true or false"),
    ("vllm_restart_force", 2, "is 2: must be true or false"),
    ("vllm_served_model_name", ["a", "b"], "must be a string (text) (its value is not shown)"),
    ("status_file", {"path": "/tmp/x"}, "must be a path (text) (its value is not shown)"),
    # choices
    ("vllm_runtime", "docker", "is 'docker': must be one of: container, venv"),
    ("nginx_proxy_balance", "round_robin", "is 'round_robin': must be one of: affinity, least_conn"),
])
def test_a_value_its_option_refuses_is_one_line_saying_what_it_must_be(name, value, words):
    [error] = values({"spark-1": {name: value}})
    assert (error["check"], error["variables"], error["hosts"]) == ("value_type", [name], ["spark-1"])
    assert error["message"] == "%s on spark-1 %s." % (name, words)
    assert "\n" not in error["message"]


@pytest.mark.parametrize("name, value", [
    ("vllm_gpu_memory_utilization", 0.8), ("vllm_gpu_memory_utilization", "0.74"), ("vllm_gpu_memory_utilization", None),
    ("vllm_max_num_seqs", 16), ("vllm_max_num_seqs", "16"), ("vllm_max_num_seqs", 16.0), ("vllm_port", "8000"),
    ("vllm_restart_force", "yes"), ("vllm_restart_force", "True"), ("vllm_restart_force", 1), ("vllm_restart_force", False),
    ("vllm_served_model_name", 123), ("vllm_runtime", "container"), ("memory_guard_memory_high_ratio", 1),
    ("tool_gate_min_score", 0), ("keepalived_preempt_delay", 0), ("vllm_extra_args", ["--enforce-eager"]),
    ("vllm_env", {"HF_HOME": "/x"}), ("tool_gate_topologies", ["replicas"]), ("tune_concurrency", [1, "4"]),
    ("memory_guard_workloads", [{"name": "db"}]), ("vllm_split_head", "spark-1"),
])
def test_a_value_its_option_takes_passes(name, value):
    assert values({"spark-1": {name: value}}) == []


@pytest.mark.parametrize("name, value, words", [
    ("tool_gate_topologies", ["replicas", "splt"], "item 2 ('splt') must be one of: replicas, split"),
    ("tune_concurrency", [1, "four"], "item 2 ('four') must be a whole number"),
    ("memory_guard_workloads", [{"name": "db"}, "db2"], "item 2 ('db2') must be a mapping"),
    ("vllm_extra_args", ["--enforce-eager", None], "item 2 must be a string (text)"),
])
def test_a_list_item_its_option_refuses(name, value, words):
    [error] = values({"spark-1": {name: value}})
    assert error["message"] == "%s on spark-1: %s." % (name, words)


@pytest.mark.parametrize("name, value, words", [
    ("vllm_extra_args", "--enforce-eager", "is a string, not a list. Ansible's argument check turns a string into a list"),
    ("vllm_env", "HF_TOKEN=hf_secret", "is a string, not a dict."),
    ("vllm_env", None, "is empty (null), not a dict."),
])
def test_a_list_or_dict_given_as_something_else_is_never_quoted(name, value, words):
    [error] = values({"spark-1": {name: value}})
    assert words in error["message"]
    assert "hf_secret" not in error["message"] and "--enforce-eager is" not in error["message"]


def test_a_no_log_value_is_never_quoted():
    table = dict(TABLE, secret_port={"type": "int", "no_log": True, "choices": None, "range": iv.PORT, "default": None,
                                     "elements": None, "roles": ["x"]})
    [error] = iv.check_values(table, {"h": {"secret_port": "hunter2"}})
    assert "hunter2" not in error["message"]
    assert error["message"] == "secret_port on h must be a TCP port, a whole number from 1 to 65535 (its value is not shown)."


def test_skipped_and_undeclared_names_are_left_to_their_own_checks():
    assert values({"spark-1": {"topology": "both", "vllm_api_key": ["x"], "vllm_max_num_seq": "x"}}) == []


def test_hosts_that_share_a_wrong_value_share_one_line():
    errors = values({"a": {"vllm_port": "x", "vllm_max_num_seqs": "x"}, "b": {"vllm_port": "x"}, "c": {"vllm_port": "y"}})
    assert [(e["variables"][0], e["hosts"]) for e in errors] == [
        ("vllm_max_num_seqs", ["a"]), ("vllm_port", ["a", "b"]), ("vllm_port", ["c"])]


# ----------------------------------------------------------------------------- the ranges are the specs'

@pytest.mark.parametrize("name", sorted(iv.RANGES))
def test_every_range_is_documented_in_its_options_description(name):
    found = [" ".join(o["description"]) if isinstance(o["description"], list) else o["description"]
             for doc in DOCS.values() for spec in doc["argument_specs"].values()
             for n, o in (spec.get("options") or {}).items() if n == name]
    assert found, name
    assert any(iv.RANGES[name][4] in text for text in found), (name, iv.RANGES[name][4])
    assert TABLE[name]["range"] == iv.RANGES[name]


def test_every_port_option_has_the_port_range():
    ports = sorted(name for name, option in TABLE.items() if option["range"] == iv.PORT)
    assert {"vllm_port", "site_engine_port", "site_proxy_port",
            "site_split_master_port", "site_watchdog_status_port", "vllm_split_master_port",
            "vllm_watchdog_status_port"} <= set(ports)
    assert all(TABLE[name]["type"] == "int" for name in ports)


# ----------------------------------------------------------------------------- the action plugin's reading

class _HostVars(dict):
    """A host's variables as Ansible's hostvars gives them: templated when read, which may fail."""

    def __getitem__(self, name):
        value = dict.__getitem__(self, name)
        if value == "{{ undefined }}":
            raise ValueError("'undefined' is undefined")
        return value


def test_the_action_reads_every_role_and_skips_a_value_it_cannot_template():
    from ansible_collections.factory_floor.llm.plugins.action import layout_check as action

    docs = action.load_specs()
    assert sorted(docs) == sorted(DOCS)
    hostvars = {
        "spark-1": _HostVars(vllm_max_num_seq=16, vllm_port="{{ undefined }}", vllm_runtime="docker",
                             ansible_host="192.0.2.11", inventory_hostname="spark-1", keepalived_instances={},
                             vllm_layout_foreign_variables=["keepalived_instances"]),
        "elsewhere": _HostVars(vllm_frob=1),
    }
    errors = action.inventory_errors(hostvars, ["spark-1", "not-in-the-inventory"], docs)
    assert [(e["check"], e["variables"]) for e in errors] == [("variable_name", ["vllm_max_num_seq"]),
                                                              ("value_type", ["vllm_runtime"])]


def test_the_affinity_header_of_before_is_refused_naming_the_list():
    # nginx_proxy_affinity_header (one header) became nginx_proxy_affinity_headers (a list): a site that
    # still sets the old name is told the new one before any host changes.
    errors = names({"gw": ["nginx_proxy_affinity_header"]})
    assert [e["variables"] for e in errors] == [["nginx_proxy_affinity_header"]]
    assert "did you mean nginx_proxy_affinity_headers?" in errors[0]["message"]
    errors = values({"gw": {"nginx_proxy_affinity_headers": "x-session-id"}})
    assert [(e["check"], e["variables"]) for e in errors] == [("value_type", ["nginx_proxy_affinity_headers"])]
    assert values({"gw": {"nginx_proxy_affinity_headers": ["x-session-id", "thread-id"]}}) == []


# ----------------------------------------------------------------------------- one name per concept

@pytest.mark.parametrize("old, new", sorted(iv.RENAMED.items()))
def test_an_old_name_is_refused_with_the_one_name_it_has_now(old, new):
    [error] = names({"spark-1": [old, "vllm_port"], "gateway": [old]})
    assert error["check"] == "variable_renamed" and error["variables"] == [old]
    assert error["hosts"] == ["gateway", "spark-1"]
    assert error["message"] == (
        "%s (set for gateway, spark-1) is no longer a variable of factory_floor.llm: set %s instead, which every role "
        "reads (one name for it). No role reads %s, so as written it would change nothing. Rename it where it is set "
        "(group_vars, host_vars or -e)." % (old, new, old))


def test_an_old_name_is_refused_whatever_the_prefixes():
    [error] = iv.check_names(TABLE, (), {"gateway": ["vllm_proxy_group"]})
    assert error["check"] == "variable_renamed"


@pytest.mark.parametrize("old, new", sorted(iv.RENAMED.items()))
def test_the_new_name_is_declared_and_the_old_one_is_not(old, new):
    assert new in TABLE and old not in TABLE


@pytest.mark.parametrize("old, new", sorted(iv.MOVED.items()))
def test_a_variable_that_moved_with_its_procedure_is_refused_naming_its_new_name(old, new):
    [error] = names({"spark-1": [old, "vllm_port"]})
    role = "rolling_restart" if new.startswith("rolling_restart_") else "model_upgrade"
    assert error["check"] == "variable_renamed" and error["variables"] == [old] and error["hosts"] == ["spark-1"]
    assert error["message"] == (
        "%s (set for spark-1) is no longer a variable of factory_floor.llm: set %s instead, the role %s reads it now. "
        "No role reads %s, so as written it would change nothing. Rename it where it is set (group_vars, host_vars or "
        "-e)." % (old, new, role, old))
    assert new in TABLE and old not in TABLE


def test_one_name_per_concept_in_the_roles():
    """No role file, playbook or plugin names a renamed variable, but where the refusal is documented (the changelog
    keeps the history)."""
    documented = ("_inventory_values.py", os.path.join("roles", "site", "meta", "argument_specs.yml"),
                  os.path.join("plugins", "modules", "layout_check.py"))
    pattern = re.compile(r"\b(%s)\b" % "|".join(sorted(iv.RENAMED)))
    found = []
    for top in ("roles", "playbooks", "plugins", "inventory"):
        for path in glob.glob(os.path.join(ROOT, top, "**", "*"), recursive=True):
            if os.path.isfile(path) and path.endswith((".yml", ".yaml", ".py", ".j2", ".md")):
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                if path.endswith(documented):
                    continue
                found += ["%s: %s" % (os.path.relpath(path, ROOT), m.group(0)) for m in pattern.finditer(text)]
    assert found == []


def test_a_name_this_run_set_itself_is_not_an_inventory_variable():
    # The advisor runs the gated switch, then the layout check again in the same run: the tool gate's own fact
    # (tool_gate_build) is no role option, and must not refuse the next switch. A typo in the inventory still does.
    from ansible_collections.factory_floor.llm.plugins.action import layout_check as action

    docs = action.load_specs()
    hostvars = {"spark-1": {"tool_gate_build": {"id": "x"}, "vllm_max_num_seq": 16}}
    assert [e["variables"] for e in action.inventory_errors(hostvars, ["spark-1"], docs, {})] == [
        ["tool_gate_build"], ["vllm_max_num_seq"]]
    assert [e["variables"] for e in action.inventory_errors(hostvars, ["spark-1"], docs,
                                                            {"spark-1": {"tool_gate_build"}})] == [["vllm_max_num_seq"]]


LAYOUT_AFTER_FACT = """
- name: A fact of the run, then the layout check
  hosts: gb10
  gather_facts: false
  tasks:
    - name: The tool gate's fact
      ansible.builtin.set_fact:
        tool_gate_build: {id: abc, parts: {}}
    - name: The check
      factory_floor.llm.layout_check:
        topology: replicas
        inventory_variables: true
      delegate_to: localhost
      run_once: true
"""


@pytest.mark.parametrize("typo", [False, True])
def test_the_check_after_a_fact_of_the_run_refuses_only_the_inventory(tmp_path, typo):
    from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import run_playbook

    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "vllm_api_key": "k-123"}
    if typo:
        host["vllm_max_num_seq"] = 16
    engines = {"spark-1": dict(host, ansible_host="192.0.2.11"), "spark-2": dict(host, ansible_host="192.0.2.12", vllm_port=8001)}
    inventory = {"all": {"children": {"gb10": {"hosts": engines},
                                      "proxy": {"hosts": {"gw": {"ansible_connection": "local",
                                                                 "ansible_host": "192.0.2.2"}}}}}}
    done = run_playbook(tmp_path, inventory, LAYOUT_AFTER_FACT)
    refusals = [line for line in done.stdout.splitlines() if line.startswith("fatal:")]
    assert not any("tool_gate_build" in line for line in refusals), refusals
    assert (done.returncode != 0) == typo, done.stdout + done.stderr
    assert ("vllm_max_num_seq" in done.stdout) == typo
