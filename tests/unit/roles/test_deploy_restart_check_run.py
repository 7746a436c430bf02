# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's preflight task ``factory_floor.llm.deploy_restart_check`` run by ansible-playbook (this machine is
spark-a, local connection) against a loopback stand-in for vLLM, with the site role's own variables
(``_site_vllm_endpoint``, its ``api_key`` omitted when ``vllm_api_key`` is empty): the probe reaches the engine, a
second replica lets it go on, the only replica that serves is refused, and a key the engine rejects is refused naming
the rotation - in the words of the unit tests (tests/unit/plugins/modules/test_deploy_restart_check.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PLAY = [{
    "name": "deploy.yml's preflight: the restart check",
    "hosts": "gb10",
    "gather_facts": False,
    "vars_files": [os.path.join(ROOT, "roles", "site", "defaults", "main.yml"),
                   os.path.join(ROOT, "roles", "site", "vars", "main.yml")],
    "tasks": [{"name": "Refuse a new API key the running engines reject, and restarting the only replica while it "
                       "serves, unless forced",
               "factory_floor.llm.deploy_restart_check": None}],
}]

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


@pytest.fixture
def engine():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


def run(tmp_path, engine, others=(), **extra):
    hosts = {"spark-a": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                         "vllm_port": engine.port}}
    hosts.update((name, {"ansible_host": "127.0.0.1"}) for name in others)
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"gb10": {"hosts": hosts}, "proxy": {"hosts": {}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    extra = dict({"topology": "replicas", "vllm_served_model_name": engine.models[0],
                  "vllm_service_plan": {"restart_pending": True, "change": "was --max-num-seqs 12, now 10"}}, **extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "--limit", "spark-a", "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@needs_tools
def test_a_replica_that_serves_next_to_another_goes_on_after_one_probe(tmp_path, engine):
    rc, output = run(tmp_path, engine, others=["spark-b"])
    assert rc == 0, output
    assert "/v1/completions" in {path for _method, path, _headers, _body in engine.requests}


@needs_tools
def test_the_only_replica_that_serves_is_refused(tmp_path, engine):
    rc, output = run(tmp_path, engine)
    assert rc != 0, output
    assert "spark-a is the only replica and its configuration changed (was --max-num-seqs 12, now 10)." in output


@needs_tools
def test_a_key_the_engine_rejects_is_refused_naming_the_rotation(tmp_path, engine):
    engine.api_key = "the-engines-key"
    rc, output = run(tmp_path, engine, others=["spark-b"], vllm_api_key="a-new-key")
    assert rc != 0, output
    assert "spark-a's engine rejects vllm_api_key (HTTP 401 or 403)" in output and "vllm_api_key_next" in output
    assert "a-new-key" not in output
