#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


DOCUMENTATION = r"""
---
module: maintenance_lock
short_description: Take or release an engine host's maintenance lock, only for the run that owns it
version_added: 0.1.0
description:
  - The maintenance lock is the file the C(factory_floor.llm.vllm_watchdog) role's watchdog reads (C(vllm_watchdog_lock_file),
    by default C(/run/factory-floor-maintenance)); while it exists and has not expired the watchdog takes no action. The switch
    and model-upgrade playbooks hold it while they stop and start engines.
  - The file holds one JSON object, C({"holder", "since", "run", "by", "expires"}); the watchdog reads C(holder), C(since) and
    C(expires) and honours any content until it expires (past C(expires) on this host's clock; content without one,
    C(vllm_watchdog_lock_stale_after) seconds after the file was last written).
  - O(state=present) creates the lock (atomically, so two runs cannot both create it), rewrites it when this run (O(run))
    already holds it, or takes it over when another run's lock has passed its C(expires). It fails, changing nothing, when
    another run holds it and it has not expired, naming the holder, since when and until when, and saying to remove the file
    if that run is dead. Content without C(expires) (a file written by hand, by C(touch), or by an older version of the
    playbooks) never expires; content without C(run) is never this run's.
  - O(state=absent) removes the lock only when this run wrote it (its C(run) is O(run)); anyone else's is left in place
    with a warning.
  - In check mode it reads the lock and fails the same way when another run holds it, writing nothing; the playbooks run it
    so in their preflight.
  - O(state=query) only reads the lock and says who holds it (C(playbooks/status.yml)); it never fails on a held lock.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
    details: Taking a lock this run already holds, with the same O(holder), O(since) and O(by), leaves it as it is (its
      expiry is not pushed back); releasing a lock that is gone or someone else's changes nothing.
options:
  path:
    description:
      - The lock file on this host; give the watchdog's C(vllm_watchdog_lock_file).
      - Its directory must exist (C(/run) does).
    type: path
    default: /run/factory-floor-maintenance
  path_of:
    description:
      - An inventory host whose lock file to use instead of O(path), for a lock taken or released on each host in turn
        (C(delegate_to)). The module's action plugin reads it from C(hostvars) on the controller - the file that host
        noted as C(maintenance_window_lock_path) (the C(factory_floor.llm.maintenance_window) role's C(open) entry
        point), else O(path).
    type: str
  state:
    description:
      - V(present) takes the lock for O(run); V(absent) releases it if O(run) holds it; V(query) reads it and changes
        nothing (RV(state) V(free), V(held), V(expired), or V(ours) when O(run) wrote it).
    type: str
    choices: [present, absent, query]
    default: present
  run:
    description:
      - The id of the run that takes or releases the lock, the same on every host and in every step of one playbook run
        (for example its UTC start time and a random suffix). Only this run may rewrite or remove the lock it wrote.
      - Required with O(state=present) and O(state=absent).
    type: str
  holder:
    description:
      - What holds the lock, for people and the watchdog's log (for example V(switch-model), V(switch-to-split)).
      - Required with O(state=present).
    type: str
  by:
    description:
      - Who runs it, for people (for example C(user@controller)).
    type: str
    default: ""
  since:
    description:
      - When the run started, epoch seconds (float). Defaults to now, from this host's clock.
    type: float
  ttl:
    description:
      - Seconds after the lock is written when another run may take it over, the writer then being presumed dead
        (C(expires) = now + O(ttl), from this host's clock). Past it the watchdog acts again (a dead run's lock does not
        switch protection off). Keep it above the longest run.
    type: float
    default: 14400
  mode:
    description:
      - Permissions of the lock file (octal string).
    type: str
    default: "0644"
"""

EXAMPLES = r"""
- name: Check, before anything changes, that no other run holds the lock
  factory_floor.llm.maintenance_lock:
    path: "{{ maintenance_window_lock_file }}"
    run: "{{ run_id }}"
    holder: switch-model
  check_mode: true
  changed_when: false

- name: Who holds this host's maintenance lock, if anyone (reads only)
  factory_floor.llm.maintenance_lock:
    path: /run/factory-floor-maintenance
    state: query
  register: lock

- name: Take the maintenance lock (the watchdog stands down)
  factory_floor.llm.maintenance_lock:
    path: /run/factory-floor-maintenance
    run: "{{ run_id }}"
    holder: switch-model
    by: ops@controller
    since: "{{ run_start }}"
    ttl: 14400

- name: Release it, if it is still this run's
  factory_floor.llm.maintenance_lock:
    path: /run/factory-floor-maintenance
    run: "{{ run_id }}"
    state: absent
"""

