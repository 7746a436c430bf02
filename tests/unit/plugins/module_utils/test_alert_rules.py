# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The alert rules with a site's settings (``_alert_rules.apply``), on the rules file the collection ships;
and the monitoring role's named defaults are the file's own values (the file is the defaults, rendered)."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _alert_rules as ar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def shipped():
    with open(os.path.join(ROOT, "extras", "prometheus", "factory-floor-alerts.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_settings_change_only_what_they_name():
    rules = shipped()
    out = ar.apply(rules, durations={"FactoryFloorEngineOutOfRotation": "1m", "FactoryFloorWatchdogGaveUp": "30s"},
                   thresholds={"VLLMTimeToFirstTokenHigh": 2.5, "VLLMQueueDeep": "24", "VLLMKVCacheNearlyFull": 0.9},
                   skip_groups=["factory-floor-floating-address"])
    alerts, before = ar.alerts(out), ar.alerts(rules)
    assert alerts["FactoryFloorEngineOutOfRotation"]["for"] == "1m"
    assert alerts["FactoryFloorWatchdogGaveUp"]["for"] == "30s" and "for" not in before["FactoryFloorWatchdogGaveUp"]
    assert alerts["VLLMTimeToFirstTokenHigh"]["expr"].endswith("(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 2.5")
    assert alerts["VLLMQueueDeep"]["expr"] == "vllm:num_requests_waiting > 24"
    assert alerts["VLLMKVCacheNearlyFull"]["expr"] == "vllm:kv_cache_usage_perc > 0.9"
    assert not [name for name in alerts if name.startswith("FactoryFloorFloatingAddress")]
    untouched = set(before) - {"FactoryFloorEngineOutOfRotation", "FactoryFloorWatchdogGaveUp", "VLLMTimeToFirstTokenHigh",
                               "VLLMQueueDeep", "VLLMKVCacheNearlyFull"} - {n for n in before if n not in alerts}
    assert all(alerts[name] == before[name] for name in untouched)
    assert ar.alerts(shipped()) == before          # the input is not changed


@pytest.mark.parametrize("kwargs, words", [
    ({"durations": {"VLLMQueueDepp": "2m"}}, "monitoring_alert_for[VLLMQueueDepp]: there is no alert VLLMQueueDepp "
                                             "(did you mean VLLMQueueDeep?)"),
    ({"durations": {"VLLMQueueDeep": "5 minutes"}}, "monitoring_alert_for[VLLMQueueDeep] is '5 minutes': a Prometheus "
                                                    "duration, such as 30s, 5m or 1h30m."),
    ({"durations": {"VLLMQueueDeep": 300}}, "is 300: a Prometheus duration"),
    ({"durations": {"VLLMQueueDeep": "5m30"}}, "is '5m30': a Prometheus duration"),
    ({"thresholds": {"VLLMKVCacheNearlyFull": "95%"}}, "monitoring_alert_thresholds[VLLMKVCacheNearlyFull] is '95%': "
                                                       "a number, such as 12 or 2.5."),
    ({"thresholds": {"VLLMKVCacheNearlyFull": True}}, "is True: a number"),
    ({"thresholds": {"FactoryFloorWatchdogMetricsAbsent": 1}}, "the expression of FactoryFloorWatchdogMetricsAbsent ends "
                                                               "with no number to set (it takes no threshold)."),
    ({"skip_groups": ["factory-floor-floating"]}, "monitoring_skip_groups: there is no rule group factory-floor-floating "
                                                  "(did you mean factory-floor-floating-address?)"),
    ({"skip_groups": "factory-floor-load"}, "monitoring_skip_groups must be a list of rule group names"),
    ({"durations": ["VLLMQueueDeep"]}, "monitoring_alert_for must be a mapping of alert names to values"),
])
def test_a_wrong_setting_is_named_with_what_to_write(kwargs, words):
    with pytest.raises(ar.RuleSettingError) as caught:
        ar.apply(shipped(), **kwargs)
    assert words in str(caught.value)


def test_every_wrong_setting_is_named_at_once():
    with pytest.raises(ar.RuleSettingError) as caught:
        ar.apply(shipped(), durations={"Nope": "1m"}, thresholds={"VLLMQueueDeep": "x"})
    assert "there is no alert Nope" in str(caught.value) and "VLLMQueueDeep] is 'x'" in str(caught.value)


@pytest.mark.parametrize("expr, number", [
    ("vllm:num_requests_waiting > 12", 12.0),
    ("x >= 0.95", 0.95),
    ("sum(x) by (a) == bool 0", 0.0),
    ("x > 1e3\n", 1000.0),
    ("absent(x)", None),
    ("changes(x[4m]) == 0 or absent(x)", None),
])
def test_the_threshold_is_the_number_after_the_last_comparison(expr, number):
    assert ar.threshold(expr) == number


@pytest.mark.parametrize("value, ok", [("30s", True), ("5m", True), ("1h30m", True), ("2d", True), ("500ms", True),
                                       ("", False), ("5 m", False), ("m", False), ("30m1h", False), ("1.5h", False)])
def test_durations_are_prometheus_durations(value, ok):
    assert ar.is_duration(value) is ok


def test_the_monitoring_roles_named_defaults_are_the_files_values():
    defaults, site = _defaults("monitoring"), _defaults("site")
    alerts = ar.alerts(shipped())
    assert defaults["monitoring_out_of_rotation_for"] == alerts["FactoryFloorEngineOutOfRotation"]["for"]
    assert ar.threshold(alerts["VLLMTimeToFirstTokenHigh"]["expr"]) == defaults["monitoring_ttft_p95_seconds"]
    assert defaults["monitoring_queue_waiting_max"] == "{{ site_max_num_seqs }}"
    assert ar.threshold(alerts["VLLMQueueDeep"]["expr"]) == site["site_max_num_seqs"]


@pytest.mark.parametrize("value", ["30 minutes", "", 30, None])
def test_a_named_window_that_is_no_duration_is_refused_first_naming_its_variable(value):
    with pytest.raises(ar.RuleSettingError) as caught:
        ar.apply(shipped(), durations={"Nope": "1m"}, named={"monitoring_out_of_rotation_for": value})
    assert str(caught.value) == ("monitoring_out_of_rotation_for is '%s': a Prometheus duration, such as 30m, 1h or "
                                 "1h30m." % value)
    assert ar.apply(shipped(), named={"monitoring_out_of_rotation_for": "1h30m"}) == ar.apply(shipped())
