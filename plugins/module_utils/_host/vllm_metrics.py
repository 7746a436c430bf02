# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Read vLLM's Prometheus ``/metrics`` from each engine directly and add them up.

Pure logic, shared by the ``factory_floor.llm.vllm_metrics`` module and the watchdog
daemon (imported there as plain ``_vllm_metrics``): the standard library,
``prometheus_client`` and ``requests`` only, never ``ansible``.

Why it exists: a monitor that read ``/metrics`` through the least_conn proxy got each
answer from a different copy, saw counters go back and forth and called the model
starved. Here every engine is read on its own address, counters and gauges are summed
per vLLM metric, KV-cache usage is never summed (capacity-weighted mean instead) and the
latency histograms are merged bucket by bucket before quantiles are taken.
"""

from __future__ import annotations

import math
import re
import time
import traceback
from urllib.parse import urlsplit

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    text_string_to_metric_families = None
    PROMETHEUS_CLIENT_IMPORT_ERROR = traceback.format_exc()
else:
    PROMETHEUS_CLIENT_IMPORT_ERROR = None

from . import vllm_client as client

requests = client.requests
REQUESTS_IMPORT_ERROR = client.REQUESTS_IMPORT_ERROR


TOPOLOGY_REPLICAS = "replicas"
TOPOLOGY_SPLIT = "split"
TOPOLOGIES = (TOPOLOGY_REPLICAS, TOPOLOGY_SPLIT)
DEFAULT_TIMEOUT = 5.0

# vLLM's metric names, as exposed on /metrics. Sample names keep ``_total`` even though
# prometheus_client's parser strips it from counter *family* names, so everything below
# is keyed by sample name.
NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
PROMPT_TOKENS_TOTAL = "vllm:prompt_tokens_total"
GENERATION_TOKENS_TOTAL = "vllm:generation_tokens_total"
REQUEST_SUCCESS_TOTAL = "vllm:request_success_total"
NUM_PREEMPTIONS_TOTAL = "vllm:num_preemptions_total"
# Current vLLM first, then the name older (V0 engine) releases used.
KV_CACHE_USAGE_PERC = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
CACHE_CONFIG_INFO = "vllm:cache_config_info"
TIME_TO_FIRST_TOKEN_SECONDS = "vllm:time_to_first_token_seconds"
E2E_REQUEST_LATENCY_SECONDS = "vllm:e2e_request_latency_seconds"
# Histogram of the tokens (prompt + generated) of each engine step; its ``_count`` is the
# number of engine steps that produced output (vLLM 0.32, vllm/v1/metrics/loggers.py).
ITERATION_TOKENS_TOTAL = "vllm:iteration_tokens_total"
PROCESS_START_TIME_SECONDS = "process_start_time_seconds"

COUNTERS = (PROMPT_TOKENS_TOTAL, GENERATION_TOKENS_TOTAL, NUM_PREEMPTIONS_TOTAL,
            REQUEST_SUCCESS_TOTAL)
HISTOGRAMS = {
    "ttft_seconds": TIME_TO_FIRST_TOKEN_SECONDS,
    "e2e_latency_seconds": E2E_REQUEST_LATENCY_SECONDS,
}
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))

# Keys of one engine's (and the total's) summed values, in table/return order.
SUMMED = ("num_requests_running", "num_requests_waiting", "prompt_tokens_total",
          "generation_tokens_total", "num_preemptions_total")

WEIGHTING_CAPACITY = "capacity"
WEIGHTING_UNWEIGHTED = "unweighted"

_ERRNO_RE = re.compile(r"\[Errno -?\d+\] [^'\")]+")


class MetricsError(ValueError):
    """The request itself is wrong (engines, topology, window): nothing was read."""


class ScrapeError(Exception):
    """One engine's /metrics could not be read: refused, timed out, non-200."""


# --------------------------------------------------------------------------- inputs

