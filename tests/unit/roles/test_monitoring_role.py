# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""playbooks/monitoring.yml as a site runs it, on this machine: the monitoring role installs the alert rules
with the site's windows and thresholds on the Prometheus host, checked with the real promtool.

What a user would check: the installed file is what Prometheus loads (promtool), an alert fires after the
site's window and not the file's (promtool test rules on the installed file), the groups of daemons the
site does not run are left out, a second run changes nothing, and a misspelled setting is refused naming
the variable and the closest alert, with the installed file untouched. Every host is this machine
(``ansible_connection: local``); no Prometheus is reloaded (``monitoring_prometheus_service: ""``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.extras import test_prometheus_alerts as pa

ROOT = pa.ROOT
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def _inventory(tmp_path, proxies=1, workloads=None):
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    engine = dict(local, memory_guard_workloads=workloads or [])
    inventory = {"all": {"children": {
        "gb10": {"hosts": {"spark-a": engine, "spark-b": local},
                 "vars": {"vllm_prometheus_hosts": ["prometheus-1"]}},
        "proxy": {"hosts": {"gateway-%d" % n: local for n in range(proxies)}},
        "monitoring": {"hosts": {"prometheus-1": local}},
    }}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def run(tmp_path, inventory, **extra):
    settings = {"monitoring_rules_file": str(tmp_path / "prometheus" / "rules" / "factory-floor.yml"),
                "monitoring_promtool": pa.promtool(), "monitoring_prometheus_service": ""}
    settings.update(extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), os.path.join(ROOT, "playbooks", "monitoring.yml"),
                           "-e", json.dumps(settings)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    return done, tmp_path / "prometheus" / "rules" / "factory-floor.yml"


def _recap(output, host):
    line = [x for x in output.splitlines() if x.startswith(host + " ") and "ok=" in x]
    assert line, output
    return dict(part.split("=") for part in line[0].split(":", 1)[1].split())


def _alerts(path):
    return {rule["alert"]: rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("monitoring")
    inventory = _inventory(tmp)
    first, rules = run(tmp, inventory, monitoring_out_of_rotation_for="1m", monitoring_ttft_p95_seconds=2.5,
                       monitoring_alert_for={"VLLMQueueDeep": "2m"})
    second, _rules = run(tmp, inventory, monitoring_out_of_rotation_for="1m", monitoring_ttft_p95_seconds=2.5,
                         monitoring_alert_for={"VLLMQueueDeep": "2m"})
    return {"tmp": tmp, "inventory": inventory, "first": first, "second": second, "rules": rules}


@needs_tools
def test_the_rules_land_with_the_sites_windows_and_thresholds(installed):
    assert installed["first"].returncode == 0, installed["first"].stdout + installed["first"].stderr
    alerts = _alerts(installed["rules"])
    assert alerts["FactoryFloorEngineOutOfRotation"]["for"] == "1m"
    assert alerts["VLLMQueueDeep"]["for"] == "2m"
    assert alerts["VLLMTimeToFirstTokenHigh"]["expr"].rstrip().endswith("> 2.5")
    # site_max_num_seqs, the default of monitoring_queue_waiting_max.
    assert alerts["VLLMQueueDeep"]["expr"] == "vllm:num_requests_waiting > 12"
    # Everything else as shipped; Prometheus' own templates are not Ansible's.
    shipped = pa.rules()
    assert alerts["VLLMEngineDown"] == shipped["VLLMEngineDown"]
    assert "{{ $labels.host }}" in alerts["FactoryFloorEngineOutOfRotation"]["annotations"]["summary"]
    # One proxy host, no memory guard watch: their groups are left out (their absent() would fire forever).
    assert "FactoryFloorFloatingAddressNoHolder" not in alerts and "FactoryFloorMemoryGuardMetricsAbsent" not in alerts
    left_out = ("FactoryFloorFloatingAddress", "FactoryFloorKeepalived", "FactoryFloorMemoryGuardMetrics")
    assert set(alerts) == {name for name in shipped if not name.startswith(left_out)}
    assert _recap(installed["first"].stdout, "prometheus-1")["changed"] == "2"


@needs_tools
def test_a_second_run_changes_nothing(installed):
    assert installed["second"].returncode == 0, installed["second"].stdout
    assert _recap(installed["second"].stdout, "prometheus-1")["changed"] == "0"


@needs_tools
def test_the_installed_rules_fire_after_the_sites_window(installed, tmp_path, monkeypatch):
    """spark-b drained while spark-a serves: with the site's 1 minute the alert fires at 3 minutes; the file as
    shipped (30 minutes) is silent then."""
    series = pa.timeline(pa.engine_out_of_rotation(tmp_path, monkeypatch, True)[:4])
    labels = dict(pa.PROXY_NODE, host="gateway", backend="spark-b", severity="warning")
    expected = [{"exp_labels": labels, "exp_annotations": pa.annotations("FactoryFloorEngineOutOfRotation", labels)}]
    for rules, alerts in ((str(installed["rules"]), expected), (pa.RULES, [])):
        test = {"rule_files": [rules], "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
                    {"eval_time": "3m", "alertname": "FactoryFloorEngineOutOfRotation", "exp_alerts": alerts}]}]}
        path = tmp_path / "site.test.yml"
        path.write_text(yaml.safe_dump(test, sort_keys=False))
        done = subprocess.run([pa.promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, (rules, done.stdout + done.stderr)


@needs_tools
def test_a_misspelled_setting_is_refused_naming_it_and_nothing_changes(installed):
    before = installed["rules"].read_text()
    done, rules = run(installed["tmp"], installed["inventory"], monitoring_alert_for={"VLLMQueueDepp": "2m"},
                      monitoring_alert_thresholds={"VLLMKVCacheNearlyFull": "95%"})
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "monitoring_alert_for[VLLMQueueDepp]: there is no alert VLLMQueueDepp (did you mean VLLMQueueDeep?)" in output
    assert "monitoring_alert_thresholds[VLLMKVCacheNearlyFull] is '95%': a number" in output
    assert rules.read_text() == before
    done, _rules = run(installed["tmp"], installed["inventory"], monitoring_out_of_rotation_for="30 minutes")
    assert done.returncode != 0
    assert "monitoring_out_of_rotation_for is '30 minutes': a Prometheus duration" in done.stdout + done.stderr
    assert rules.read_text() == before


@needs_tools
def test_the_groups_of_daemons_the_site_runs_are_kept(tmp_path):
    inventory = _inventory(tmp_path, proxies=2, workloads=[{"name": "db", "unit": "postgresql.service", "peak_gib": 4}])
    done, rules = run(tmp_path, inventory)
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = _alerts(rules)
    assert {"FactoryFloorFloatingAddressNoHolder", "FactoryFloorMemoryGuardMetricsAbsent"} <= set(alerts)


@needs_tools
def test_no_prometheus_host_is_refused(tmp_path):
    inventory = yaml.safe_load(_inventory(tmp_path).read_text())
    del inventory["all"]["children"]["gb10"]["vars"]
    (tmp_path / "none.yml").write_text(yaml.safe_dump(inventory))
    done, _rules = run(tmp_path, tmp_path / "none.yml")
    assert done.returncode != 0
    assert "No Prometheus host: set vllm_prometheus_hosts" in done.stdout + done.stderr
