# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_inventory_values.py: variable names no role declares, values
of the wrong type, choice or range, list and dict variables given as something else, API keys that
are no bearer token, engines that disagree - never a secret shown. (Whole runs through the site
role's layout entry point: tests/unit/plugins/modules/test_layout_check.py.)"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _inventory_values as iv

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SECRET = "sk-7f3e9a2c41d86b05"


def _specs():
    roles = sorted(os.listdir(os.path.join(ROOT, "roles")))
    docs = []
    for role in roles:
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            docs.append(yaml.safe_load(handle))
    return roles, docs


def test_container_types_of_the_roles_specs():
    dummy, docs = _specs()
    found = iv.container_types(docs)
    for name in ("vllm_extra_args", "vllm_container_run_args", "vllm_allowed_clients", "vllm_prometheus_hosts",
                 "tool_gate_topologies", "memory_guard_workloads", "keepalived_unicast_peer",
                 "nginx_proxy_affinity_body_fields", "nginx_proxy_affinity_headers"):
        assert found[name] == "list", name
    for name in ("vllm_env", "vllm_env_host", "vllm_speculative_config"):
        assert found[name] == "dict", name
    assert "vllm_api_key" not in found and "vllm_port" not in found
    # Every option of type list or dict is in, and nothing else.
    every = {name: option.get("type") for doc in docs for spec in doc["argument_specs"].values()
             for name, option in (spec.get("options") or {}).items()}
    assert found == {name: kind for name, kind in every.items() if kind in ("list", "dict")}


def test_a_string_for_a_list_names_the_variable_the_hosts_and_the_fix():
    errors = iv.check_types({"vllm_extra_args": "list", "vllm_env": "dict"},
                            {"spark-1": {"vllm_extra_args": "str", "vllm_env": "dict"},
                             "spark-2": {"vllm_extra_args": "str", "vllm_env": "str"},
                             "gw": {}})
    assert [(e["check"], e["variables"], e["hosts"]) for e in errors] == [
        ("value_type", ["vllm_env"], ["spark-2"]), ("value_type", ["vllm_extra_args"], ["spark-1", "spark-2"])]
    assert errors[1]["message"].startswith("vllm_extra_args on spark-1, spark-2 is a string, not a list. Ansible's "
                                           "argument check turns a string into a list for the check only: the role "
                                           "would take it character by character.")
    assert "vllm_extra_args: [first, second]" in errors[1]["message"]
    assert "vllm_env: {NAME: value}" in errors[0]["message"]


@pytest.mark.parametrize("kind, words", [("NoneType", "is empty (null), not a list"), ("int", "is a number"),
                                         ("dict", "is a dict, not a list")])
def test_other_types_for_a_list(kind, words):
    errors = iv.check_types({"vllm_extra_args": "list"}, {"spark-1": {"vllm_extra_args": kind}})
    assert words in errors[0]["message"]


def test_right_types_and_unknown_variables_pass():
    assert iv.check_types({"vllm_extra_args": "list"}, {"spark-1": {"vllm_extra_args": "list", "other": "str"}}) == []


def test_api_keys_that_are_no_bearer_token_are_named_never_shown():
    errors = iv.check_api_keys({"spark-1": {"vllm_api_key": SECRET + "\n", "tool_gate_api_key": SECRET},
                                "spark-2": {"vllm_api_key": SECRET + "\n"}, "gw": {"nginx_proxy_api_key": "a b"}})
    assert [(e["variables"], e["hosts"]) for e in errors] == [(["nginx_proxy_api_key"], ["gw"]),
                                                              (["vllm_api_key"], ["spark-1", "spark-2"])]
    assert errors[1]["message"].startswith("vllm_api_key on spark-1, spark-2 ends with a newline")
    for error in errors:
        assert "7f3e" not in error["message"]


def test_engines_agree():
    assert iv.check_agreement(["a", "b"], {"a": {"vllm_served_model_name": "m"}, "b": {"vllm_served_model_name": "m"}},
                              {"a": {"vllm_api_key": SECRET}, "b": {"vllm_api_key": SECRET}}) == []
    # One engine: nothing to agree with.
    assert iv.check_agreement(["a"], {}, {"a": {"vllm_api_key": SECRET}}) == []


def test_engines_that_disagree_are_named_and_the_keys_never_shown():
    errors = iv.check_agreement(
        ["a", "b", "c"], {"a": {"vllm_served_model_name": "m"}, "b": {"vllm_served_model_name": "m"}, "c": {}},
        {"a": {"vllm_api_key": SECRET}, "b": {"vllm_api_key": SECRET + "x"}, "c": {}})
    assert [(e["check"], e["hosts"]) for e in errors] == [("served_model_name_differs", ["c"]),
                                                          ("api_key_differs", ["b", "c"])]
    assert "('m' on a, b; not set on c)" in errors[0]["message"]
    assert ("(key 1 on a; key 2 on b; no key on c; the keys are not shown)" in errors[1]["message"])
    assert "group_vars/gb10.yml" in errors[1]["message"] and "host_vars of b, c" in errors[1]["message"]
    assert SECRET not in errors[1]["message"] and "7f3e" not in errors[1]["message"]