def validate_engines(engines, topology=TOPOLOGY_REPLICAS):
    """Check the engine list against the topology; return it as a list of ``{name, url}``.

    ``split`` reads the rank-0 head only: its /metrics already covers the whole
    tensor-parallel group, and the headless ranks serve none.
    """
    if topology not in TOPOLOGIES:
        raise MetricsError("topology must be one of %s, got %r" % (", ".join(TOPOLOGIES), topology))
    if not engines:
        raise MetricsError("engines is empty: give at least one engine as {name, url}")
    checked, seen = [], set()
    for index, engine in enumerate(engines):
        if not isinstance(engine, dict):
            raise MetricsError("engines[%d] must be a dict with name and url, got %r" % (index, engine))
        name, url = engine.get("name"), engine.get("url")
        if not name or not isinstance(name, str):
            raise MetricsError("engines[%d] has no name" % index)
        if not url or not isinstance(url, str):
            raise MetricsError("engine %r has no url (base URL such as http://spark-a:8000)" % name)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise MetricsError("engine %r: url %r is not an http(s) base URL such as http://spark-a:8000"
                               % (name, url))
        if name in seen:
            raise MetricsError("engine name %r is given twice; names must be unique" % name)
        seen.add(name)
        checked.append({"name": name, "url": url})
    if topology == TOPOLOGY_SPLIT and len(checked) != 1:
        raise MetricsError(
            "topology 'split' reads exactly one engine, the rank-0 head (its /metrics covers the whole "
            "tensor-parallel group; headless ranks serve none), but %d were given: %s. Give only the "
            "head, or use topology 'replicas' for one copy per machine."
            % (len(checked), ", ".join(e["name"] for e in checked)))
    return checked


def metrics_url(url):
    """``http://spark-a:8000`` -> ``http://spark-a:8000/metrics`` (kept if already there)."""
    base = url.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


# --------------------------------------------------------------------------- HTTP

def _short_reason(exc):
    match = _ERRNO_RE.search(str(exc))
    return match.group(0).strip() if match else str(exc)


def make_fetch(timeout=DEFAULT_TIMEOUT, api_key=None):
    """Return ``fetch(url) -> text`` doing one GET with ``requests``.

    Raises ScrapeError on a refused connection, a timeout (``timeout`` seconds for
    connect and for read) or any status other than 200. Environment proxies are
    ignored: the point is to reach each engine on its own address.
    """
    if requests is None:
        raise MetricsError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
    session = client.session()
    # Classic text format (what vLLM serves unless OpenMetrics is asked for).
    try:
        headers = client.headers(api_key, accept="text/plain;version=0.0.4", **{"User-Agent": "factory_floor.llm.vllm_metrics"})
    except client.ClientConfigError as exc:
        raise MetricsError(str(exc)) from None

    def fetch(url):
        try:
            response = session.get(url, headers=headers, timeout=timeout, proxies=client.no_proxies(),
                                   allow_redirects=False)
        except requests.exceptions.Timeout:
            raise ScrapeError("GET %s: no answer within %gs" % (url, timeout)) from None
        except requests.exceptions.ConnectionError as exc:
            raise ScrapeError("GET %s: cannot connect: %s" % (url, _short_reason(exc))) from None
        except (requests.exceptions.RequestException, UnicodeError) as exc:
            # A request refused before it was sent: requests' own text would quote the header.
            words = client.config_error(exc)
            raise ScrapeError("GET %s: %s" % (url, words if words is not None else exc)) from None
        if response.status_code != 200:
            raise ScrapeError("GET %s: HTTP %d %s" % (url, response.status_code, response.reason or ""))
        return response.text

    return fetch


# --------------------------------------------------------------------------- parsing

def _sum(values):
    values = [v for v in values if v is not None]
    return math.fsum(values) if values else None


def _as_int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _kv_usage(samples):
    """Usage (fraction 0-1) and capacity (tokens) of one endpoint.

    One endpoint normally has one engine (label ``engine="0"``); with data parallelism
    it has several, weighted here by their own ``vllm:cache_config_info``.
    """
    capacity_by_engine = {}
    for labels, _value in samples.get(CACHE_CONFIG_INFO, ()):
        blocks, block_size = _as_int(labels.get("num_gpu_blocks")), _as_int(labels.get("block_size"))
        capacity_by_engine[labels.get("engine")] = (
            blocks * block_size if blocks is not None and block_size is not None else None)
    capacity = None
    if capacity_by_engine and None not in capacity_by_engine.values():
        capacity = sum(capacity_by_engine.values())

    usage_samples = []
    for name in KV_CACHE_USAGE_PERC:
        usage_samples = samples.get(name, [])
        if usage_samples:
            break
    if not usage_samples:
        return None, capacity
    if len(usage_samples) == 1:
        return usage_samples[0][1], capacity
    weights = [capacity_by_engine.get(labels.get("engine")) for labels, _value in usage_samples]
    if None not in weights and sum(weights) > 0:
        return math.fsum(w * v for w, (_l, v) in zip(weights, usage_samples)) / sum(weights), capacity
    return math.fsum(v for _l, v in usage_samples) / len(usage_samples), capacity


