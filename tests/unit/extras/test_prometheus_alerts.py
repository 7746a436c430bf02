# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""extras/prometheus/factory-floor-alerts.yml, checked and tested with Prometheus' own promtool.

``promtool check rules`` must pass, and for every alert ``promtool test rules`` proves that
it fires on a sample of its fault and stays silent on a healthy one. The samples:

* the daemons' verdicts are the files the daemons themselves write in their unit-test
  worlds (tests/unit/plugins/module_utils/test_textfile.py: a watchdog that gave up, the
  memory guard under its floor with nothing left to act on, a proxy whose engines are all
  gone or all drained), read as node_exporter serves them;
* the engines' metrics are exposition texts with vLLM's own names and labels
  (tests/unit/fixtures/metrics): ``vllm_0_32_frozen_t0``/``_t1`` is a frozen scheduler
  (requests running, no counter moving), ``vllm_a_t0``/``_t1`` a healthy engine 20 s apart,
  extended at its measured rates; the full KV cache is that healthy engine with
  ``vllm:kv_cache_usage_perc`` at 0.97. None was recorded from a live engine: the lab
  can record them (docs/monitoring.md).

promtool comes from Debian's prometheus package (``make promtool`` extracts it into
.cache; ``make units`` does that first), or ``$PROMTOOL``, or the PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils._host import test_textfile as tt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULES = os.path.join(ROOT, "extras", "prometheus", "factory-floor-alerts.yml")
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "metrics")
STEPS = 41          # one sample a minute, 0m..40m
EVAL = "40m"
ENGINE = {"job": "vllm", "instance": "spark-a:8000", "host": "spark-a", "topology": "replicas"}
NODE = {"job": "node", "instance": "spark-a:9100"}
PROXY_NODE = {"job": "node", "instance": "gateway:9100"}


def promtool():
    found = os.environ.get("PROMTOOL") or os.path.join(ROOT, ".cache", "promtool", "usr", "bin", "promtool")
    if os.path.exists(found):
        return found
    if shutil.which("promtool"):
        return shutil.which("promtool")
    pytest.fail("promtool not found: `make promtool` extracts it from Debian's prometheus package into .cache "
                "(make units does it first), or set PROMTOOL")
    return None


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt"), encoding="utf-8") as handle:
        return handle.read()


def read(text, extra):
    """{series selector: value} of an exposition text, with the target's labels added."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels, **extra)
            inside = ",".join('%s="%s"' % (k, labels[k].replace("\\", "\\\\").replace('"', '\\"'))
                              for k in sorted(labels))
            found["%s{%s}" % (sample.name, inside)] = sample.value
    return found


def timeline(snapshots):
    """promtool input_series from one snapshot per minute ({series: value}); "_" where a series is absent."""
    names = sorted(set().union(*snapshots))
    return [{"series": name, "values": " ".join("_" if name not in snap else repr(float(snap[name]))
                                                for snap in snapshots)} for name in names]


def steady(snapshot):
    return [snapshot] * STEPS


def advancing(t0, t1, seconds_apart, rest=None):
    """Counters go on rising at the rate between t0 and t1; gauges keep t1's values."""
    per_minute = 60.0 / seconds_apart
    snaps = []
    for minute in range(STEPS):
        snap = {}
        for name, value in t1.items():
            if name.split("{")[0].endswith(("_total", "_count", "_sum", "_bucket")):
                snap[name] = t0.get(name, value) + (value - t0.get(name, value)) * per_minute * minute
            else:
                snap[name] = value
        snap.update(rest or {})
        snaps.append(snap)
    return snaps


# ------------------------------------------------------------------- the samples


def engine_up(up):
    return steady({"up{%s}" % ",".join('%s="%s"' % kv for kv in sorted(ENGINE.items())): up})


def engine_down(tmp_path, monkeypatch, fault):
    return engine_up(0 if fault else 1)


