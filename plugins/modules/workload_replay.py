#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_replay
short_description: Replay the site's workload profile against the proxy, open loop, and measure it
version_added: 0.1.0
description:
  - Builds a load plan from O(profile) (M(factory_floor.llm.workload_profile)'s RV(factory_floor.llm.workload_profile#module:profile))
    or takes O(plan), and sends it to the site's OpenAI-compatible endpoint (the proxy's C(/v1/completions) or
    C(/v1/chat/completions)) B(open loop) - each request at its planned time whether or not earlier ones finished -
    and returns tokens/s, requests/min, TTFT and TPOT p50/p95 and errors by status, per engine and in total
    (issue 38). It runs on the topology in place and changes nothing.
  - B(The plan) (C(_workload_replay.plan())) - Poisson arrivals at the profile's arrival rate (or one hour's, O(hour)),
    times O(rate_scale); prompt and output lengths drawn from its histograms; conversations whose later turns start
    with the conversation's own text, so the engines' prefix cache sees about the profile's hit fraction. Same
    profile and O(seed), same plan.
  - B(Each request) streams (C(stream_options.include_usage)) with C(max_tokens) = the planned output and vLLM's
    C(ignore_eos), so the output is as long as planned. O(prompt=token_ids) sends the prompt as token ids (exact
    lengths, C(/v1/completions) only); O(prompt=text) one common English word per planned token.
  - B(Where the numbers come from.) TTFT - seconds from sending to the first streamed event with output; TPOT - (last
    output event - TTFT) / (completion tokens - 1), C(vllm bench serve)'s definitions; completion tokens - the last
    event's C(usage), or the output events counted when the server sends none. tokens/s - output tokens of the
    requests that succeeded over the wall time (first send to last end); requests/min - those requests over the same
    time. The engine - the proxy's C(X-Factory-Floor-Upstream) header (C(nginx_proxy_expose_upstream)); C(unknown)
    without it.
  - B(The in-flight bound.) At most O(max_in_flight) requests are in flight; a request whose time comes while the bound
    is reached is B(not sent) (sending it late would close the loop) and RV(replay.in_flight_bound) says how many and
    from when. A replay that hits the bound measured less than the plan's load; rerun with a higher bound or read it
    as the load the site could not take.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Check mode sends no request (a replay is load on the engines); it makes the plan and returns its summary
      (RV(replay.plan)). It predicts RV(ignore:changed=false), which a run reports.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It changes no state; every run measures again.