def _buckets(samples, name):
    """Cumulative bucket counts ``{le: count}`` of one histogram, series summed."""
    series = {}
    for labels, value in samples.get(name + "_bucket", ()):
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        try:
            upper = float(labels["le"])
        except (KeyError, ValueError):
            continue
        series.setdefault(key, {})[upper] = value
    return merge_buckets(series.values())


def parse_metrics(text):
    """Parse one engine's exposition text into the values this module reports.

    Returns a dict: ``model_name``; ``num_requests_running``, ``num_requests_waiting``
    (gauges), ``prompt_tokens_total``, ``generation_tokens_total``,
    ``num_preemptions_total`` (counters) and ``iteration_tokens_total_count`` (engine
    steps that produced output: the ``_count`` of the histogram
    ``vllm:iteration_tokens_total``), each summed over the endpoint's series, None
    when absent; ``request_success_total`` ``{finished_reason: count}`` or None;
    ``kv_cache_usage_perc`` (fraction 0-1) and ``kv_cache_capacity_tokens``
    (``num_gpu_blocks`` x ``block_size``) or None; ``histograms`` ``{key: {le: count}}``;
    ``counter_series`` ``{(sample name, labels): value}`` and ``process_start_time_seconds``
    for restart detection.

    Raises MetricsError when prometheus_client cannot parse the text or no ``vllm:``
    metric is in it (a 200 from something that is not a vLLM engine).
    """
    if text_string_to_metric_families is None:
        raise MetricsError("the Python library prometheus_client is required: %s"
                           % PROMETHEUS_CLIENT_IMPORT_ERROR)
    samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    except ValueError as exc:
        raise MetricsError("not Prometheus exposition text: %s" % exc) from None
    if not any(name.startswith("vllm:") for name in samples):
        raise MetricsError("answered, but exposes no vllm:* metric (is this a vLLM engine's port?)")

    model_name = next((labels["model_name"] for name in (NUM_REQUESTS_RUNNING,) + COUNTERS
                       for labels, _value in samples.get(name, ()) if labels.get("model_name")), None)
    parsed = {"model_name": model_name}
    for key, name in (("num_requests_running", NUM_REQUESTS_RUNNING),
                      ("num_requests_waiting", NUM_REQUESTS_WAITING),
                      ("prompt_tokens_total", PROMPT_TOKENS_TOTAL),
                      ("generation_tokens_total", GENERATION_TOKENS_TOTAL),
                      ("num_preemptions_total", NUM_PREEMPTIONS_TOTAL),
                      ("iteration_tokens_total_count", ITERATION_TOKENS_TOTAL + "_count")):
        parsed[key] = _sum(v for _l, v in samples.get(name, ()))

    success = None
    if REQUEST_SUCCESS_TOTAL in samples:
        success = {}
        for labels, value in samples[REQUEST_SUCCESS_TOTAL]:
            reason = labels.get("finished_reason", "unknown")
            success[reason] = success.get(reason, 0.0) + value
    parsed["request_success_total"] = success

    parsed["kv_cache_usage_perc"], parsed["kv_cache_capacity_tokens"] = _kv_usage(samples)
    parsed["histograms"] = {key: _buckets(samples, name) for key, name in HISTOGRAMS.items()}

    series = {}
    for name in COUNTERS + tuple(n + "_count" for n in HISTOGRAMS.values()):
        for labels, value in samples.get(name, ()):
            series[(name, tuple(sorted(labels.items())))] = value
    parsed["counter_series"] = series
    start = samples.get(PROCESS_START_TIME_SECONDS)
    parsed["process_start_time_seconds"] = start[0][1] if start else None
    return parsed