RETURN = r"""
state:
  description:
    - The lock as found, compared with O(run) - V(free) (no file), V(ours) (written by O(run)), V(expired) (another run's,
      past its C(expires); taken over with O(state=present), left with O(state=absent)) or V(held) (another run's, or of
      unknown content, not expired; left with O(state=absent), a failure with O(state=present)).
  returned: always
  type: str
  sample: free
previous:
  description: The lock file's fields before the task, or null when there was none.
  returned: always
  type: dict
  contains:
    holder:
      description: What holds it (for content that is not a JSON object, its first 100 characters).
      type: str
      sample: switch-model
    since:
      description: When the holding run started, epoch seconds.
      type: float
      sample: 1795950000.0
    run:
      description: The id of the run that wrote it.
      type: str
      sample: 20261129T110000Z-3f9a1c
    by:
      description: Who ran it.
      type: str
      sample: ops@controller
    expires:
      description: Epoch seconds after which another run may take it over; null for never.
      type: float
      sample: 1795964400.0
    path:
      description: The lock file.
      type: str
      sample: /run/factory-floor-maintenance
    mtime:
      description: When the file was last written, epoch seconds.
      type: float
      sample: 1795950012.4
  sample:
    holder: switch-model
    since: 1795950000.0
    run: 20261129T110000Z-3f9a1c
    by: ops@controller
    expires: 1795964400.0
    path: /run/factory-floor-maintenance
    mtime: 1795950012.4
holder:
  description:
    - With O(state=query), who holds the lock, since when and until when, in words (C(switch-to-replicas (run
      20261129T110000Z-3f9a1c, by ops@controller), since 2026-11-29 11:00:00 UTC (10 min ago); expires ...)); null when
      there is no lock.
  returned: with O(state=query)
  type: str
  sample: >-
    switch-model (run 20261129T110000Z-3f9a1c, by ops@controller), since 2026-11-29 11:00:00 UTC (10 min ago);
    expires 2026-11-29 15:00:00 UTC (in 3.8 h)
lock:
  description: The lock file's fields after the task (as in RV(previous)), or null when there is none.
  returned: always
  type: dict
  sample:
    holder: switch-model
    since: 1795950000.0
    run: 20261129T110000Z-3f9a1c
    by: ops@controller
    expires: 1795964400.0
    path: /run/factory-floor-maintenance
    mtime: 1795950012.4
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils._host import maintenance_lock as ml


def _diff_text(lock):
    if lock is None:
        return ""
    return ml.render(lock.get("holder"), lock.get("since"), lock.get("run"), lock.get("by"), lock.get("expires"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/run/factory-floor-maintenance"),
            # Read by the action plugin (plugins/action/maintenance_lock.py), which passes path instead.
            path_of=dict(type="str"),
            state=dict(type="str", choices=["present", "absent", "query"], default="present"),
            run=dict(type="str"),
            holder=dict(type="str"),
            by=dict(type="str", default=""),
            since=dict(type="float"),
            ttl=dict(type="float", default=14400.0),
            mode=dict(type="str", default="0644"),
        ),
        required_if=[("state", "present", ["holder", "run"]), ("state", "absent", ["run"])],
        supports_check_mode=True,
    )
    params = module.params
    path, run = params["path"], params["run"]
    now = time.time()
    if params["state"] == "query":
        try:
            lock = ml.read(path)
        except OSError as exc:
            module.fail_json(msg="Could not read the maintenance lock %s: %s" % (path, exc), changed=False)
        module.exit_json(changed=False, state=ml.state_of(lock, run, now), previous=lock, lock=lock,
                         holder=ml.describe(lock, now) if lock is not None else None)
    if not run.strip():
        module.fail_json(msg="run must be a non-empty id of this playbook run; the lock of a run without an id could "
                             "never be told apart from another's")
    if params["ttl"] <= 0:
        module.fail_json(msg="ttl must be more than 0 seconds, got %g" % params["ttl"])
    try:
        mode = int(params["mode"], 8)
    except ValueError:
        module.fail_json(msg="mode must be an octal string such as 0644, got %r" % params["mode"])
    check = module.check_mode
    try:
        if params["state"] == "present":
            since = params["since"] if params["since"] is not None else now
            outcome = ml.take(path, params["holder"], since, run, params["by"], now + params["ttl"], now,
                              mode=mode, check=check)
            after = ml.read(path) if not check else (
                dict(holder=params["holder"], since=since, run=run, by=params["by"], expires=now + params["ttl"],
                     path=path, mtime=now) if outcome["changed"] else outcome["previous"])
        else:
            outcome = ml.release(path, run, now, check=check)
            after = ml.read(path) if not check else (None if outcome["changed"] else outcome["previous"])
    except ml.LockHeld as exc:
        module.fail_json(msg=str(exc), state=ml.HELD, previous=exc.lock, lock=exc.lock, changed=False)
    except OSError as exc:
        module.fail_json(msg="Could not %s the maintenance lock %s: %s"
                         % ("take" if params["state"] == "present" else "release", path, exc), changed=False)
    if params["state"] == "absent" and outcome["state"] in (ml.HELD, ml.EXPIRED):
        module.warn("Left the maintenance lock %s in place: it is not this run's (%s). It is held by %s."
                    % (path, run, ml.describe(outcome["previous"], now)))
    if params["state"] == "present" and outcome["state"] == ml.EXPIRED and outcome["changed"]:
        module.warn("Took over the expired maintenance lock %s, held by %s."
                    % (path, ml.describe(outcome["previous"], now)))
    result = dict(changed=outcome["changed"], state=outcome["state"], previous=outcome["previous"], lock=after)
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = dict(before=_diff_text(outcome["previous"]), after=_diff_text(after),
                              before_header=path, after_header=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
