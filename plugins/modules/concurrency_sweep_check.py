#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: concurrency_sweep_check
short_description: Check a concurrency sweep's request before it runs, and make its report after, on the controller
version_added: 0.1.0
description:
  - "The decisions of the C(factory_floor.llm.tune_concurrency) role around M(factory_floor.llm.concurrency_sweep)
    (C(playbooks/tune_concurrency.yml)). The role's tasks sweep; the module reads the engine units' command lines on the
    host (M(factory_floor.llm.vllm_engine_info), each of C(_site_engine_units)) for V(plan) and the C(tune_*) variables
    and the others a check needs itself, as the task sees them (the entry point's block variables, C(-e), the
    inventory), on the controller."
  - "O(check=plan) refuses a C(tune_host) outside the engine group (C(site_engine_group)), C(tune_concurrency) empty
    or with a level below 1, C(tune_profiles) empty or other than C(short)/C(long), C(tune_target_metric) other than
    C(e2e)/C(ttft)/C(tpot), an empty C(tune_write_path); then, unless C(tune_allow_over_cap), a highest level above
    the cap the engine runs with (RV(cap)); with C(tune_num_speculative_tokens) set, an engine without a speculative
    config (no C(method), no draft C(model) in its C(--speculative-config), else in C(vllm_speculative_config)) or one
    running a C(num_speculative_tokens) the list does not hold (RV(speculative)). Returns the engine's URL from where the load comes (RV(url)), its cap and
    batch budget (RV(batched)) and the sentence about the budget (RV(batch_note))."
  - "O(check=report) returns the printed report (RV(lines)), the figures saved as JSON (RV(saved)), the
    C(vllm_max_num_seqs) line C(tune_write) writes (RV(line)) and, when writing was asked but no level qualified in a
    sweep that sent load, the refusal (RV(refusal)) for the role to fail with. With C(tune_num_speculative_tokens),
    the report compares this run's value with the runs of the other values that C(<tune_output_dir>/<host>.json) on the
    controller holds for the same engine, and RV(saved) gains them (C(speculative)). Never fails."
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  check:
    description: Which decision (see the description).
    type: str
    required: true
    choices: [plan, report]
  engines:
    description:
      - V(plan) - the M(factory_floor.llm.vllm_engine_info) results of the host's engine units (a loop's C(results), C(item)
        the unit); the one whose process runs gives the cap and the batch budget (its C(--max-num-seqs),
        C(--max-num-batched-tokens)), else the inventory's C(vllm_max_num_seqs), C(vllm_max_num_batched_tokens).
      - Omitted, the module reads each of C(_site_engine_units) on the host itself.
    type: list
    elements: dict
  plan:
    description: V(report) - what V(plan) returned.
    type: dict
    default: {}
  sweep:
    description: V(report) - the M(factory_floor.llm.concurrency_sweep) result.
    type: dict
    default: {}
notes:
  - The module runs on the controller through its action plugin; the module file holds its documentation only.
seealso:
  - module: factory_floor.llm.concurrency_sweep
"""

EXAMPLES = r"""
- name: Check what is asked, and read the cap and the batch budget the engine runs with
  factory_floor.llm.concurrency_sweep_check:
    check: plan
  register: tune

- name: Make the report
  factory_floor.llm.concurrency_sweep_check:
    check: report
    plan: "{{ tune }}"
    sweep: "{{ sweep }}"
  register: report
"""

RETURN = r"""
errors:
  description: V(plan) - the refusals, the first that applies (empty when the sweep may run); the task's C(msg) says the same.
  returned: when O(check=plan)
  type: list
  elements: str
  sample: []
url:
  description: V(plan) - the engine's OpenAI API from where the load comes (C(tune_load_host)).
  returned: when O(check=plan)
  type: str
  sample: http://127.0.0.1:8000
load_host:
  description: V(plan) - where the load comes from, an inventory host.
  returned: when O(check=plan)
  type: str
  sample: spark-a
