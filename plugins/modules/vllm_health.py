#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: vllm_health
short_description: Wait until a vLLM server is serving (or is no longer serving)
version_added: 0.1.0
description:
  - Polls one vLLM OpenAI-compatible server and reports whether it is serving.
  - Each probe ends in one of six statuses, decided from what the endpoint does (or, for the last, from this side).
  - "V(serving) - C(GET /health) answered 200 and whatever else O(probe) and O(model) ask for succeeded."
  - "V(loading) - the TCP connection was refused. vLLM binds its port only once the engine is ready, so this is what
    start-up looks like. A stopped server looks the same; give O(unit) to tell them apart."
  - "V(unreachable) - no TCP connection could be made for another reason: the name does not resolve, there is no route
    to the host, or the connect timed out."
  - "V(dead) - a TCP connection was made but the server does not serve: C(/health) answered anything but 200
    (vLLM answers 503 once its EngineCore died), no HTTP answer came within 5 seconds, the connection dropped,
    C(/v1/models) or the completion answered an HTTP error, or the 1-token generation did not finish within
    O(generate_timeout). A hung engine still answers C(/health) 200; only a generation shows it."
  - "V(wrong_model) - C(/v1/models) answered but does not list O(model)."
  - "V(config_error) - no request was sent: O(api_key) is not a bearer token (RFC 6750: letters, digits, C(-._~+/), then
    C(=) only at its end; a trailing newline is the usual cause), or requests refused the URL. It says nothing about the
    server: the module fails at once, whatever O(wait_for), with RV(reason=config_error). No message quotes the key."
  - Waits, polling every O(interval) seconds, until the status is O(wait_for) or O(timeout) seconds passed,
    and fails at once, without waiting for the timeout, when O(unit) stops, when O(unit) crashes the second time
    since the wait began (a crash loop), or when the server rejects O(api_key).
  - "While it waits for V(serving), a line every O(progress_interval) seconds (30 by default) at the default verbosity:
    the time waited out of O(timeout), O(unit)'s state, and what vLLM is doing, read from the unit's journal - vLLM's own
    log lines of the current run (starting, reading the model's configuration, loading weights with the shards loaded,
    model loaded, compiling, sizing the KV cache, capturing CUDA graphs, starting the API server), and the first Python
    exception of a run that is failing."
  - On a failure with O(unit), the message also names the phase vLLM had reached and the root cause it logged (its first
    exception line), before the journal tail.
  - "Where it probes: C(/health), C(/version), C(/v1/models) and C(/v1/completions) under the server's root (O(url)
    without a trailing C(/v1)). With O(model) set, every O(probe) also reads C(/v1/models): a server that does not
    list it is V(wrong_model). With O(probe=generate), the 1-token generation uses O(model), else the first model
    C(/v1/models) lists. A 401 or 403 answer (O(api_key) rejected) fails at once."
  - When O(unit) stopped or crash-looped, the message's first line quotes the journal's last line that looks like the
    cause (docker's or podman's refusal to start the container, C(Error response from daemon) or C(Error:), a Python
    exception's line, C(exec format error)), cut to 300 characters. The journal (and process) lines that end the
    message are followed by C(-- end of the unit's lines --).
  - "No key in a journal line reaches the result - O(api_key), and any value a line writes as a key (C(--api-key K),
    C(VLLM_API_KEY=K), C(api-key: K), vLLM's C('api_key': [...]), C(Bearer K): a key rotation's next key) shows as
    C(<hidden>), before any line is cut."
  - Only reads. It never changes anything, so it always reports RV(ignore:changed=false) and runs in full in check mode.
author:
  - Factory Floor maintainers (@factory-floor)
requirements:
  - requests (Python library, on the host the module runs on)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
  - factory_floor.llm.vllm_endpoint
options:
  engine_host:
    description:
      - Another engine host (inventory name) whose engine to ask - the module's action plugin reads, on the controller,
        its endpoint from C(hostvars) (its own address as P(factory_floor.llm.vllm_probe_url#filter) gives it, its
        C(vllm_api_key), its C(vllm_served_model_name)) and gives it as O(url), O(api_key) and O(model), in place of
        the task's or C(module_defaults)'. Run the task on that host (C(delegate_to)).
    type: str
  timeout:
    description:
      - How long to wait, in seconds, for the status O(wait_for) before failing.
      - Start-up of a large model on a GB10 / DGX Spark takes 5 to 20 minutes (weights, compile warm-up, CUDA graphs);
        the default, 1800 (30 minutes), covers a 20-minute start-up with half as much again as margin. A start-up that
        cannot succeed does not wait this long when O(unit) is given (see O(unit)).
      - V(0) probes once and returns the state whatever it is, without failing on it.
      - The deadline is checked between probes, so the wait can run over by at most one probe
        (5 seconds per connect and per answer of C(/health), C(/version) and C(/v1/models), plus O(generate_timeout)).
    type: float
    default: 1800
  interval:
    description:
      - Seconds to sleep between two probes. The last sleep is shortened so a probe runs at the deadline.
    type: float
    default: 2
  probe:
    description:
      - What must succeed for the server to count as V(serving).
      - V(health) - C(GET /health) answers 200 (plus C(/v1/models) listing O(model) when O(model) is set).
        Cheapest; does not notice a hung engine.
      - V(models) - also C(GET /v1/models) answers a model list (this checks O(api_key)).
      - V(generate) - also a 1-token C(POST /v1/completions) (C(max_tokens) 1, C(temperature) 0) finishes within
        O(generate_timeout). Only this probe notices a hung engine, which still answers C(/health) and C(/v1/models).
    type: str
    choices: [health, models, generate]
    default: health
  unit:
    description:
      - A systemd unit to watch while waiting for V(serving), for example V(vllm-replica.service) or V(vllm-split.service) (the units the roles install).
      - After each probe that did not see V(serving), the module reads
        C(systemctl show -p LoadState,ActiveState,SubState,Result,ExecMainStatus,NRestarts,ExecMainStartTimestampMonotonic,InvocationID
        UNIT). If the unit is C(failed), C(inactive), C(active) with SubState C(exited), or does not exist, the module fails
        at once with that state and the unit's last 30 journal lines (C(journalctl -u UNIT --no-pager), without the report of
        leaked objects an exiting vLLM prints),
        RV(reason) V(unit_down). C(activating) (including SubState C(auto-restart)) and C(deactivating) keep the wait going.
      - "Crash loop: the first read is the baseline; after it, each run of the unit that ended counts as a crash - systemd's
        C(NRestarts) going up (C(Restart=) started it again), the main process started again
        (C(ExecMainStartTimestampMonotonic) changed) while C(NRestarts) did not go up, or SubState C(auto-restart) (the run
        ended, the next one starts after C(RestartSec=)). At the second crash the module fails with the journal tail and
        RV(reason) V(crash_loop), at the first read after it: within O(interval) plus one probe (seconds, a connection
        refused during start-up), far within 30 s with the defaults, instead of waiting for systemd's start limit or
        O(timeout). One crash alone keeps the wait going: the restart may cure it."
      - vLLM's API server exits with status 0 a few seconds after its engine died, so the unit is then
        C(inactive) with Result C(success), and C(Restart=on-failure) does not restart it.
      - Not read when O(wait_for=dead).
    type: str
  container_engine:
    description:
      - With O(unit), the engine of the container that unit runs (C(/usr/bin/docker), C(/usr/bin/podman); the C(vllm)
        role's container runtime). The engine's processes are then not under the unit's main process, which is the
        C(docker run) client, but under containerd-shim (docker) or conmon (podman); on a timeout RV(processes) also
        lists the container's, from its main process (C(ENGINE container inspect --format {{.State.Pid}} NAME)),
        vLLM's API server.
      - Empty or omitted - the unit's own processes only (the C(venv) runtime).
    type: str
    default: ""
  container_name:
    description:
      - The container's name, for O(container_engine). Default, O(unit) without C(.service) (C(vllm-replica),
        C(vllm-split), as the C(vllm) role names them).
    type: str
    default: ""
  generate_timeout:
    description:
      - Seconds the 1-token generation of O(probe=generate) may take, from sending the request to the whole answer.
      - A generation that takes longer makes the status V(dead), with the error
        C(1-token generation did not finish within N s).
      - On a loaded server this includes waiting in vLLM's queue behind running requests; leave headroom.
    type: float
    default: 30
  progress_interval:
    description:
      - Seconds between two progress lines of a wait (see the description), printed on the controller at the default
        verbosity while the wait lasts, prefixed with the inventory host. The module's action plugin runs the module
        once per interval, each run going on with the same wait - the same deadline (O(timeout) from the first run's
        start), attempts and crash count (O(resume)) - and the task's result is the last run's.
      - V(0) waits in one run and prints nothing until it ends.
      - A task with C(no_log) prints no progress lines.
    type: float
    default: 30
  resume:
    description:
      - Internal, set by the action plugin - what the previous run of the same wait returned in the C(resume) of RV(progress).
        It holds readings of the host's monotonic clock, so only a run on the same host continues the wait.
    type: dict
  wait_for:
    description:
      - The state to wait for.
      - V(serving) - until the status is V(serving).
      - V(dead) - until the server is no longer serving, that is any status other than V(serving). Useful in fault
        tests. A killed EngineCore makes C(/health) answer 503 (V(dead)) within a second, then the API server exits and
        the port refuses connections (V(loading)).
    type: str
    choices: [serving, dead]
    default: serving
notes:
  - The server is considered from the host the module runs on; delegate the task to probe from elsewhere
    (for example from the proxy host, to see what the proxy sees).
seealso:
  - name: vLLM OpenAI-compatible server
    description: The endpoints C(/health), C(/version), C(/v1/models) and C(/v1/completions).
    link: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html
"""

EXAMPLES = r"""
- name: Wait until vLLM serves the model and can generate
  factory_floor.llm.vllm_health:
    url: http://127.0.0.1:8000
    model: smollm2-135m-instruct
    probe: generate
    unit: vllm-replica.service
    timeout: 1800

- name: Report the state once, without waiting
  factory_floor.llm.vllm_health:
    url: http://127.0.0.1:8000
    timeout: 0
  register: vllm_state

- name: Check a server that requires an API key, through its OpenAI base URL
  factory_floor.llm.vllm_health:
    url: http://spark-a:8000/v1
    api_key: "{{ vllm_api_key }}"
    probe: models
    timeout: 60

- name: After killing the EngineCore, wait until the server stops serving
  factory_floor.llm.vllm_health:
    url: http://127.0.0.1:8000
    wait_for: dead
    probe: generate
    generate_timeout: 10
    timeout: 60
"""

RETURN = r"""
status:
  description:
    - The status the last probe saw, V(serving), V(loading), V(unreachable), V(dead), V(wrong_model) or
      V(config_error) (see the description for what each means).
  returned: always
  type: str
  sample: serving
ended_at:
  description:
    - When the wait ended (for example when the engine was first seen serving), as epoch seconds of the controller's
      clock - the module's action plugin sets it when the result reaches the controller, at most the result's way back
      (SSH, usually well under a second) after the last probe ended. Never the host's clock, which may be minutes off
      the controller's and the other hosts'; switch reports put it next to other hosts' events.
  returned: always
  type: float
  sample: 1795957165.259
elapsed:
  description: Seconds from the first probe to the end of the last one, measured with the host's monotonic clock.
  returned: always
  type: float
  sample: 73.214
models:
  description:
    - The model ids C(GET /v1/models) listed in the last probe (its C(data[].id)); empty when C(/health) did not answer 200
      or C(/v1/models) did not answer.
  returned: always
  type: list
  elements: str
  sample: [smollm2-135m-instruct]
model_roots:
  description:
    - For each model id of RV(models), its C(root) in C(GET /v1/models) - the directory (or name) vLLM loaded it from,
      its C(--model) - where the list gives one. Tells which build serves under an unchanged served name.
  returned: always
  type: dict
  sample: {smollm2-135m-instruct: /opt/models/SmolLM2-135M-Instruct}
version:
  description:
    - vLLM's version, the C(version) key of the JSON object C(GET /version) answered in the last probe;
      null when it did not answer.
  returned: always
  type: str
  sample: "0.32.0"
probe_latency:
  description:
    - Seconds the last probe took, every request it made included
      (C(/health), C(/version), C(/v1/models), and the 1-token generation with O(probe=generate)).
  returned: always
  type: float
  sample: 0.412
error:
  description: Why the last probe did not see V(serving); null when it did.
  returned: always
  type: str
  sample: "GET http://127.0.0.1:8000/health: connection refused (nothing listens on the port yet)"
url:
  description: The base URL probed, as normalised (no trailing C(/) or C(/v1)).
  returned: always
  type: str
  sample: http://127.0.0.1:8000
attempts:
  description: Number of probes made.
  returned: always
  type: int
  sample: 37
reason:
  description:
    - How the wait ended. V(reached) (the status O(wait_for) was seen), V(probed) (O(timeout=0)), V(timeout),
      V(unit_down) (O(unit) stopped and systemd will not start it again), V(crash_loop) (O(unit) crashed the second time
      since the wait began), V(rejected) (the server refused O(api_key)) or V(config_error) (no request could be sent,
      O(api_key) is not a bearer token or the URL is not valid).
    - V(waiting) from a run that returned after O(progress_interval) to report (see RV(progress)); the action plugin
      runs the module again, so a task's result never ends so.
  returned: always
  type: str
  sample: crash_loop
crashes:
  description:
    - Runs of O(unit) that ended since the wait began (a count, from C(systemctl show) - C(NRestarts) and
      C(ExecMainStartTimestampMonotonic) changes, SubState C(auto-restart)); 0 without O(unit), or when the unit was not
      read (it served at the first probe).
  returned: always
  type: int
  sample: 2
unit_state:
  description:
    - The state of O(unit) from C(systemctl show), when the module failed because the unit stopped or crash-looped.
  returned: on failure, when O(unit) stopped or crashed twice
  type: dict
  contains:
    name:
      description: The unit name, as given in O(unit).
      type: str
    load_state:
      description: C(LoadState).
      type: str
    active_state:
      description: C(ActiveState).
      type: str
    sub_state:
      description: C(SubState).
      type: str
    result:
      description: C(Result).
      type: str
    exec_main_status:
      description: C(ExecMainStatus), the exit status of the main process.
      type: int
    n_restarts:
      description: C(NRestarts), systemd's own restarts of the unit under C(Restart=) (a count; reset by a start by hand).
      type: int
    main_started:
      description: C(ExecMainStartTimestampMonotonic), when the current main process started (microseconds of the host's monotonic clock).
      type: int
  sample:
    name: vllm-replica.service
    load_state: loaded
    active_state: failed
    sub_state: failed
    result: exit-code
    exec_main_status: 1
    n_restarts: 2
    main_started: 1284077332
journal:
  description:
    - The unit's last 30 journal lines (C(journalctl -u UNIT --no-pager), without nanobind's report of the objects an
      exiting vLLM leaked, which can fill hundreds of lines after the error), when the module failed because O(unit)
      stopped, crash-looped or the wait timed out, keys hidden. Also at the end of C(msg).
  returned: on failure, when O(unit) is set and it stopped, crashed twice or the wait timed out
  type: list
  elements: str
  sample: ["Jan 01 12:00:00 spark-a python[812]: ValueError: No available memory for the cache blocks."]
phase:
  description:
    - What vLLM's own log lines of the unit's current (or last) run say it is doing, read from the journal
      (C(journalctl -a -o cat _SYSTEMD_INVOCATION_ID=ID), the last 300 lines; of a unit that no longer names its last run,
      C(journalctl -a -o cat -u UNIT)).
  returned: with O(unit), in RV(progress) and on failure when the unit stopped, crashed twice or the wait timed out
  type: dict
  contains:
    phase:
      description:
        - V(starting), V(configuring), V(engine), V(loading), V(loaded), V(compiling), V(kv_cache), V(graphs), V(api),
          V(ready) or V(stopping) - the phase of the last line that names one; null when none does yet.
      type: str
    label:
      description: The phase in words (V(loading weights), V(capturing CUDA graphs), ...).
      type: str
    detail:
      description: What that line's figures say (V(3/17 shards), V(40.2 GiB in 81.5 s), V(600,416 tokens)); empty when none.
      type: str
    line:
      description: vLLM's own words, without its prefix, cut to 240 characters.
      type: str
    at:
      description: vLLM's timestamp of that line (month-day and the host's local time); null for a tqdm progress bar.
      type: str
    seen:
      description: Every phase met in this run, in order.
      type: list
      elements: str
    cause:
      description: The run's first Python exception line (the root cause of a failed start), or null.
      type: str
    failed_in:
      description: The phase the run was in when that line came, or null.
      type: str
  sample:
    phase: loading
    label: loading weights
    detail: 7/17 shards
    line: "Loading safetensors checkpoint shards:  41% Completed | 7/17 [01:12<01:40, 10.1s/it]"
    at: null
    seen: [starting, configuring, engine, loading]
    cause: null
    failed_in: null
