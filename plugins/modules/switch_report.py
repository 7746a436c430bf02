#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: switch_report
short_description: What a topology switch or a model upgrade looked like from a client's side
version_added: 0.1.0
description:
  - Reads the log of the probe client that asked the model through the proxy during a switch (one JSON
    line per request, written by the collection's C(_host/probe_client.py)) and the switch's timeline, and
    returns the seconds without a model, every 502/503, failures after the first new engine served, and
    a table for people.
  - The longest gap is measured from the end of the last answered request (HTTP 200) before it to the end
    of the first one after it.
  - With O(procedure), it takes what each engine host noted during the run (O(hosts)) and what the run
    decided (O(plan)) instead, and works out the timeline, the engines, the outcome, the lines to print
    (RV(lines)) and why the run fails (RV(message)); the playbooks only print and fail.
  - "Clocks: the timeline's events are the controller's clock. The probe client's records are the clock of the host the
    module runs on (the proxy host); the module's action plugin first reads that host's clock, with the controller's
    time before and after (O(clock_offset), to within half that round trip, O(clock_offset_bound)), and every record is
    moved onto the controller's clock before it is compared with an event. So the outcome never depends on the hosts'
    clocks agreeing; RV(clock) says how far they were apart, and a line of RV(table) says so when over a second."
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  probe_log:
    description: Path, on the host the module runs on, of the probe client's JSON-lines log.
    type: path
    required: true
  timeline:
    description:
      - Named events of the switch as epoch seconds (float), for example C(start), C(old_stopped),
        C(first_serving), C(in_rotation), C(end). C(first_serving) is when the first engine of the new
        topology passed its health probe.
    type: dict
    default: {}
  engines:
    description: Per-engine state to print (for example the C(vllm_health) status and start-up seconds).
    type: dict
    default: {}
  tool_score:
    description: Score 0-100 of the tool-calling gate, when it ran.
    type: float
  outcome:
    description:
      - How the switch ended. V(ok_with_failures) is a switch that went through while clients saw failed requests
        (see O(max_failures_after_serving)).
    type: str
    choices: [ok, ok_with_failures, unchanged, rolled_back, failed]
    default: ok
  reason:
    description: Why it ended that way (for C(rolled_back), C(failed) and C(ok_with_failures)).
    type: str
  max_failures_after_serving:
    description:
      - The bar for RV(failures_after_serving), in requests. When O(outcome=ok) and more requests than this failed,
        the outcome returned is V(ok_with_failures) and, unless O(reason) is given, the reason says how many failed.
      - Unset, the outcome is returned as given.
    type: int
  procedure:
    description:
      - V(switch) for a topology switch (C(playbooks/switch.yml)), V(upgrade) for a rolling model or image upgrade
        (C(playbooks/switch-model.yml)).
      - Unset, the report is built from O(timeline), O(engines), O(tool_score), O(outcome) and O(reason) as given.
    type: str
    choices: [switch, upgrade]
  engine_hosts:
    description:
      - With O(procedure), the engine hosts, in inventory order, instead of O(hosts) - the module's action plugin reads
        what each noted during the run itself, on the controller (its C(maintenance_window_host) fact, in C(hostvars),
        that the C(factory_floor.llm.maintenance_window) role's C(note) entry point sets) and passes it as O(hosts).
    type: list
    elements: str
  hosts:
    description:
      - With O(procedure), what each engine host noted during the run, in inventory order.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The host's inventory name.
        type: str
        required: true
      events:
        description:
          - Epoch seconds (float) of what happened on it, among C(drained), C(old_stopped), C(serving),
            C(gate_done), C(in_rotation), C(failed), C(restored), C(rollback_started), C(rollback_serving).
        type: dict
        default: {}
      health:
        description: The C(vllm_health) status of its start-up wait (unset when it was not probed).
        type: str
      gate:
        description: The tool-calling gate's verdict on it (the C(tool_gate) role's C(tool_gate_result)), C({}) when none.
        type: dict
        default: {}
      reason:
        description: Why it failed, when it did.
        type: str
      failed:
        description: Its start, or its gate, failed.
        type: bool
        default: false
      upgraded:
        description: (upgrade) It serves the candidate and rejoined the proxy.
        type: bool
        default: false
      restore_failed:
        description: (upgrade) Giving it its old build back failed.
        type: bool
        default: false
      rollback_failed:
        description: (switch) Starting the old topology again failed on it.
        type: bool
        default: false
  clock_offset:
    description:
      - Seconds the clock of the host the module runs on is ahead of the controller's (negative, behind). The probe
        client's records (its clock) are moved by it onto the controller's clock, the clock of O(timeline) and of the
        hosts' events, before anything is compared; the log file is left as it is.
      - Unset, the module's action plugin measures it just before the report is built - the host's clock read between
        two readings of the controller's (C(time.time)), the midpoint taken - and sets O(clock_offset_bound).
    type: float
  clock_offset_bound:
    description:
      - Seconds either side of O(clock_offset) the true offset lies within (half the measurement's round trip); null when
        O(clock_offset) was given by the task. Reported in RV(clock).
    type: float
  read_clock:
    description:
      - Return only RV(host_time), this host's clock when the module started, and nothing else. The action plugin's first
        step, to measure O(clock_offset).
    type: bool
    default: false
  plan:
    description:
      - With O(procedure), what the run decided and what the closing play read.
      - V(switch) reads C(start) (epoch seconds; else the first host's C(start) event), C(topology), C(on_target),
        C(heal), C(heal_hosts), C(heal_holders), C(heal_ready), C(heal_left), C(drained_other) (host to drain holder),
        C(gated), C(gate_mode), C(gate_mode_why), C(owed_gate), C(incumbent), C(incumbent_score), C(rollback), C(other),
        C(undrain), C(lost_hosts), C(api_engines) (the factory_floor.llm.switch_plan module's keys; with C(owed_gate) the
        report is the switch's whose gate the run owed - its timeline names the gate's start C(owed gate)), C(site) (the
        engine hosts' topology records next to what they run once the switch recorded them -
        M(factory_floor.llm.topology_record)'s C(site)), C(inventory) (what the inventory must say for what the hosts
        run, its C(inventory)), C(lost_locks) (per lost host - C(released), C(path), C(error)), C(run) (the run's id),
        C(record_errors) (per engine host, why its record could not be written),
        C(rotation_error) and C(inventory_sources).
      - V(upgrade) reads C(target) (in words), C(todo) (the replicas to upgrade), C(start) (epoch seconds), C(old)
        (C(model), C(image)), C(switch_model) and C(switch_image).
      - Both read C(playbook_dir) (Ansible's magic variable; absent, an installed collection's) to name a playbook in a
        message the way the operator runs it - C(factory_floor.llm.status) from an installed collection,
        C(playbooks/status.yml) from a checkout (the P(factory_floor.llm.playbook_name#filter) filter's rule).
    type: dict
    default: {}
author:
  - Factory Floor maintainers (@factory-floor)
"""

EXAMPLES = r"""
- name: Build the switch report from the probe client's log
  factory_floor.llm.switch_report:
    probe_log: /run/factory-floor/switch-probe.jsonl
    timeline:
      start: 1795950000.0
      old_stopped: 1795950004.2
      first_serving: 1795950101.7
  register: report

- name: Print it
  ansible.builtin.debug:
    msg: "{{ report.table }}"
"""

RETURN = r"""
clock:
  description:
    - How far the proxy host's clock (the probe client's) was from the controller's when the report was built -
      C(proxy_offset), seconds it is ahead (negative, behind), and C(bound), seconds either side it was measured to
      (null when O(clock_offset) was given). The report's times are all on the controller's clock.
  returned: unless O(read_clock)
  type: dict
  sample: {proxy_offset: 0.012, bound: 0.21}
host_time:
  description: With O(read_clock), the clock of the host the module runs on when it started, epoch seconds.
  returned: when O(read_clock)
  type: float
  sample: 1795950000.123
lines:
  description: What the playbook prints, the table with the tool-calling gate's summary and the inventory's advice.
  returned: when O(procedure) is set
  type: list
  elements: str
message:
  description: Why the run fails, in words for the operator; empty when it does not fail.
  returned: when O(procedure) is set
  type: str
  sample: ""
tool_gate:
  description:
    - (switch) The gate's part of the report, C(topology), C(gated), C(incumbent) (its stored score), C(engines)
      (the verdict per engine it tested), C(summary) (lines), C(gate_mode), C(shares) (a split suite's case ids per
      engine) and C(owed_gate) (true when the run gated the engines a switch killed after admission had left serving
      ungated; a C(summary) line then begins C(owed gate:)).
  returned: when O(procedure=switch)
  type: dict
inventory:
  description:
    - (switch) What the inventory must say for what the hosts run (C(plan.inventory)), for the JSON report; its
      C(advice) is the last line printed.
  returned: when O(procedure=switch)
  type: dict
lost_hosts:
  description: (switch) The engine hosts the run lost (C(plan.lost_hosts)); any fails the run (outcome V(host_lost)).
  returned: when O(procedure=switch)
  type: list
  elements: str
topology:
  description: (switch, finishing an interrupted switch) The topology the hosts are on.
  returned: when O(procedure=switch) finished an interrupted switch
  type: str
drained_by:
  description: (switch, finishing an interrupted switch) The drain holders the interrupted run left.
  returned: when O(procedure=switch) finished an interrupted switch
  type: list
  elements: str
back_in_rotation:
  description: (switch, finishing an interrupted switch) The engines put back in the proxy's rotation.
  returned: when O(procedure=switch) finished an interrupted switch
  type: list
  elements: str
left_drained:
  description: (switch, finishing an interrupted switch) The engines that stay drained (they did not serve or failed the gate).
  returned: when O(procedure=switch) finished an interrupted switch
  type: list
  elements: str
downtime:
  description: Seconds without a model, the longest stretch with no answered request.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
  sample: 97.4
count_502:
  description: Requests answered 502 by the proxy during the whole switch.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
  sample: 0
count_503:
  description: Requests answered 503 (no engine serving; sent with Retry-After).
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
  sample: 180
failures_after_serving:
  description: Requests that started after C(first_serving) and were not answered 200.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
  sample: 0
count_502_after_serving:
  description: 502 answers among C(failures_after_serving).
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
  sample: 0
failures_after_serving_sample:
  description: Up to five of those requests, as the probe client logged them (C(t) and C(end) on the controller's clock).
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: list
  elements: dict
requests:
  description: Requests the probe client sent.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
  sample: 412
by_status:
  description: Request counts by HTTP status (C("0") = no HTTP answer).
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: dict
  sample: {"200": 230, "503": 182}
startup:
  description: Seconds from the old topology stopped to the first new engine serving, or null.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
  sample: 96.1
timeline:
  description: The timeline as seconds since C(start).
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: dict
outcome:
  description:
    - The outcome given, or V(ok_with_failures) when O(outcome=ok) and O(max_failures_after_serving) was exceeded.
    - With O(procedure), the outcome worked out; O(procedure=switch) adds V(healed) and V(heal_failed) for a re-run that
      finished an interrupted switch, and V(not_in_rotation) when the switch went through or had nothing to do but the
      proxy did not put every engine that should serve in its rotation (C(rotation_error) in O(plan)); the run fails.
    - A switch that went through while requests failed after its first new engine served is V(ok_with_failures) (the bar
      is 0); an engine host lost from the run gives V(host_lost); engine hosts whose topology records disagree with each
      other or with what they run after the switch give V(not_recorded). Each fails the run (RV(message)); the new
      topology is kept.
  returned: unless O(read_clock)
  type: str
  sample: ok
reason:
  description: The reason given, or for V(ok_with_failures) without one, how many requests failed.
  returned: unless O(read_clock)
  type: str
engines:
  description: The engines given.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: dict
tool_score:
  description: The tool score given.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
first_serving:
  description: Epoch seconds when the first new engine served.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
downtime_from:
  description: Epoch seconds the longest gap began.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
downtime_to:
  description: Epoch seconds the longest gap ended.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: float
count_200:
  description: Requests answered 200.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
count_no_answer:
  description: Requests with no HTTP answer at all.
  returned: unless O(procedure=switch) switched nothing (V(unchanged), V(healed), V(heal_failed))
  type: int
table:
  description:
    - The report as lines for people; with a line on the clocks when the proxy host's is more than a second off the
      controller's.
  returned: unless O(read_clock)
  type: list
  elements: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_report import (
    clock_summary, load_records, on_controller_clock, summarize, switch_report, upgrade_report)


def main():
    started = time.time()
    module = AnsibleModule(
        argument_spec=dict(
            probe_log=dict(type="path", required=True),
            timeline=dict(type="dict", default={}),
            engines=dict(type="dict", default={}),
            tool_score=dict(type="float"),
            outcome=dict(type="str", default="ok", choices=["ok", "ok_with_failures", "unchanged", "rolled_back", "failed"]),
            reason=dict(type="str"),
            max_failures_after_serving=dict(type="int"),
            procedure=dict(type="str", choices=["switch", "upgrade"]),
            # Read by the action plugin (plugins/action/switch_report.py), which passes O(hosts) instead.
            engine_hosts=dict(type="list", elements="str"),
            hosts=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                events=dict(type="dict", default={}),
                health=dict(type="str"),
                gate=dict(type="dict", default={}),
                reason=dict(type="str"),
                failed=dict(type="bool", default=False),
                upgraded=dict(type="bool", default=False),
                restore_failed=dict(type="bool", default=False),
                rollback_failed=dict(type="bool", default=False),
            )),
            plan=dict(type="dict", default={}),
            clock_offset=dict(type="float"),
            clock_offset_bound=dict(type="float"),
            read_clock=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("engine_hosts", "hosts"), ("procedure", "timeline"), ("procedure", "engines"), ("procedure", "tool_score"),
                            ("procedure", "reason"), ("procedure", "max_failures_after_serving")],
        supports_check_mode=True,
    )
    if module.params["read_clock"]:
        module.exit_json(changed=False, host_time=started)
    path = module.params["probe_log"]
    text = ""
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            module.fail_json(msg="Could not read the probe client's log %s: %s" % (path, exc))
    params = module.params
    # Every time from here on the controller's clock: the records, and now.
    offset = params["clock_offset"] or 0.0
    clock = clock_summary(offset, params["clock_offset_bound"])
    records = on_controller_clock(load_records(text), offset)
    if params["procedure"]:
        build = switch_report if params["procedure"] == "switch" else upgrade_report
        try:
            report = build(records, params["hosts"], params["plan"], time.time() - offset, clock)
        except (KeyError, TypeError, ValueError) as exc:
            module.fail_json(msg="Could not build the %s report from hosts and plan: %s %s"
                             % (params["procedure"], type(exc).__name__, exc))
    else:
        report = summarize(records, params["timeline"], params["engines"], params["tool_score"],
                           params["outcome"], params["reason"], params["max_failures_after_serving"], clock)
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
