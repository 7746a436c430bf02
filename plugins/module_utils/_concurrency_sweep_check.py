# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The concurrency tuning's decisions around the sweep (the ``tune_concurrency`` role, ``playbooks/tune_concurrency.yml``):
before it, what is asked and the cap and batch budget the engine runs with (:func:`plan`); after it, the report, the
saved figures and the line written to the inventory (:func:`report`).

Pure functions over plain data: the ``tune_*`` variables as the task sees them, the engine units'
``vllm_engine_info`` results and the ``concurrency_sweep`` result. The messages are the ones the role's tasks said
before, in the same words.
"""

from __future__ import annotations

import json
import re

from ansible_collections.factory_floor.llm.plugins.module_utils import _concurrency_spec as spec
from ansible_collections.factory_floor.llm.plugins.module_utils._jinja_values import jinja_int
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

# Who wrote the inventory's vllm_max_num_seqs line: the mark that line has always carried (a checkout's name of the
# playbook, whichever way it ran), not a playbook to run - so not playbook_name's.
WRITER = "tune-concurrency.yml"
BATCH_UNSET = "unset (vLLM's default: 2048 on GB10, where it cannot read the device's memory)"


def _truthy(value):
    """Ansible's ``bool`` filter on a variable."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on", "y", "t")


def _unset(value):
    return value is None or value == ""


def running_engine(results):
    """The ``vllm_engine_info`` result (one per engine unit, ``item`` its unit) of the unit whose process runs; {}."""
    for result in results or []:
        if isinstance(result, dict) and result.get("running"):
            return result
    return {}


def engine_flag(running, flag, inventory):
    """The value of ``--<flag>`` on the running engine's command line, else the inventory's (``None`` when unset)."""
    found = re.findall("--%s[= ]([0-9]+)" % re.escape(flag), " ".join(str(arg) for arg in running.get("args_now") or []))
    return found[0] if found and found[0] else (inventory if not _unset(inventory) else None)


def group_size(running, v):
    """``(tensor_parallel_size, source)`` of the engine the sweep loads - the size of its engine group, which the saved
    figures are matched to (``_kv_cache_plan.measured_by_size``): the running engine's ``--tensor-parallel-size``
    (vLLM's default 1 when its command line has none), else the inventory's - the host's group in
    ``site_engine_groups``, else ``vllm_split_tensor_parallel_size`` (default 2) on a ``split``, else 1."""
    if running:
        flag = engine_flag(running, "tensor-parallel-size", None)
        unit = running.get("item") or "the running engine"
        if flag:
            return jinja_int(flag), "%s --tensor-parallel-size" % unit
        return 1, "%s: no --tensor-parallel-size, vLLM's default" % unit
    host = v.get("inventory_hostname")
    for group in v.get("site_engine_groups") or []:
        if host in (group or []):
            return len(group), "site_engine_groups"
    if v.get("topology") == "split":
        return jinja_int(v.get("vllm_split_tensor_parallel_size") or 2), "vllm_split_tensor_parallel_size"
    return 1, "topology %s" % (v.get("topology") or "replicas")


def plan(v, results):
    """What the sweep runs with, and its refusals: ``{errors, url, cap, cap_source, batched, batch_note,
    speculative}``. ``v``: the tune_* variables, inventory_hostname, engines (the engine group's hosts),
    vllm_max_num_seqs, vllm_max_num_batched_tokens, vllm_speculative_config, url (the replica's own endpoint),
    nginx_proxy_backend_address, playbook_dir. ``speculative``: the num_speculative_tokens dimension's plan
    (``_concurrency_spec.plan``; its refusals follow the others)."""
    host = v.get("inventory_hostname")
    levels, profiles = v.get("tune_concurrency") or [], v.get("tune_profiles") or []
    running = running_engine(results)
    cap = engine_flag(running, "max-num-seqs", v.get("vllm_max_num_seqs"))
    batched = engine_flag(running, "max-num-batched-tokens", v.get("vllm_max_num_batched_tokens"))
    load_host = v.get("tune_load_host") or host
    url = v.get("url") or ""
    if load_host != host:
        url = "http://%s:%s" % (v.get("nginx_proxy_backend_address") or host, url.rsplit(":", 1)[-1])
    deploy = playbook_name("deploy.yml", v.get("playbook_dir"))
    errors = []
    if not (host in (v.get("engines") or []) and levels and min(jinja_int(level) for level in levels) >= 1 and profiles
            and not set(profiles) - {"short", "long"} and v.get("tune_target_metric") in ("e2e", "ttft", "tpot")
            and v.get("tune_write_path")):
        errors.append("tune_host must be a host of group gb10 (got %s); tune_concurrency a list of integers >= 1 (got "
                      "%s); tune_profiles some of short, long (got %s); tune_target_metric e2e, ttft or tpot (got %s)."
                      % (host, levels, profiles, v.get("tune_target_metric")))
    else:
        highest = max(jinja_int(level) for level in levels)
        if not (_truthy(v.get("tune_allow_over_cap", False)) or _unset(cap) or highest <= jinja_int(cap)):
            errors.append(
                "The highest level (%d) is above the engine's max_num_seqs (%s): vLLM would queue the rest and the "
                "levels above %s would measure its queue, not the engine running that many. Deploy this host with a "
                "higher cap for the sweep (ansible-playbook -i <inventory> %s -e vllm_max_num_seqs=%d --limit %s,proxy), "
                "lower tune_concurrency, or pass -e tune_allow_over_cap=true." % (highest, cap, cap, deploy, highest, host))
    speculative = spec.plan(v.get("tune_num_speculative_tokens"), running, v.get("vllm_speculative_config"), host, deploy)
    errors += speculative["errors"]
    long_prompt = v.get("tune_long_prompt_tokens")
    more = ""
    if jinja_int(batched or 0) < jinja_int(long_prompt):
        more = ("A long prompt of %s tokens is prefilled in chunks of it; the GB10 recipes run 8192-16384 "
                "(vllm_max_num_batched_tokens, then %s) - measure with the budget you will serve with." % (long_prompt, deploy))
    note = "The engine runs with max_num_batched_tokens %s: the figures below hold for it. %s" % (
        BATCH_UNSET if _unset(batched) else batched, more)
    size, size_source = group_size(running, v)
    return {"errors": errors, "url": url, "load_host": load_host, "cap": cap,
            "cap_source": running.get("item") or "", "batched": batched, "batch_note": note,
            "speculative": speculative, "tensor_parallel_size": size, "tensor_parallel_size_source": size_source}


