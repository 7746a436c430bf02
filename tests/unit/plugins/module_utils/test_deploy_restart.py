# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's preflight asks each replica whose configuration changed whether it serves
(plugins/module_utils/_deploy_restart.py, for the deploy_restart_check action plugin: vllm_health with
``timeout: 0``, one probe). It may fail only when the probe could not be asked (a configuration error on this side):
a serving engine, one that does not serve yet and one that rejects the key (refused by the restart check, naming
the key rotation) go on.

Checked with what the module returns for each (its ``_result`` of ``_vllm_wait.wait`` with the plugin's own
arguments, the probe replaced). Seen in the lab: every deploy.yml that restarts a serving replica (the replica
scenario's runtime change) failed here with reason ``reached``, when the rule was a task's failed_when.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _deploy_restart as dr
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_wait
from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as health
from ansible_collections.factory_floor.llm.plugins.modules import vllm_health as module


@pytest.mark.parametrize("seen, fails", [
    (health.ProbeResult(status=health.SERVING, models=["lab-chat"]), False),
    (health.ProbeResult(status=health.LOADING, error="503 from /health"), False),
    (health.ProbeResult(status=health.UNREACHABLE, error="connection refused"), False),
    (health.ProbeResult(status=health.DEAD, error="401 from /v1/models", http_status=401), False),
    (health.ProbeResult(status=health.CONFIG_ERROR, error="invalid header value"), True),
], ids=["serving", "loading", "unreachable", "rejected", "config_error"])
def test_the_probe_fails_the_preflight_only_when_it_could_not_ask(monkeypatch, seen, fails):
    args = dr.probe_args({"url": "http://127.0.0.1:8000", "api_key": "k", "model": "lab-chat"})
    monkeypatch.setattr(_vllm_wait, "probe", lambda *a, **k: seen)
    outcome = _vllm_wait.wait(args["url"], api_key=args["api_key"], model=args["model"], kind=args["probe"],
                              timeout=float(args["timeout"]), generate_timeout=float(args["generate_timeout"]),
                              sleep=lambda s: None)
    result = module._result(outcome)
    assert (dr.probe_failure(result) is not None) is fails, result


def test_a_probe_that_could_not_be_asked_fails_with_its_own_message():
    assert dr.probe_failure({"failed": True, "msg": "url must be http or https"}) == "url must be http or https"
    assert dr.probe_failure({"reason": "error", "error": "invalid header"}) == (
        "vllm_health could not ask the engine: invalid header")


def test_the_probe_asks_once_at_the_sites_endpoint_leaving_out_what_is_not_set():
    assert dr.probe_args({"url": "http://127.0.0.1:8000", "api_key": "", "model": None}) == {
        "url": "http://127.0.0.1:8000", "probe": "generate", "generate_timeout": 60, "timeout": 0}


V = {"inventory_hostname": "spark-a", "groups": {"gb10": ["spark-a", "spark-b"], "proxy": ["proxy-1"]},
     "site_engine_group": "gb10", "topology": "replicas", "vllm_service_plan": {"restart_pending": True}}


@pytest.mark.parametrize("change, asked", [
    ({}, True),
    ({"vllm_service_plan": {"restart_pending": False}}, False),
    ({"vllm_service_plan": {}}, False),
    ({"topology": "split"}, False),
    ({"inventory_hostname": "proxy-1"}, False),
], ids=["changed-replica", "unchanged", "no-plan", "split", "proxy-host"])
def test_only_a_replica_whose_configuration_changed_is_asked(change, asked):
    assert dr.probes(dict(V, **change)) is asked