# --------------------------------------------------------------------------- histograms

def merge_buckets(bucket_maps):
    """Add cumulative bucket counts ``{le: count}`` of several histograms.

    Only upper bounds every histogram has are kept (``+Inf`` always is), so engines of
    different vLLM releases with different buckets still merge exactly, if coarser.
    """
    maps = [m for m in bucket_maps if m]
    if not maps:
        return {}
    common = set(maps[0])
    for other in maps[1:]:
        common &= set(other)
    return {le: math.fsum(m[le] for m in maps) for le in common}


def histogram_quantile(q, buckets):
    """The q-quantile (0 < q < 1) of cumulative buckets ``{le: count}``, like PromQL.

    Linear interpolation inside the bucket holding the rank; the first bucket starts at
    0; a rank in the ``+Inf`` bucket returns the highest finite bound. None when there
    is no observation or no ``+Inf`` bucket.
    """
    if not buckets or math.inf not in buckets or len(buckets) < 2:
        return None
    bounds = sorted(buckets)
    counts, highest = [], 0.0
    for upper in bounds:  # force monotonic, as Prometheus does
        highest = max(highest, buckets[upper])
        counts.append(highest)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if index == len(bounds) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start = bounds[index - 1] if index > 0 else 0.0
    below = counts[index - 1] if index > 0 else 0.0
    return start + (bounds[index] - start) * (rank - below) / (counts[index] - below)


def _quantiles(buckets):
    result = {key: _round(histogram_quantile(q, buckets), 6) for key, q in QUANTILES}
    result["count"] = _number(buckets.get(math.inf)) if buckets else 0
    return result


# --------------------------------------------------------------------------- sampling

def _scrape(engine, fetch, clock):
    url = metrics_url(engine["url"])
    try:
        text = fetch(url)
        parsed = parse_metrics(text)
    except (ScrapeError, MetricsError, OSError) as exc:
        return {"time": clock(), "parsed": None, "error": str(exc) or exc.__class__.__name__}
    return {"time": clock(), "parsed": parsed, "error": None}


def _restarted(first, second):
    """True when a counter went down, or the server process is a new one."""
    start1, start2 = first["process_start_time_seconds"], second["process_start_time_seconds"]
    if start1 is not None and start2 is not None and start1 != start2:
        return True
    for key, value in second["counter_series"].items():
        before = first["counter_series"].get(key)
        if before is not None and value < before:
            return True
    return False


def _increase(before, after, restarted):
    """Counter increase between samples; after a restart it counts from zero."""
    if after is None:
        return None
    if restarted or before is None or after < before:
        return after
    return after - before


def _bucket_increase(before, after, restarted):
    return {le: _increase(before.get(le), count, restarted) for le, count in after.items()}


def _number(value):
    """Integral floats (counts, tokens) as int, others unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _round(value, digits):
    return None if value is None else round(value, digits)


def _engine_view(engine, first, second, window):
    """One engine's returned dict, and what the total needs from it (None if left out)."""
    view = {"name": engine["name"], "url": engine["url"], "reachable": True, "error": None,
            "model_name": None}
    view.update({key: None for key in SUMMED})
    view.update({"request_success_total": None, "kv_cache_usage_perc": None,
                 "kv_cache_capacity_tokens": None, "ttft_seconds": None, "e2e_latency_seconds": None,
                 "restarted": False})
    if window > 0:
        view["rates"] = None
    failed = second if second["error"] else (first if first and first["error"] else None)
    if failed is not None:
        error = failed["error"]
        if window > 0:
            error = "%s sample: %s" % ("second" if failed is second else "first", error)
        view.update({"reachable": False, "error": error})
        return view, None

    now = second["parsed"]
    restarted = bool(first) and _restarted(first["parsed"], now)
    view["model_name"] = now["model_name"]
    view.update({key: _number(now[key]) for key in SUMMED})
    success = now["request_success_total"]
    view["request_success_total"] = (
        None if success is None else {reason: _number(v) for reason, v in sorted(success.items())})
    view["kv_cache_usage_perc"] = now["kv_cache_usage_perc"]
    view["kv_cache_capacity_tokens"] = now["kv_cache_capacity_tokens"]
    view["restarted"] = restarted

    histograms = now["histograms"]
    if first:
        before = first["parsed"]
        histograms = {key: _bucket_increase(before["histograms"][key], buckets, restarted)
                      for key, buckets in histograms.items()}
        elapsed = second["time"] - first["time"]
        if elapsed <= 0:
            elapsed = window
        finished_before = _sum((before["request_success_total"] or {}).values())
        finished_now = _sum((success or {}).values())

        def per_second(increase, scale=1.0):
            return None if increase is None else round(increase * scale / elapsed, 3)

        view["rates"] = {
            "generation_tokens_per_s": per_second(_increase(
                before["generation_tokens_total"], now["generation_tokens_total"], restarted)),
            "prompt_tokens_per_s": per_second(_increase(
                before["prompt_tokens_total"], now["prompt_tokens_total"], restarted)),
            "requests_per_min": per_second(_increase(finished_before, finished_now, restarted), 60.0),
            "elapsed_seconds": round(elapsed, 3),
        }
    for key, buckets in histograms.items():
        view[key] = _quantiles(buckets)
    return view, histograms


