#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: switch_report
short_description: What a topology switch looked like from a client's side
version_added: 0.1.0
description:
  - Reads the log of the probe client that asked the model through the proxy during a switch (one JSON
    line per request, written by the collection's C(_probe_client.py)) and the switch's timeline, and
    returns the seconds without a model, every 502/503, failures after the first new engine served, and
    a table for people.
  - The longest gap is measured from the end of the last answered request (HTTP 200) before it to the end
    of the first one after it.
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
downtime:
  description: Seconds without a model, the longest stretch with no answered request.
  returned: always
  type: float
  sample: 97.4
count_502:
  description: Requests answered 502 by the proxy during the whole switch.
  returned: always
  type: int
  sample: 0
count_503:
  description: Requests answered 503 (no engine serving; sent with Retry-After).
  returned: always
  type: int
  sample: 180
failures_after_serving:
  description: Requests that started after C(first_serving) and were not answered 200.
  returned: always
  type: int
  sample: 0
count_502_after_serving:
  description: 502 answers among C(failures_after_serving).
  returned: always
  type: int
  sample: 0
failures_after_serving_sample:
  description: Up to five of those requests, as the probe client logged them.
  returned: always
  type: list
  elements: dict
requests:
  description: Requests the probe client sent.
  returned: always
  type: int
  sample: 412
by_status:
  description: Request counts by HTTP status (C("0") = no HTTP answer).
  returned: always
  type: dict
  sample: {"200": 230, "503": 182}
startup:
  description: Seconds from the old topology stopped to the first new engine serving, or null.
  returned: always
  type: float
  sample: 96.1
timeline:
  description: The timeline as seconds since C(start).
  returned: always
  type: dict
outcome:
  description: The outcome given, or V(ok_with_failures) when O(outcome=ok) and O(max_failures_after_serving) was exceeded.
  returned: always
  type: str
  sample: ok
reason:
  description: The reason given, or for V(ok_with_failures) without one, how many requests failed.
  returned: always
  type: str
engines:
  description: The engines given.
  returned: always
  type: dict
tool_score:
  description: The tool score given.
  returned: always
  type: float
first_serving:
  description: Epoch seconds when the first new engine served.
  returned: always
  type: float
downtime_from:
  description: Epoch seconds the longest gap began.
  returned: always
  type: float
downtime_to:
  description: Epoch seconds the longest gap ended.
  returned: always
  type: float
count_200:
  description: Requests answered 200.
  returned: always
  type: int
count_no_answer:
  description: Requests with no HTTP answer at all.
  returned: always
  type: int
table:
  description: The report as lines for people.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._switch_report import load_records, summarize


def main():
    module = AnsibleModule(
        argument_spec=dict(
            probe_log=dict(type="path", required=True),
            timeline=dict(type="dict", default={}),
            engines=dict(type="dict", default={}),
            tool_score=dict(type="float"),
            outcome=dict(type="str", default="ok", choices=["ok", "ok_with_failures", "unchanged", "rolled_back", "failed"]),
            reason=dict(type="str"),
            max_failures_after_serving=dict(type="int"),
        ),
        supports_check_mode=True,
    )
    path = module.params["probe_log"]
    text = ""
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            module.fail_json(msg="Could not read the probe client's log %s: %s" % (path, exc))
    report = summarize(load_records(text), module.params["timeline"], module.params["engines"],
                       module.params["tool_score"], module.params["outcome"], module.params["reason"],
                       module.params["max_failures_after_serving"])
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
