#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_metrics
short_description: Read vLLM's Prometheus metrics from each engine directly and add them up
version_added: 0.1.0
description:
  - Reads C(/metrics) from B(each vLLM engine on its own address), never through the least_conn proxy, parses it with
    C(prometheus_client)'s parser and returns every engine's values and the model-wide view.
  - Counters and request gauges are summed over engines. KV-cache usage is never summed; the model-wide figure is a
    capacity-weighted mean. Latency quantiles come from the engines' histograms merged bucket by bucket.
  - With O(window) > 0 every engine is read twice and rates are returned. A counter that went down between the two
    reads (or a new C(process_start_time_seconds)) means the engine restarted; its rates then count from zero (never
    negative) and the restart is reported.
  - An engine that cannot be read (connection refused, timeout, HTTP status other than 200, no C(vllm:*) metric in the
    answer) is reported with RV(engines[].reachable=false) and left out of every total, and RV(complete) is false.
    It never counts as zero.
  - Reading through the proxy is what made a throughput monitor see counters jump back and forth between copies and
    call the model starved; this module exists so that never happens again.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - prometheus-client (Python library, on the host that runs the module; Debian and Ubuntu package
    C(python3-prometheus-client), which the C(factory_floor.llm.nginx_proxy) role installs on the proxy hosts)
  - requests (Python library, on the host that runs the module)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.engine_metrics
options:
  engines:
    description:
      - The vLLM engines to read, each on its own address (the machine's address, not the proxy's).
      - C(/metrics) is appended to O(engines[].url) unless it already ends with it.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - Name of the engine in the result and in RV(unreachable_engines) and RV(restarts), typically the inventory
            hostname (V(spark-a)). Must be unique.
        type: str
        required: true
      url:
        description:
          - Base URL of the engine's OpenAI-compatible server, for example V(http://spark-a:8000).
        type: str
        required: true
  topology:
    description:
      - V(replicas) (one full copy per machine) sums over all O(engines).
      - V(split) (one model, tensor parallelism over both machines) reads exactly one engine, the rank-0 head; its
        C(/metrics) covers the whole tensor-parallel group and the headless rank serves none. More than one engine
        with V(split) fails.
    type: str
    choices: [replicas, split]
    default: replicas
  window:
    description:
      - Seconds between two reads of every engine. V(0) reads once and returns no rates.
      - With a window, rates are increases divided by the time measured between an engine's two reads, and the
        latency quantiles cover only the requests that finished during the window.
    type: float
    default: 0
  api_key:
    description:
      - Sent to every engine as a bearer token (C(Authorization) header). vLLM's C(/metrics) normally needs none,
        even when the server was started with C(--api-key).
    type: str
notes:
  - Proxy settings from the environment (C(HTTP_PROXY), C(ALL_PROXY)) are ignored, so every read goes straight to the
    engine.
  - The same logic is used by the watchdog on the hosts (module_utils C(_vllm_metrics)).
seealso:
  - name: vLLM production metrics
    description: The metrics vLLM exports on C(/metrics).
    link: https://docs.vllm.ai/en/latest/usage/metrics.html
  - name: Prometheus histogram_quantile()
    description: The interpolation used for the latency quantiles.
    link: https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile
"""

EXAMPLES = r"""
- name: Read both replicas directly, 30 seconds apart
  factory_floor.llm.vllm_metrics:
    engines:
      - name: spark-a
        url: http://spark-a:8000
      - name: spark-b
        url: http://spark-b:8000
    window: 30
  delegate_to: localhost
  run_once: true
  register: __vllm_metrics

- name: Print the table
  ansible.builtin.debug:
    msg: "{{ __vllm_metrics.table }}"
  run_once: true

- name: Fail when a copy cannot be read or the model is slower than expected
  ansible.builtin.assert:
    that:
      - __vllm_metrics.complete
      - __vllm_metrics.total.rates.generation_tokens_per_s >= 150
    fail_msg: >-
      unreachable: {{ __vllm_metrics.unreachable_engines }},
      generation: {{ __vllm_metrics.total.rates.generation_tokens_per_s }} tokens/s
  run_once: true

- name: Read the split model (rank-0 head only), one sample
  factory_floor.llm.vllm_metrics:
    engines:
      - name: spark-a
        url: "http://{{ hostvars['spark-a'].ansible_host }}:8000"
    topology: split
  delegate_to: localhost
  run_once: true
  register: __vllm_metrics_split
"""

RETURN = r"""
changed:
  description: Always false; the module only reads.
  returned: always
  type: bool
  sample: false
complete:
  description: True when every engine in O(engines) was read (in both reads when O(window) > 0).
  returned: always
  type: bool
  sample: true
unreachable_engines:
  description: Names of the engines that could not be read and are left out of RV(total).
  returned: always
  type: list
  elements: str
  sample: []
restarts:
  description:
    - Names of the engines that restarted between the two reads (a counter went down, or C(process_start_time_seconds)
      changed). Always empty when O(window) is 0.
  returned: always
  type: list
  elements: str
  sample: [spark-b]
