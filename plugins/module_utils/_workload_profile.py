# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The site's workload, read from its own engines' ``/metrics`` (issue 38, first brick).

Pure logic: the standard library and ``prometheus_client``'s parser (through
``_host/vllm_metrics``, which owns the import guard, the HTTP read and the bucket
arithmetic), never ``ansible``. ``sample()`` reads every engine every ``interval``
seconds over a ``window``; ``profile()`` turns those snapshots into a JSON-able dict.

Where each figure comes from (vLLM 0.32 names, vllm/v1/metrics/loggers.py):

- finished requests: increase of ``vllm:request_success_total`` (every
  ``finished_reason``: stop, length, abort, error).
- arrivals: finished + (running + waiting at the end - at the start of each interval),
  from the gauges ``vllm:num_requests_running``/``_waiting``. vLLM exports no arrival
  counter; this is the conservation of requests inside the engine, exact at the sample
  instants (a request still in the API server, before the engine's queue, is not yet
  counted).
- prompt and output lengths: the increase of the per-request histograms
  ``vllm:request_prompt_tokens`` and ``vllm:request_generation_tokens`` (observed when a
  request finishes; buckets 1, 2, 5, 10, 20, 50, ... up to ``max_model_len``). The mean
  is exact (``_sum`` / ``_count``); quantiles are bucket-interpolated like PromQL's
  ``histogram_quantile``, so a quantile is only known to lie inside its bucket.