def _total(views, histograms, window, notes):
    counted = [v for v in views if v["reachable"]]
    total = {"engines_counted": len(counted)}
    for key in SUMMED:
        known = [v[key] for v in counted if v[key] is not None]
        total[key] = _number(_sum(known))
        if known and len(known) < len(counted):
            notes.append("%s is missing on %s; the total covers the others only"
                         % (key, ", ".join(v["name"] for v in counted if v[key] is None)))
    success = None
    for view in counted:
        if view["request_success_total"] is not None:
            success = success or {}
            for reason, count in view["request_success_total"].items():
                success[reason] = _number(float(success.get(reason, 0)) + count)
    total["request_success_total"] = success

    usage = [v for v in counted if v["kv_cache_usage_perc"] is not None]
    capacities = [v["kv_cache_capacity_tokens"] for v in usage]
    mean, weighting = None, None
    if usage and None not in capacities and sum(capacities) > 0:
        mean = math.fsum(v["kv_cache_usage_perc"] * v["kv_cache_capacity_tokens"] for v in usage) / sum(capacities)
        weighting = WEIGHTING_CAPACITY
    elif usage:
        mean = math.fsum(v["kv_cache_usage_perc"] for v in usage) / len(usage)
        weighting = WEIGHTING_UNWEIGHTED
        if len(usage) > 1:
            notes.append("KV-cache capacity unknown for %s (no num_gpu_blocks/block_size in "
                         "vllm:cache_config_info): kv_cache_usage_perc_weighted_mean is an unweighted mean"
                         % ", ".join(v["name"] for v in usage if v["kv_cache_capacity_tokens"] is None))
    total["kv_cache_usage_perc_weighted_mean"] = _round(mean, 6)
    total["kv_cache_usage_weighting"] = weighting
    all_capacities = [v["kv_cache_capacity_tokens"] for v in counted]
    total["kv_cache_capacity_tokens"] = (
        sum(all_capacities) if all_capacities and None not in all_capacities else None)

    for key in HISTOGRAMS:
        total[key] = _quantiles(merge_buckets(h[key] for h in histograms))

    if window > 0:
        rates = {}
        for key in ("generation_tokens_per_s", "prompt_tokens_per_s", "requests_per_min"):
            rates[key] = _round(_sum(v["rates"][key] for v in counted), 3)
        total["rates"] = rates
    return total