topology:
  description: The O(topology) the engines were read as.
  returned: always
  type: str
  sample: replicas
window:
  description: The O(window) asked for, in seconds (0 means one read, no rates).
  returned: always
  type: float
  sample: 30.0
table:
  description:
    - A human-readable table, one line per element, to print. A header, one row per engine and a C(TOTAL) row.
      KV_USED is a percentage, KV_TOKENS tokens, TTFT and E2E seconds, GEN_TOK/S and PROMPT_TOK/S tokens/s.
    - For display only; use RV(engines) and RV(total) in conditions.
  returned: always
  type: list
  elements: str
  sample:
    - "ENGINE   STATE   RUNNING  WAITING  KV_USED  KV_TOKENS  TTFT_P50  TTFT_P95  E2E_P95  GEN_TOK/S  PROMPT_TOK/S  REQ/MIN  NOTE"
    - "spark-a  up            9        1    45.0%    760,000     0.375     1.825    35.50      111.0        5000.0     27.0"
    - "spark-b  up           12        3    35.0%  1,080,000     0.417     1.900    36.00       99.0        4000.0     24.0"
    - "TOTAL    2/2 up       21        4    39.1%  1,840,000     0.396     1.863    35.75      210.0        9000.0     51.0"
engines:
  description:
    - One entry per element of O(engines), in the same order. Values are from the (second) read; every value is
      null when the engine is unreachable, and null when the engine does not export that metric.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: O(engines[].name).
      type: str
      sample: spark-a
    url:
      description: O(engines[].url).
      type: str
      sample: http://spark-a:8000
    reachable:
      description: False when C(/metrics) could not be read or was not vLLM's; the engine is then left out of RV(total).
      type: bool
      sample: true
    error:
      description:
        - Why the engine could not be read (refused, timed out, HTTP status, not vLLM), prefixed with the read
          (C(first sample) or C(second sample)) when O(window) > 0. Null when reachable.
      type: str
      sample: "second sample: GET http://spark-b:8000/metrics: cannot connect: [Errno 111] Connection refused"
    model_name:
      description: The engine's C(model_name) label (vLLM's C(--served-model-name)).
      type: str
      sample: local-model
    num_requests_running:
      description: Requests in the engine's running batch, from the gauge C(vllm:num_requests_running).
      type: int
      sample: 9
    num_requests_waiting:
      description: Requests queued in the engine, from the gauge C(vllm:num_requests_waiting).
      type: int
      sample: 1
    prompt_tokens_total:
      description: Prompt (prefill) tokens processed since the engine started, from the counter C(vllm:prompt_tokens_total). Tokens.
      type: int
      sample: 1300000
    generation_tokens_total:
      description: Tokens generated since the engine started, from the counter C(vllm:generation_tokens_total). Tokens.
      type: int
      sample: 352220
    num_preemptions_total:
      description: Requests preempted (KV cache full) since the engine started, from the counter C(vllm:num_preemptions_total).
      type: int
      sample: 4
    request_success_total:
      description:
        - Finished requests since the engine started, by C(finished_reason) label (V(stop), V(length), V(abort),
          V(error)), from the counter C(vllm:request_success_total).
      type: dict
      sample: {abort: 3, error: 0, length: 13, stop: 908}
    kv_cache_usage_perc:
      description:
        - Fraction (0-1) of the engine's KV-cache blocks in use, from the gauge C(vllm:kv_cache_usage_perc) (older vLLM
          C(vllm:gpu_cache_usage_perc)). Despite the name it is a fraction, not a percentage.
      type: float
      sample: 0.45
    kv_cache_capacity_tokens:
      description:
        - Size of the engine's KV cache in tokens, C(num_gpu_blocks) x C(block_size) from the labels of
          C(vllm:cache_config_info). Null when the engine does not export them.
      type: int
      sample: 760000
    ttft_seconds:
      description:
        - Time to first token, seconds, from the histogram C(vllm:time_to_first_token_seconds) (C(p50), C(p95),
          C(p99), interpolated inside buckets like Prometheus C(histogram_quantile)); C(count) is the number of
          requests they cover (since the engine started, or during the window when O(window) > 0). Quantiles are
          null when C(count) is 0.
      type: dict
      sample: {p50: 0.375, p95: 1.825, p99: 2.365, count: 9}
    e2e_latency_seconds:
      description:
        - End-to-end request latency, seconds, from the histogram C(vllm:e2e_request_latency_seconds); same keys as
          RV(engines[].ttft_seconds).
      type: dict
      sample: {p50: 14.166667, p95: 35.5, p99: 39.1, count: 9}
    restarted:
      description: True when the engine restarted between the two reads; its rates then count from zero.
      type: bool
      sample: false
    rates:
      description:
        - Increases between the two reads divided by the seconds measured between them. Null when unreachable.
        - C(generation_tokens_per_s) (tokens/s, from C(vllm:generation_tokens_total)), C(prompt_tokens_per_s)
          (tokens/s, from C(vllm:prompt_tokens_total)), C(requests_per_min) (finished requests of any
          C(finished_reason) per minute, from C(vllm:request_success_total)), C(elapsed_seconds) (seconds between
          the two reads of this engine).
      type: dict
      returned: when O(window) > 0
      sample: {generation_tokens_per_s: 111.0, prompt_tokens_per_s: 5000.0, requests_per_min: 27.0, elapsed_seconds: 20.0}