def alive(snapshot, minutes=STEPS):
    """One snapshot a minute of a daemon's file that it keeps writing: its timestamp moves."""
    stamps = [name for name in snapshot if name.split("{")[0].endswith("_updated_timestamp_seconds")]
    return [dict(snapshot, **{name: 1_796_000_000.0 + 60.0 * minute for name in stamps}) for minute in range(minutes)]


def engine_down_with_watchdog(tmp_path, monkeypatch, verdict, live=True):
    """The port is closed (up 0) while the watchdog's file says ``verdict`` (tt.watchdog_textfile's
    fault), written every minute (``live``) or last written at 0m (its watchdog stopped)."""
    said = read(tt.watchdog_textfile(tmp_path, monkeypatch, verdict), NODE)
    files = alive(said) if live else steady(said)
    return [dict(snap, **file) for snap, file in zip(engine_up(0), files)]


def engine_down_while_starting(tmp_path, monkeypatch, fault):
    """The port is closed (up 0) while the watchdog says the engine is starting (a deploy's start-up)."""
    return engine_down_with_watchdog(tmp_path, monkeypatch, "starting")


def engine_hung(tmp_path, monkeypatch, fault):
    if fault:
        return [read(fixture("vllm_0_32_frozen_t0"), ENGINE)] + [read(fixture("vllm_0_32_frozen_t1"), ENGINE)] * (STEPS - 1)
    return advancing(read(fixture("vllm_a_t0"), ENGINE), read(fixture("vllm_a_t1"), ENGINE), 20)


def _engine_gauge(gauge, value):
    """The healthy engine at its measured rates, with ``gauge`` at ``value`` on the fault."""
    def sample(tmp_path, monkeypatch, fault):
        snaps = advancing(read(fixture("vllm_a_t0"), ENGINE), read(fixture("vllm_a_t1"), ENGINE), 20)
        if fault:
            for snap in snaps:
                for name in snap:
                    if name.startswith(gauge + "{"):
                        snap[name] = value
        return snaps
    return sample


kv_cache_full = _engine_gauge("vllm:kv_cache_usage_perc", 0.97)


def _textfile_steady(producer, labels):
    def sample(tmp_path, monkeypatch, fault):
        return steady(read(producer(tmp_path, monkeypatch, fault), labels))
    return sample


def engines_drained_long(tmp_path, monkeypatch, fault):
    """Every engine drained for the whole 40 minutes, or for a 20-minute switch that then completed."""
    drained = read(tt.upstream_textfile(tmp_path / "d", monkeypatch, "drained"), PROXY_NODE)
    serving = read(tt.upstream_textfile(tmp_path / "s", monkeypatch, False), PROXY_NODE)
    return [drained] * STEPS if fault else [drained] * 20 + [serving] * (STEPS - 20)


def lock_expired(tmp_path, monkeypatch, fault):
    """The watchdog found its host's maintenance lock expired (a dead run's), or held (a switch)."""
    return alive(read(tt.watchdog_textfile(tmp_path, monkeypatch, "lock_expired" if fault else "maintenance"), NODE))


def watchdog_config_error(tmp_path, monkeypatch, fault):
    """The watchdog cannot send its own request (its key ends with a newline): written every minute, or it serves."""
    return alive(read(tt.watchdog_textfile(tmp_path, monkeypatch, "config_error" if fault else False), NODE))


def verdicts_stale(tmp_path, monkeypatch, fault):
    """The watchdog's file, its timestamp on promtool's clock: written every minute, or last at 0m."""
    snap = read(tt.watchdog_textfile(tmp_path, monkeypatch, False), NODE)
    stamp = [name for name in snap if name.startswith("factory_floor_watchdog_updated_timestamp_seconds{")][0]
    return [dict(snap, **{stamp: 0.0 if fault else 60.0 * minute}) for minute in range(STEPS)]