- long-context share: vLLM keeps prompt and output lengths in two histograms, not their
  sum per request, so the share of requests whose prompt + output exceed a token count
  is given as bounds that hold for any pairing (``lower_bound``: prompt alone, or output
  alone, above the count; ``upper_bound``: the best union bound ``P(prompt > a) +
  P(output > T - a)`` over the bucket edges) and an ``estimate`` (prompt above the count
  minus the window's mean output, interpolated).
- concurrency: running + waiting at each sample (sampled, not time-integrated).
- prefix cache: increase of ``vllm:prefix_cache_hits_total`` / of
  ``vllm:prefix_cache_queries_total`` (tokens, not requests).

Counter resets: between two snapshots of one engine, a new
``process_start_time_seconds`` or any counter or bucket that went down means the engine
restarted; that interval's increase is then the later value (counted from zero, as
Prometheus' ``increase()`` does), and the interval's arrivals are the finished requests
since the restart plus the ones in flight at the later sample. What the engine counted
between the earlier sample and its crash is lost, so a restart can only make the figures
lower, never negative; the engine is listed in ``restarts``.
"""

from __future__ import annotations

import math
import time

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_metrics as vm

SCHEMA = "factory_floor.llm.workload_profile/1"

# vLLM's metric names as exposed (sample names; counters keep ``_total``).
REQUEST_SUCCESS_TOTAL = vm.REQUEST_SUCCESS_TOTAL
NUM_REQUESTS_RUNNING = vm.NUM_REQUESTS_RUNNING
NUM_REQUESTS_WAITING = vm.NUM_REQUESTS_WAITING
PROMPT_TOKENS_TOTAL = vm.PROMPT_TOKENS_TOTAL
GENERATION_TOKENS_TOTAL = vm.GENERATION_TOKENS_TOTAL
NUM_PREEMPTIONS_TOTAL = vm.NUM_PREEMPTIONS_TOTAL
PREFIX_CACHE_QUERIES_TOTAL = "vllm:prefix_cache_queries_total"
PREFIX_CACHE_HITS_TOTAL = "vllm:prefix_cache_hits_total"
PROCESS_START_TIME_SECONDS = vm.PROCESS_START_TIME_SECONDS

COUNTERS = (PROMPT_TOKENS_TOTAL, GENERATION_TOKENS_TOTAL, NUM_PREEMPTIONS_TOTAL,
            PREFIX_CACHE_QUERIES_TOTAL, PREFIX_CACHE_HITS_TOTAL)
# Profile key -> vLLM histogram. The time-per-output-token histogram was renamed
# (``vllm:inter_token_latency_seconds`` in newer releases); the first one present counts.
HISTOGRAMS = {
    "prompt_length_tokens": ("vllm:request_prompt_tokens",),
    "output_length_tokens": ("vllm:request_generation_tokens",),
    "ttft_seconds": (vm.TIME_TO_FIRST_TOKEN_SECONDS,),
    "tpot_seconds": ("vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds",
                     "vllm:inter_token_latency_seconds"),
    "e2e_latency_seconds": (vm.E2E_REQUEST_LATENCY_SECONDS,),
}
LENGTHS = ("prompt_length_tokens", "output_length_tokens")
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))
DEFAULT_LONG_CONTEXT_TOKENS = (32768, 131072)
DEFAULT_INTERVAL = 15.0
HOUR = 3600.0


class ProfileError(ValueError):
    """The request itself is wrong (engines, window, interval): nothing was read."""


# --------------------------------------------------------------------------- parsing

def parse_snapshot(text):
    """One engine's exposition text -> the values the profile needs.

    Returns ``{model_name, process_start_time_seconds, running, waiting, success
    {finished_reason: count}, counters {sample name: value}, histograms {profile key:
    {buckets {le: cumulative count}, sum, count, metric}}}``, every value summed over the
    endpoint's series (one per ``engine`` label with data parallelism). A metric the
    engine does not export is absent (or None), never zero.

    Raises ``vm.MetricsError`` when the text is not Prometheus exposition or has no
    ``vllm:*`` metric.
    """
    if vm.text_string_to_metric_families is None:
        raise vm.MetricsError("the Python library prometheus_client is required: %s"
                              % vm.PROMETHEUS_CLIENT_IMPORT_ERROR)
    samples = {}
    try:
        for family in vm.text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    except ValueError as exc:
        raise vm.MetricsError("not Prometheus exposition text: %s" % exc) from None
    if not any(name.startswith("vllm:") for name in samples):
        raise vm.MetricsError("answered, but exposes no vllm:* metric (is this a vLLM engine's port?)")

    def total(name):
        values = [value for _labels, value in samples.get(name, ())]
        return math.fsum(values) if values else None

    success = None
    if REQUEST_SUCCESS_TOTAL in samples:
        success = {}
        for labels, value in samples[REQUEST_SUCCESS_TOTAL]:
            reason = labels.get("finished_reason", "unknown")
            success[reason] = success.get(reason, 0.0) + value
    histograms = {}
    for key, names in HISTOGRAMS.items():
        for name in names:
            if name + "_bucket" in samples:
                histograms[key] = {"metric": name, "buckets": vm._buckets(samples, name),  # pylint: disable=protected-access
                                   "sum": total(name + "_sum"), "count": total(name + "_count")}
                break
    model_name = next((labels["model_name"] for name in (NUM_REQUESTS_RUNNING, REQUEST_SUCCESS_TOTAL)
                       for labels, _value in samples.get(name, ()) if labels.get("model_name")), None)
    return {
        "model_name": model_name,
        "process_start_time_seconds": total(PROCESS_START_TIME_SECONDS),
        "running": total(NUM_REQUESTS_RUNNING),
        "waiting": total(NUM_REQUESTS_WAITING),
        "success": success,
        "counters": {name: total(name) for name in COUNTERS},
        "histograms": histograms,
    }


# --------------------------------------------------------------------------- sampling

def sample(engines, fetch, window, interval=DEFAULT_INTERVAL, sleep=time.sleep, clock=time.monotonic,
           wall=time.time):
    """Read every engine's ``/metrics`` every ``interval`` seconds for ``window`` seconds.

    ``fetch(url) -> text`` is ``vm.make_fetch()``'s (or a test's); ``sleep``, ``clock``
    (monotonic, for the schedule) and ``wall`` (epoch seconds, stamped on each snapshot
    for the by-hour rates) are injectable. Rounds start at 0, ``interval``, ... and the
    last at ``window``: ``floor(window / interval) + 1`` rounds, at least two.

    Returns ``[{name, url, samples: [{time, parsed, error}]}]`` for ``profile()``.
    Raises ProfileError for a wrong request.
    """
    engines = _checked(engines)
    window, interval = _seconds("window", window), _seconds("interval", interval)
    if interval > window:
        raise ProfileError("interval (%gs) is longer than window (%gs): the profile needs at least two samples"
                           % (interval, window))
    rounds = int(math.floor(window / interval + 1e-9)) + 1
    offsets = [interval * i for i in range(rounds)] + [window]
    if offsets[-1] - offsets[-2] < 1e-9:
        offsets.pop()
    result = [{"name": e["name"], "url": e["url"], "samples": []} for e in engines]
    start = clock()
    for offset in offsets:
        delay = start + offset - clock()
        if delay > 0:
            sleep(delay)
        for engine, out in zip(engines, result):
            try:
                parsed, error = parse_snapshot(fetch(vm.metrics_url(engine["url"]))), None
            except (vm.ScrapeError, vm.MetricsError, OSError) as exc:
                parsed, error = None, str(exc) or exc.__class__.__name__
            out["samples"].append({"time": wall(), "parsed": parsed, "error": error})
    return result


def _checked(engines):
    try:
        return vm.validate_engines(engines, vm.TOPOLOGY_REPLICAS)
    except vm.MetricsError as exc:
        raise ProfileError(str(exc)) from None


def _seconds(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ProfileError("%s must be a number of seconds, got %r" % (name, value)) from None
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise ProfileError("%s must be a positive number of seconds, got %r" % (name, value))
    return value


# --------------------------------------------------------------------------- increases

def restarted(before, after):
    """True when the engine restarted between two parsed snapshots (see the module docstring)."""
    start1, start2 = before["process_start_time_seconds"], after["process_start_time_seconds"]
    if start1 is not None and start2 is not None and start1 != start2:
        return True
    pairs = [(before["counters"].get(n), after["counters"].get(n)) for n in COUNTERS]
    pairs += [((before["success"] or {}).get(r), v) for r, v in (after["success"] or {}).items()]
    for key, hist in after["histograms"].items():
        old = before["histograms"].get(key)
        if old:
            pairs.append((old["count"], hist["count"]))
            pairs += [(old["buckets"].get(le), count) for le, count in hist["buckets"].items()]
    return any(b is not None and a is not None and a < b for b, a in pairs)


def _increase(before, after, reset):
    if after is None:
        return None
    if reset or before is None:
        return after
    return max(after - before, 0.0)


def _inflight(parsed):
    if parsed["running"] is None:
        return None
    return parsed["running"] + (parsed["waiting"] or 0.0)


class _Engine:
    """Accumulates one engine's increases over its consecutive readable snapshots."""

    def __init__(self, name):
        self.name = name
        self.restarts = 0
        self.finished = None
        self.by_reason = {}
        self.arrivals = None
        self.counters = {}
        self.histograms = {}
        self.elapsed = 0.0
        self.hours = {}  # "YYYY-MM-DDTHH" -> [arrivals, seconds]
        self.concurrency = []  # (time, running, waiting)
        self.model_name = None
        self.errors = []
        self.rounds = []  # (running, waiting) or None, one per sampling round

    def add(self, before, after):
        b, a = before["parsed"], after["parsed"]
        reset = restarted(b, a)
        self.restarts += int(reset)
        seconds = after["time"] - before["time"]
        if seconds <= 0:
            return
        self.elapsed += seconds
        for name in COUNTERS:
            inc = _increase(b["counters"].get(name), a["counters"].get(name), reset)
            if inc is not None:
                self.counters[name] = self.counters.get(name, 0.0) + inc
        finished = None
        if a["success"] is not None:
            finished = 0.0
            for reason, value in a["success"].items():
                inc = _increase((b["success"] or {}).get(reason), value, reset)
                self.by_reason[reason] = self.by_reason.get(reason, 0.0) + inc
                finished += inc
            self.finished = (self.finished or 0.0) + finished
        for key, hist in a["histograms"].items():
            old = b["histograms"].get(key) or {"buckets": {}, "sum": None, "count": None}
            acc = self.histograms.setdefault(key, {"buckets": {}, "sum": 0.0, "count": 0.0, "metric": hist["metric"]})
            for le, count in hist["buckets"].items():
                acc["buckets"][le] = acc["buckets"].get(le, 0.0) + _increase(old["buckets"].get(le), count, reset)
            acc["sum"] += _increase(old["sum"], hist["sum"], reset) or 0.0
            acc["count"] += _increase(old["count"], hist["count"], reset) or 0.0
        arrivals = None
        now, then = _inflight(a), _inflight(b)
        if finished is not None and now is not None:
            arrivals = finished + now if reset or then is None else max(finished + now - then, 0.0)
            self.arrivals = (self.arrivals or 0.0) + arrivals
            _spread(self.hours, before["time"], after["time"], arrivals)

    def sampled(self, snap):
        parsed = snap["parsed"]
        self.model_name = self.model_name or parsed["model_name"]
        if parsed["running"] is not None:
            self.concurrency.append((snap["time"], parsed["running"], parsed["waiting"] or 0.0))


