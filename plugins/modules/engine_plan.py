#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# An action plugin (plugins/action/engine_plan.py): this file holds its documentation only.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: engine_plan
short_description: A vLLM engine's command line, environment and fingerprint, and whether its unit must restart
version_added: 0.1.0
description:
  - Composes, on the controller, what an engine's systemd unit runs - its command line (C(ExecStart=)), its
    environment (the root-only env file) and the configuration fingerprint of both with the API keys - then reads on
    the host what runs now and says whether a C(service) run would restart it. The C(factory_floor.llm.vllm) role's
    C(plan) entry point (the first step of C(service)) calls it with no option; each option left out is read from
    the role's variable it names, as the task sees it (an include's C(vars) too); one not defined there takes its
    default.
  - "The command line per O(runtime). V(venv): C(VENV/bin/vllm serve) (O(venv)). V(container): the attached
    C(ENGINE run --name UNIT --network=host --pull=missing|never --stop-timeout=SECONDS [--log-driver=DRIVER]
    --env-file ENV_FILE) (O(container_engine), O(unit), O(container_pull), O(stop_timeout), O(container_log_driver),
    O(env_file)), then O(container_resource_args), the cache (C(--volume=CACHE_DIR:CACHE_PATH), O(container_cache_dir)
    and O(container_cache_path)), read-only mounts at the same path of what vLLM reads from the host (the model
    directory when it is a path; a chat template, a speculative model or a C(--config) file that is a path outside it;
    each once), O(service_run_args), O(container_run_args), then C(--entrypoint vllm IMAGE serve) (O(container_image)).
    vLLM's arguments follow: the model, one C(--flag value) per setting of O(settings) and O(service_settings) (the
    C(factory_floor.llm.vllm_args) filter's rules), then O(extra_args). Every word is kept as given (backslashes, C($),
    C(%), quotes): the role writes it with the C(factory_floor.llm.systemd_exec) filter, which quotes it so that
    systemd passes it on unchanged."
  - "The container is named after the unit (C(vllm-replica.service) runs C(vllm-replica)). It is not removed by the
    engine (C(--rm)): the unit's C(ExecStopPost=) removes it synchronously. The API key reaches it only through the
    env file, never as C(-e) on this command line."
  - "The environment: with the container runtime and a cache kept, C(TRITON_CACHE_DIR=CACHE_PATH/triton)
    (O(container_cache_path); Triton's own default is outside the mounted cache); then O(env), O(env_host),
    O(service_env), a later one winning."
  - "The fingerprint: the SHA-256 (64 hex digits) of the JSON C([argv, environment, KEY_HASH]) - the environment
    sorted by name (case-insensitive) as C([name, value]) pairs, KEY_HASH the SHA-256 of O(api_key) - with the
    SHA-256 of O(api_key_next) appended while a rotation is under way: exactly what the role's Jinja composed before
    this plugin, so an engine started before keeps its fingerprint. The unit's process carries it as
    C(FACTORY_FLOOR_CONFIG) (from the env file)."
  - "What runs is read by the collection's read-only modules on the host: C(factory_floor.llm.vllm_engine_info) (the
    unit's main process, its C(vllm serve) arguments and whether its fingerprint is this one) and, with the container
    runtime, C(factory_floor.llm.container_image_info) (the image's ID, and the one the unit's container was created
    from). A restart is pending when the process runs another fingerprint (its command line, its environment or a key
    changed), or while it runs when its container runs another build of the image than the one O(container_image)
    names on the host (a tag pulled again): compared only while the container runs and the wanted image is on the
    host. Nothing is pulled, started or changed."
  - "The environment, the keys and the fingerprint never leave the controller except the fingerprint, as
    C(vllm_engine_info)'s C(no_log) option. The result holds them, so a successful run's output is never shown (as
    with C(no_log)); its command line and RV(plan) are meant to be shown by a following task (the role's C(set_fact)
    of C(vllm_service_plan)). A refusal is shown, and names variables and types, never a value."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
attributes:
  action:
    description: Runs on the controller (an action plugin), and runs the modules that read the host there.
    support: full
options:
  unit:
    description:
      - The engine's systemd unit, C(vllm-replica.service) or C(vllm-split.service) (the role's C(vllm_service_name)).
      - The container is named after it, without C(.service).
    type: str
    required: true
  runtime:
    description: How the engine runs (C(vllm_runtime)).
    type: str
    required: true
    choices: [venv, container]
  settings:
    description:
      - vLLM's settings, keyed by flag name with underscores (C(max_num_seqs) for C(--max-num-seqs)); the role's
        C(_vllm_settings), from C(vllm_model), C(vllm_served_model_name), C(vllm_port), ...
      - C(model) is required. C(None) and empty values are left to vLLM's defaults; an unknown key is refused.
    type: raw
    required: true
  service_settings:
    description: The topology's settings, which win over O(settings) (C(vllm_service_settings); the split's ranks).
    type: raw
    default: {}
  extra_args:
    description: Arguments appended as given (C(vllm_extra_args)). A list; anything else is refused.
    type: raw
    default: []
  venv:
    description: The virtualenv that holds vLLM, for O(runtime=venv) (C(vllm_venv)).
    type: str
    default: /opt/vllm
  container_engine:
    description: The container engine's command, a path (the role's C(_vllm_container_engine_path), C(/usr/bin/) and C(vllm_container_engine)).
    type: str
    default: /usr/bin/docker
  container_image:
    description: The image the container runs (C(vllm_container_image)).
    type: str
    default: ""
  container_pull:
    description: C(--pull=missing) when true, else C(--pull=never) (C(vllm_container_pull)).
    type: bool
    default: false
  container_log_driver:
    description: C(--log-driver=), left out when empty (C(vllm_container_log_driver)).
    type: str
    default: ""
  container_resource_args:
    description:
      - The GPU, IPC and C(/dev/shm) options (the role's C(_vllm_container_resource_args), from C(vllm_container_gpus),
        C(vllm_container_ipc), C(vllm_container_shm_size)). A list.
    type: raw
    default: []
  container_cache_dir:
    description: The host directory mounted at O(container_cache_path); none when empty (C(vllm_container_cache_dir)).
    type: str
    default: ""
  container_cache_path:
    description: Where the container sees the cache, the image's C(~/.cache) (C(vllm_container_cache_path)).
    type: str
    default: /root/.cache
  container_run_args:
    description: The inventory's C(run) options, after the topology's (C(vllm_container_run_args)). A list.
    type: raw
    default: []
  service_run_args:
    description: The topology's C(run) options, before the inventory's (C(vllm_service_run_args); the split's RDMA devices and NCCL). A list.
    type: raw
    default: []
  stop_timeout:
    description: Seconds the container has to stop before C(SIGKILL), its C(--stop-timeout) (the role's C(_vllm_stop_timeout), C(vllm_shutdown_timeout) + 10).
    type: int
    default: 40
  env_file:
    description: The unit's root-only env file, the container's C(--env-file) (the role's C(_vllm_config_dir)/UNIT.env, C(/etc/factory-floor/UNIT.env)).
    type: str
    default: ""
  env:
    description: "The engine's environment (C(vllm_env)). A mapping C(NAME: value); its values are never shown."
    type: raw
    default: {}
  env_host:
    description: This host's additions, which win over O(env) (C(vllm_env_host)). A mapping.
    type: raw
    default: {}
  service_env:
    description: The topology's additions, which win over both (C(vllm_service_env); the split's NCCL and Gloo settings). A mapping.
    type: raw
    default: {}
  api_key:
    description: The API key (C(vllm_api_key)); only its SHA-256 enters the fingerprint. Never shown.
    type: str
    default: ""
  api_key_next:
    description: The key being rotated to (C(vllm_api_key_next)); its SHA-256 enters the fingerprint while it is set. Never shown.
    type: str
    default: ""
  systemctl:
    description: The C(systemctl) that C(vllm_engine_info) asks on the host (tests).
    type: str
    default: /usr/bin/systemctl
notes:
  - "Errors (the task fails, nothing changes): O(runtime) not V(venv) or V(container); O(settings) or
    O(service_settings) not a mapping; an unknown vLLM setting, or no C(model); O(extra_args), O(container_run_args),
    O(service_run_args) or O(container_resource_args) not a list; O(env), O(env_host) or O(service_env) not a mapping
    (the message names the three variables and their types, and the host); C(vllm_engine_info) or
    C(container_image_info) failing on the host (their message: C(systemctl) not answering, the container engine
    missing or not running)."
seealso:
  - module: factory_floor.llm.vllm_engine_info
  - module: factory_floor.llm.container_image_info
"""

EXAMPLES = r"""
- name: Plan the engine against what runs, every option from the vllm role's variables (its plan entry point)
  factory_floor.llm.engine_plan: {}
  register: engine

- name: Plan the replica's engine against what runs, the options given
  factory_floor.llm.engine_plan:
    unit: vllm-replica.service
    runtime: container
    settings:
      model: /models/Qwen3-Next-80B-A3B-Instruct-NVFP4
      served_model_name: qwen3-next
      port: 8000
      max_num_seqs: 12
      kv_cache_dtype: fp8
    container_engine: /usr/bin/docker
    container_image: vllm-gb10:0.32.0
    container_resource_args: [--gpus=all, --ipc=host]
    container_cache_dir: /var/cache/vllm
    env_file: /etc/factory-floor/vllm-replica.service.env
    env: "{{ vllm_env }}"
    api_key: "{{ vllm_api_key }}"
  register: engine

- name: Say what a service run would do
  ansible.builtin.debug:
    msg: "{{ engine.plan.change if engine.plan.restart_pending else 'runs this configuration' }}"
"""

RETURN = r"""
argv:
  description: The unit's whole command line (C(ExecStart=)), each word as given; readable by anyone on the host (C(/proc)).
  returned: success
  type: list
  elements: str
  sample: [/usr/bin/docker, run, --name, vllm-replica, --network=host, --pull=never, --stop-timeout=40, --env-file,
           /etc/factory-floor/vllm-replica.service.env, --entrypoint, vllm, "vllm-gb10:0.32.0", serve, /models/m,
           --port, "8000"]
environment:
  description: "The engine's environment (C(NAME: value)), for the root-only env file. Secret (C(HF_TOKEN)...)."
  returned: success
  type: dict
fingerprint:
  description: The configuration fingerprint, 64 hex digits, the env file's C(FACTORY_FLOOR_CONFIG). Derived from the keys, never shown.
  returned: success
  type: str
need_daemon_reload:
  description: systemd's C(NeedDaemonReload) of the unit (from C(vllm_engine_info)) - a restart without C(daemon-reload) runs the definition it loaded before.
  returned: success
  type: bool
main_pid:
  description: The unit's main process, 0 when none.
  returned: success
  type: int
plan:
  description: What a C(service) run would do (the role's fact C(vllm_service_plan)).
  returned: success
  type: dict
  contains:
    running:
      description: The unit has a main process.
      type: bool
    restart_pending:
      description: It runs another configuration, or (container, while it runs) another build of the image; a C(service) run restarts it.
      type: bool
    args_removed:
      description: vLLM's arguments (after C(serve) - the model, then C(--flag value) items) of the running process that are gone.
      type: list
      elements: str
    args_added:
      description: The new ones. Both empty when only the environment, a key, the container's options or its image changed.
      type: list
      elements: str
    image:
      description:
        - "With the container runtime: C(wanted) (O(container_image)), C(wanted_id) (its ID on the host, empty when absent),
          C(running) and C(running_id) (the image the unit's container was created from and its ID, empty when it does
          not run), C(changed) (both known and different). Empty with the venv runtime."
      type: dict
    change:
      description: The differences in words (C(was ...), C(now ...), C(image OLD (ID) -> NEW (ID))), for messages; empty when no restart is pending.
      type: str
      sample: was --max-num-seqs 12, now --max-num-seqs 10
"""
