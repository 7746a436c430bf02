# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The topology advisor's store of measurements on the controller (issue 38): pure logic, standard library only.

One JSON file (``results.json`` in the store directory) holds a list of results, one per (grouping, build):
``{grouping, build, run, measured_at, measured_load, busiest_hour, switch_seconds_without_model, kv_tokens}``
(``_topology_advisor`` reads them), or, while the advisor switches to a grouping, ``{grouping, build, run,
status: switching, switch_report_file}``. A switch that does not go through ends the playbook (ansible-core stops a
run once every host of a play failed, and switch.yml's report play has one host), so the entry stays ``switching``
and the next ranking settles it from the switch's own report (:func:`settle`): the candidate is reported as failed,
with the switch's reason, and never chosen.

The build is the tool gate's build id (``_tool_gate_build``: the model directory's small files, its weights by name
and size, the tool-call parser, the chat template and the vLLM image), the same on every engine host of a site that
serves one build; a new model or image is a new id, so only what changed is measured again.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_advisor as ta
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import partitions, split_sizes

SCHEMA = ta.RESULTS_SCHEMA
# Switch outcomes (_switch_report) after which the hosts run the grouping asked for.
SWITCHED = ("ok", "ok_with_failures", "unchanged", "healed", "not_in_rotation", "not_recorded")


class StoreError(ValueError):
    """The store cannot be read or the hosts give no single build."""


def read(text, path="the store"):
    """The results in a store file's ``text`` (empty text: none)."""
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as error:
        raise StoreError("%s is not JSON (%s): move it aside and the advisor starts a new one" % (path, error)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("results"), list):
        raise StoreError("%s is not a topology results store (schema %s): point workload_store_dir at another "
                         "directory or move the file aside" % (path, SCHEMA))
    for result in data["results"]:
        ta.key_of(result)
    return data["results"]


def dump(results):
    return json.dumps({"schema": SCHEMA, "results": sorted(results, key=ta.key_of)}, indent=2, sort_keys=True,
                      allow_nan=False) + "\n"


def site_build(builds):
    """One build id for the site from ``{host: tool gate build id}``; the hosts' ids differ when they serve different
    builds, and then the id names that mix (measurements of it are still its own)."""
    missing = sorted(host for host, build in builds.items() if not build)
    if not builds or missing:
        raise StoreError("no tool gate build id for %s: the playbook identifies it first (factory_floor.llm.tool_gate, "
                         "entry point build_id) on every engine host" % (", ".join(missing) or "any engine host"))
    ids = sorted(set(builds.values()))
    if len(ids) == 1:
        return ids[0]
    text = json.dumps(sorted(builds.items()))
    return "mixed-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def candidates(engine_hosts, num_attention_heads=None, num_key_value_heads=None):
    """The groupings ``engine_hosts`` hosts allow as the collection runs them (engine groups): every host its own
    replica first, then fewer and larger groups, one tensor-parallel group of them all last; only the group sizes the
    model's heads allow (``_engine_groups.split_sizes``; unknown heads allow every size)."""
    if engine_hosts < 1:
        raise StoreError("no engine host in the inventory's engine group")
    sizes = split_sizes(num_attention_heads, num_key_value_heads, most=engine_hosts)
    found = sorted(partitions(engine_hosts, sizes), key=lambda p: (-len(p), p))
    return [{"sizes": option} for option in found]


def _stored(results, grouping, build):
    for result in results:
        if ta.key_of(result) == (grouping, str(build)):
            return result
    return None


def plan(results, build, current, engine_hosts, remeasure=False, heads=(None, None)):
    """What an advisor window does: the grouping it starts on, the other it switches to, and which of them it
    measures (none that has a result for ``build``, unless ``remeasure``). ``results`` as :func:`settle` leaves
    them: a switch that reported its failure is not tried again, an interrupted one is. ``heads``: the model's
    attention and key/value heads (:func:`candidates`).

    The window switches with switch.yml, between the two groupings two hosts allow; with more hosts it replays the
    grouping in place only (``other`` None): move_groups.yml moves between the others, and workload_replay.yml after
    each move records it."""
    names = [ta.grouping_name(c["sizes"]) for c in candidates(engine_hosts, *heads)]
    if current not in names:
        raise StoreError("the engines run %s, which is none of the groupings the advisor compares (%s): switch to "
                         "one of them first" % (current, ", ".join(names)))
    others = [n for n in names if n != current] if engine_hosts == 2 else []
    found = {n: _stored(results, n, build) for n in names}
    # A grouping whose switch failed for this build (its report says so) is not tried again unless asked: the next
    # try would cost another outage for what the table already reports as failed. One whose run was interrupted
    # before its switch reported (settle()'s ``interrupted``; a "switching" entry not settled yet counts as one)
    # measured nothing and is tried again.
    interrupted = {n for n in names if found[n] is not None and (found[n].get("interrupted")
                                                                 or found[n].get("status") == "switching")}
    failed = [n for n in names if found[n] is not None and found[n].get("failed") and n not in interrupted]
    need = {n: remeasure or found[n] is None or n in interrupted for n in names}
    return {"build": str(build), "start": current, "other": others[0] if others else None, "candidates": names,
            "measure_start": need[current], "measure_other": bool(others) and need[others[0]],
            "stored": [n for n in names if found[n] is not None and n not in failed and n not in interrupted],
            "failed": failed}