WATCHDOG = {"unit": "vllm-replica.service", "role": "replica", "host": "spark-a", **NODE}
# alert -> (sample, labels of the alert it must raise on the fault)
CASES = {
    "VLLMEngineDown": (engine_down, dict(ENGINE, severity="critical")),
    "VLLMEngineHung": (engine_hung, dict(ENGINE, engine="0", model_name="lab-chat", severity="critical")),
    "VLLMKVCacheNearlyFull": (kv_cache_full, dict(ENGINE, engine="0", model_name="local-model", severity="warning")),
    "FactoryFloorNoEngineInRotation": (_textfile_steady(tt.upstream_textfile, PROXY_NODE),
                                       dict(PROXY_NODE, host="gateway", severity="critical")),
    "FactoryFloorEnginesDrainedTooLong": (engines_drained_long, dict(PROXY_NODE, host="gateway", severity="warning")),
    "FactoryFloorMemoryFloorCrossed": (_textfile_steady(tt.memory_guard_textfile, NODE),
                                       dict(NODE, host="spark-a", severity="warning")),
    "FactoryFloorMemoryGuardNothingLeft": (_textfile_steady(tt.memory_guard_textfile, NODE),
                                           dict(NODE, host="spark-a", severity="critical")),
    "FactoryFloorWatchdogGaveUp": (_textfile_steady(tt.watchdog_textfile, NODE), dict(WATCHDOG, severity="critical")),
    "FactoryFloorVerdictsStale": (verdicts_stale, dict(WATCHDOG, severity="warning")),
    "FactoryFloorMaintenanceLockExpired": (lock_expired, dict(WATCHDOG, severity="warning")),
    "FactoryFloorWatchdogConfigError": (watchdog_config_error, dict(WATCHDOG, verdict="config_error", severity="warning")),
}


# ------------------------------------------------- issue 35: absent(), rotation, load, floating address

ENGINE_B = dict(ENGINE, instance="spark-b:8000", host="spark-b")
PROXY_B_NODE = {"job": "node", "instance": "gateway-b:9100"}


def _selector(name, labels):
    return "%s{%s}" % (name, ",".join('%s="%s"' % kv for kv in sorted(labels.items())))


def _with(snapshots, extra):
    return [dict(snap, **extra) for snap in snapshots]


def watchdog_metrics_absent(tmp_path, monkeypatch, fault):
    """The engines are scraped; the watchdog's file reaches Prometheus (healthy) or no file does (a
    node_exporter reading another directory)."""
    up = {_selector("up", ENGINE): 1, _selector("up", ENGINE_B): 1}
    if fault:
        return steady(up)
    return _with(alive(read(tt.watchdog_textfile(tmp_path, monkeypatch, False), NODE)), up)


def watchdog_metrics_missing(tmp_path, monkeypatch, fault):
    """spark-a's watchdog reports; spark-b's engine is scraped and its watchdog's file does not reach
    Prometheus (``fault``), or spark-b is the split's rank 1, which has no scrape target (healthy)."""
    files = alive(read(tt.watchdog_textfile(tmp_path, monkeypatch, False), NODE))
    up = {_selector("up", ENGINE): 1}
    if fault:
        up[_selector("up", ENGINE_B)] = 1
    return _with(files, up)


def _absent_of(producer, labels):
    def sample(tmp_path, monkeypatch, fault):
        other = {_selector("up", ENGINE): 1}
        return steady(other) if fault else _with(alive(read(producer(tmp_path, monkeypatch, False), labels)), other)
    return sample


def engine_out_of_rotation(tmp_path, monkeypatch, fault):
    """Both replicas scraped; the proxy has spark-b drained while spark-a serves (``fault``), or both in."""
    up = {_selector("up", ENGINE): 1, _selector("up", ENGINE_B): 1}
    proxy = read(tt.upstream_textfile(tmp_path, monkeypatch, "one_drained" if fault else False), PROXY_NODE)
    return steady(dict(proxy, **up))


# spark-a with 20 requests waiting (more than max_num_seqs, 12) for the whole window, or its measured 1.
queue_deep = _engine_gauge("vllm:num_requests_waiting", 20.0)