def _hour_key(seconds):
    return time.strftime("%Y-%m-%dT%H", time.gmtime(seconds))


def _spread(hours, start, end, amount):
    """Share ``amount`` over the UTC hours ``[start, end)`` covers, in proportion to the seconds in each."""
    span = end - start
    t = start
    while t < end:
        boundary = min((math.floor(t / HOUR) + 1) * HOUR, end)
        slot = hours.setdefault(_hour_key(t), [0.0, 0.0])
        slot[0] += amount * (boundary - t) / span
        slot[1] += boundary - t
        t = boundary


# --------------------------------------------------------------------------- distributions

def tail_share(buckets, threshold, interpolate=True):
    """Fraction (0-1) of observations above ``threshold`` from cumulative buckets ``{le: count}``.

    With ``interpolate``, linear inside the bucket holding the threshold (observations
    spread evenly in it, the first bucket starting at 0); without, ``threshold`` must be a
    bucket edge (or 0) and the share is exact. None when there is no observation.
    """
    total = buckets.get(math.inf) if buckets else None
    if not total:
        return None
    if threshold <= 0:
        return 1.0 if threshold < 0 else (total - buckets.get(0.0, 0.0)) / total
    below, start = 0.0, 0.0
    for upper in sorted(buckets):
        count = buckets[upper]
        if threshold < upper:
            if not interpolate or upper == math.inf:
                return (total - below) / total
            inside = (count - below) * (threshold - start) / (upper - start)
            return (total - below - inside) / total
        below, start = count, upper
    return 0.0