def _target(v):
    seconds = v.get("tune_target_seconds")
    return None if seconds is None else "%s p95 <= %s s" % (v.get("tune_target_metric"), seconds)


def report(v, planned, sweep, stored=None):
    """After the sweep: ``{lines, saved, line, refusal}`` - the printed report, the figures saved as JSON, the
    ``vllm_max_num_seqs`` line written with ``tune_write``, and the refusal when writing was asked but no level
    qualified (after a sweep that sent load; "" otherwise). ``planned`` is :func:`plan`'s result; ``stored``, what an
    earlier run saved for this host (its ``speculative`` runs are compared with this one's when the
    num_speculative_tokens dimension is on)."""
    host, recommendation = v.get("inventory_hostname"), sweep.get("recommendation") or {}
    seqs, target, path = recommendation.get("max_num_seqs"), _target(v), v.get("tune_write_path")
    write = _truthy(v.get("tune_write", False))
    lines = list(sweep.get("table") or []) + [
        "",
        "engine %s (load from %s), max_model_len %s, max_num_seqs now %s%s" % (
            planned["url"], planned["load_host"], (sweep.get("engine") or {}).get("max_model_len"), planned["cap"],
            " (%s)" % planned["cap_source"] if planned.get("cap_source") else " (inventory)"),
        "engine group: tensor_parallel_size %s (%s), saved with the figures for kv_cache_plan's groupings" % (
            planned.get("tensor_parallel_size"), planned.get("tensor_parallel_size_source")),
        "long profile: " + json.dumps((sweep.get("profiles") or {}).get("long") or {}),
        "latency target: " + (target or "none (-e tune_target_seconds=S)"),
        "",
    ] + list(recommendation.get("reasoning") or []) + [
        "",
        "recommended vllm_max_num_seqs: %s" % (seqs or "none"),
        "the proxy (nginx_proxy) has no per-replica cap to set; max_num_seqs is the only one",
        "files: %s/%s.json, .png" % (v.get("tune_output_dir"), host),
        ("writing it to %s (next task)" % path) if write else "not written (-e tune_write=true writes it to %s)" % path,
    ]
    saved = {"host": host, "url": planned["url"], "load_host": planned["load_host"], "engine": sweep.get("engine"),
             "profiles": sweep.get("profiles"), "levels": sweep.get("levels"),
             "max_num_batched_tokens": None if _unset(planned["batched"]) else jinja_int(planned["batched"]),
             "tensor_parallel_size": planned.get("tensor_parallel_size"),
             "tensor_parallel_size_source": planned.get("tensor_parallel_size_source"),
             "measured_at": v.get("measured_at"), "recommendation": recommendation}
    asked = (planned.get("speculative") or {}).get("tokens") or []
    if asked:
        lines[-3:-3] = _speculative(planned, sweep, stored, saved, recommendation)
    line = "vllm_max_num_seqs: %s  # %s, %s, shares %s" % (
        seqs, WRITER, target or "no latency target", json.dumps(recommendation.get("shares")))
    refusal = ""
    if write and seqs is None and sweep.get("load_sent"):
        refusal = ("No level met the target, so nothing was written to %s. See the reasoning above; relax "
                   "tune_target_seconds or sweep lower levels." % path)
    return {"lines": lines, "saved": saved, "line": line, "refusal": refusal}


def _speculative(planned, sweep, stored, saved, recommendation):
    """The report's num_speculative_tokens lines; the merged runs and the comparison go to ``saved["speculative"]``."""
    dimension = planned["speculative"]
    merged = spec.merge(dimension, (stored or {}).get("speculative"),
                        spec.key(dimension["config"], sweep.get("engine"), planned["batched"]), sweep.get("levels"))
    compared = spec.compare(merged, dimension["tokens"], planned["cap"], recommendation.get("max_num_seqs"),
                            recommendation.get("shares"))
    saved["speculative"] = dict(merged, tokens=dimension["tokens"], config=dimension["config"], now=dimension["now"],
                                recommendation={name: compared[name] for name in ("best", "level", "rates", "missing")})
    measured = "this run measured num_speculative_tokens %s (the engine's --speculative-config)" % dimension["now"]
    after = ["next value: %s, then this playbook again with the same tune_num_speculative_tokens (the deploy restarts "
             "the engine; the tool-calling gate runs before the sweep measures it)" % command
             for value, command in zip([v for v in dimension["tokens"] if v != dimension["now"]], dimension["next"])
             if value in compared["missing"]]
    return [""] + [measured] + compared["lines"] + after + [""]
