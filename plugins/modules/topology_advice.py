#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_advice
short_description: Keep the topology advisor's measurements on the controller and rank the groupings from them
version_added: 0.1.0
description:
  - "The store and the ranking of the topology advisor (issue 38; C(playbooks/workload_profile.yml),
    C(playbooks/workload_replay.yml), C(playbooks/advise_topology.yml)). Everything lives in O(store_dir) on the
    controller - C(profile.json) (the last workload profile), C(results.json) (the replays, one per grouping and build,
    schema C(factory_floor.llm.topology_results/1)) and C(advice.json) (the last ranking)."
  - "B(The build) is the tool gate's build id (M(factory_floor.llm.tool_gate_build), the fact C(tool_gate_build) the
    C(factory_floor.llm.tool_gate) role's C(build_id) entry point sets on every engine host): the model directory's small
    files by checksum, its weights by name and size, the tool-call parser, the chat template and the vLLM image's ID.
    The plugin reads it from every host of the engine group (C(site_engine_group)) itself; hosts with different ids
    give an id C(mixed-<digest>) of their own. A new model or image is a new id, so only what changed is measured again."
  - "O(state=profile) writes O(profile) (M(factory_floor.llm.workload_profile)'s) to C(profile.json) and returns a short
    summary (RV(lines))."
  - "O(state=read) returns the saved profile (RV(profile)) for a replay, with what the replay asks for - the first
    engine host's C(vllm_served_model_name) (else its C(vllm_model)) as RV(model) and its C(vllm_max_model_len) as
    RV(max_model_len), and where to send it from the proxy host the task runs for (RV(url), RV(ca_path)); fails,
    saying to run C(workload_profile.yml), when there is none."
  - "O(state=plan) says what an advisor window does from the grouping the engines run (O(current)) - the grouping it
    switches to (the other of V(replicas) and V(split); one host has only V(replicas)) and which of the two it measures:
    those without a result for the build, all of them with O(remeasure). One whose switch failed for the build is
    not tried again without O(remeasure) - another try costs another outage."
  - "O(state=pending) notes, before the advisor's switch to O(grouping), that the switch is under way and where its
    report will be (O(switch_report_file)). A switch that does not go through ends the playbook (ansible-core stops a
    run once every host of a play failed; the switch's report play has one host): the next O(state=rank) finds the
    note, reads the report, and lists that grouping as failed, with the switch's reason, never chosen."
  - "O(state=record) stores O(grouping)'s replays (M(factory_floor.llm.workload_replay)'s RV(factory_floor.llm.workload_replay#module:replay))
    for the build, replacing the one stored before; the seconds without a model are O(switch_report)'s C(downtime)
    (the switch's longest gap between answers through the proxy) when the run switched to it."
  - "O(state=rank) ranks the groupings from the store (C(_topology_advisor.rank)): a failed, errored or unmeasured one
    is not chosen; of the others the most output tokens/s at the busiest hour (the measured load when one has no
    busiest-hour replay), and the grouping the engines run stays unless another does more than O(margin) more. The
    long-context need is the profile's longest request (C(max_at_most) of the prompt and output histograms), at most the
    first engine host's C(vllm_max_model_len). Writes C(advice.json); returns RV(advice) and the table (RV(lines))."
  - Runs on the controller (its action plugin); it never connects to a host.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Says whether it would write and writes nothing; plan and rank read as outside check mode.
  diff_mode:
    support: none
  idempotent:
    support: none
    details: A record and a pending note carry the time they were made.
options:
  state:
    description: What to do (see the description).
    type: str
    required: true
    choices: [profile, read, plan, pending, record, rank]
  store_dir:
    description:
      - The directory of the store on the controller; made when missing. Default - the variable C(workload_store_dir) as
        the task sees it (the inventory, C(-e)), else C(~/.factory_floor/workload/<the inventory directory's name>) of
        the user running ansible-playbook - one store per site.
    type: path
  current:
    description: (plan, rank) The grouping the engines run now (V(replicas), V(split)), as C(factory_floor.llm.serving_engines) decides it.
    type: str
  grouping:
    description: (pending, record) The grouping the replays ran on, or the advisor switches to.
    type: str
  run:
    description: (plan, pending, record) The run's id (C(plan.run) of the window), stored with the result.
    type: str
    default: ""
  profile:
    description: (profile) The workload profile, RV(factory_floor.llm.workload_profile#module:profile).
    type: dict
  measured_load:
    description: (record) The replay at the site's measured arrival rate, RV(factory_floor.llm.workload_replay#module:replay).
    type: dict
  busiest_hour:
    description: (record) The replay at the busiest hour's arrival rate, same form; null when none ran.
    type: dict
  switch_report:
    description:
      - (record) The report of the switch that brought the hosts to O(grouping) in this run (C(maintenance_window_report));
        none when they were on it already.
    type: dict
  kv_tokens:
    description:
      - (record) Each serving group's KV cache, in tokens, as its API engine reports it (C(num_gpu_blocks) x
        C(block_size) of C(vllm:cache_config_info); M(factory_floor.llm.vllm_metrics)'s C(kv_cache_capacity_tokens)).
        Stored with the grouping's figures; the table's C(KV smallest/need) column compares the smallest with the
        profile's long-context need. A null or missing item (an engine that does not export it) stores none.
    type: list
    elements: raw
  switch_report_file:
    description: (pending) Where the switch saves its report on the controller (C(switch_report_file)).
    type: path
  remeasure:
    description: (plan) Measure every grouping again, even those with a result for the build.
    type: bool
    default: false
  start:
    description: (rank) The grouping an advisor window started on; default O(current).
    type: str
  apply:
    description: (rank) End the window on the recommended grouping (RV(return_to)) instead of O(start).
    type: bool
    default: false
  margin:
    description: (rank) How much more output tokens/s another grouping must do to be recommended over the current one. Fraction 0-1.
    type: float
    default: 0.05
"""

EXAMPLES = r"""
- name: Rank the groupings from what the store holds for this build
  factory_floor.llm.topology_advice:
    state: rank
    current: "{{ __metrics_topology }}"
  register: __workload_advice
  run_once: true
"""

RETURN = r"""
store_dir:
  description: The store's directory (O(store_dir) or its default).
  returned: always
  type: str
  sample: /home/operator/.factory_floor/workload/lab
profile:
  description: (read) The saved workload profile (RV(factory_floor.llm.workload_profile#module:profile)).
  returned: with state read
  type: dict
model:
  description: (read) The served model name the replay asks for.
  returned: with state read
  type: str
  sample: lab-chat
max_model_len:
  description: (read) The first engine host's C(vllm_max_model_len), tokens; null when the inventory sets none.
  returned: with state read
  type: int
url:
  description:
    - (read) The proxy's base URL from the proxy host the task runs for - the variable C(workload_replay_url), else
      C(https://<nginx_proxy_tls_server_name or the host's name>:<site_proxy_port>/v1) with a certificate
      (C(nginx_proxy_tls_certificate)), else C(http://127.0.0.1:<site_proxy_port>/v1) (the probe client's address).
  returned: with state read
  type: str
  sample: http://127.0.0.1:8080/v1
ca_path:
  description: (read) C(nginx_proxy_tls_ca_file), the CA to verify the proxy's certificate with; null for the system's.
  returned: with state read
  type: str
path:
  description: (profile, pending, record, rank) The file written (or that would be, in check mode) on the controller.
  returned: with state profile, pending, record or rank
  type: str
  sample: /home/operator/.factory_floor/workload/lab/results.json
build:
  description: (pending, record) The build id the result is stored under.
  returned: with state pending or record
  type: str
lines:
  description: (profile, record, rank) What the playbook prints - the profile's summary, the replays' totals, or the table and the recommendation.
  returned: with state profile, record or rank
  type: list
  elements: str
plan:
  description:
    - (plan) C(build), C(start) (O(current)), C(other) (the grouping a window switches to; null with one host),
      C(candidates), C(measure_start) and C(measure_other) (bool - no result for the build, or O(remeasure)), C(stored)
      (the groupings with a result for the build), C(failed) (those whose switch failed for the build - not tried
      again unless O(remeasure)), C(run) (O(run), else the time, UTC) and C(switch_report_file)
      (C(<store_dir>/switch-<run>-<other>.json), where the window's switch saves its report).
  returned: with state plan
  type: dict
  sample: {build: 3f2a..., start: split, other: replicas, candidates: [replicas, split], measure_start: true,
           measure_other: true, stored: [], failed: []}
advice:
  description:
    - (rank) C(_topology_advisor.rank)'s result - C(rows) (per grouping - C(tokens_per_s_measured_load),
      C(tokens_per_s_busiest_hour) in output tokens/s, C(ttft_p95_seconds), C(tpot_p95_seconds), C(errors),
      C(switch_seconds_without_model) in seconds, C(failed) and C(excluded) - why it cannot be chosen - and, shown,
      never ranked on, C(full_context_requests_total) and C(sweep_tokens_per_s) (output tokens/s) from the KV plan's
      grouping, null where it has none), C(recommendation)
      (C(grouping), C(switch), C(reasons)), C(not_measured), C(site) and C(lines) (the table).
  returned: with state rank
  type: dict
return_to:
  description: (rank) The grouping an advisor window ends on - O(start) (else O(current)), or with O(apply) the recommended one.
  returned: with state rank
  type: str
  sample: split
switch_back:
  description: (rank) Whether RV(return_to) differs from O(current), so the window switches once more.
  returned: with state rank
  type: bool
"""