options:
  url:
    description:
      - The endpoint's base URL, without a path or with C(/v1) (the proxy's, for example V(http://gateway:8080)).
    type: str
    required: true
  model:
    description: The served model name to ask for (C(served_model_name)).
    type: str
    required: true
  api_key:
    description:
      - "Sent as C(Authorization: Bearer) (C(site_api_key)); empty sends none. Never logged. A key that is no bearer
        token (RFC 6750 - letters, digits and C(-._~+/), C(=) only at its end) is refused before anything is sent, as
        the other vLLM modules refuse it, without quoting it."
    type: str
    default: ""
  endpoint:
    description: V(completions) (C(/v1/completions)) or V(chat) (C(/v1/chat/completions)).
    type: str
    choices: [completions, chat]
    default: completions
  prompt:
    description:
      - V(token_ids) - the prompt as token ids drawn from O(token_id_range) (O(endpoint=completions) only; lengths
        exact). V(text) - one common English word per planned token (a chat template adds its own tokens; the engines'
        count is C(prompt_tokens_counted) in RV(replay.total)).
    type: str
    choices: [token_ids, text]
    default: token_ids
  token_id_range:
    description:
      - (O(prompt=token_ids)) The lowest and one past the highest token id drawn, token ids.
      - Default - V([1000, 20000]), within O(vocab_size) where that is smaller (V([vocab_size // 10, vocab_size])).
      - A range past O(vocab_size) is refused before anything is sent (vLLM answers every such request 400, "out of
        vocabulary").
    type: list
    elements: int
  vocab_size:
    description:
      - The served model's vocabulary, a count of tokens (C(vocab_size) of its C(config.json), as
        M(factory_floor.llm.model_manifest) returns it in RV(factory_floor.llm.model_manifest#module:model)).
        C(workload_replay.yml) reads it on the first engine host, the smallest of the models the site's topologies serve,
        so every grouping is replayed with the same prompts.
      - Unset, the ids are not checked against the model.
    type: int
  profile:
    description: A workload profile (RV(factory_floor.llm.workload_profile#module:profile)) to plan from. One of O(profile), O(plan).
    type: dict
  plan:
    description: A plan C(_workload_replay.plan()) made (C(requests) with C(at_seconds), C(conversation), C(prompt_tokens),
      C(prefix_tokens), C(output_tokens)). One of O(profile), O(plan).
    type: dict
  seconds:
    description: (O(profile)) How long the plan runs, seconds. Requests still streaming at its end finish.
    type: float
    default: 300
  seed:
    description: (O(profile)) The plan's seed.
    type: int
    default: 0
  engine:
    description: (O(profile)) Replay one engine's part of the profile instead of the total.
    type: str
  hour:
    description: (O(profile)) Replay one UTC hour's arrival rate (V(2026-01-01T13)), or V(busiest).
    type: str
  rate_scale:
    description: (O(profile)) Multiplies the arrival rate.
    type: float
    default: 1.0
  max_model_len:
    description: (O(profile)) Caps prompt + output per request, tokens (C(max_model_len)).
    type: int
  max_in_flight:
    description: The most requests in flight at once (threads); see the description. Requests.
    type: int
    default: 256
  timeout:
    description: Seconds a request may wait for a connection, for its answer and between two streamed events.
    type: float
    default: 600
  validate_certs:
    description: Whether to verify an C(https) endpoint's certificate.
    type: bool
    default: true
  ca_path:
    description: A CA bundle to verify the certificate with; empty for the system's.
    type: path
notes:
  - Standard library only (C(http.client)); environment proxy settings are not used.
seealso:
  - module: factory_floor.llm.workload_profile
  - name: vLLM benchmark metrics
    description: TTFT, TPOT and ITL as C(vllm bench serve) defines them.
    link: https://docs.vllm.ai/en/latest/contributing/benchmarks.html
"""

EXAMPLES = r"""
- name: Replay the site's busiest hour for five minutes through the proxy
  factory_floor.llm.workload_replay:
    url: "http://{{ groups['proxy'][0] }}:{{ site_proxy_port }}"
    model: "{{ vllm_served_model_name }}"
    api_key: "{{ site_api_key }}"
    profile: "{{ lookup('ansible.builtin.file', 'build/workload/profile.json') | from_json }}"
    hour: busiest
    seconds: 300
    seed: 1
  delegate_to: localhost
  run_once: true
  register: __workload_replay
"""

RETURN = r"""
changed:
  description: Always false (it sends load, and changes no state).
  returned: always
  type: bool
  sample: false
replay:
  description: What the replay measured. Units in the keys' names (C(_seconds) seconds, C(_per_s) per second, C(_per_min) per minute).
  returned: always
  type: dict
  contains:
    schema:
      description: Name and version of this layout.
      type: str
      sample: factory_floor.llm.workload_replay/1
    url:
      description: The URL requests went to.
      type: str
      sample: http://gateway:8080/v1/completions
    plan:
      description:
        - The plan's C(seed), C(duration_seconds), C(arrival_rate_requests_per_s) and C(summary) (its own rate, mean
          lengths, prefix-cache hit fraction).
      type: dict
    total:
      description:
        - C(requests_planned), C(requests_sent), C(requests_ok), C(errors), C(errors_by_status) (the HTTP status as a
          string; C(no_answer) when none came, C(stream) when a 200's stream broke or carried an error event),
          C(wall_seconds), C(output_tokens) (of the requests that succeeded), C(output_tokens_planned),
          C(tokens_per_s) (output), C(requests_per_min), C(ttft_seconds) and C(tpot_seconds) (C(p50), C(p95)),
          C(prompt_tokens_counted) (the engines' C(usage.prompt_tokens), null when none came) and
          C(prompt_tokens_planned_sent). Null where nothing succeeded.
      type: dict
      sample: {requests_planned: 300, requests_sent: 300, requests_ok: 300, errors: 0, errors_by_status: {},
               tokens_per_s: 210.4, requests_per_min: 59.8, ttft_seconds: {p50: 0.21, p95: 0.93},
               tpot_seconds: {p50: 0.041, p95: 0.058}}
    engines:
      description:
        - The same keys as RV(replay.total) (without the plan's) per engine that answered, with C(name)
          (C(X-Factory-Floor-Upstream), C(unknown) without it).
      type: list
      elements: dict
    in_flight_bound:
      description: C(max_in_flight), C(hit), C(requests_not_sent) and C(first_at_seconds) (the plan time of the first one not sent).
      type: dict
      sample: {max_in_flight: 256, hit: false, requests_not_sent: 0, first_at_seconds: null}
    send_lag_seconds:
      description: How late the client sent, against the plan - C(p50), C(max). Seconds.
      type: dict
    first_errors:
      description: The first five failed requests - C(index), C(engine), C(status), C(error).
      type: list
      elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_replay as wr
from ansible_collections.factory_floor.llm.plugins.module_utils import _workload_replay_run as rr


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "endpoint": {"type": "str", "choices": list(rr.ENDPOINTS), "default": "completions"},
            "prompt": {"type": "str", "choices": list(rr.PROMPTS), "default": "token_ids"},
            # Token ids, not credentials.
            "token_id_range": {"type": "list", "elements": "int", "no_log": False},
            "vocab_size": {"type": "int"},
            "profile": {"type": "dict"},
            "plan": {"type": "dict"},
            "seconds": {"type": "float", "default": 300},
            "seed": {"type": "int", "default": 0},
            "engine": {"type": "str"},
            "hour": {"type": "str"},
            "rate_scale": {"type": "float", "default": 1.0},
            "max_model_len": {"type": "int"},
            "max_in_flight": {"type": "int", "default": rr.DEFAULT_MAX_IN_FLIGHT},
            "timeout": {"type": "float", "default": rr.DEFAULT_TIMEOUT},
            "validate_certs": {"type": "bool", "default": True},
            "ca_path": {"type": "path"},
        },
        mutually_exclusive=[("profile", "plan")],
        required_one_of=[("profile", "plan")],
        supports_check_mode=True,
    )
    params = module.params
    try:
        rr.check_target(params["url"], params["api_key"], params["endpoint"], params["prompt"])
        ids = rr.id_range(params["token_id_range"], params["vocab_size"])
        if params["max_in_flight"] < 1 or params["timeout"] <= 0:
            raise rr.ReplayError("max_in_flight must be at least 1 and timeout positive, got %s and %s"
                                 % (params["max_in_flight"], params["timeout"]))
        if params["plan"] is not None:
            plan = params["plan"]
            if not isinstance(plan.get("requests"), list):
                raise rr.ReplayError("plan has no requests list: give what _workload_replay.plan() returns")
        else:
            plan = wr.plan(params["profile"], params["seconds"], params["seed"], engine=params["engine"],
                           hour=params["hour"], rate_scale=params["rate_scale"], max_model_len=params["max_model_len"])
    except (rr.ReplayError, wr.PlanError) as exc:
        module.fail_json(msg="workload_replay: %s" % exc)
    if module.check_mode:
        module.exit_json(changed=False, replay={"schema": rr.SCHEMA, "plan": {
            "seed": plan.get("seed"), "duration_seconds": plan.get("duration_seconds"),
            "arrival_rate_requests_per_s": plan.get("arrival_rate_requests_per_s"), "summary": plan.get("summary")}})
    context = rr.tls_context(params["validate_certs"], params["ca_path"])
    report = rr.replay(plan, params["url"], params["model"], api_key=params["api_key"], endpoint=params["endpoint"],
                       prompt=params["prompt"], max_in_flight=params["max_in_flight"], timeout=params["timeout"],
                       context=context, id_range=tuple(ids))
    if report["in_flight_bound"]["hit"]:
        module.warn("workload_replay: %d planned requests were not sent: %d were in flight (max_in_flight) from %.1f s "
                    "into the plan; the replay measured less than the plan's load"
                    % (report["in_flight_bound"]["requests_not_sent"], params["max_in_flight"],
                       report["in_flight_bound"]["first_at_seconds"]))
    module.exit_json(changed=False, replay=report)


if __name__ == "__main__":
    main()
