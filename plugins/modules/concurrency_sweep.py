#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: concurrency_sweep
short_description: Load one vLLM engine at several concurrency levels and recommend max_num_seqs
version_added: 0.1.0
description:
  - Sends streamed chat completions (C(POST /v1/chat/completions) with C(stream_options.include_usage)) straight to
    B(one) vLLM engine, never through the proxy, at each number of concurrent requests in O(concurrency), for each
    prompt profile in O(profiles), and measures per request the time to the first generated token (TTFT), the
    end-to-end latency and the prompt and completion tokens from the answer's C(usage) (as the engine counted them;
    never estimated from the number of streamed events, which with speculative decoding carry several tokens each).
  - Each level is a closed loop - O(concurrency) clients each send one request at a time, back to back - for
    O(duration) seconds or O(requests) requests. Requests under way when the level ends finish and are counted.
  - "Per level it returns tokens/s (completion tokens of the successful requests / the level's wall time, vLLM's own
    serving benchmark's definition), requests/min, TTFT and end-to-end p50, p95 and p99, and the inter-token
    latency as C(vllm bench serve) reports it - TPOT (time per output token after the first, per request:
    (latency - TTFT) / (completion tokens - 1)) and ITL (the gaps between streamed events after the first output,
    pooled over the level's requests) - as mean, p50, p95 and p99. All in seconds."
  - Recommends C(max_num_seqs) as the concurrency with the best throughput whose p95 (O(target_metric)) stays
    within O(target_seconds). With both profiles, the throughput compared is the one estimated for a mix of them in
    O(shares) (see RV(recommendation.mixed_tokens_per_s)). The reasoning is returned as sentences.
  - The engine must allow the highest level (its C(max_num_seqs) at least max(O(concurrency))), or the levels above
    its cap measure vLLM's queue instead of the engine running that many requests.
  - Changes nothing, but loads the engine for the whole sweep (about len(O(profiles)) x len(O(concurrency)) x
    O(duration) seconds, plus a calibration and warm-up per profile). Run it against a replica that carries no
    other traffic, or the results mix both.
  - "While it runs, a line per level at the default verbosity (C(level 3 of 10: short x 8: 109.2 tokens/s, 26.1
    requests/min, TTFT p95 0.41 s, TPOT 0.031 s, e2e p95 4.2 s, 0 failed)): the module's action plugin runs it in parts
    of at least O(progress_interval) seconds (a level is never cut), each going on with the same sweep (O(resume)), and
    prints each part's lines as it ends. The task's result is the last part's, with every level."
  - In check mode it sends no load - only what it checks before a sweep (C(GET /v1/models) lists O(model), the long
    profile fits C(max_model_len)) - and returns RV(levels) empty and RV(load_sent) false.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - requests (Python library, on the host that runs the module)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.vllm_endpoint
attributes:
  check_mode:
    support: full
    details:
      - Check mode sends no chat completion; it reads C(/v1/models) and checks the parameters, so a C(--check) run of
        C(playbooks/tune-concurrency.yml) never loads the engine.