def ttft_high(tmp_path, monkeypatch, fault):
    """spark-a at its measured rates (p95 under 1 s), or with every new request's first token after 10-20 s:
    only the buckets from le=20 up (and the count) grow."""
    t0, t1 = read(fixture("vllm_a_t0"), ENGINE), read(fixture("vllm_a_t1"), ENGINE)
    snaps = advancing(t0, t1, 20)
    if fault:
        for minute, snap in enumerate(snaps):
            for name in snap:
                if not name.startswith(("vllm:time_to_first_token_seconds_bucket{",
                                        "vllm:time_to_first_token_seconds_count{")):
                    continue
                bound = re.search(r'le="([^"]+)"', name)
                late = bound is None or float(bound.group(1)) >= 20.0
                snap[name] = t1[name] + (30.0 * minute if late else 0.0)
    return snaps


def _keepalived(tmp_path, monkeypatch, holders, down=(), live=True):
    """Both proxy hosts' watch files, gateway-a and gateway-b; ``holders`` have the address on eth0."""
    found = {}
    for host, node in (("gateway-a", PROXY_NODE), ("gateway-b", PROXY_B_NODE)):
        found.update(read(tt.keepalived_textfile(tmp_path / host, monkeypatch, host, host in holders,
                                                 "MASTER" if host in holders else "BACKUP",
                                                 "failed" if host in down else "active"), node))
    return alive(found) if live else steady(found)


def floating_no_holder(tmp_path, monkeypatch, fault):
    return _keepalived(tmp_path, monkeypatch, () if fault else ("gateway-a",))


def floating_two_holders(tmp_path, monkeypatch, fault):
    return _keepalived(tmp_path, monkeypatch, ("gateway-a", "gateway-b") if fault else ("gateway-b",))


def keepalived_down(tmp_path, monkeypatch, fault):
    return _keepalived(tmp_path, monkeypatch, ("gateway-a",), down=("gateway-b",) if fault else ())


def floating_unwatched(tmp_path, monkeypatch, fault):
    """Both watches report (healthy); gateway-b's stopped at 0m, its file left behind (``fault``)."""
    moving = _keepalived(tmp_path / "a", monkeypatch, ("gateway-a",))
    if not fault:
        return moving
    for snap in moving:
        for name in snap:
            if name.startswith("factory_floor_keepalived_updated_timestamp_seconds{") and 'host="gateway-b"' in name:
                snap[name] = moving[0][name]
    return moving


ABSENT = {"severity": "critical"}
CASES.update({
    "FactoryFloorWatchdogMetricsAbsent": (watchdog_metrics_absent, ABSENT),
    "FactoryFloorWatchdogMetricsMissing": (watchdog_metrics_missing, {"host": "spark-b", "severity": "critical"}),
    "FactoryFloorMembershipMetricsAbsent": (_absent_of(tt.upstream_textfile, PROXY_NODE), ABSENT),
    "FactoryFloorMemoryGuardMetricsAbsent": (_absent_of(tt.memory_guard_textfile, NODE), ABSENT),
    "FactoryFloorEngineOutOfRotation": (engine_out_of_rotation,
                                        dict(PROXY_NODE, host="gateway", backend="spark-b", severity="warning")),
    "VLLMQueueDeep": (queue_deep, dict(ENGINE, engine="0", model_name="local-model", severity="warning")),
    "VLLMTimeToFirstTokenHigh": (ttft_high, dict(ENGINE, model_name="local-model", severity="warning")),
    "FactoryFloorFloatingAddressNoHolder": (floating_no_holder, {"address": "10.89.7.100", "severity": "critical"}),
    "FactoryFloorFloatingAddressTwoHolders": (floating_two_holders, {"address": "10.89.7.100", "severity": "critical"}),
    "FactoryFloorKeepalivedDown": (keepalived_down, dict(PROXY_B_NODE, host="gateway-b", severity="warning")),
    "FactoryFloorFloatingAddressUnwatched": (floating_unwatched,
                                             dict(PROXY_B_NODE, host="gateway-b", severity="warning")),
})