total:
  description:
    - The model-wide view over the reachable engines (with O(topology=split), the head's own values). Null values
      when no engine exports the metric or none is reachable.
  returned: always
  type: dict
  contains:
    engines_counted:
      description: How many engines the total covers (the reachable ones).
      type: int
      sample: 2
    num_requests_running:
      description: Sum of RV(engines[].num_requests_running). Requests.
      type: int
      sample: 21
    num_requests_waiting:
      description: Sum of RV(engines[].num_requests_waiting). Requests.
      type: int
      sample: 4
    prompt_tokens_total:
      description: Sum of RV(engines[].prompt_tokens_total). Tokens.
      type: int
      sample: 2280000
    generation_tokens_total:
      description: Sum of RV(engines[].generation_tokens_total). Tokens.
      type: int
      sample: 634200
    num_preemptions_total:
      description: Sum of RV(engines[].num_preemptions_total).
      type: int
      sample: 4
    request_success_total:
      description: Sum of RV(engines[].request_success_total) per C(finished_reason).
      type: dict
      sample: {abort: 5, error: 0, length: 18, stop: 1617}
    kv_cache_usage_perc_weighted_mean:
      description:
        - Fraction (0-1) of all KV-cache blocks in use. Mean of RV(engines[].kv_cache_usage_perc) weighted by
          RV(engines[].kv_cache_capacity_tokens); an unweighted mean when a capacity is unknown (see
          RV(total.kv_cache_usage_weighting)). Never a sum.
      type: float
      sample: 0.391304
    kv_cache_usage_weighting:
      description: V(capacity) when the mean is weighted by KV-cache capacity, V(unweighted) when it is not.
      type: str
      sample: capacity
    kv_cache_capacity_tokens:
      description:
        - Sum of RV(engines[].kv_cache_capacity_tokens), tokens; null when one is unknown. With replicas these are
          separate pools; one request can use only one of them.
      type: int
      sample: 1840000
    ttft_seconds:
      description:
        - Time to first token over all engines, seconds, from C(vllm:time_to_first_token_seconds) with buckets
          merged across engines before the quantiles are taken (buckets only some engines have are dropped). Keys
          as in RV(engines[].ttft_seconds).
      type: dict
      sample: {p50: 0.395833, p95: 1.8625, p99: 2.3725, count: 17}
    e2e_latency_seconds:
      description:
        - End-to-end request latency over all engines, seconds, from C(vllm:e2e_request_latency_seconds) merged
          the same way.
      type: dict
      sample: {p50: 13.75, p95: 35.75, p99: 39.15, count: 17}
    rates:
      description:
        - Sum of RV(engines[].rates) over the reachable engines. C(generation_tokens_per_s) and
          C(prompt_tokens_per_s) in tokens/s, C(requests_per_min) in finished requests per minute.
      type: dict
      returned: when O(window) > 0
      sample: {generation_tokens_per_s: 210.0, prompt_tokens_per_s: 9000.0, requests_per_min: 51.0}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_metrics import engine_metrics_spec
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_metrics import (
    PROMETHEUS_CLIENT_IMPORT_ERROR,
    REQUESTS_IMPORT_ERROR,
    TOPOLOGIES,
    TOPOLOGY_REPLICAS,
    MetricsError,
    collect,
    make_fetch,
)


def main():
    module = AnsibleModule(
        argument_spec=engine_metrics_spec(
            topology={"type": "str", "choices": list(TOPOLOGIES), "default": TOPOLOGY_REPLICAS},
            window={"type": "float", "default": 0.0},
        ),
        supports_check_mode=True,
    )
    if PROMETHEUS_CLIENT_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("prometheus-client", reason="to parse the engines' /metrics")
                         + " On Debian and Ubuntu: apt-get install python3-prometheus-client (the"
                         " factory_floor.llm.nginx_proxy role installs it on the proxy hosts, where"
                         " playbooks/metrics.yml reads).", exception=PROMETHEUS_CLIENT_IMPORT_ERROR)
    if REQUESTS_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %s" % module.params["timeout"])

    try:
        result = collect(
            module.params["engines"],
            make_fetch(timeout=module.params["timeout"], api_key=module.params["api_key"]),
            topology=module.params["topology"],
            window=module.params["window"],
        )
    except MetricsError as exc:
        module.fail_json(msg="vllm_metrics: %s" % exc)

    for note in result.pop("notes"):
        module.warn(note)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
