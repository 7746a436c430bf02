# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's preflight asks each replica whose configuration changed whether it serves
(roles/site_deploy/tasks/deploy_preflight.yml, "See whether each of them serves now": vllm_health
with ``timeout: 0``, one probe). That task may fail only when the probe could not be asked
(a configuration error on this side): a serving engine, one that does not serve yet and one
that rejects the key (refused by the next task, naming the key rotation) go on.

Checked with what the module returns for each (its ``_result`` of ``_vllm_wait.wait`` with
the task's own arguments, the probe replaced) and the task's own ``failed_when``, evaluated
as Ansible evaluates a conditional. Seen in the lab: every deploy.yml that restarts a
serving replica (the replica scenario's runtime change) failed here with reason
``reached``.
"""

from __future__ import annotations

import os

import jinja2
import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._host import vllm_health as health
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_wait
from ansible_collections.factory_floor.llm.plugins.modules import vllm_health as module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _task():
    with open(os.path.join(ROOT, "roles", "site_deploy", "tasks", "deploy_preflight.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    # Blocks flattened: the probe sits in the block of the engine hosts' checks.
    tasks = [inner for task in tasks for inner in (task.get("block") or [task])]
    found = [t for t in tasks if t.get("name") == "See whether each of them serves now"]
    assert len(found) == 1, "the task moved: adapt this test"
    return found[0]


def _failed(task, result):
    """The task's failed_when as Ansible evaluates it (a bare Jinja expression, any item true)."""
    conditions = task["failed_when"] if isinstance(task["failed_when"], list) else [task["failed_when"]]
    env = jinja2.Environment()
    return any(env.from_string("{{ %s }}" % c).render(**{task["register"]: result}) == "True"
               for c in conditions)


@pytest.mark.parametrize("seen, fails", [
    (health.ProbeResult(status=health.SERVING, models=["lab-chat"]), False),
    (health.ProbeResult(status=health.LOADING, error="503 from /health"), False),
    (health.ProbeResult(status=health.UNREACHABLE, error="connection refused"), False),
    (health.ProbeResult(status=health.DEAD, error="401 from /v1/models", http_status=401), False),
    (health.ProbeResult(status=health.CONFIG_ERROR, error="invalid header value"), True),
], ids=["serving", "loading", "unreachable", "rejected", "config_error"])
def test_the_probe_fails_the_preflight_only_when_it_could_not_ask(monkeypatch, seen, fails):
    task = _task()
    args = task["factory_floor.llm.vllm_health"]
    monkeypatch.setattr(_vllm_wait, "probe", lambda *a, **k: seen)
    outcome = _vllm_wait.wait("http://127.0.0.1:8000", api_key="k", model="lab-chat", kind=args["probe"],
                              timeout=float(args["timeout"]), generate_timeout=float(args["generate_timeout"]),
                              sleep=lambda s: None)
    result = module._result(outcome)
    assert _failed(task, result) is fails, result