def _floor_edge(buckets, value):
    """The largest bucket edge at or below ``value`` (0 when none)."""
    return max([le for le in buckets if le <= value] + [0.0])


def _ceil_edge(buckets, value):
    return min(le for le in buckets if le >= value)


def long_context(prompt, output, thresholds, mean_output):
    """Share of requests whose prompt + output exceed each threshold (tokens), as bounds and an estimate."""
    rows = []
    pb, ob = prompt.get("buckets") or {}, output.get("buckets") or {}
    for threshold in thresholds:
        row = {"tokens": threshold, "share_estimate": None, "share_lower_bound": None, "share_upper_bound": None}
        if pb.get(math.inf) and ob.get(math.inf):
            lower = max(tail_share(pb, _ceil_edge(pb, threshold), False), tail_share(ob, _ceil_edge(ob, threshold), False))
            upper = 1.0
            for split in sorted(set([0.0] + [le for le in pb if le < threshold])):
                upper = min(upper, tail_share(pb, _floor_edge(pb, split), False)
                            + tail_share(ob, _floor_edge(ob, threshold - split), False))
            estimate = tail_share(pb, threshold - (mean_output or 0.0))
            row.update(share_lower_bound=round(lower, 6), share_upper_bound=round(upper, 6),
                       share_estimate=round(min(max(estimate, lower), upper), 6))
        rows.append(row)
    return rows


def _buckets_json(buckets):
    return [["+Inf" if le == math.inf else _number(le), _number(count)] for le, count in sorted(buckets.items())]


