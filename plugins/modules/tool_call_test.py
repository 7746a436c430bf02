#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: tool_call_test
short_description: Score how well a vLLM server calls tools (the gate before a model or topology switch)
version_added: 0.1.0
description:
  - Runs a suite of OpenAI-style tool-calling cases against one OpenAI-compatible server (a vLLM replica directly,
    or the proxy) with C(POST /v1/chat/completions) and returns a score from 0 to 100 with the result of every case.
  - Every case runs twice, non-streamed and streamed (O(streaming)). It passes only when both answers pass and the
    streamed calls equal the non-streamed ones.
  - "A case that expects calls passes when: the answer is HTTP 200; C(finish_reason) is C(tool_calls); the calls are
    in C(message.tool_calls), not written as text in C(content) (the call is then in the wrong place and fails);
    C(content) holds no tool-call markup beside them (C(<tool_call>), C(</tool_call>), C(<function=...>),
    C(</function>), C([TOOL_CALLS]), C(<|python_tag|>), or JSON with a name and arguments - a client would show it
    or run the call twice); each call names a tool the request offered; its C(arguments) is valid JSON, an object
    that matches the tool's C(parameters) JSON Schema and the case's expected values; and the calls match the
    expected ones one to one, in any order."
  - "A case that expects text passes when there is no tool call, C(finish_reason) is C(stop) (or C(length)), and
    C(content) is not empty and contains every string the case lists."
  - "Streamed answers are reassembled from the server-sent events read line by line (C(data:) lines up to
    C(data: [DONE])); the C(arguments) fragments of each tool call are concatenated per C(index), then parsed."
  - "C(arguments) are validated against the tool's C(parameters) with the C(jsonschema) library, under the draft the
    schema names in C($schema) (default 2020-12, what OpenAI, pydantic and MCP tool definitions use): every keyword
    of that draft, C(anyOf)/C(oneOf)/C(allOf), C($ref) into C($defs) or C(definitions), C(const), C(minLength),
    C(exclusiveMinimum), C(pattern), ... C(format) is an annotation, not checked (as 2020-12 says)."
  - "A suite is refused when a tool's schema is not valid under its draft's meta-schema, uses a word that is not a
    keyword or annotation of that draft (a typo, OpenAPI's C(nullable); C(x-) extensions are allowed), or has a
    C($ref) that does not point into the schema itself (C(#/...)); nothing is fetched. So no argument goes
    unchecked."
  - Expected strings are compared after BFCL's normalisation (lower case, without spaces and C(,./-_*^)), numbers by
    value (C(5) equals C(5.0); C(true) is not C(1)). See the suite file for the matchers (C($one_of), C($optional),
    C($contains), C($unordered), C($any), C($absent)).
  - The score is the percentage of selected cases that passed, with one decimal.
  - Optionally adds cases from the Berkeley Function Calling Leaderboard data (O(bfcl_path)), scored by the same
    rules.
  - "Every request asks for O(model), else the first model C(GET /v1/models) lists. To gate a candidate before it
    takes traffic, point O(url) at the replica itself, never at the proxy. An answer of 401 or 403 (O(api_key)
    rejected) or 404 (model not served, or wrong URL) stops the run at once."
  - "While it runs, one line per case at the default verbosity (C(case 3 of 18: single_weather (single) passed in 4.1 s),
    or the case's first reason when it failed): the module's action plugin runs it in parts of at least
    O(progress_interval) seconds, each going on with the same run (O(resume)), and prints each part's lines as it ends."
  - Only reads. The requests generate text but change nothing, so the module always reports
    RV(ignore:changed=false).
  - In check mode it sends nothing - a suite is load on the engine - and returns what it would do, as
    O(validate_only) does, with RV(would_send) (the chat completions a run would send) and a message that says so.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - requests (Python library, on the host the module runs on)
  - jsonschema 4.10 or later (Python library, on the host the module runs on; Debian and Ubuntu package
    C(python3-jsonschema), which the C(factory_floor.llm.tool_gate) role installs)
  - PyYAML (Python library, on the host the module runs on), only for a O(suite) given as a path to a YAML file
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.vllm_endpoint
attributes:
  check_mode:
    support: full
    details: Check mode sends no request (a suite is load on the engine); it checks the suite and the selection and
      returns what a run would send (RV(would_send)). It predicts RV(ignore:changed=false), which a run reports.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  suite:
    description:
      - The cases to run. A suite as data (a mapping with C(tools) and C(cases)), a path on the host the module runs
        on to a suite file (C(.json), or YAML, which needs PyYAML there), or a list of those, merged in order
        (tools by name, cases appended).
      - The collection's suite is C(roles/tool_gate/files/suites/default.yml); the C(factory_floor.llm.tool_gate) role
        reads it (and yours) on the controller and passes it here as data, so the host running the module needs
        no copy.
      - At least one of O(suite) and O(bfcl_categories) is required.
    type: raw
  cases:
    description:
      - Run only the cases whose id matches one of these shell patterns (V(single_*), V(bfcl_simple_python_1?)).
      - Empty runs every case (after O(categories)).
    type: list
    elements: str
    default: []
  categories:
    description:
      - Run only the cases of these categories. The shipped suite has V(single), V(choose), V(parallel), V(auto),
        V(no_tool), V(multi_turn) and V(tool_choice); the shipped C(schemas) suite (pydantic- and MCP-style tool
        schemas) has V(schema); BFCL cases are V(bfcl_simple), V(bfcl_multiple), V(bfcl_parallel) and
        V(bfcl_irrelevance).
      - Empty runs every category.
    type: list
    elements: str
    default: []
  bfcl_path:
    description:
      - The C(bfcl_eval/data) folder of the PyPI package C(bfcl-eval) (Apache-2.0), on the host the module runs on,
        holding C(BFCL_v<N>_<category>.json) and C(possible_answer/). The module only reads these files; it never
        downloads anything.
      - "One way to get it without the package's heavy dependencies: C(pip download bfcl-eval --no-deps) and unzip
        the wheel."
      - Required with O(bfcl_categories).
    type: path
  bfcl_categories:
    description:
      - BFCL categories to add. V(simple) (one function, one call), V(multiple) (several functions, one call),
        V(parallel) (one function, several calls), V(irrelevance) (no function fits; the answer must be text).
    type: list
    elements: str
    choices: [simple, multiple, parallel, irrelevance]
  bfcl_limit:
    description:
      - Take the first N entries of each BFCL category (in the files' order). V(0) takes all
        (about 400 simple, 200 multiple, 200 parallel, 240 irrelevance; two requests each).
    type: int
    default: 20
  bfcl_tool_choice:
    description:
      - C(tool_choice) sent with the BFCL cases that expect calls. V(auto) is BFCL's own setting; V(required) lets
        models that only call tools when forced (such as SmolLM2-135M) score. V(irrelevance) is always asked with
        V(auto).
    type: str
    choices: [auto, required]
    default: auto
  timeout:
    description:
      - Seconds one request may take, from sending it to the last byte of the answer (streamed or not).
      - On a loaded server this includes waiting in vLLM's queue.
    type: float
    default: 120
  temperature:
    description:
      - Sampling temperature sent with every request. V(0) (greedy) makes the streamed and non-streamed answers
        comparable and scores repeatable.
    type: float
    default: 0
  max_tokens:
    description:
      - C(max_tokens) sent with every request (a case may set its own). Tokens.
    type: int
    default: 512
  streaming:
    description:
      - Also run every case streamed and require the reassembled streamed calls to equal the non-streamed ones.
      - Turning it off halves the requests but no longer tests the streamed tool-call path clients use.
    type: bool
    default: true
  concurrency:
    description:
      - How many cases run at once, each in its own thread with its own HTTP session. V(1) runs them one after another.
      - vLLM batches concurrent requests, so cases run together take little more than the slowest of them instead of
        their sum. That matters where the gate runs while no engine serves clients (a topology switch).
      - A case's own requests (non-streamed, then streamed) still run one after the other. The results come back in the
        suite's order and are scored the same way whatever the value.
      - Each request then shares the engine with up to O(concurrency) - 1 others, so the C(latency) of each case in
        RV(results) includes that sharing, and O(timeout) must allow for it.
      - Above 1 a case's answer can depend on what else is in the batch (see the notes); the default runs cases one at
        a time so that a verdict does not flip with batching.
      - Must be 1 or more.
    type: int
    default: 1
  repeat:
    description:
      - How many times the whole selection runs. With more than one run each case is judged by majority over the runs
        (a tie fails), RV(flipped_cases) names the cases whose verdict differed between runs, and RV(run_scores) gives
        each run's score.
      - Greedy decoding is not batch-invariant, and on some builds not even run-to-run invariant, so a case near the
        model's ability can pass once and fail the next time. Use several runs to measure a build's spread before
        choosing C(tool_gate_min_score) and C(tool_gate_tolerance); the gate's time grows with each run.
      - Must be 1 or more. Not part of RV(suite_digest).
    type: int
    default: 1
  progress_interval:
    description:
      - Seconds after which a part of the run ends to print its cases' lines (see the description) - the cases run in
        batches of O(concurrency), each batch O(repeat) times, and a part ends after the first batch that ends this long
        or longer after the part began. The action plugin then runs the module again, going on with the same run; the
        task's result is the last part's, scored over every case.
      - V(0) runs the whole selection in one part and prints the cases' lines when it ends.
    type: float
    default: 30
  resume:
    description:
      - Internal, set by the action plugin - what the previous part of the same run returned in the C(resume) of RV(progress)
        (the results so far). The selection must be the same.
    type: dict
  validate_only:
    description:
      - Only read and check the suite and the selection, and return RV(suite_digest), RV(selected) and RV(total)
        without sending any request (O(model) is then not looked up).
      - The C(tool_gate) role uses it to find a stored score comparable with the next run before it runs.
    type: bool
    default: false
notes:
  - The server is reached from the host the module runs on. vLLM replicas are firewalled to the proxy and
    themselves, so run it on the replica's own host with O(url=http://127.0.0.1:PORT).
  - Up to O(concurrency) cases run at once; each takes two generations, one after the other (one with
    O(streaming=false)).
  - "vLLM does not promise the same greedy output for a prompt in batches of different sizes (unless started with
    E(VLLM_BATCH_INVARIANT) set to C(1)), so an answer may differ between runs with different O(concurrency), as it
    may between runs on an engine that serves other clients. O(concurrency) is not part of RV(suite_digest)."
  - Returned keys avoid the names C(failed) and C(changed) for case lists, which Ansible reserves.
  - With O(repeat) above 1 each batch of cases runs O(repeat) times before the next batch starts (each case still gets
    O(repeat) verdicts; RV(run_scores) is each repeat's score over all the cases).
seealso:
  - name: vLLM tool calling
    description: C(--enable-auto-tool-choice), C(--tool-call-parser) and how C(tool_choice) is honoured.
    link: https://docs.vllm.ai/en/latest/features/tool_calling.html
  - name: Berkeley Function Calling Leaderboard
    description: The public benchmark whose data O(bfcl_path) reads.
    link: https://gorilla.cs.berkeley.edu/leaderboard.html
  - module: factory_floor.llm.vllm_health
"""

EXAMPLES = r"""
# The factory_floor.llm.tool_gate role runs the collection's suite this way, read on the controller.
- name: Score the replica on this host with a suite read on the controller
  factory_floor.llm.tool_call_test:
    url: http://127.0.0.1:8000
    model: lab-chat
    suite: "{{ lookup('ansible.builtin.file', 'files/my_suite.yml') | from_yaml }}"
  register: tool_score

- name: Print the score and what failed
  ansible.builtin.debug:
    msg: "{{ tool_score.score }} ({{ tool_score.passed_count }}/{{ tool_score.total }}); failed: {{ tool_score.failed_cases | map(attribute='id') }}"

- name: Only the parallel and multi-turn cases, without the streamed pass, from a JSON suite on the host
  factory_floor.llm.tool_call_test:
    url: http://127.0.0.1:8000/v1
    suite: /etc/factory-floor/tool_suite.json
    categories: [parallel, multi_turn]
    streaming: false

- name: Add 25 entries of each BFCL category, forcing tool calls
  factory_floor.llm.tool_call_test:
    url: http://127.0.0.1:8000
    model: lab-chat
    bfcl_path: /opt/bfcl_eval/data
    bfcl_categories: [simple, multiple, parallel, irrelevance]
    bfcl_limit: 25
    bfcl_tool_choice: required
"""

RETURN = r"""
score:
  description: Percentage (0-100, one decimal) of the selected cases that passed.
  returned: success, unless O(validate_only) or in check mode
  type: float
  sample: 72.2
total:
  description: Number of cases run (with O(validate_only), selected).
  returned: success
  type: int
  sample: 18
passed_count:
  description: Number of cases that passed.
  returned: success, unless O(validate_only) or in check mode
  type: int
  sample: 13
failed_count:
  description: Number of cases that failed.
  returned: success, unless O(validate_only) or in check mode
  type: int
  sample: 5
passed_cases:
  description: Ids of the cases that passed, in the order run.
  returned: success, unless O(validate_only) or in check mode
  type: list
  elements: str
  sample: [single_string, single_enum]
failed_cases:
  description: The cases that failed, with why and the raw answers (each cut at 20000 characters).
  returned: success, unless O(validate_only) or in check mode
  type: list
  elements: dict
  contains:
    id:
      description: The case id.
      type: str
    category:
      description: The case's category.
      type: str
    reasons:
      description: Why it failed, each prefixed with C(non-stream:) or C(stream:) when it concerns one answer.
      type: list
      elements: str
    body:
      description: The raw body of the non-streamed answer (JSON text, or an error body).
      type: str
    stream_body:
      description: The raw server-sent event lines of the streamed answer, joined with newlines; null without O(streaming).
      type: str
  sample:
    - id: single_nested_object
      category: single
      reasons: ["non-stream: the tool call is in content, not in tool_calls: \"<tool_call>[{\\\"name\\\": ...\""]
      body: '{"id":"chatcmpl-1","choices":[{"message":{"content":"<tool_call>[...]</tool_call>"},"finish_reason":"stop"}]}'
      stream_body: 'data: {...}'
results:
  description: Every case's result, in the order run.
  returned: success, unless O(validate_only) or in check mode
  type: list
  elements: dict
  contains:
    id:
      description: The case id.
      type: str
    category:
      description: The case's category.
      type: str
    passed:
      description: Whether the case passed.
      type: bool
    reasons:
      description: Why it failed; empty when it passed.
      type: list
      elements: str
    latency:
      description:
        - Seconds the non-streamed request took, from sending it to the whole answer.
        - With O(concurrency) above 1 the engine served other cases' requests meanwhile; this is included.
      type: float
    stream_latency:
      description: Seconds the streamed request took, from sending it to C(data [DONE]); null without O(streaming).
      type: float
    calls:
      description: The calls of the non-streamed answer, each C(name) and C(arguments) (parsed when valid JSON).
      type: list
      elements: dict
    verdicts:
      description: The case's verdict in each run (one boolean per O(repeat)); C(passed) is their majority.
      type: list
      elements: bool
  sample:
    - id: single_integer
      category: single
      passed: true
      reasons: []
      latency: 1.84
      stream_latency: 1.91
      calls: [{name: search_flights, arguments: {origin: LHR, destination: JFK, date: "2025-03-14", passengers: 3}}]
      verdicts: [true]
by_category:
  description: Per category, C(total), C(passed) and C(score) (percent, one decimal).
  returned: success, unless O(validate_only) or in check mode
  type: dict
  sample: {single: {total: 5, passed: 4, score: 80.0}, no_tool: {total: 2, passed: 2, score: 100.0}}
latency_mean:
  description: Mean seconds of the non-streamed requests that got an answer; null when none did.
  returned: success, unless O(validate_only) or in check mode
  type: float
  sample: 2.315
latency_max:
  description: Longest non-streamed request, seconds.
  returned: success, unless O(validate_only) or in check mode
  type: float
  sample: 6.02
elapsed:
  description:
    - Seconds the whole run took (wall time, reading the suite included). With O(concurrency) above 1 this is less than
      the sum of the latencies.
  returned: always
  type: float
  sample: 81.4
model:
  description: The model name the requests used.
  returned: success, unless O(validate_only) or in check mode
  type: str
  sample: lab-chat
url:
  description: The base URL tested, as normalised (no trailing C(/) or C(/v1)).
  returned: always
  type: str
  sample: http://127.0.0.1:8000
selected:
  description: Ids of the selected cases, in the order they run.
  returned: success
  type: list
  elements: str
  sample: [single_string, single_enum, single_integer]
suite_name:
  description: Name of the (merged) suite, the suites' names joined with C(+).
  returned: success
  type: str
  sample: default
repeat:
  description: How many times the selection ran (O(repeat)); each case's verdict is the majority over the runs.
  returned: success, unless O(validate_only) or in check mode
  type: int
  sample: 3
run_scores:
  description: Each run's score (percent, 0-100, one decimal), in the order they ran. One entry with O(repeat=1).
  returned: success, unless O(validate_only) or in check mode
  type: list
  elements: float
  sample: [72.2, 66.7, 72.2]
flipped_cases:
  description:
    - Ids of the cases whose verdict differed between the runs (empty with O(repeat=1)). Their majority verdict counts
      in RV(score); each appears in RV(results) with C(verdicts), one boolean per run.
  returned: success, unless O(validate_only) or in check mode
  type: list
  elements: str
  sample: [multi_turn_answer_from_result]
progress:
  description:
    - C(done) (false while the run goes on), C(lines) (one per case this part ran, for the action plugin to print) and,
      while it goes on, C(resume) (the results so far, passed back as O(resume)). A part that does not end the run
      returns only RV(url), RV(model), RV(suite_name), RV(suite_digest), RV(total) and this; the task's result is the
      last part's.
  returned: success, unless O(validate_only) or in check mode
  type: dict
  sample:
    done: true
    lines: ["case 18 of 18: multi_turn_answer_from_result (multi_turn) passed in 6.2 s"]
would_send:
  description:
    - In check mode, the chat completions a run would send - each selected case once non-streamed and, with O(streaming),
      once streamed, O(repeat) times - none of them sent.
  returned: in check mode
  type: int
  sample: 36
suite_digest:
  description:
    - sha256 (hex) of what decides the score - the selected cases, the tools they offer, O(temperature),
      O(max_tokens) and O(streaming). Two scores are comparable only when their digests are equal.
  returned: success
  type: str
  sample: 3f2a9c0e1b7d4e6a8c5b2d1f0e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.factory_floor.llm.plugins.module_utils._tool_call import (
    HAS_REQUESTS,
    REQUESTS_IMPORT_ERROR,
    AbortRun,
    case_line,
    combine_runs,
    first_model,
    run_part,
    score,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._tool_check import (
    HAS_JSONSCHEMA,
    JSONSCHEMA_IMPORT_ERROR,
    SuiteError,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._tool_suite import (
    load_bfcl,
    load_suite_file,
    merge_suites,
    select_cases,
    suite_digest,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_client import base_url
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_endpoint import ENDPOINT_SPEC


def _suites(value) -> list:
    """The O(suite) option as a list of suite mappings (paths read on this host)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    suites = []
    for item in items:
        if isinstance(item, str):
            suites.append(load_suite_file(item))
        elif isinstance(item, dict):
            suites.append(item)
        else:
            raise SuiteError("suite must be a mapping, a path or a list of those, got %s" % type(item).__name__)
    return suites


def _resumed(resume, cases, repeat):
    """``(started, model, runs)`` from an earlier part's the C(resume) of RV(progress), or None when it does not fit the selection."""
    try:
        started, model, runs = float(resume["started"]), str(resume["model"]), resume["runs"]
        ids = [case["id"] for case in cases]
        if len(runs) != repeat or any([result["id"] for result in run] != ids[:len(runs[0])] for run in runs):
            return None
        if started > time.monotonic():
            return None
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return started, model, [list(run) for run in runs]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ENDPOINT_SPEC,
            suite=dict(type="raw"),
            cases=dict(type="list", elements="str", default=[]),
            categories=dict(type="list", elements="str", default=[]),
            bfcl_path=dict(type="path"),
            bfcl_categories=dict(type="list", elements="str",
                                 choices=["simple", "multiple", "parallel", "irrelevance"]),
            bfcl_limit=dict(type="int", default=20),
            bfcl_tool_choice=dict(type="str", default="auto", choices=["auto", "required"]),
            timeout=dict(type="float", default=120),
            temperature=dict(type="float", default=0),
            max_tokens=dict(type="int", default=512, no_log=False),
            streaming=dict(type="bool", default=True),
            concurrency=dict(type="int", default=1),
            repeat=dict(type="int", default=1),
            validate_only=dict(type="bool", default=False),
            progress_interval=dict(type="float", default=30),
            resume=dict(type="dict"),
        ),
        required_by={"bfcl_categories": ["bfcl_path"]},
        required_one_of=[["suite", "bfcl_categories"]],
        supports_check_mode=True,
    )
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
    if not HAS_JSONSCHEMA:
        module.fail_json(msg=missing_required_lib("jsonschema", reason="to check tool arguments against their JSON Schema"),
                         exception=JSONSCHEMA_IMPORT_ERROR)
    params = module.params
    started = time.monotonic()
    try:
        url = base_url(params["url"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    for name in ("timeout", "max_tokens"):
        if params[name] <= 0:
            module.fail_json(msg="%s must be more than 0, got %s" % (name, params[name]))
    for name in ("concurrency", "repeat"):
        if params[name] < 1:
            module.fail_json(msg="%s must be 1 or more, got %s" % (name, params[name]))
    if params["bfcl_limit"] < 0:
        module.fail_json(msg="bfcl_limit must be 0 (all) or more, got %s" % params["bfcl_limit"])
    if params["progress_interval"] < 0:
        module.fail_json(msg="progress_interval must be 0 (one part) or more seconds, got %s" % params["progress_interval"])

    try:
        suites = _suites(params["suite"])
        if params["bfcl_categories"]:
            suites.append(load_bfcl(params["bfcl_path"], params["bfcl_categories"], params["bfcl_limit"],
                                    params["bfcl_tool_choice"]))
        suite = merge_suites(suites)
    except SuiteError as exc:
        module.fail_json(msg="The tool-calling suite is not valid: %s" % exc, url=url)
    cases = select_cases(suite, params["cases"], params["categories"])
    if not cases:
        module.fail_json(msg="No case selected: the suite %s has %d cases; cases=%s, categories=%s match none of them" % (
            suite["name"], len(suite["cases"]), params["cases"], params["categories"]), url=url)
    settings = {"temperature": params["temperature"], "max_tokens": params["max_tokens"], "streaming": params["streaming"]}
    digest = suite_digest(cases, suite["tools"], settings)
    if params["validate_only"] or module.check_mode:
        result = dict(changed=False, url=url, suite_name=suite["name"], suite_digest=digest, total=len(cases),
                      selected=[case["id"] for case in cases], elapsed=round(time.monotonic() - started, 3))
        if module.check_mode and not params["validate_only"]:
            # A suite is load on the engine: check mode sends none of it and says what a run would send.
            result["would_send"] = len(cases) * params["repeat"] * (2 if params["streaming"] else 1)
            result["msg"] = ("check mode: would run %d cases %d time(s) against %s (%d chat completions); nothing was sent"
                             % (len(cases), params["repeat"], url, result["would_send"]))
        module.exit_json(**result)

    model = params["model"]
    runs = [[] for _run in range(params["repeat"])]
    if params["resume"]:
        resumed = _resumed(params["resume"], cases, params["repeat"])
        if resumed is None:
            module.fail_json(msg="resume is not what an earlier part of this run returned (the selection or repeat "
                                 "changed, or it is not this module's)", url=url)
        started, model, runs = resumed
    before = len(runs[0])
    try:
        if not model:
            model = first_model(url, params["api_key"])
        runs = run_part(url, cases, suite["tools"], model, runs, repeat=params["repeat"],
                        concurrency=params["concurrency"], report_after=params["progress_interval"] or None,
                        api_key=params["api_key"], timeout=params["timeout"], temperature=params["temperature"],
                        max_tokens=params["max_tokens"], streaming=params["streaming"])
    except AbortRun as exc:
        module.fail_json(msg="Tool-calling test against %s stopped: %s" % (url, exc), url=url,
                         elapsed=round(time.monotonic() - started, 3))
    lines = [case_line(index, len(cases), [run[index] for run in runs]) for index in range(before, len(runs[0]))]
    if len(runs[0]) < len(cases):
        module.exit_json(changed=False, url=url, model=model, suite_name=suite["name"], suite_digest=digest,
                         total=len(cases), progress={"done": False, "lines": lines, "resume": {
                             "started": started, "model": model, "runs": runs}})

    combined = combine_runs(runs)
    results = combined["results"]
    if not any(r["answered"] for r in results):
        module.fail_json(msg="Tool-calling test against %s: no request got an HTTP answer; first error: %s" % (
            url, results[0]["reasons"][0]), url=url, elapsed=round(time.monotonic() - started, 3))

    summary = score(results)
    failed = [dict(id=r["id"], category=r["category"], reasons=r["reasons"], body=r["body"], stream_body=r["stream_body"])
              for r in results if not r["passed"]]
    module.exit_json(
        changed=False,
        score=summary["score"],
        total=summary["total"],
        passed_count=summary["passed_count"],
        failed_count=summary["total"] - summary["passed_count"],
        passed_cases=[r["id"] for r in results if r["passed"]],
        failed_cases=failed,
        results=[dict(id=r["id"], category=r["category"], passed=r["passed"], reasons=r["reasons"], latency=r["latency"],
                      stream_latency=r["stream_latency"], calls=r["calls"], verdicts=r["verdicts"]) for r in results],
        by_category=summary["by_category"],
        latency_mean=summary["latency_mean"],
        latency_max=summary["latency_max"],
        elapsed=round(time.monotonic() - started, 3),
        model=model,
        url=url,
        suite_name=suite["name"],
        suite_digest=digest,
        selected=[r["id"] for r in results],
        repeat=params["repeat"],
        run_scores=combined["scores"],
        flipped_cases=combined["flipped"],
        progress={"done": True, "lines": lines},
    )


if __name__ == "__main__":
    main()
