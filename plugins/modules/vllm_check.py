#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_check
short_description: Refuse what an engine host cannot run - settings, model, port, image - before anything changes
version_added: 0.1.0
description:
  - "The refusals of the C(factory_floor.llm.vllm) role's preflight, image check, and the preflights of C(deploy.yml)
    and the topology switch. Each names the host and the variable, says what to change, and fails the task with one
    message per problem (numbered when there are several). The roles' tasks read the host
    (M(factory_floor.llm.container_image_info), M(factory_floor.llm.vllm_health)) and pass what they saw; O(check=engine)
    given none of its observations reads the host itself (M(ansible.builtin.stat), C(systemctl is-active), C(ss),
    C(ps), run for real in check mode too: they only read). The module reads the variables the check needs itself, as
    the task sees them (inventory, the roles' defaults, an include's C(vars)), on the controller."
  - "O(check=engine) (the role's C(preflight) entry point, on each engine host) refuses: a setting vLLM cannot run
    with, in one message naming each - C(vllm_runtime) other than C(venv)/C(container), an empty C(vllm_model) or
    C(vllm_served_model_name), C(vllm_port) outside 1-65535, C(vllm_max_num_seqs) or C(vllm_max_model_len) below 1,
    a C(vllm_kv_cache_dtype) vLLM does not take, a C(vllm_gpu_memory_utilization) not strictly between 0 and 1, no
    C(vllm_tool_call_parser) with C(vllm_enable_auto_tool_choice), a negative C(vllm_shutdown_timeout),
    C(--api-key) in C(vllm_extra_args), a C(vllm_env)/C(vllm_env_host) value the env file cannot carry as it is
    (a newline, a backslash, a leading quote, outer whitespace), and with the C(container) runtime an engine other
    than docker/podman, an empty or spaced C(vllm_container_image), a malformed C(vllm_container_image_digest) or
    C(vllm_container_shm_size), a C(vllm_container_shm_size) with C(vllm_container_ipc=host), relative cache paths,
    and a C(vllm_container_run_args) flag the role sets itself or that puts a value on the command line (C(-e));
    then a model directory that is missing (O(model_dir)), a virtualenv without vLLM (O(venv_vllm)), a tool-call
    parser the installed vLLM does not list (O(tool_parsers)), the API port held by another program
    (O(port_listeners), O(port_units), unless one of the engine units is active - O(units_active)), and a
    C(vllm_api_key_next) that is not a bearer token, equals C(vllm_api_key) or comes without it."
  - "O(check=deploy) (C(deploy.yml), once): C(topology) other than C(replicas)/C(split), or no host in the engine group
    (C(site_engine_group)) or the proxy group (C(site_proxy_group))."
  - "O(check=restart) (C(deploy.yml), each host): an engine that rejects C(vllm_api_key) (O(serving) says
    C(rejected)); the only replica (C(topology) C(replicas), one engine host) restarting while it serves
    (C(vllm_service_plan.restart_pending) and O(serving)), unless C(vllm_restart_force)."
  - "O(check=switch) (a topology switch, once): C(switch_to) other than C(replicas)/C(split).
    O(check=switch_incumbent) (the switch, where scoring the incumbent failed - also in a dry run, whose probe of the
    incumbent sends no chat completion): always refuses, saying why from O(serving) (the gate's probe) or O(failure),
    and naming every setting the way on takes: C(tool_gate_measure_incumbent), and with C(tool_gate_bar.min_score) at 0
    C(tool_gate_min_score) too, with how to choose it (without the incumbent's score it is the gate's only bar).
    O(check=switch_hosts) (once): engine hosts the run does not reach (C(vllm_switch_plan.lost_hosts)).
    O(check=switch_proxy) (once): a proxy host never set up, or one whose settings differ from the inventory's in
    what a switch cannot go right with - it starts the new engines with the inventory's settings and leaves the proxy
    as it is - (the engines' key or served model name, an engine's address or port, an engine the proxy does not
    know, the port and TLS clients reach it by), from every proxy host's C(nginx_proxy_settings) (the C(nginx_proxy)
    role's C(settings) entry point, M(factory_floor.llm.proxy_settings_info)); naming every difference, a key never
    shown, and the command that applies them. Differences it can go on with are named in a warning."
  - "O(check=image) (the role's C(image_check) entry point, C(container) runtime): an image that is not pinned (no tag,
    C(:latest), and no digest), not the build its digest names, of another architecture than the host, or not on the
    host while C(vllm_container_pull) is false - or, with C(vllm_container_pull), while a digest must be checked first
    (O(image_info))."
  - "O(check=image_builds) (after O(check=image) on every host): one image name that is different builds (IDs) on the
    play's hosts (each host's C(vllm_image_check) fact, read from C(hostvars)); and with C(vllm_image_check_running)
    (C(deploy.yml)) the engine of C(topology) running in a container of another image than C(vllm_container_image),
    unless C(vllm_deploy_image_change)."
  - No message holds a secret - an API key, an environment value or a run argument's value is named by its variable
    (and key) only. The check runs on the controller through the module's action plugin; it connects to no host and
    the values it reads never become module arguments.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description:
      - Which refusals to check (see the description). The variables each reads are, as the task sees them -
      - "V(engine): C(inventory_hostname), C(vllm_runtime), C(vllm_model), C(vllm_served_model_name), C(vllm_port),
        C(vllm_max_num_seqs), C(vllm_max_model_len), C(vllm_kv_cache_dtype), C(vllm_gpu_memory_utilization),
        C(vllm_enable_auto_tool_choice), C(vllm_tool_call_parser), C(vllm_shutdown_timeout), C(vllm_extra_args),
        C(vllm_env), C(vllm_env_host), C(vllm_container_engine), C(vllm_container_image),
        C(vllm_container_image_digest), C(vllm_container_shm_size), C(vllm_container_ipc), C(vllm_container_cache_dir),
        C(vllm_container_cache_path), C(vllm_container_run_args), C(vllm_venv), C(vllm_api_key), C(vllm_api_key_next),
        and the role's engine units."
      - "V(deploy): C(topology), C(groups), C(site_engine_group), C(site_proxy_group)."
      - "V(restart): C(inventory_hostname), C(topology), C(groups), C(site_engine_group), C(vllm_service_plan),
        C(vllm_restart_force), C(playbook_dir)."
      - "V(switch): C(switch_to), C(playbook_dir). V(switch_incumbent): C(vllm_switch_plan) (its incumbent's topology),
        C(site_engine_group), C(tool_gate_bar) (the tool_gate role's note of C(tool_gate_min_score); undefined: 0),
        C(playbook_dir).
        V(switch_hosts): C(vllm_switch_plan) (its lost hosts), C(site_engine_group), C(site_proxy_group).
        V(switch_proxy): C(groups), C(site_proxy_group), C(ansible_inventory_sources) (for the command it names), and
        each proxy host's C(nginx_proxy_settings)."
      - "V(image): C(vllm_runtime), C(vllm_container_engine), C(vllm_container_pull), C(ansible_facts.architecture)."
      - "V(image_builds): C(vllm_runtime), C(vllm_image_check), C(vllm_image_check_running), C(vllm_deploy_image_change),
        C(vllm_container_image), C(topology) (default V(replicas)), the role's engine units, C(ansible_play_hosts) and
        each of those hosts' C(vllm_image_check), C(playbook_dir)."
      - C(playbook_dir) (Ansible's magic variable) decides how a message names a playbook - C(factory_floor.llm.deploy)
        when the playbook that runs comes from an installed collection, C(playbooks/deploy.yml) from a checkout (the
        P(factory_floor.llm.playbook_name#filter) filter's rule).
    type: str
    required: true
    choices: [engine, deploy, restart, switch, switch_incumbent, switch_hosts, switch_proxy, image, image_builds]
  model_dir:
    description:
      - V(engine) - the M(ansible.builtin.stat) result of C(vllm_model) (read when it is an absolute path).
      - When O(model_dir), O(venv_vllm), O(tool_parsers), O(units_active), O(port_listeners) and O(port_units) are all
        left out, the module reads them on the host itself (the vllm role's preflight does); a failed read of the
        model directory, of the virtualenv's C(vllm) or of C(ss) fails the task with that read's message.
    type: dict
  venv_vllm:
    description: V(engine) - the M(ansible.builtin.stat) result of C(vllm_venv)/bin/vllm (the C(venv) runtime).
    type: dict
  tool_parsers:
    description:
      - V(engine) - the command result that lists, one a line, the tool-call parsers the virtualenv's vLLM knows (the
        C(venv) runtime, a C(vllm_tool_call_parser) set). Not checked when it failed or listed none.
    type: dict
  units_active:
    description: V(engine) - the C(systemctl is-active) result of the engine units; one active means the port is ours.
    type: dict
  port_listeners:
    description: V(engine) - the C(ss -Hltnp 'sport = :PORT') result for C(vllm_port).
    type: dict
  port_units:
    description: V(engine) - the C(ps -o unit= -p PIDS) result for those listeners' processes, one unit a line.
    type: dict
  serving:
    description:
      - V(restart) - this host's M(factory_floor.llm.vllm_health) result (one probe) - RV(factory_floor.llm.vllm_health#module:reason)
        C(rejected) is an engine that refuses the key; C(status) C(serving) one that serves.
      - V(switch_incumbent) - the failed task's result; when it is the gate's M(factory_floor.llm.vllm_health) probe
        (it has C(status) and C(reason)), a key the engine rejects, a model it does not list or an engine that does not
        serve is named with the setting to check; any other result is ignored (O(failure) says why).
    type: dict
  failure:
    description: V(switch_incumbent) - why scoring the incumbent failed (the failed task's C(msg)); cut to 600 characters.
    type: str
  image_info:
    description: V(image) - M(factory_floor.llm.container_image_info)'s result for C(vllm_container_image) on this host.
    type: dict
notes:
  - The variables are read where the task runs, so an include's C(vars) (the split's model, an upgrade's candidate image)
    count. An undefined C(topology), C(switch_to), C(vllm_service_plan), C(vllm_restart_force), C(vllm_switch_plan),
    C(vllm_image_check), C(vllm_image_check_running), C(tool_gate_bar), C(ansible_inventory_sources),
    C(ansible_facts.architecture) or C(playbook_dir) takes the default the check documents; any other undefined variable
    fails the task, naming it.
seealso:
  - module: factory_floor.llm.layout_check
  - module: factory_floor.llm.container_image_info
"""

EXAMPLES = r"""
# What the vllm role's preflight does: the module reads the host itself.
- name: Refuse settings vLLM cannot run with, a missing model or vLLM, an unknown parser, a taken port
  factory_floor.llm.vllm_check:
    check: engine

# The same, given what the host said.
- name: Refuse settings vLLM cannot run with, judged on given observations
  factory_floor.llm.vllm_check:
    check: engine
    model_dir: "{{ __model_dir }}"
    venv_vllm: "{{ __venv }}"
    tool_parsers: "{{ __parsers }}"
    units_active: "{{ __units }}"
    port_listeners: "{{ __ss }}"
    port_units: "{{ __ps }}"

- name: Refuse a topology other than replicas or split, or a site with no engine or no proxy host
  factory_floor.llm.vllm_check:
    check: deploy
  run_once: true
"""

RETURN = r"""
changed:
  description: Always false; the check only reads.
  returned: always
  type: bool
  sample: false
errors:
  description:
    - Every refusal, in the order checked; empty when there is none. On failure C(msg) holds the same messages (numbered
      when there are several). No message holds a key, an environment value or a run argument's value.
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description:
        - Which refusal - V(settings), V(model_dir), V(venv), V(tool_call_parser), V(port), V(api_key_next) (check
          V(engine)); V(topology) (V(deploy)); V(api_key_rejected), V(only_replica) (V(restart)); V(switch_to),
          V(incumbent_score), V(lost_hosts), V(proxy_missing), V(proxy_settings) (the switch's); V(image) (V(image));
          V(image_builds), V(image_running) (V(image_builds)).
      type: str
      sample: port
    hosts:
      description: Inventory hosts involved.
      type: list
      elements: str
      sample: [spark-1]
    variables:
      description: Variables to change (or to set, to go on anyway).
      type: list
      elements: str
      sample: [vllm_port]
    message:
      description: What is refused, why, and what to change.
      type: str
      sample: >-
        Port 8000 on spark-1 is held by jupyter.service (LISTEN 0 128 *:8000 *:* users:(("python3",pid=4120,fd=3))).
        Stop that program or set vllm_port to a free port.
"""
