#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxy_rotation
short_description: Drain engines from the nginx proxy, or wait until they are in rotation, as its membership checker says
version_added: 0.1.0
description:
  - "On a proxy host of the C(factory_floor.llm.nginx_proxy) role. Reads the membership checker's state file
    (O(state_file): C(in_rotation), C(statuses), C(drained), ...) once a second, up to O(timeout) seconds."
  - "With O(drain): marks those engines drained (O(drain_state=present): a file per engine in O(drain_dir), holding
    O(drain_holder) as C({\"holder\": ...}) when one is given) or lifts their drains (V(absent)), then waits until the
    checker has applied it. Refused before anything changes: O(drain) that is not a list, and (V(present)) a name the
    checker does not know - its drain file would be ignored, and the drain would look applied while every engine stays
    in rotation."
  - "Without O(drain): waits until every engine of O(expect_in_rotation) is in rotation (O(wait_for=all)), failing
    with what the checker sees; or until any of them is (O(wait_for=any)), never failing - the caller decides."
  - "With O(holders): reads only - which engines have a drain file and who drained each (RV(drained)); a drain counts
    from the moment its file exists, whether or not the checker has applied it yet."
  - In check mode no drain file changes and no drain is waited for; the state is read as outside check mode.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Says which drain files it would change; reads the state as outside check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  state_file:
    description: The membership checker's state file (C(_nginx_proxy_state_file)).
    type: path
    required: true
  timeout:
    description: Seconds to wait (C(nginx_proxy_rotation_timeout)); the file is read once a second.
    type: int
    default: 30
  expect_in_rotation:
    description: Inventory names of engines to wait for (C(nginx_proxy_expect_in_rotation)).
    type: list
    elements: str
    default: []
  wait_for:
    description: Without O(drain), wait for V(all) of O(expect_in_rotation) (fails on timeout) or V(any) (never fails).
    type: str
    choices: [all, any]
    default: all
  drain:
    description:
      - Inventory names of engines to drain or put back (C(nginx_proxy_drain)); must be a YAML list (raw, so that a
        string is refused rather than split). Left out, nothing is drained.
    type: raw
  drain_state:
    description: V(present) takes O(drain) out of rotation, V(absent) puts them back (C(nginx_proxy_drain_state)).
    type: str
    choices: [present, absent]
    default: present
  drain_holder:
    description: Who drains (C(nginx_proxy_drain_holder)), written into the drain files; empty writes empty files.
    type: str
    default: ""
  drain_dir:
    description: Where the drain files are (C(_nginx_proxy_drain_dir)); each is C(root:root), mode C(0644).
    type: path
    default: /etc/factory-floor/drain
  holders:
    description: Read the drain files' holders (RV(drained)) and the state, nothing else.
    type: bool
    default: false
  host:
    description: The proxy host's inventory name, for the messages.
    type: str
    default: ""
  checker_unit:
    description: The membership checker's systemd unit, for the messages.
    type: str
    default: factory-floor-upstream.service
"""

EXAMPLES = r"""
- name: Take spark-a out of rotation, naming who drained it
  factory_floor.llm.proxy_rotation:
    state_file: /run/factory-floor/upstream.json
    drain: [spark-a]
    drain_holder: switch
    host: "{{ inventory_hostname }}"

- name: Wait until spark-a and spark-b are in rotation
  factory_floor.llm.proxy_rotation:
    state_file: /run/factory-floor/upstream.json
    expect_in_rotation: [spark-a, spark-b]
    timeout: 30
  register: __rotation
"""

RETURN = r"""
changed:
  description: Whether a drain file was written or removed (in check mode, would be).
  returned: always
  type: bool
  sample: true
rotation:
  description:
    - The checker's state as last read (C(mode), C(members), C(in_rotation), C(statuses), C(drained), C(updated));
      empty when there is none.
  returned: always
  type: dict
  sample: {mode: replicas, in_rotation: [spark-a], drained: [spark-b], statuses: {spark-a: serving, spark-b: drained}}
drained:
  description:
    - (O(holders)) Per engine with a drain file (its inventory name), who drained it - the O(drain_holder) the file
      names, the text of a file without one, "" for an empty file (an operator's C(touch)).
  returned: with holders
  type: dict
  sample: {spark-a: switch-model, spark-b: ""}
found:
  description: Whether what was waited for came (always true unless O(wait_for=any) timed out).
  returned: always
  type: bool
  sample: true
"""

import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_rotation as pr


def wait(path, timeout, done):
    """The state once ``done(state)``, or the last one read after ``timeout`` seconds; with ``found``."""
    deadline = time.monotonic() + max(0, timeout)
    while True:
        state = pr.read_state(path)
        if done(state):
            return state, True
        if time.monotonic() >= deadline:
            return state, False
        time.sleep(1)


def mark(module, path, present, holder):
    """Write, touch or remove one drain file; whether it changed (would change, in check mode)."""
    exists = os.path.lexists(path)
    if not present:
        if exists and not module.check_mode:
            os.remove(path)
        return exists
    changed = not exists
    if holder:
        content = pr.holder_content(holder).encode("utf-8")
        if exists:
            with open(path, "rb") as handle:
                changed = handle.read() != content
        if changed and not module.check_mode:
            handle, temp = tempfile.mkstemp(dir=os.path.dirname(path))
            with os.fdopen(handle, "wb") as out:
                out.write(content)
            module.atomic_move(temp, path)
    elif not exists and not module.check_mode:
        open(path, "ab").close()  # an empty file; an existing one keeps its content and times
    if module.check_mode and not os.path.exists(path):
        return True
    changed = module.set_owner_if_different(path, "root", changed)
    changed = module.set_group_if_different(path, "root", changed)
    return module.set_mode_if_different(path, "0644", changed)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_file=dict(type="path", required=True),
            timeout=dict(type="int", default=30),
            expect_in_rotation=dict(type="list", elements="str", default=[]),
            wait_for=dict(type="str", choices=["all", "any"], default="all"),
            drain=dict(type="raw"),
            drain_state=dict(type="str", choices=["present", "absent"], default="present"),
            drain_holder=dict(type="str", default=""),
            drain_dir=dict(type="path", default="/etc/factory-floor/drain"),
            host=dict(type="str", default=""),
            checker_unit=dict(type="str", default="factory-floor-upstream.service"),
            holders=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path, timeout, unit, host = params["state_file"], params["timeout"], params["checker_unit"], params["host"]
    drain = params["drain"]
    if params["holders"]:
        module.exit_json(changed=False, drained=pr.read_holders(params["drain_dir"]), rotation=pr.read_state(path) or {},
                         found=True)
    if drain is None:
        expected, wait_for = params["expect_in_rotation"], params["wait_for"]
        # "any" of nothing asks nothing: one read. "all" waits for the state file at least.
        state, found = wait(path, timeout if expected or wait_for == "all" else 0,
                            lambda seen: pr.expected_in(seen, expected, wait_for))
        if not found and wait_for == "all":
            module.fail_json(msg=pr.not_in_rotation(state, expected, host, timeout, unit), rotation=state or {},
                             found=False)
        module.exit_json(changed=False, rotation=state or {}, found=found)
    if not pr.is_list(drain):
        module.fail_json(msg=pr.not_a_list(drain))
    drain = [str(name) for name in drain]
    present = params["drain_state"] == "present"
    state = pr.read_state(path)
    if present and state is not None:
        refusal = pr.unknown_engines(drain, state, host)
        if refusal:
            module.fail_json(msg=refusal, rotation=state)
    changed = False
    for name in drain:
        changed = mark(module, os.path.join(params["drain_dir"], name), present, params["drain_holder"]) or changed
    if module.check_mode:  # nothing was written: nothing to wait for
        module.exit_json(changed=changed, rotation=state or {}, found=True)
    state, found = wait(path, timeout, lambda seen: pr.drain_applied(seen, drain, present))
    if not found:
        module.fail_json(msg=pr.drain_not_applied(state, drain, present, host, timeout, unit), changed=changed,
                         rotation=state or {}, found=False)
    module.exit_json(changed=changed, rotation=state, found=True)


if __name__ == "__main__":
    main()