def collect(engines, fetch, topology=TOPOLOGY_REPLICAS, window=0.0, sleep=time.sleep, clock=time.monotonic):
    """Read every engine's /metrics (twice, ``window`` seconds apart, if ``window`` > 0).

    ``fetch(url) -> text`` does the GET (see make_fetch) and raises ScrapeError (or
    OSError) when the engine cannot be read; ``sleep`` and ``clock`` are injectable so
    tests can feed pairs of exposition texts without HTTP or waiting.

    Returns ``{engines, total, complete, unreachable_engines, restarts, topology, window,
    table, notes}``: see the module's RETURN documentation. Raises MetricsError for a
    wrong request (engine list, topology, window).
    """
    engines = validate_engines(engines, topology)
    try:
        window = float(window or 0.0)
    except (TypeError, ValueError):
        raise MetricsError("window must be a number of seconds, got %r" % (window,)) from None
    if window < 0 or math.isnan(window) or math.isinf(window):
        raise MetricsError("window must be 0 (one sample) or a positive number of seconds, got %r" % window)

    first = None
    if window > 0:
        first = [_scrape(e, fetch, clock) for e in engines]
        sleep(window)
    second = [_scrape(e, fetch, clock) for e in engines]

    notes, views, histograms = [], [], []
    for index, engine in enumerate(engines):
        view, hist = _engine_view(engine, first[index] if first else None, second[index], window)
        views.append(view)
        if hist is not None:
            histograms.append(hist)

    models = sorted({v["model_name"] for v in views if v["reachable"] and v["model_name"]})
    if len(models) > 1:
        notes.append("engines serve different models (%s): the total adds them up anyway"
                     % ", ".join(models))

    unreachable = [v["name"] for v in views if not v["reachable"]]
    result = {
        "engines": views,
        "total": _total(views, histograms, window, notes),
        "complete": not unreachable,
        "unreachable_engines": unreachable,
        "restarts": [v["name"] for v in views if v["restarted"]],
        "topology": topology,
        "window": window,
        "notes": notes,
    }
    result["table"] = format_table(result)
    return result


# --------------------------------------------------------------------------- table

def _fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def format_table(result):
    """Lines of a plain-text table: one row per engine and a TOTAL row."""
    window = result["window"]
    headers = ["ENGINE", "STATE", "RUNNING", "WAITING", "KV_USED", "KV_TOKENS",
               "TTFT_P50", "TTFT_P95", "E2E_P95"]
    if window > 0:
        headers += ["GEN_TOK/S", "PROMPT_TOK/S", "REQ/MIN"]
    headers.append("NOTE")

    def row(name, state, values, note):
        cells = [name, state,
                 _fmt(values.get("num_requests_running"), ",.0f"),
                 _fmt(values.get("num_requests_waiting"), ",.0f"),
                 _fmt(values.get("kv_usage"), ".1%"),
                 _fmt(values.get("kv_cache_capacity_tokens"), ",.0f"),
                 _fmt((values.get("ttft_seconds") or {}).get("p50"), ".3f"),
                 _fmt((values.get("ttft_seconds") or {}).get("p95"), ".3f"),
                 _fmt((values.get("e2e_latency_seconds") or {}).get("p95"), ".2f")]
        if window > 0:
            rates = values.get("rates") or {}
            cells += [_fmt(rates.get("generation_tokens_per_s"), ".1f"),
                      _fmt(rates.get("prompt_tokens_per_s"), ".1f"),
                      _fmt(rates.get("requests_per_min"), ".1f")]
        cells.append(note)
        return cells

    rows = []
    for view in result["engines"]:
        if not view["reachable"]:
            rows.append(row(view["name"], "DOWN", {}, view["error"] or ""))
        else:
            rows.append(row(view["name"], "restarted" if view["restarted"] else "up",
                            dict(view, kv_usage=view["kv_cache_usage_perc"]), ""))
    total = result["total"]
    counted, given = total["engines_counted"], len(result["engines"])
    note = ""
    if total["kv_cache_usage_weighting"] == WEIGHTING_UNWEIGHTED and total["engines_counted"] > 1:
        note = "KV_USED unweighted mean (capacity unknown)"
    if not result["complete"]:
        note = ("INCOMPLETE: %s left out; " % ", ".join(result["unreachable_engines"]) + note).rstrip("; ")
    rows.append(row("TOTAL", "%d/%d up" % (counted, given),
                    dict(total, kv_usage=total["kv_cache_usage_perc_weighted_mean"]), note))

    widths = [max(len(str(cells[i])) for cells in [headers] + rows) for i in range(len(headers))]
    # Name and state left-aligned, numbers right-aligned, the note as it is.
    return ["  ".join([str(cell).ljust(widths[i]) if i < 2 else str(cell).rjust(widths[i])
                       for i, cell in enumerate(cells[:-1])] + [str(cells[-1])]).rstrip()
            for cells in [headers] + rows]