cap:
  description: V(plan) - the engine's C(max_num_seqs), concurrent sequences (its process's, else the inventory's); null, unset.
  returned: when O(check=plan)
  type: raw
  sample: "16"
cap_source:
  description: V(plan) - the engine unit whose process gave RV(cap); empty, the inventory's.
  returned: when O(check=plan)
  type: str
  sample: vllm-replica.service
batched:
  description: V(plan) - the engine's C(max_num_batched_tokens), tokens per step; null, vLLM's default.
  returned: when O(check=plan)
  type: raw
  sample: "8192"
tensor_parallel_size:
  description:
    - V(plan) - the size of the engine group the sweep loads, hosts (its ranks) - the running engine's
      C(--tensor-parallel-size) (1, vLLM's default, when its command line has none), else the inventory's (the host's
      group in C(site_engine_groups), else C(vllm_split_tensor_parallel_size) on C(topology=split), else 1). Saved
      with the figures so M(factory_floor.llm.kv_cache_plan) matches them to groups of that size.
  returned: when O(check=plan)
  type: int
  sample: 1
tensor_parallel_size_source:
  description: V(plan) - where RV(tensor_parallel_size) came from (the engine unit's command line, or the inventory variable).
  returned: when O(check=plan)
  type: str
  sample: "vllm-split.service --tensor-parallel-size"
batch_note:
  description: V(plan) - the sentence that says which batch budget the figures hold for.
  returned: when O(check=plan)
  type: str
speculative:
  description:
    - V(plan) - the C(num_speculative_tokens) dimension (C(tune_num_speculative_tokens)); C(tokens) empty, off.
  returned: when O(check=plan)
  type: dict
  contains:
    tokens:
      description: The values compared, draft tokens per step (C(tune_num_speculative_tokens)).
      type: list
      elements: int
      sample: [2, 4]
    config:
      description: The speculative config the engine runs (its process's C(--speculative-config), else C(vllm_speculative_config)).
      type: dict
      sample: {method: mtp, num_speculative_tokens: 2}
    source:
      description: The engine unit whose command line gave RV(speculative.config); empty, the inventory's.
      type: str
    now:
      description: The C(num_speculative_tokens) the engine runs, the value this run measures, tokens; null, unset.
      type: int
      sample: 2
    errors:
      description: The dimension's refusals (also in RV(errors)).
      type: list
      elements: str
    next:
      description: For each other value, the deploy that restarts the engine with it, before its own run.
      type: list
      elements: str
lines:
  description: V(report) - the sweep's table, the engine, the reasoning and the recommendation, one line each.
  returned: when O(check=report)
  type: list
  elements: str
saved:
  description: V(report) - what is saved as C(<host>.json) (C(host), C(url), C(load_host), C(engine), C(profiles),
    C(levels), C(max_num_batched_tokens), C(tensor_parallel_size) and C(tensor_parallel_size_source) (the engine
    group's size, RV(tensor_parallel_size)), C(measured_at) (UTC, ISO 8601), C(recommendation)); with C(tune_num_speculative_tokens), C(speculative) -
    C(key) (the engine the values share), C(runs) (value -> the levels measured at it, this run's and earlier ones'),
    C(dropped), C(tokens), C(config), C(now), and C(recommendation) (C(best) value, at C(level) concurrent requests,
    C(rates) value -> tokens/s for the mix, C(missing) values not measured yet).
  returned: when O(check=report)
  type: dict
line:
  description: V(report) - the C(vllm_max_num_seqs) line for C(tune_write_path).
  returned: when O(check=report)
  type: str
  sample: "vllm_max_num_seqs: 8  # tune-concurrency.yml, e2e p95 <= 20.0 s, shares {\"short\": 1, \"long\": 1}"
refusal:
  description: V(report) - why nothing was written when C(tune_write) was asked; empty otherwise.
  returned: when O(check=report)
  type: str
"""
