# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engine plan in Python gives what the role's Jinja gave, for every inventory of the checkout (transition test).

For each inventory, each engine host, each topology's unit (the replica's, the split's rank) and both runtimes,
ansible-playbook evaluates (no host is contacted) the role's old Jinja from ``roles/vllm/tasks/plan.yml`` - the
command line, the environment, the fingerprint - and the arguments the new ``factory_floor.llm.engine_plan`` task
gets; ``_engine_plan.compose`` of those arguments must give the same three, to the byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
INVENTORIES = ["lab", "lab-single", "lab-vip", "example", "example-single"]

# The new plan.yml's engine_plan arguments.
ARGS = yaml.safe_load("""
unit: "{{ vllm_service_name }}"
runtime: "{{ vllm_runtime }}"
settings: "{{ _vllm_settings }}"
service_settings: "{{ vllm_service_settings }}"
extra_args: "{{ vllm_extra_args }}"
venv: "{{ vllm_venv }}"
container_engine: "{{ _vllm_container_engine_path }}"
container_image: "{{ vllm_container_image }}"
container_pull: "{{ vllm_container_pull }}"
container_log_driver: "{{ vllm_container_log_driver }}"
container_resource_args: "{{ _vllm_container_resource_args }}"
container_cache_dir: "{{ vllm_container_cache_dir }}"
container_cache_path: "{{ vllm_container_cache_path }}"
container_run_args: "{{ vllm_container_run_args }}"
service_run_args: "{{ vllm_service_run_args | default([]) }}"
stop_timeout: "{{ _vllm_stop_timeout }}"
env_file: "{{ _vllm_config_dir }}/{{ vllm_service_name }}.env"
env: "{{ vllm_env }}"
env_host: "{{ vllm_env_host }}"
service_env: "{{ vllm_service_env }}"
api_key: "{{ vllm_api_key }}"
api_key_next: "{{ vllm_api_key_next }}"
""")

# What vllm_replica and vllm_split pass to the vllm role's service entry point.
ROLES = {
    "replica": {"vllm_service_name": "{{ _vllm_replica_unit }}", "vllm_service_env": {}, "vllm_service_settings": {}},
    "split": {"vllm_service_name": "{{ _vllm_split_unit }}", "vllm_service_env": "{{ _vllm_split_env }}",
              "vllm_service_settings": "{{ _vllm_split_settings }}", "vllm_service_run_args": "{{ _vllm_split_run_args }}"},
}
ADVERSARIAL = ["a\\b", "${HOME}", "$x", "%h", '"q"', "it's", "sp ace", "tab\\there", "100%", "--opt=${x}", ""]
# Variants of the inventory's values, on the lab only (each overrides the inventory, as extra vars would).
VARIANTS = {
    "inventory": {},
    "venv": {"vllm_runtime": "venv"},
    "podman": {"vllm_container_engine": "podman", "vllm_container_gpus": "nvidia.com/gpu=all", "vllm_container_ipc": "host"},
    "bare": {"vllm_container_log_driver": "", "vllm_container_cache_dir": "", "vllm_container_shm_size": "",
             "vllm_container_pull": True, "vllm_container_run_args": ["--ulimit=memlock=-1", "--cap-add=SYS_NICE"]},
    "rotation": {"vllm_api_key_next": "lab-key-next-0b9d2f6e", "vllm_chat_template": "/etc/vllm/template.jinja",
                 "vllm_speculative_config": {"method": "draft_model", "model": "/opt/models/draft",
                                             "num_speculative_tokens": 2}},
    "adversarial": {"vllm_extra_args": ADVERSARIAL, "vllm_model": "/opt/models/a b$c\\d",
                    "vllm_env": {"HF_TOKEN": "hf_$x\\y\"z", "b_lower": "1", "A_UPPER": 2, "FLAG": True},
                    "vllm_container_run_args": ["--label=x=${y}"], "vllm_container_image": "reg/img:tag"},
    "case": {"vllm_chat_template": "/etc/vllm/T.jinja",
             "vllm_speculative_config": {"method": "draft_model", "model": "/etc/vllm/t.jinja"}},
    "hub": {"vllm_model": "HuggingFaceTB/SmolLM2-135M-Instruct"},
    "inside": {"vllm_chat_template": "/opt/models/SmolLM2-135M-Instruct/t.jinja",
               "vllm_speculative_config": {"model": "/opt/models/SmolLM2-135M-Instruct"}},
}