progress:
  description:
    - From a run that returned to report (RV(reason=waiting)) - C(done) (false), C(lines) (the line the action plugin
      prints, one), C(resume) (what the next run continues from; passed back as O(resume)).
  returned: when RV(reason) is V(waiting)
  type: dict
  sample:
    done: false
    lines: ["2m30s of 30m: vllm-replica.service activating (start); vLLM: loading weights (7/17 shards); API: loading"]
    resume: {started: 8203.41, attempts: 75, crashes: {crashes: 0, seen: true, pending: false}}
processes:
  description:
    - When the wait timed out, one line per process of O(unit) (its MainPID and descendants, from C(/proc); with
      O(container_engine), then the container's main process and its descendants) - pid, name,
      state (R running or runnable, S sleeping, D uninterruptible, T stopped), CPU seconds (utime + stime), the core it
      last ran on, and the cores it may run on (C(Cpus_allowed_list)). A start-up that never finishes shows here whether
      its processes compute, wait, are stopped, or are runnable without getting CPU. Also at the end of C(msg).
  returned: on failure, when O(unit) is set and the wait timed out
  type: list
  elements: str
  sample: ["812 python3 S 41.2 1 0-1", "901 VLLM::EngineCor R 0.3 0 0"]
"""

import functools
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_phase as engine_phase
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import (
    UnitStateError,
    invocation_journal,
    unit_log,
    unit_process_lines,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import journal as systemd_journal
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_client import base_url
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_health import (
    HAS_REQUESTS,
    REQUESTS_IMPORT_ERROR,
)
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_endpoint import ENDPOINT_SPEC
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_wait import WAIT_FIELDS, hide_keys, systemd_unit_state, wait


def _result(outcome) -> dict:
    last = outcome.last
    return dict(
        changed=False,
        status=last.status,
        elapsed=round(outcome.elapsed, 3),
        models=last.models,
        model_roots=last.roots,
        version=last.version,
        probe_latency=round(last.latency, 3),
        error=last.error,
        url=outcome.url,
        attempts=outcome.attempts,
        reason=outcome.reason,
        crashes=outcome.crashes,
        ended_at=round(time.time(), 3),
    )


def _read_phase(unit, run_command, journalctl, api_key=None):
    """``_engine_phase.parse`` of the unit's current run's journal, or None without a unit state.

    A unit that stopped may no longer name its last run (no ``InvocationID``): then its
    journal's last lines, whatever run wrote them. Keys hidden first (``hide_keys``): the
    lines the parse keeps are cut, and a key cut in two slips past no_log.
    """
    if unit is None:
        return None
    if unit.invocation_id:
        lines = invocation_journal(unit.invocation_id, run_command, journalctl=journalctl)
    else:
        lines = unit_log(unit.name, run_command, journalctl=journalctl)
    return engine_phase.parse(hide_keys(lines, [api_key]))


def _with_phase(message, parsed):
    """The failure message with what vLLM logged last after its first line (before the journal tail)."""
    if not parsed or not (parsed.get("phase") or parsed.get("cause")):
        return message
    words = "What vLLM logged last: %s%s" % (engine_phase.describe(parsed), " [%s]" % parsed["at"] if parsed.get("at") else "")
    if parsed.get("cause"):
        words += "; root cause: %s%s" % (
            parsed["cause"], " (while %s)" % engine_phase.LABELS[parsed["failed_in"]] if parsed.get("failed_in") else "")
    first, sep, rest = message.partition("\n")
    return first + "\n" + words + (sep + rest if sep else "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ENDPOINT_SPEC,
            timeout=dict(type="float", default=1800),
            interval=dict(type="float", default=2),
            probe=dict(type="str", default="health", choices=["health", "models", "generate"]),
            unit=dict(type="str"),
            container_engine=dict(type="str", default=""),
            container_name=dict(type="str", default=""),
            generate_timeout=dict(type="float", default=30),
            wait_for=dict(type="str", default="serving", choices=["serving", "dead"]),
            progress_interval=dict(type="float", default=30),
            resume=dict(type="dict"),
            # Read by the action plugin (plugins/action/vllm_health.py), which gives url, api_key and model instead.
            engine_host=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)

    params = module.params
    try:
        url = base_url(params["url"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))

    if params["progress_interval"] < 0:
        module.fail_json(msg="progress_interval must be 0 (no progress lines) or more seconds, got %s" % params["progress_interval"])

    unit_state = unit_journal = unit_processes = None
    journalctl = "journalctl"
    if params["unit"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        journalctl = module.get_bin_path("journalctl") or "journalctl"
        unit_state = functools.partial(systemd_unit_state, params["unit"], module.run_command, systemctl=systemctl)
        unit_journal = functools.partial(systemd_journal, params["unit"], module.run_command, journalctl=journalctl)
        unit_processes = functools.partial(unit_process_lines, params["unit"], module.run_command, systemctl=systemctl,
                                           container_engine=params["container_engine"] or "",
                                           container_name=params["container_name"] or "")

    try:
        outcome = wait(
            url,
            api_key=params["api_key"],
            model=params["model"],
            kind=params["probe"],
            wait_for=params["wait_for"],
            timeout=params["timeout"],
            interval=params["interval"],
            generate_timeout=params["generate_timeout"],
            unit_state=unit_state,
            unit_journal=unit_journal,
            unit_processes=unit_processes,
            report_after=params["progress_interval"] or None,
            resume=params["resume"],
        )
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    except UnitStateError as exc:
        module.fail_json(msg="Could not read the state of systemd unit %s while waiting for vLLM at %s: %s" % (
            params["unit"], url, exc))

    result = _result(outcome)
    if outcome.reason == "waiting":
        parsed = (_read_phase(outcome.last_unit, module.run_command, journalctl, params["api_key"]) if params["unit"]
                  else None)
        unit = outcome.last_unit.as_dict(("name", "active_state", "sub_state")) if outcome.last_unit is not None else None
        line = engine_phase.progress_line(outcome.elapsed, params["timeout"], outcome.last.status, unit, parsed,
                                          outcome.crashes, outcome.last.error)
        if parsed is not None:
            result["phase"] = parsed
        result["progress"] = {"done": False, "lines": [line], "resume": outcome.resume}
        module.exit_json(**result)
    if outcome.ok:
        module.exit_json(**result)
    message = outcome.message
    if params["unit"]:
        parsed = _read_phase(outcome.unit or outcome.last_unit, module.run_command, journalctl, params["api_key"])
        if parsed is not None:
            result["phase"] = parsed
            message = _with_phase(message, parsed)
    if outcome.unit is not None:
        result["unit_state"] = outcome.unit.as_dict(WAIT_FIELDS)
        result["journal"] = outcome.journal
    if outcome.reason == "timeout":
        result["journal"] = outcome.journal
        result["processes"] = outcome.processes
    module.fail_json(msg=message, **result)


if __name__ == "__main__":
    main()
