# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool gate's stored scores on the controller (factory_floor.llm.tool_gate_scores). Pure logic, standard
library only.

One JSON file per build, suite digest and host (``<build[:16]>.<digest[:16]>.<host>.json``) holds that build's last
run that counts there: an incumbent's measurement or a candidate that passed. A candidate that failed is kept for its
raw answers under ``failed/``, which the lookup's glob does not reach; a failed record an older version wrote into a
score file (``passed: false``) is left out.
"""

from __future__ import annotations

import datetime
import glob
import json
import os

# What a record keeps of the run (factory_floor.llm.tool_call_test's result), under the same names.
RUN_KEYS = ("url", "model", "score", "total", "passed_count", "by_category", "failed_cases", "latency_mean",
            "suite_name", "suite_digest")


def pattern(store_dir, build_id, suite_digest, id_chars=16):
    """The glob of build ``build_id``'s score files for suite ``suite_digest``, every host's."""
    return "%s/%s.%s.*.json" % (store_dir, build_id[:id_chars], suite_digest[:id_chars])


def latest(records):
    """The record that counts: the latest by ``measured_epoch`` of those not marked failed, or None."""
    counted = [one for one in records if "passed" not in one] + [
        one for one in records if "passed" in one and one["passed"] is not False]
    # float(): a record written by an Ansible that rendered templates as text holds its epoch as a string.
    return sorted(counted, key=lambda one: float(one.get("measured_epoch") or 0))[-1] if counted else None


def lookup(store_dir, build_id, suite_digest, id_chars=16, hosts=None):
    """The stored score of ``build_id`` with ``suite_digest`` (any host, or one of ``hosts``), or None."""
    records = []
    for path in sorted(glob.glob(pattern(store_dir, build_id, suite_digest, id_chars))):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                records.append(json.load(handle))
    if hosts is not None:
        records = [one for one in records if one.get("host") in set(hosts)]
    return latest(records)


def known(build_id, found, min_score, admit=True, id_chars=16):
    """The fact ``tool_gate_known``: whether candidate build ``build_id`` passed the gate on this site's engine hosts.

    ``found``: :func:`lookup` of the build with the suite, limited to the site's engine hosts (None: nothing stored
    there) - the score a switch finishing an interrupted one holds the build to. It counts when its score reaches
    ``min_score`` (tool_gate_min_score) and is above 0: a candidate that passed, or the build measured while it served.
    ``admit``: tool_gate_admit_known_builds (false: never counts). ``known`` is the decision, ``why`` its reason in
    words; ``score`` (percent of the suite's cases), ``measured_at`` (UTC), ``host`` and ``role`` are the record's.
    """
    fact = {"build_id": build_id, "known": False, "admit": bool(admit), "score": None, "measured_at": "", "host": "",
            "role": ""}
    name = "the build %s" % build_id[:id_chars]
    if not admit:
        return dict(fact, why="tool_gate_admit_known_builds is false: %s is gated before it joins the proxy" % name)
    if found is None:
        return dict(fact, why="%s has no score stored on this site's engine hosts with this suite (never gated here)"
                    % name)
    fact.update(score=found.get("score"), measured_at=found.get("measured_at") or "", host=found.get("host") or "",
                role=found.get("role") or "")
    score, least = float(found.get("score") or 0), float(min_score or 0)
    if score < least or score <= 0:
        return dict(fact, why="%s's last stored score here, %s (%s), is below tool_gate_min_score %s or 0"
                    % (name, found.get("score"), fact["measured_at"] or "undated", min_score))
    done = ("passed the gate here" if fact["role"] == "candidate" else "was scored here while it served")
    return dict(fact, known=True, why="%s %s on %s (%s) with score %s" % (
        name, done, fact["measured_at"] or "an undated run", fact["host"] or "?", found.get("score")))


def record(build, run, host, role, passed=None, now=None):
    """What is stored of one run of ``build`` (``{id, parts}``) on ``host``: ``role`` incumbent or candidate,
    ``passed`` the candidate's verdict (None for an incumbent), ``now`` an aware datetime (default: now)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    found = {"build_id": build["id"], "build": build["parts"], "host": host, "role": role,
             "passed": passed if role == "candidate" else None,
             "measured_at": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "measured_epoch": now.timestamp()}
    found.update((key, run.get(key)) for key in RUN_KEYS)
    return found


def text(one):
    """A record as its file holds it (Ansible's ``to_nice_json``, and a final line break)."""
    return json.dumps(one, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