def playbook(out, all_cases):
    """Load the roles' variables (running none of their tasks), compose every case, keep the results."""
    tasks = [
        {"name": "Load the vllm role's settings",
         "ansible.builtin.include_role": {"name": "factory_floor.llm.vllm", "tasks_from": "settings", "public": True}},
        {"name": "Load the roles' variables, running none of their tasks",
         "ansible.builtin.include_role": {"name": "factory_floor.llm.{{ item }}", "public": True,
                                          "apply": {"when": False}},
         "loop": ["vllm_replica", "vllm_split"]},
    ]
    tasks += [{"name": "Compose " + case["name"], "ansible.builtin.include_tasks": "compose.yml",
               "vars": dict(case["vars"], case_name=case["name"])} for case in all_cases]
    tasks.append({"name": "Keep them", "ansible.builtin.copy": {
        "content": "{{ __results | to_json }}", "dest": "%s/{{ inventory_hostname }}.json" % out, "mode": "0600"}})
    return [{"name": "Compose every engine's plan both ways", "hosts": "gb10", "gather_facts": False, "tasks": tasks}]


def compose_tasks():
    """The old plan.yml's composing tasks (the command line, the environment check, the environment, the
    fingerprint), then the new task's arguments, then one result."""
    with open(os.path.join(ROOT, "roles", "vllm", "tasks", "plan.yml"), encoding="utf-8") as handle:
        old = yaml.safe_load(handle)
    wanted = [task for task in old if "ansible.builtin.set_fact" in task or "ansible.builtin.assert" in task][:4]
    assert [task["name"].split(" ")[0] for task in wanted] == ["Compose", "Check", "Compose", "Fingerprint"]
    return wanted + [{
        "name": "Keep",
        "ansible.builtin.set_fact": {"__results": "{{ __results | default([]) + [{'case': case_name, 'args': __args, "
                                                  "'argv': __vllm_argv, 'environment': __vllm_environment, "
                                                  "'fingerprint': __vllm_digest}] }}"},
        "vars": {"__args": ARGS},
    }]


def cases(inventory):
    found = []
    for role, role_vars in ROLES.items():
        for variant, values in VARIANTS.items():
            if variant != "inventory" and (inventory != "lab" or (role == "split" and variant not in ("venv", "inventory"))):
                if not (inventory != "lab" and variant == "venv"):
                    continue
            if role == "split" and inventory.endswith("single"):
                continue
            found.append({"name": "%s/%s" % (role, variant), "vars": dict(role_vars, **values)})
    return found


def run(inventory, tmp):
    out = tmp / inventory
    out.mkdir()
    all_cases = cases(inventory)
    (out / "play.yml").write_text(yaml.safe_dump(playbook(out, all_cases)))
    (out / "compose.yml").write_text(yaml.safe_dump(compose_tasks()))
    extra = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", os.path.join(ROOT, "inventory", inventory), str(out / "play.yml"),
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return {path[:-5]: json.loads((out / path).read_text()) for path in os.listdir(out) if path.endswith(".json")}


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plans")
    return {inventory: run(inventory, tmp) for inventory in INVENTORIES}


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_python_composes_what_the_jinja_did(composed, inventory):
    hosts = composed[inventory]
    assert hosts
    for host, results in hosts.items():
        assert [result["case"] for result in results] == [case["name"] for case in cases(inventory)]
        for result in results:
            got = ep.compose(result["args"], host)
            if result["case"] == "replica/case":
                # The one intended difference: two paths that differ only in case are two files; Ansible's unique
                # filter (case-insensitive) mounted only the first.
                assert "--volume=/etc/vllm/t.jinja:/etc/vllm/t.jinja:ro" in got["argv"]
                assert "--volume=/etc/vllm/t.jinja:/etc/vllm/t.jinja:ro" not in result["argv"]
                continue
            for key in ("argv", "environment", "fingerprint"):
                assert got[key] == result[key], (inventory, host, result["case"], key)


def test_record_the_table(composed):
    """With FF_RECORD_ENGINE_PLAN=PATH, write what the Jinja composed, once per distinct input, as the table
    tests/unit/plugins/module_utils/test_engine_plan.py keeps."""
    path = os.environ.get("FF_RECORD_ENGINE_PLAN")
    if not path:
        pytest.skip("FF_RECORD_ENGINE_PLAN not set")
    rows = {}
    for inventory in INVENTORIES:
        for host, results in sorted(composed[inventory].items()):
            for result in results:
                if host == "spark-b" and result["case"].split("/")[1] not in ("inventory", "venv"):
                    continue  # the variants once, on spark-a
                key = json.dumps(result["args"], sort_keys=True)
                row = rows.setdefault(key, {"where": [], "args": result["args"], "argv": result["argv"],
                                            "environment": result["environment"], "fingerprint": result["fingerprint"]})
                row["where"].append("%s %s %s" % (inventory, host, result["case"]))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(list(rows.values()), handle, indent=1, sort_keys=True)
        handle.write("\n")