def _number(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _round(value, digits=6):
    return None if value is None else round(value, digits)


def _distribution(hist, with_buckets):
    """Quantiles (bucket-interpolated), exact mean, and the buckets when asked."""
    buckets = hist.get("buckets") or {}
    count = buckets.get(math.inf, 0.0) if buckets else 0.0
    out = {key: _round(vm.histogram_quantile(q, buckets)) for key, q in QUANTILES}
    out["mean"] = _round(hist["sum"] / hist["count"]) if hist.get("count") else None
    out["count"] = _number(count)
    if with_buckets:
        finite = [le for le in buckets if le != math.inf and buckets[le] >= count]
        out["max_at_most"] = _number(min(finite)) if count and finite else None
        out["buckets"] = _buckets_json(buckets)
    out["metric"] = hist.get("metric")
    return out


def _merge(histograms, key):
    present = [h[key] for h in histograms if key in h]
    if not present:
        return {}
    return {"buckets": vm.merge_buckets(h["buckets"] for h in present),
            "sum": math.fsum(h["sum"] for h in present), "count": math.fsum(h["count"] for h in present),
            "metric": present[0]["metric"]}


def _sample_quantile(values, q):
    """Nearest-rank quantile of sampled values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(int(math.ceil(q * len(ordered))) - 1, 0)]


def _concurrency(series):
    """``series``: lists of (running, waiting) samples."""
    if not series:
        return None
    inflight = [r + w for r, w in series]
    out = {"samples": len(series), "mean": _round(math.fsum(inflight) / len(inflight), 3)}
    for key, q in (("p50", 0.5), ("p95", 0.95)):
        out[key] = _number(_sample_quantile(inflight, q))
    out["max"] = _number(max(inflight))
    out["running_max"] = _number(max(r for r, _w in series))
    out["waiting_max"] = _number(max(w for _r, w in series))
    return out


# --------------------------------------------------------------------------- profile

def _per_s(amount, seconds, digits=6):
    return None if amount is None or not seconds else round(amount / seconds, digits)


def _view(acc, thresholds):
    """One engine's (or the total's) profile section."""
    counters = acc["counters"]
    hist = acc["histograms"]
    seconds = acc["elapsed"]
    hit, query = counters.get(PREFIX_CACHE_HITS_TOTAL), counters.get(PREFIX_CACHE_QUERIES_TOTAL)
    out = {
        "window_seconds": _round(seconds, 3),
        "requests_arrived": _round(acc["arrivals"], 3),
        "requests_finished": _number(acc["finished"]),
        "requests_finished_by_reason": {r: _number(v) for r, v in sorted(acc["by_reason"].items())} or None,
        "arrival_rate_requests_per_s": acc["arrival_rate"],
        "finish_rate_requests_per_s": acc["finish_rate"],
        "prompt_tokens_per_s": acc["prompt_rate"],
        "generation_tokens_per_s": acc["generation_rate"],
        "prefix_cache_hit_fraction": _round(hit / query) if hit is not None and query else None,
        "prefix_cache_queried_tokens": _number(query),
        "num_preemptions": _number(counters.get(NUM_PREEMPTIONS_TOTAL)),
        "concurrency_requests": _concurrency(acc["concurrency"]),
    }
    for key in HISTOGRAMS:
        out[key] = _distribution(hist[key], key in LENGTHS) if key in hist else None
    mean_output = (out["output_length_tokens"] or {}).get("mean")
    out["long_context"] = long_context(hist.get("prompt_length_tokens") or {}, hist.get("output_length_tokens") or {},
                                       thresholds, mean_output)
    for row in out["long_context"]:
        rate = out["finish_rate_requests_per_s"]
        row["requests_per_s_estimate"] = (None if rate is None or row["share_estimate"] is None
                                          else round(rate * row["share_estimate"], 6))
    return out


def profile(sampled, long_context_tokens=DEFAULT_LONG_CONTEXT_TOKENS):
    """The workload profile of ``sample()``'s snapshots: see the module docstring and the
    ``workload_profile`` module's RETURN for every key. JSON-able (no ``inf``)."""
    thresholds = sorted(set(int(t) for t in long_context_tokens))
    if any(t <= 0 for t in thresholds):
        raise ProfileError("long_context_tokens must be positive token counts, got %r" % (long_context_tokens,))
    engines, accs, notes = [], [], []
    for engine in sampled:
        acc = _Engine(engine["name"])
        readable = [s for s in engine["samples"] if s["parsed"] is not None]
        acc.errors = [s["error"] for s in engine["samples"] if s["error"]]
        for snap in readable:
            acc.sampled(snap)
        for before, after in zip(readable, readable[1:]):
            acc.add(before, after)
        acc.rounds = [(s["parsed"]["running"], s["parsed"]["waiting"] or 0.0)
                      if s["parsed"] is not None and s["parsed"]["running"] is not None else None
                      for s in engine["samples"]]
        view = {"name": engine["name"], "url": engine["url"], "model_name": acc.model_name,
                "samples": len(engine["samples"]), "samples_read": len(readable), "restarts": acc.restarts,
                "errors": acc.errors[:5]}
        if len(readable) < 2:
            view["profile"] = None
            notes.append("%s: fewer than two readable samples (%d of %d), left out of the total%s"
                         % (engine["name"], len(readable), len(engine["samples"]),
                            ": " + acc.errors[-1] if acc.errors else ""))
        else:
            if len(readable) < len(engine["samples"]):
                notes.append("%s: %d of %d samples unreadable; its increases span the gaps"
                             % (engine["name"], len(engine["samples"]) - len(readable), len(engine["samples"])))
            state = _state(acc)
            view["profile"] = _view(state, thresholds)
            view["profile"]["by_hour"] = _hours(acc.hours)
            accs.append((acc, state))
        engines.append(view)
    for acc, _state_ in accs:
        if acc.restarts:
            notes.append("%s restarted %d time(s) in the window: what it counted between the sample before and "
                         "the restart is lost (figures can only be lower)" % (acc.name, acc.restarts))
    missing = [a.name for a, _s in accs if not set(LENGTHS) <= set(a.histograms)]
    if missing:
        notes.append("%s: no per-request length histograms (vllm:request_prompt_tokens, "
                     "vllm:request_generation_tokens) in /metrics; lengths and long-context shares are "
                     "null or cover the other engines only" % ", ".join(missing))
    models = sorted({e["model_name"] for e in engines if e["model_name"]})
    if len(models) > 1:
        notes.append("engines serve different models (%s): the total adds them up anyway" % ", ".join(models))
    total = None
    if accs:
        total = _view(_total_state(accs), thresholds)
        hours = {}
        for acc, _state_ in accs:
            for hour, (arrivals, seconds) in acc.hours.items():
                slot = hours.setdefault(hour, [0.0, 0.0, 0])
                slot[0] += arrivals / seconds if seconds else 0.0
                slot[1] = max(slot[1], seconds)
        total["by_hour"] = [{"hour_utc": h, "seconds_covered": round(s, 3), "arrival_rate_requests_per_s": round(r, 6)}
                            for h, (r, s, _n) in sorted(hours.items())]
        busiest = max(total["by_hour"], key=lambda row: row["arrival_rate_requests_per_s"], default=None)
        total["busiest_hour_utc"] = busiest["hour_utc"] if busiest else None
    times = [s["time"] for e in sampled for s in e["samples"]]
    return {
        "schema": SCHEMA,
        "started": _iso(min(times)) if times else None,
        "ended": _iso(max(times)) if times else None,
        "engines": engines,
        "total": total,
        "engines_counted": len(accs),
        "complete": len(accs) == len(engines) and all(e["samples_read"] == e["samples"] for e in engines),
        "restarts": [acc.name for acc, _s in accs if acc.restarts],
        "long_context_tokens": thresholds,
        "notes": notes,
    }


