#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_profile
short_description: Profile the site's own traffic from its vLLM engines' metrics over a window
version_added: 0.1.0
description:
  - Reads C(/metrics) from B(each vLLM engine on its own address) every O(interval) seconds for O(window) seconds and
    returns the site's workload - arrival rate (over the window and by UTC hour), prompt and output length
    distributions, concurrency, the share of long-context requests and the prefix-cache hit fraction - per engine and
    for the whole model. It only reads; it sends no request to the model.
  - The profile is what a replay of the site's traffic is built from (issue 38); O(dest) keeps it as JSON.
  - B(Where the numbers come from) (vLLM 0.32 metric names). Finished requests - the increase of
    C(vllm:request_success_total), any C(finished_reason). Arrivals - finished requests plus the change of
    C(vllm:num_requests_running) + C(vllm:num_requests_waiting) over each interval (vLLM exports no arrival counter;
    a request still in the API server, not yet in the engine's queue, is not counted yet). Lengths - the increase of
    the per-request histograms C(vllm:request_prompt_tokens) and C(vllm:request_generation_tokens), observed when a
    request finishes; the mean is exact (C(_sum)/C(_count)), quantiles are B(interpolated inside vLLM's buckets)
    (1, 2, 5, 10, 20, 50, ... tokens) like PromQL's C(histogram_quantile), so a quantile is only known to lie in its
    bucket. Prefix cache - increase of C(vllm:prefix_cache_hits_total) over that of
    C(vllm:prefix_cache_queries_total), in tokens. Latencies - C(vllm:time_to_first_token_seconds),
    C(vllm:time_per_output_token_seconds), C(vllm:e2e_request_latency_seconds).
  - B(Long-context requests.) vLLM keeps prompt and output lengths in two histograms, not their sum per request, so
    the share of requests whose prompt + output exceed a token count of O(long_context_tokens) is returned as a lower
    and an upper bound that hold whatever the pairing, and an estimate between them.
  - B(Restarts.) An engine whose C(process_start_time_seconds) changed, or one of whose counters went down, between
    two samples restarted; that interval counts from zero (as Prometheus' C(increase()) does) and the engine is listed
    in RV(profile.restarts). What it counted between the sample before and the restart is lost, so figures can only be
    lower, never negative.
  - An engine that cannot be read at a sample is skipped for that sample (its increases span the gap); one read fewer
    than twice is left out of the total, and RV(profile.complete) is false. When no engine was read twice the module
    fails and writes nothing.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - prometheus-client (Python library, on the host that runs the module)
  - requests (Python library, on the host that runs the module)
extends_documentation_fragment:
  - ansible.builtin.files
  - factory_floor.llm.attributes
  - factory_floor.llm.engine_metrics
attributes:
  check_mode:
    support: full
    details:
      - The engines are read in check mode too (reading changes nothing); with O(dest), the profile is compared with
        the file and nothing is written.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details:
      - Without O(dest) nothing changes. With O(dest) every run is a new measurement, so the file changes whenever the
        traffic did.
options:
  engines:
    description:
      - The vLLM engines to read, each on its own address (the machine's, not the proxy's), as
        M(factory_floor.llm.vllm_metrics) takes them. C(/metrics) is appended to O(engines[].url) unless it ends with
        it.
      - For the split topology give the rank-0 head only; its C(/metrics) covers the whole tensor-parallel group.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - Name of the engine in the result, typically the inventory hostname (V(spark-a)). Must be unique.
        type: str
        required: true
      url:
        description:
          - Base URL of the engine's OpenAI-compatible server, for example V(http://spark-a:8000).
        type: str
        required: true
  window:
    description:
      - How long to watch, in seconds. The module returns after about this long.
      - Rates by hour need a window that covers the hours; an hour is reported with the seconds of it the window
        covered.
    type: float
    required: true
  interval:
    description:
      - Seconds between two reads of every engine. Reads happen at 0, O(interval), 2 x O(interval), ... and at
        O(window), so at least twice.
      - Concurrency is sampled at these instants; a shorter interval sees more of its peaks.
    type: float
    default: 15
  long_context_tokens:
    description:
      - Token counts (prompt + output) above which a request counts as long-context, for RV(profile.total.long_context).
        Tokens.
    type: list
    elements: int
    default: [32768, 131072]
  dest:
    description:
      - Write the profile (RV(profile)) there as JSON. Its directory must exist. Not written in check mode.
    type: path
  api_key:
    description:
      - Sent to every engine as a bearer token (C(Authorization) header). vLLM's C(/metrics) normally needs none.
    type: str
notes:
  - Not in the action group C(factory_floor.llm.vllm) - it reads many engines and takes no O(factory_floor.llm.vllm_health#module:url) or
    O(factory_floor.llm.vllm_health#module:model), like M(factory_floor.llm.vllm_metrics).
  - Proxy settings from the environment (C(HTTP_PROXY), C(ALL_PROXY)) are ignored, so every read goes straight to the
    engine.
seealso:
  - module: factory_floor.llm.vllm_metrics
  - name: vLLM production metrics
    description: The metrics vLLM exports on C(/metrics).
    link: https://docs.vllm.ai/en/latest/usage/metrics.html
  - name: Prometheus histogram_quantile()
    description: The interpolation used for the quantiles.
    link: https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile
"""

EXAMPLES = r"""
- name: Watch both replicas for an hour, every 15 seconds, and keep the profile
  factory_floor.llm.workload_profile:
    engines:
      - name: spark-a
        url: http://spark-a:8000
      - name: spark-b
        url: http://spark-b:8000
    window: 3600
    interval: 15
    dest: "{{ playbook_dir }}/../build/workload/profile.json"
    mode: "0644"
  delegate_to: localhost
  run_once: true
  register: __workload_profile

- name: Say what the site asks for
  ansible.builtin.debug:
    msg: >-
      {{ __workload_profile.profile.total.arrival_rate_requests_per_s }} requests/s,
      prompt p95 {{ __workload_profile.profile.total.prompt_length_tokens.p95 }} tokens,
      busiest hour {{ __workload_profile.profile.total.busiest_hour_utc }}
  run_once: true
"""

RETURN = r"""
changed:
  description: True when O(dest) was (or, in check mode, would be) written with a different profile.
  returned: always
  type: bool
  sample: true
dest:
  description: O(dest).
  returned: when O(dest) is given
  type: str
  sample: /srv/factory/build/workload/profile.json
profile:
  description:
    - The workload profile, the same JSON O(dest) holds. Every unit is in the key's name (C(_per_s) per second,
      C(_tokens) tokens, C(_seconds) seconds, C(_fraction) 0-1); C(null) where the engines do not export the metric.
  returned: always
  type: dict
  contains:
    schema:
      description: Name and version of this layout. A reader checks it before using the rest.
      type: str
      sample: factory_floor.llm.workload_profile/1
    started:
      description: UTC time of the first read, ISO 8601.
      type: str
      sample: "2026-01-01T00:00:00Z"
    ended:
      description: UTC time of the last read, ISO 8601.
      type: str
      sample: "2026-01-01T02:00:00Z"
    complete:
      description: True when every engine answered every read.
      type: bool
      sample: true
    engines_counted:
      description: How many engines RV(profile.total) covers (those read at least twice).
      type: int
      sample: 2
    restarts:
      description: Names of the engines that restarted during the window.
      type: list
      elements: str
      sample: []
    long_context_tokens:
      description: O(long_context_tokens), sorted. Tokens.
      type: list
      elements: int
      sample: [32768, 131072]
    notes:
      description: What the profile could not see (engines left out, restarts, missing histograms); also returned as warnings.
      type: list
      elements: str
      sample: []
    engines:
      description:
        - One entry per O(engines), in order - C(name), C(url), C(model_name), C(samples) (reads tried),
          C(samples_read), C(restarts) (count), C(errors) (the first five read errors) and C(profile), the same keys as
          RV(profile.total) for that engine (C(null) when it was read fewer than twice). Its C(by_hour) rows also carry
          C(requests_arrived).
      type: list
      elements: dict
    total:
      description: The whole model - counts and rates summed over the engines, histograms merged bucket by bucket.
      type: dict
      contains:
        window_seconds:
          description: Seconds between the first and the last read (the longest over the engines).
          type: float
          sample: 7200.0
        requests_arrived:
          description: Requests that arrived in the window, finished plus the change of running + waiting.
          type: float
          sample: 7329.0
        requests_finished:
          description: Requests that finished in the window (C(vllm:request_success_total), every reason).
          type: int
          sample: 7314
        requests_finished_by_reason:
          description: RV(profile.total.requests_finished) by C(finished_reason).
          type: dict
          sample: {abort: 0, error: 0, length: 0, stop: 7314}
        arrival_rate_requests_per_s:
          description: Requests arrived per second over the window (the sum of the engines' rates).
          type: float
          sample: 1.017917
        finish_rate_requests_per_s:
          description: Requests finished per second over the window.
          type: float
          sample: 1.015833
        prompt_tokens_per_s:
          description: Prompt tokens processed per second (C(vllm:prompt_tokens_total)), prefix-cache hits included.
          type: float
          sample: 9771.333
        generation_tokens_per_s:
          description: Tokens generated per second (C(vllm:generation_tokens_total)).
          type: float
          sample: 385.2
        prefix_cache_hit_fraction:
          description: Prompt tokens found in the prefix cache over prompt tokens looked up, 0-1.
          type: float
          sample: 0.531438
        prefix_cache_queried_tokens:
          description: Prompt tokens looked up in the prefix cache during the window. Tokens.
          type: int
          sample: 70353600
        num_preemptions:
          description: Requests preempted during the window (KV cache full), C(vllm:num_preemptions_total).
          type: int
          sample: 0
        concurrency_requests:
          description:
            - Requests in the engines (running + waiting) at the reads, summed over engines per read - C(samples),
              C(mean), C(p50), C(p95), C(max) (nearest-rank over the reads), C(running_max), C(waiting_max).
              Reads where an engine did not answer are left out. Requests.
          type: dict
          sample: {samples: 121, mean: 12.612, p50: 13, p95: 25, max: 30, running_max: 28, waiting_max: 5}
        prompt_length_tokens:
          description:
            - Prompt length of the requests finished in the window (C(vllm:request_prompt_tokens)). Tokens.
            - C(p50), C(p90), C(p95), C(p99) interpolated inside the buckets; C(mean) exact; C(count) requests;
              C(max_at_most) the smallest bucket bound all of them are under; C(buckets) the cumulative counts
              C([le, count]) (the last C(le) is C(+Inf)), from which a replay draws lengths; C(metric) the vLLM name.
          type: dict
          sample: {p50: 3225.9, p90: 17703.2, p95: 34457.4, p99: 152196.1, mean: 9584.4, count: 7314, max_at_most: 200000}
        output_length_tokens:
          description:
            - Output length of the requests finished in the window (C(vllm:request_generation_tokens)), keys as
              RV(profile.total.prompt_length_tokens). Tokens.
          type: dict
          sample: {p50: 334.2, p90: 912.4, p95: 1272.4, p99: 1975.6, mean: 399.1, count: 7314, max_at_most: 5000}
        ttft_seconds:
          description: Time to first token in the window, C(p50) to C(p99) bucket-interpolated, C(mean), C(count), C(metric). Seconds.
          type: dict
        tpot_seconds:
          description: Time per output token in the window, same keys. Seconds.
          type: dict
        e2e_latency_seconds:
          description: End-to-end request latency in the window, same keys. Seconds.
          type: dict
        long_context:
          description:
            - One row per O(long_context_tokens) - C(tokens), and the share (0-1) of finished requests whose prompt +
              output exceed it - C(share_lower_bound) (the prompt alone or the output alone exceeds it),
              C(share_upper_bound) (the best union bound over the bucket edges), C(share_estimate) (prompt above
              the count minus the mean output, interpolated), and C(requests_per_s_estimate).
          type: list
          elements: dict
          sample: [{tokens: 32768, share_lower_bound: 0.043, share_upper_bound: 0.056, share_estimate: 0.051, requests_per_s_estimate: 0.052}]
        by_hour:
          description:
            - Arrival rate per UTC hour the window covers - C(hour_utc) (V(2026-01-01T13)), C(seconds_covered),
              C(arrival_rate_requests_per_s) (the sum of the engines' rates in that hour). An interval across the
              hour is shared in proportion to its seconds.
          type: list
          elements: dict
        busiest_hour_utc:
          description: The hour of RV(profile.total.by_hour) with the highest arrival rate.
          type: str
          sample: "2026-01-01T01"
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.factory_floor.llm.plugins.module_utils._engine_metrics import engine_metrics_spec
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_metrics
from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_profile as wp


def main():
    module = AnsibleModule(
        argument_spec=engine_metrics_spec(
            window={"type": "float", "required": True},
            interval={"type": "float", "default": wp.DEFAULT_INTERVAL},
            # Token counts, not credentials.
            long_context_tokens={"type": "list", "elements": "int", "default": list(wp.DEFAULT_LONG_CONTEXT_TOKENS),
                                 "no_log": False},
            dest={"type": "path"},
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    if vllm_metrics.PROMETHEUS_CLIENT_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("prometheus-client", reason="to parse the engines' /metrics"),
                         exception=vllm_metrics.PROMETHEUS_CLIENT_IMPORT_ERROR)
    if vllm_metrics.REQUESTS_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("requests"), exception=vllm_metrics.REQUESTS_IMPORT_ERROR)
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="workload_profile: timeout must be a positive number of seconds, got %s" % params["timeout"])
    dest = params["dest"]
    if dest and not os.path.isdir(os.path.dirname(dest) or "."):
        module.fail_json(msg="workload_profile: the directory of dest %s does not exist" % dest)

    try:
        if any(t <= 0 for t in params["long_context_tokens"]):
            raise wp.ProfileError("long_context_tokens must be positive token counts, got %s"
                                  % params["long_context_tokens"])
        fetch = vllm_metrics.make_fetch(timeout=params["timeout"], api_key=params["api_key"])
        sampled = wp.sample(params["engines"], fetch, params["window"], params["interval"])
        profile = wp.profile(sampled, params["long_context_tokens"])
    except (wp.ProfileError, vllm_metrics.MetricsError) as exc:
        module.fail_json(msg="workload_profile: %s" % exc)

    if not profile["engines_counted"]:
        module.fail_json(msg="workload_profile: no engine could be read twice in %gs, so there is no profile: %s"
                             % (params["window"], "; ".join(profile["notes"])), profile=profile)
    for note in profile["notes"]:
        module.warn(note)
    result = {"changed": False, "profile": profile}
    if dest:
        text = json.dumps(profile, indent=2, sort_keys=True, allow_nan=False) + "\n"
        try:
            with open(dest, encoding="utf-8") as handle:
                changed = handle.read() != text
        except FileNotFoundError:
            changed = True
        except (OSError, UnicodeDecodeError) as exc:
            module.fail_json(msg="workload_profile: reading %s failed: %s" % (dest, exc))
        if changed and not module.check_mode:
            tmp = dest + ".tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(text)
                module.atomic_move(tmp, dest)
            except OSError as exc:
                module.fail_json(msg="workload_profile: writing %s failed: %s" % (dest, exc))
        if os.path.exists(dest):  # in check mode it only predicts
            file_args = module.load_file_common_arguments(params, path=dest)
            changed = module.set_fs_attributes_if_different(file_args, changed)
        result.update(changed=changed, dest=dest)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
