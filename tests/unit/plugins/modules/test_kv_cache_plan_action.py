# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.kv_cache_plan``'s action plugin: the site read where the task does not say (the model an engine
group serves, its context, the engine hosts' count, the KV pool, the served name) and the sweeps saved on the
controller; what the task gives always wins."""

from __future__ import annotations

import json

from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.kv_cache_plan import ActionModule, read_sweeps, site_args
from ansible_collections.factory_floor.llm.tests.unit.plugins.action_task import run_action_answering

SITE = {
    "groups": {"gb10": ["spark-a", "spark-b", "spark-c"], "proxy": ["gw"]}, "site_engine_group": "gb10",
    "vllm_model": "/opt/models/SmolLM2-135M-Instruct", "vllm_split_model": "/opt/models/tiny-random",
    "vllm_max_model_len": 4096, "vllm_served_model_name": "lab-chat", "vllm_env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
    "vllm_kv_cache_dtype": "auto",
}


def variable_of(variables):
    def variable(name):
        value = variables
        for part in name.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value
    return variable


def test_the_sites_plan_reads_the_split_model_its_context_the_hosts_and_the_kv_pool():
    args = site_args({"sweep_dir": "/x"}, variable_of(SITE), sweeps=[{"host": "spark-a"}])
    assert args == {"model_dir": "/opt/models/tiny-random", "max_model_len": 4096, "engine_hosts": 3,
                    "kv_cache_space_gib": "1", "served_model_name": "lab-chat", "kv_cache_dtype": "auto",
                    "sweeps": [{"host": "spark-a"}]}


def test_what_the_task_gives_wins():
    given = {"model_dir": "/m", "engine_hosts": 2, "gpu_memory_utilization": 0.8, "sweeps": [],
             "served_model_name": "x", "kv_cache_dtype": "fp8"}
    gpu_site = dict(SITE, vllm_gpu_memory_utilization=0.5, vllm_env={})
    args = site_args(dict(given), variable_of(gpu_site), sweeps=[{"host": "a"}])
    assert args == given
    # vLLM's CPU build sizes its pool by VLLM_CPU_KVCACHE_SPACE whatever share is given (the module then takes it).
    assert site_args(dict(given), variable_of(SITE))["kv_cache_space_gib"] == "1"
    # A what-if with the tokens from the logs reads no model and no host count.
    what_if = site_args({"per_host_kv_tokens": [1000], "max_model_len": 100}, variable_of(SITE))
    assert "model_dir" not in what_if and "engine_hosts" not in what_if


def test_a_hub_name_is_not_a_directory_and_a_gpu_site_reads_its_share():
    site = dict(SITE, vllm_split_model="Qwen/Qwen3-8B", vllm_env={}, vllm_gpu_memory_utilization=0.78)
    args = site_args({}, variable_of(site))
    assert "model_dir" not in args and "engine_hosts" not in args and args["gpu_memory_utilization"] == 0.78
    # No split model: the replicas' model serves every group.
    assert site_args({}, variable_of(dict(SITE, vllm_split_model=None)))["model_dir"] == \
        "/opt/models/SmolLM2-135M-Instruct"


def test_saved_sweeps_are_read_from_the_directory_with_their_path(tmp_path):
    (tmp_path / "spark-a.json").write_text(json.dumps({"host": "spark-a", "tensor_parallel_size": 1}))
    (tmp_path / "spark-b.json").write_text("not json")
    (tmp_path / "spark-a.png").write_text("")
    assert read_sweeps(str(tmp_path)) == [{"host": "spark-a", "tensor_parallel_size": 1,
                                           "source": str(tmp_path / "spark-a.json")}]
    assert read_sweeps(str(tmp_path / "none")) == []


def test_the_plugin_runs_the_module_with_the_site_and_the_sweeps_of_tune_output_dir(tmp_path):
    (tmp_path / "spark-a.json").write_text(json.dumps({"host": "spark-a", "tensor_parallel_size": 1}))
    variables = dict(SITE, tune_output_dir=trust_as_template("{{ '%s' }}" % tmp_path))
    result, calls = run_action_answering(ActionModule, "kv_cache_plan", {}, variables, [{"changed": False}])
    assert result == {"changed": False, "site_read": {
        "model_dir": "/opt/models/tiny-random", "max_model_len": 4096, "engine_hosts": 3, "kv_cache_space_gib": "1",
        "served_model_name": "lab-chat", "kv_cache_dtype": "auto", "sweeps": [str(tmp_path / "spark-a.json")]}}
    (name, args), = calls
    assert name == "factory_floor.llm.kv_cache_plan" and args["engine_hosts"] == 3
    assert args["sweeps"] == [{"host": "spark-a", "tensor_parallel_size": 1, "source": str(tmp_path / "spark-a.json")}]
    # sweep_dir is the plugin's, never the module's.
    _result, calls = run_action_answering(ActionModule, "kv_cache_plan", {"sweep_dir": str(tmp_path / "none")},
                                          SITE, [{"changed": False}])
    assert "sweep_dir" not in calls[0][1] and "sweeps" not in calls[0][1]