def rules():
    with open(RULES, encoding="utf-8") as handle:
        return {rule["alert"]: rule for group in yaml.safe_load(handle)["groups"] for rule in group["rules"]}


def annotations(alert, labels):
    """The rule's annotations as Prometheus renders them for these labels (only $labels.NAME is used)."""
    rendered = {}
    for key, template in rules()[alert]["annotations"].items():
        assert set(re.findall(r"{{(.*?)}}", template)) <= {" $labels.%s " % name for name in labels}, template
        rendered[key] = re.sub(r"{{ \$labels\.(\w+) }}", lambda m: labels[m.group(1)], template)
    return rendered


def run_promtool_test(tmp_path, alert, series, expected):
    test = {"rule_files": [RULES], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": EVAL, "alertname": alert, "exp_alerts": expected}]}]}
    path = tmp_path / ("%s.test.yml" % alert)
    path.write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    return subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120,
                          check=False)


# --------------------------------------------------------------------- the tests


def test_promtool_check_rules():
    done = subprocess.run([promtool(), "check", "rules", RULES], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: %d rules found" % len(rules()) in done.stdout


def test_every_alert_is_tested_and_has_a_runbook_line():
    assert set(rules()) == set(CASES)
    for alert, rule in rules().items():
        assert rule["labels"]["severity"] in ("critical", "warning"), alert
        assert set(rule["annotations"]) == {"summary", "runbook"}, alert
        assert "\n" not in rule["annotations"]["runbook"], alert


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_fires_on_its_fault(tmp_path, monkeypatch, alert):
    sample, labels = CASES[alert]
    expected = [{"exp_labels": labels, "exp_annotations": annotations(alert, labels)}]
    done = run_promtool_test(tmp_path, alert, timeline(sample(tmp_path, monkeypatch, True)), expected)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_is_silent_when_healthy(tmp_path, monkeypatch, alert):
    sample = CASES[alert][0]
    done = run_promtool_test(tmp_path, alert, timeline(sample(tmp_path, monkeypatch, False)), [])
    assert done.returncode == 0, done.stdout + done.stderr


def test_engine_down_is_silent_while_the_watchdog_says_starting(tmp_path, monkeypatch):
    done = run_promtool_test(tmp_path, "VLLMEngineDown", timeline(engine_down_while_starting(tmp_path, monkeypatch, True)),
                             [])
    assert done.returncode == 0, done.stdout + done.stderr


def _fires(tmp_path, alert, series, labels):
    expected = [{"exp_labels": labels, "exp_annotations": annotations(alert, labels)}]
    return run_promtool_test(tmp_path, alert, series, expected)


def test_engine_down_is_silent_while_a_lock_holds_and_pages_once_it_expired(tmp_path, monkeypatch):
    """A switch holds the lock: no page. The lock of a dead run has expired: the watchdog judges again
    (no "maintenance" verdict), and the engine that is down pages."""
    held = timeline(engine_down_with_watchdog(tmp_path / "held", monkeypatch, "maintenance"))
    done = run_promtool_test(tmp_path, "VLLMEngineDown", held, [])
    assert done.returncode == 0, done.stdout + done.stderr
    expired = timeline(engine_down_with_watchdog(tmp_path / "expired", monkeypatch, "lock_expired"))
    done = _fires(tmp_path, "VLLMEngineDown", expired, dict(ENGINE, severity="critical"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_engine_down_pages_when_the_watchdog_that_stood_down_is_gone(tmp_path, monkeypatch):
    """The watchdog stopped while it said "maintenance": its file stays, and must not silence the page."""
    stale = timeline(engine_down_with_watchdog(tmp_path, monkeypatch, "maintenance", live=False))
    done = _fires(tmp_path, "VLLMEngineDown", stale, dict(ENGINE, severity="critical"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_engine_down_is_silent_while_a_proxy_has_it_drained(tmp_path, monkeypatch):
    """A switch drains the old engines before it stops them: the proxy's textfile says so."""
    drained = read(tt.upstream_textfile(tmp_path, monkeypatch, "drained"), PROXY_NODE)
    series = timeline([dict(snap, **drained) for snap in engine_up(0)])
    assert run_promtool_test(tmp_path, "VLLMEngineDown", series, []).returncode == 0
    # The control: the same outage with the engine in rotation pages.
    serving = read(tt.upstream_textfile(tmp_path / "s", monkeypatch, False), PROXY_NODE)
    series = timeline([dict(snap, **serving) for snap in engine_up(0)])
    labels = dict(ENGINE, severity="critical")
    expected = [{"exp_labels": labels, "exp_annotations": annotations("VLLMEngineDown", labels)}]
    done = run_promtool_test(tmp_path, "VLLMEngineDown", series, expected)
    assert done.returncode == 0, done.stdout + done.stderr


def test_config_error_waits_five_minutes_and_ignores_other_verdicts(tmp_path, monkeypatch):
    """Three minutes of config errors at the end of a healthy run: not yet a page. The watchdog standing down for
    a switch (maintenance) says nothing about its configuration: none either."""
    error = alive(read(tt.watchdog_textfile(tmp_path / "e", monkeypatch, "config_error"), NODE))
    serving = alive(read(tt.watchdog_textfile(tmp_path / "s", monkeypatch, False), NODE))
    recent = [serving[minute] if minute < STEPS - 4 else error[minute] for minute in range(STEPS)]
    assert run_promtool_test(tmp_path, "FactoryFloorWatchdogConfigError", timeline(recent), []).returncode == 0
    held = alive(read(tt.watchdog_textfile(tmp_path / "m", monkeypatch, "maintenance"), NODE))
    assert run_promtool_test(tmp_path, "FactoryFloorWatchdogConfigError", timeline(held), []).returncode == 0


def test_a_fault_sample_really_is_one(tmp_path):
    """The control: promtool fails a test that expects no alert on a fault sample."""
    done = run_promtool_test(tmp_path, "VLLMEngineHung", timeline(engine_hung(tmp_path, None, True)), [])
    assert done.returncode != 0 and "VLLMEngineHung" in done.stdout + done.stderr


def test_out_of_rotation_is_silent_for_the_splits_rank_1_and_when_nothing_serves(tmp_path, monkeypatch):
    """The split's rank 1 serves no API (no scrape target) and always fails the proxy's probe; with every engine
    out, FactoryFloorNoEngineInRotation or FactoryFloorEnginesDrainedTooLong speak instead."""
    split = read(tt.upstream_textfile(tmp_path / "split", monkeypatch, "one_drained"), PROXY_NODE)
    series = timeline(steady(dict(split, **{_selector("up", ENGINE): 1})))
    done = run_promtool_test(tmp_path, "FactoryFloorEngineOutOfRotation", series, [])
    assert done.returncode == 0, done.stdout + done.stderr
    drained = read(tt.upstream_textfile(tmp_path / "all", monkeypatch, "drained"), PROXY_NODE)
    series = timeline(steady(dict(drained, **{_selector("up", ENGINE): 1, _selector("up", ENGINE_B): 1})))
    done = run_promtool_test(tmp_path, "FactoryFloorEngineOutOfRotation", series, [])
    assert done.returncode == 0, done.stdout + done.stderr


def test_out_of_rotation_waits_out_a_switch(tmp_path, monkeypatch):
    """Drained for 20 minutes (a switch's start-up and gate), then back: no alert; the control, 40 minutes, fires."""
    up = {_selector("up", ENGINE): 1, _selector("up", ENGINE_B): 1}
    out = dict(read(tt.upstream_textfile(tmp_path / "o", monkeypatch, "one_drained"), PROXY_NODE), **up)
    back = dict(read(tt.upstream_textfile(tmp_path / "b", monkeypatch, False), PROXY_NODE), **up)
    series = timeline([back] * 15 + [out] * 20 + [back] * (STEPS - 35))
    done = run_promtool_test(tmp_path, "FactoryFloorEngineOutOfRotation", series, [])
    assert done.returncode == 0, done.stdout + done.stderr