options:
  url:
    description:
      - Base URL of the engine's OpenAI-compatible server, on its own address, for example V(http://127.0.0.1:8000)
        when the module runs on the replica's host. The engines' API port accepts only loopback, the proxy hosts and
        C(vllm_allowed_clients). An OpenAI client base URL ending in C(/v1) is accepted too.
      - Part of the action group C(factory_floor.llm.vllm), with a default of its own.
    type: str
    required: false
    default: http://127.0.0.1:8000
  model:
    description:
      - The served model name to ask for (vLLM's C(--served-model-name)). The engine must list it in C(/v1/models).
      - Part of the action group C(factory_floor.llm.vllm), required here.
    type: str
    required: true
  concurrency:
    description:
      - Numbers of concurrent requests to measure, each an integer >= 1.
      - When the task leaves it out, C(tune_concurrency) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: list
    elements: int
    default: [1, 4, 8, 12, 16]
  profiles:
    description:
      - V(short) - a one-line question, O(short_max_tokens) generated.
      - V(long) - the e-mail agent - a shared system prompt and an e-mail thread of about O(long_prompt_tokens)
        tokens, different for every request (so vLLM's prefix cache cannot skip its prefill), O(long_max_tokens)
        generated.
      - When the task leaves it out, C(tune_profiles) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: list
    elements: str
    choices: [short, long]
    default: [short, long]
  duration:
    description:
      - Seconds per level during which new requests start. Choose it several times the longest end-to-end latency
        expected, so the start and the end of a level (fewer requests in flight) weigh little.
      - Ignored when O(requests) is set.
      - When the task leaves it out, C(tune_duration) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: float
    default: 60
  requests:
    description:
      - Requests per level instead of O(duration).
      - When the task leaves it out, C(tune_requests) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: int
  warmup:
    description:
      - Requests sent one at a time before each profile's first level, not measured.
    type: int
    default: 1
  short_max_tokens:
    description:
      - Tokens generated per V(short) request (C(max_tokens)).
      - When the task leaves it out, C(tune_short_max_tokens) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: int
    default: 128
  long_prompt_tokens:
    description:
      - Prompt size of a V(long) request, in tokens. The thread's word count is calibrated against the prompt tokens
        the engine reports before the sweep (returned in RV(profiles)).
      - O(long_prompt_tokens) + O(long_max_tokens) must fit the engine's C(max_model_len) (checked against
        C(/v1/models)). The operations report's e-mail agent sent a few thousand tokens.
      - When the task leaves it out, C(tune_long_prompt_tokens) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: int
    default: 3000
  long_max_tokens:
    description:
      - Tokens generated per V(long) request (C(max_tokens)).
      - When the task leaves it out, C(tune_long_max_tokens) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: int
    default: 256
  ignore_eos:
    description:
      - Sends vLLM's C(ignore_eos) so every request generates exactly its C(max_tokens) and every level compares the
        same work. Set false to let the model stop where it wants (the tokens counted are still the measured ones).
    type: bool
    default: true
  timeout:
    description:
      - Seconds one request may wait for the next streamed event before it counts as failed.
      - When the task leaves it out, C(tune_request_timeout) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: float
    default: 600
  max_failures:
    description:
      - A level stops starting requests after this many failed. A level with any failed request is not eligible for
        the recommendation.
    type: int
    default: 10
  target_seconds:
    description:
      - Latency target for the recommendation, seconds. A level is eligible only when its p95 of O(target_metric) is
        at most this. Unset, the recommendation is the best throughput, whatever the latency.
      - When the task leaves it out, C(tune_target_seconds) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: float
  target_metric:
    description:
      - V(e2e) - end-to-end latency of a request; V(ttft) - time to its first token; V(tpot) - time per output token
        after the first (the three C(vllm bench serve --goodput) takes). Its p95 is held to O(target_seconds).
      - When the task leaves it out, C(tune_target_metric) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or null, this default.
    type: str
    choices: [e2e, ttft, tpot]
    default: e2e
  shares:
    description:
      - Share of each profile in your traffic (profile name to a number; normalised), for the recommendation when
        both profiles are measured. Default equal shares.
      - When the task leaves it out, C(tune_shares) as the task sees it (the action plugin reads it; the
        C(factory_floor.llm.tune_concurrency) role sets it); undefined or empty or null, equal shares.
    type: dict
  tolerance:
    description:
      - Levels whose throughput is within this fraction (0-1) of the best count as equal, and the lowest of them is
        recommended (same throughput, fewer requests in flight, lower latency).
    type: float
    default: 0.03
  seed:
    description:
      - Seed of the generated prompts; the same seed sends the same prompts.
    type: int
    default: 0
  progress_interval:
    description:
      - Seconds after which a part of the sweep ends to print its levels' lines (see the description) - after the first
        level that ends this long or longer after the part began; the action plugin then runs the module again, going on
        with the next level. With the default O(duration), every level prints as it ends.
      - V(0) runs the whole sweep in one part and prints the lines when it ends.
    type: float
    default: 30
  resume:
    description:
      - Internal, set by the action plugin - what the previous part of the same sweep returned in the C(resume) of RV(progress)
        (the levels so far, the engine, the long profile's calibrated size). The profiles and levels must be the same.
    type: dict
notes:
  - Proxy settings from the environment (C(HTTP_PROXY), C(ALL_PROXY)) are ignored.
  - The proxy (nginx_proxy) sets no per-replica connection cap (no C(max_conns)); C(max_num_seqs) is the only cap.
seealso:
  - name: vLLM engine arguments
    description: C(--max-num-seqs) and the other scheduler settings.
    link: https://docs.vllm.ai/en/latest/configuration/engine_args.html
  - module: factory_floor.llm.concurrency_plot
"""

EXAMPLES = r"""
- name: Sweep the replica on this host, recommend max_num_seqs for p95 end-to-end latency within 60 s
  factory_floor.llm.concurrency_sweep:
    url: http://127.0.0.1:8000
    model: "{{ vllm_served_model_name }}"
    concurrency: [1, 4, 8, 12, 16]
    duration: 120
    long_prompt_tokens: 3000
    target_seconds: 60
    shares:
      short: 3
      long: 1
  async: 7200
  poll: 15
  register: __sweep

- name: Print the table and the reasoning
  ansible.builtin.debug:
    msg: "{{ __sweep.table + __sweep.recommendation.reasoning }}"

- name: Short prompts only, 40 requests per level, target on time to first token
  factory_floor.llm.concurrency_sweep:
    model: lab-chat
    profiles: [short]
    requests: 40
    target_seconds: 2
    target_metric: ttft
"""

RETURN = r"""
changed:
  description: Always false; the module sends requests but changes no state.
  returned: always
  type: bool
  sample: false
engine:
  description: The engine swept.
  returned: always
  type: dict
  contains:
    url:
      description: O(url).
      type: str
      sample: http://127.0.0.1:8000
    model:
      description: O(model).
      type: str
      sample: lab-chat
    max_model_len:
      description: The engine's C(max_model_len) in tokens, from C(/v1/models); null if it does not say.
      type: int
      sample: 4096
profiles:
  description:
    - What each profile sent. For V(long) also the prompt tokens asked for, the prompt tokens the engine counted for
      the calibrated thread, and the thread's size in words.
  returned: always
  type: dict
  sample:
    short: {max_tokens: 128}
    long: {max_tokens: 256, prompt_tokens_target: 3000, prompt_tokens_calibrated: 2991, thread_words: 2140}
levels:
  description: One entry per profile and level, in the order run (profile by profile, levels as in O(concurrency)).
  returned: always
  type: list
  elements: dict
  contains:
    profile:
      description: V(short) or V(long).
      type: str
      sample: short
    concurrency:
      description: Concurrent requests of the level.
      type: int
      sample: 8
    requests_ok:
      description: "Requests that ended with C(data: [DONE])."
      type: int
      sample: 212
    requests_failed:
      description: Requests that failed (HTTP status other than 200, an error event, a stream cut short, a timeout).
      type: int
      sample: 0
    errors:
      description: Up to five distinct error messages of the failed requests.
      type: list
      elements: str
      sample: []
    duration_s:
      description: Wall time of the level, seconds, from the first request sent to the last one finished.
      type: float
      sample: 61.8
    completion_tokens:
      description: Completion tokens of the successful requests, from C(usage); null when an answer carried none.
      type: int
      sample: 27136
    completion_tokens_mean:
      description: Mean completion tokens per successful request.
      type: float
      sample: 128.0
    prompt_tokens_mean:
      description: Mean prompt tokens per successful request, from C(usage) (chat template included).
      type: float
      sample: 31.0
    tokens_per_s:
      description: Completion tokens per second of wall time (tokens/s); null when not measured.
      type: float
      sample: 109.2
    requests_per_min:
      description: Successful requests per minute of wall time.
      type: float
      sample: 26.5
    ttft_p50:
      description: Median time to first token, seconds.
      type: float
      sample: 0.41
    ttft_p95:
      description: 95th percentile of the time to first token, seconds.
      type: float
      sample: 1.9
    e2e_p50:
      description: Median end-to-end latency, seconds.
      type: float
      sample: 9.3
    e2e_p95:
      description: 95th percentile of the end-to-end latency, seconds.
      type: float
      sample: 12.1
    e2e_p99:
      description: 99th percentile of the end-to-end latency, seconds.
      type: float
      sample: 12.4
    ttft_p99:
      description: 99th percentile of the time to first token, seconds.
      type: float
      sample: 2.2
    tpot_mean:
      description:
        - Mean time per output token after the first, seconds - per request (latency to its last streamed token event
          - TTFT) / (completion tokens from C(usage) - 1), C(vllm bench serve)'s TPOT; requests of one token are left
          out. Null when no request had C(usage) and more than one token.
      type: float
      sample: 0.071
    tpot_p50:
      description: Median TPOT, seconds.
      type: float
      sample: 0.069
    tpot_p95:
      description: 95th percentile of TPOT, seconds.
      type: float
      sample: 0.082
    tpot_p99:
      description: 99th percentile of TPOT, seconds.
      type: float
      sample: 0.088
    itl_mean:
      description:
        - Mean inter-token latency, seconds - the gaps between successive streamed events that carry a choice, after
          the first output, pooled over every successful request of the level (C(vllm bench serve)'s ITL; an event of
          several tokens is one gap).
      type: float
      sample: 0.07
    itl_p50:
      description: Median inter-token latency, seconds.
      type: float
      sample: 0.068
    itl_p95:
      description: 95th percentile of the inter-token latency, seconds.
      type: float
      sample: 0.09
    itl_p99:
      description: 99th percentile of the inter-token latency, seconds.
      type: float
      sample: 0.21
    usage_missing:
      description: Successful requests whose answer carried no C(usage); tokens/s is null when this is not 0.
      type: int
      sample: 0
recommendation:
  description: The recommended C(max_num_seqs) and why.
  returned: always
  type: dict
  contains:
    max_num_seqs:
      description: The recommended number of concurrent requests per engine; null when no level qualifies.
      type: int
      sample: 12
    per_profile:
      description: Profile to the level that would be recommended for that profile alone (null if none qualifies).
      type: dict
      sample: {short: 12, long: 8}
    mixed_tokens_per_s:
      description:
        - Level to the tokens/s estimated for the mix of O(shares) at that level, from the per-profile runs - each
          profile's work (share x mean completion tokens) takes work / its measured tokens/s; rate = total work /
          total time. Only levels eligible in every profile.
      type: dict
      sample: {"4": 81.5, "8": 111.4, "12": 118.8}
    target_seconds:
      description: O(target_seconds).
      type: float
      sample: 60.0
    metric:
      description: O(target_metric).
      type: str
      sample: e2e
    shares:
      description: O(shares), normalised to sum to 1.
      type: dict
      sample: {short: 0.5, long: 0.5}
    tolerance:
      description: O(tolerance).
      type: float
      sample: 0.03
    reasoning:
      description: Why each level was or was not eligible and why the recommendation is what it is.
      type: list
      elements: str
      sample:
        - "long at 16: not eligible, e2e_p95 71.2 s is over the target 60 s"
        - "max_num_seqs 12: 118.8 tokens/s estimated for the mix (short 50%, long 50%) ..."
progress:
  description:
    - C(done) (false while the sweep goes on), C(lines) (one per level this part ran, for the action plugin to print)
      and, while it goes on, C(resume) (passed back as O(resume)). A part that does not end the sweep returns only
      RV(engine), RV(profiles), RV(levels) so far, RV(load_sent) and this.
  returned: when load was sent
  type: dict
  sample:
    done: true
    lines: ["level 10 of 10: long x 16: 87.0 tokens/s, 5.1 requests/min, TTFT p95 9.80 s, TPOT 0.142 s, e2e p95 46.3 s, 0 failed"]
table:
  description:
    - A human-readable table of RV(levels), one line per element; C(*) marks the recommended level. Latencies in
      seconds, TPOT and ITL in milliseconds (C(_MS)) as C(vllm bench serve) prints them.
  returned: always
  type: list
  elements: str
  sample:
    - "PROFILE  CONC REQ_OK  FAIL     TOK/S  REQ/MIN  TTFT_P50  TTFT_P95  TTFT_P99 TPOT_P50_MS TPOT_P99_MS ITL_P99_MS
      E2E_P50  E2E_P95  E2E_P99 PROMPT_TOK"
    - "short      *12    310     0     130.2     61.0     0.402     0.910     1.204        89.0        97.3      210.4
      11.71    12.60    12.93         31"
load_sent:
  description: Whether chat completions were sent (false in check mode, which only runs the checks before a sweep).
  returned: always
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.factory_floor.llm.plugins.module_utils._concurrency_plan import (
    DEFAULT_TOLERANCE,
    METRICS,
    format_table,
    recommend,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._host.load import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LONG_MAX_TOKENS,
    DEFAULT_LONG_PROMPT_TOKENS,
    DEFAULT_SHORT_MAX_TOKENS,
    DEFAULT_TIMEOUT,
    PROFILES,
    LoadError,
    level_line,
    preflight,
    sweep,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_endpoint import endpoint_spec
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_client import REQUESTS_IMPORT_ERROR


def check_params(params):
    """What is wrong with the parameters, as a list of sentences (empty when nothing is)."""
    problems = []
    if not params["concurrency"] or min(params["concurrency"]) < 1:
        problems.append("concurrency must list integers >= 1, got %s" % params["concurrency"])
    if not params["profiles"]:
        problems.append("profiles must name at least one of %s" % ", ".join(PROFILES))
    if params["requests"] is None and params["duration"] <= 0:
        problems.append("duration must be a positive number of seconds, got %s" % params["duration"])
    if params["requests"] is not None and params["requests"] < 1:
        problems.append("requests must be at least 1, got %s" % params["requests"])
    for name in ("short_max_tokens", "long_prompt_tokens", "long_max_tokens", "max_failures"):
        if params[name] < 1:
            problems.append("%s must be at least 1, got %s" % (name, params[name]))
    if params["warmup"] < 0:
        problems.append("warmup must be 0 or more, got %s" % params["warmup"])
    if params["timeout"] <= 0:
        problems.append("timeout must be a positive number of seconds, got %s" % params["timeout"])
    if params["target_seconds"] is not None and params["target_seconds"] <= 0:
        problems.append("target_seconds must be a positive number of seconds, got %s" % params["target_seconds"])
    if not 0 <= params["tolerance"] < 1:
        problems.append("tolerance is a fraction 0-1 (0.03 = 3%%), got %s" % params["tolerance"])
    if params["progress_interval"] < 0:
        problems.append("progress_interval must be 0 (one part) or more seconds, got %s" % params["progress_interval"])
    return problems


def main():
    module = AnsibleModule(
        argument_spec={
            **endpoint_spec(url={"required": False, "default": "http://127.0.0.1:8000"}, model={"required": True}),
            "concurrency": {"type": "list", "elements": "int", "default": list(DEFAULT_CONCURRENCY)},
            "profiles": {"type": "list", "elements": "str", "choices": list(PROFILES), "default": list(PROFILES)},
            "duration": {"type": "float", "default": 60.0},
            "requests": {"type": "int"},
            "warmup": {"type": "int", "default": 1},
            "short_max_tokens": {"type": "int", "default": DEFAULT_SHORT_MAX_TOKENS, "no_log": False},
            "long_prompt_tokens": {"type": "int", "default": DEFAULT_LONG_PROMPT_TOKENS, "no_log": False},
            "long_max_tokens": {"type": "int", "default": DEFAULT_LONG_MAX_TOKENS, "no_log": False},
            "ignore_eos": {"type": "bool", "default": True},
            "timeout": {"type": "float", "default": DEFAULT_TIMEOUT},
            "max_failures": {"type": "int", "default": 10},
            "target_seconds": {"type": "float"},
            "target_metric": {"type": "str", "choices": list(METRICS), "default": "e2e"},
            "shares": {"type": "dict"},
            "tolerance": {"type": "float", "default": DEFAULT_TOLERANCE},
            "seed": {"type": "int", "default": 0},
            "progress_interval": {"type": "float", "default": 30.0},
            "resume": {"type": "dict"},
        },
        supports_check_mode=True,
    )
    if REQUESTS_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
    params = module.params
    problems = check_params(params)
    if problems:
        module.fail_json(msg="concurrency_sweep: " + "; ".join(problems))
    shares = None
    if params["shares"]:
        try:
            shares = {str(k): float(v) for k, v in params["shares"].items()}
        except (TypeError, ValueError):
            module.fail_json(msg="concurrency_sweep: shares must map profile names to numbers, got %s" % params["shares"])
        unknown = sorted(set(shares) - set(params["profiles"]))
        if unknown:
            module.fail_json(msg="concurrency_sweep: shares name profiles that are not swept: %s (profiles: %s)"
                             % (", ".join(unknown), ", ".join(params["profiles"])))

    if module.check_mode:
        try:
            engine = preflight(params["url"], params["model"], list(dict.fromkeys(params["profiles"])),
                               params["long_prompt_tokens"], params["long_max_tokens"], params["api_key"])
        except LoadError as exc:
            module.fail_json(msg="concurrency_sweep against %s: %s" % (params["url"], exc))
        module.exit_json(changed=False, load_sent=False, engine=engine, profiles={}, levels=[], table=[],
                         recommendation={
                             "max_num_seqs": None, "per_profile": {}, "mixed_tokens_per_s": {},
                             "target_seconds": params["target_seconds"], "metric": params["target_metric"],
                             "shares": {k: v / sum(shares.values()) for k, v in shares.items()}
                             if shares and sum(shares.values()) > 0 else {},
                             "tolerance": params["tolerance"],
                             "reasoning": ["check mode: %s serves %s (max_model_len %s) and the parameters are "
                                           "valid; no load was sent, so there is nothing to recommend"
                                           % (params["url"], params["model"], engine["max_model_len"])]})

    try:
        result = sweep(
            params["url"], params["model"],
            concurrency=params["concurrency"],
            profiles=list(dict.fromkeys(params["profiles"])),
            duration=params["duration"],
            count=params["requests"],
            warmup=params["warmup"],
            short_max_tokens=params["short_max_tokens"],
            long_prompt_tokens=params["long_prompt_tokens"],
            long_max_tokens=params["long_max_tokens"],
            ignore_eos=params["ignore_eos"],
            timeout=params["timeout"],
            api_key=params["api_key"],
            seed=params["seed"],
            max_failures=params["max_failures"],
            report_after=params["progress_interval"] or None,
            resume=params["resume"],
        )
        before = len((params["resume"] or {}).get("levels") or [])
        total = len(dict.fromkeys(params["profiles"])) * len(params["concurrency"])
        lines = [level_line(index, total, level) for index, level in enumerate(result["levels"]) if index >= before]
        if not result.pop("done"):
            module.exit_json(changed=False, load_sent=True, engine=result["engine"], profiles=result["profiles"],
                             levels=result["levels"],
                             progress={"done": False, "lines": lines, "resume": result.pop("resume")})
        recommendation = recommend(result["levels"], target_seconds=params["target_seconds"],
                                   metric=params["target_metric"], shares=shares, tolerance=params["tolerance"])
    except LoadError as exc:
        module.fail_json(msg="concurrency_sweep against %s: %s" % (params["url"], exc))

    module.exit_json(changed=False, load_sent=True, recommendation=recommendation,
                     table=format_table(result["levels"], recommendation["max_num_seqs"]),
                     progress={"done": True, "lines": lines}, **result)


if __name__ == "__main__":
    main()