def pending(results, grouping, build, run, report_file, at):
    """``results`` with a ``switching`` entry for ``grouping`` (replacing its old result for ``build``)."""
    return ta.store(results, {"grouping": grouping, "build": str(build), "run": run, "status": "switching",
                              "switch_report_file": report_file, "measured_at": at})


def measured(results, grouping, build, run, at, measured_load, busiest_hour=None, switch_report=None,
             kv_tokens=None):
    """``results`` with this grouping's replays for ``build``; the switch's seconds without a model come from its
    report (``_switch_report``'s ``downtime``) when this run switched to it."""
    seconds = None
    if switch_report and switch_report.get("outcome") in SWITCHED and switch_report.get("downtime") is not None:
        seconds = float(switch_report["downtime"])
    result = {"grouping": grouping, "build": str(build), "run": run, "measured_at": at,
              "measured_load": measured_load, "busiest_hour": busiest_hour, "switch_seconds_without_model": seconds,
              "kv_tokens": kv_tokens}
    before = _stored(results, grouping, build) or {}
    if before.get("status") == "switching" and before.get("run") == run:
        # The switch this run made to get here: its report stays findable next to the figures.
        result["switch_report_file"] = before.get("switch_report_file")
    return ta.store(results, result)


def settle(results, read_report):
    """``results`` with every ``switching`` entry turned into a failed one: its switch's saved report
    (``read_report(path)``, None when there is none) says why; with no report the run was interrupted
    (``interrupted``: no measurement - the next window measures that grouping again,
    ``_topology_advisor.to_measure``), as when the switch went through and no replay was recorded after it."""
    settled = []
    for result in results:
        if result.get("status") != "switching":
            settled.append(result)
            continue
        report = read_report(result.get("switch_report_file") or "")
        interrupted = report is None or report.get("outcome") == "ok"
        if report is None:
            why = ("run %s ended before its replay, with no switch report at %s (interrupted, or the switch "
                   "was refused before it started)" % (result.get("run"), result.get("switch_report_file")))
        elif interrupted:
            why = ("run %s switched (outcome ok) but recorded no replay there (the replay failed, or the run ended)"
                   % result.get("run"))
        else:
            said = report.get("reason") or report.get("message") or "see its report"
            why = "outcome %s (run %s): %s" % (report.get("outcome"), result.get("run"), said)
        entry = dict(result, failed=why, interrupted=True) if interrupted else dict(result, failed=why)
        del entry["status"]
        settled.append(entry)
    return settled


def advise(results, profile, build, current, engine_hosts, max_model_len=None, margin=ta.DEFAULT_MARGIN,
           heads=(None, None)):
    """``_topology_advisor.rank()`` over the candidates (``heads`` as :func:`plan`'s), with the KV tokens the runs
    measured where they did."""
    options = []
    for option in candidates(engine_hosts, *heads):
        stored = _stored(results, ta.grouping_name(option["sizes"]), build) or {}
        options.append(dict(option, kv_tokens=stored.get("kv_tokens")))
    site = ta.site_of(profile, max_model_len) if profile else {}
    advice = ta.rank(results, site, options, build, current, margin)
    if not profile:
        advice["recommendation"]["reasons"].append(
            "no workload profile: the long-context need is unknown (run workload_profile.yml first)")
    return advice


def profile_lines(profile):
    """A short summary of a workload profile, for the playbook to print."""
    total = profile.get("total") or {}
    prompt = total.get("prompt_length_tokens") or {}
    output = total.get("output_length_tokens") or {}
    concurrency = total.get("concurrency_requests") or {}
    lines = ["window %s s from %s, %d engine(s) counted%s" % (
        total.get("window_seconds"), profile.get("started"), profile.get("engines_counted") or 0,
        "" if profile.get("complete") else " (incomplete: see the notes)"),
        "arrivals %s requests/s, %s finished; busiest hour %s" % (
            total.get("arrival_rate_requests_per_s"), total.get("requests_finished"), total.get("busiest_hour_utc")),
        "prompt tokens p50/p95 %s/%s, output tokens p50/p95 %s/%s" % (
            prompt.get("p50"), prompt.get("p95"), output.get("p50"), output.get("p95")),
        "in flight p50/p95/max %s/%s/%s; prefix-cache hit fraction %s" % (
            concurrency.get("p50"), concurrency.get("p95"), concurrency.get("max"),
            total.get("prefix_cache_hit_fraction"))]
    return lines + ["note: %s" % note for note in profile.get("notes") or ()]


def replay_lines(grouping, replay):
    """One line per replay total."""
    total = (replay or {}).get("total") or {}
    return ["%s: %s tokens/s, %s requests/min, TTFT p95 %s s, TPOT p95 %s s, %s of %s requests ok, errors %s" % (
        grouping, total.get("tokens_per_s"), total.get("requests_per_min"),
        (total.get("ttft_seconds") or {}).get("p95"), (total.get("tpot_seconds") or {}).get("p95"),
        total.get("requests_ok"), total.get("requests_planned"), total.get("errors_by_status") or 0)]