def _iso(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _state(acc):
    seconds = acc.elapsed
    return {
        "counters": acc.counters, "histograms": acc.histograms, "elapsed": seconds,
        "arrivals": acc.arrivals, "finished": acc.finished, "by_reason": acc.by_reason,
        "arrival_rate": _per_s(acc.arrivals, seconds), "finish_rate": _per_s(acc.finished, seconds),
        "prompt_rate": _per_s(acc.counters.get(PROMPT_TOKENS_TOTAL), seconds, 3),
        "generation_rate": _per_s(acc.counters.get(GENERATION_TOKENS_TOTAL), seconds, 3),
        "concurrency": [(r, w) for _t, r, w in acc.concurrency],
    }


def _sum_known(values):
    known = [v for v in values if v is not None]
    return math.fsum(known) if known else None


def _total_state(accs):
    """Model-wide: counts and rates summed over engines, histograms merged bucket by bucket,
    concurrency summed per sampling round (rounds where an engine was unreadable are left out)."""
    states = [s for _a, s in accs]
    counters = {}
    for name in COUNTERS:
        value = _sum_known(s["counters"].get(name) for s in states)
        if value is not None:
            counters[name] = value
    by_reason = {}
    for state in states:
        for reason, value in state["by_reason"].items():
            by_reason[reason] = by_reason.get(reason, 0.0) + value
    keys = {k for s in states for k in s["histograms"]}
    histograms = {k: _merge([s["histograms"] for s in states], k) for k in keys}
    series = []
    for slot in zip(*[a.rounds for a, _s in accs]):
        if None not in slot:
            series.append((math.fsum(r for r, _w in slot), math.fsum(w for _r, w in slot)))
    return {
        "counters": counters, "histograms": histograms,
        "elapsed": max(s["elapsed"] for s in states),
        "arrivals": _sum_known(s["arrivals"] for s in states),
        "finished": _sum_known(s["finished"] for s in states),
        "by_reason": by_reason,
        "arrival_rate": _round(_sum_known(s["arrival_rate"] for s in states)),
        "finish_rate": _round(_sum_known(s["finish_rate"] for s in states)),
        "prompt_rate": _round(_sum_known(s["prompt_rate"] for s in states), 3),
        "generation_rate": _round(_sum_known(s["generation_rate"] for s in states), 3),
        "concurrency": series,
    }


def _hours(hours):
    return [{"hour_utc": h, "seconds_covered": round(s, 3), "requests_arrived": round(a, 3),
             "arrival_rate_requests_per_s": round(a / s, 6) if s else None}
            for h, (a, s) in sorted(hours.items())]
