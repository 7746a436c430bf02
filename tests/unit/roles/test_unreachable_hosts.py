# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Tasks that ask another host and take "it does not answer SSH" as data, in deploy.yml's any_errors_fatal plays.

Real ansible-playbook runs: this machine is spark-a (local connection); spark-b is an SSH address on
loopback where nothing listens. With ansible-core 2.19 an unreachable result, even one ignore_unreachable
keeps, makes an any_errors_fatal play fail every host at once - its rescue too: the run ended with exit
code 2 and no message instead of the one the role words.

* the rolling restart (the rolling_restart role, deploy.yml's play with serial: 1): spark-a serves
  (a loopback stand-in for vLLM) and no other replica can carry the load: it must refuse with its own
  message, naming spark-b unreachable;
* the lock given back when a step failed (maintenance_window's abort, every deploy.yml play's rescue):
  spark-a's is released, spark-b's named as kept, and the run stops with what failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.plugins.fake_vllm import FakeVLLM, free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def deploy_rolling_restart_play():
    """deploy.yml's play that restarts the serving replicas, its rescue's lock release left out (no lock here)."""
    with open(os.path.join(ROOT, "playbooks", "deploy.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    (play,) = [p for p in plays if p["name"].startswith("Restart the serving replicas whose configuration changed")]
    assert play["serial"] == 1 and play["any_errors_fatal"] is True
    (block,) = play["tasks"]
    (include,) = block["block"]
    assert include["ansible.builtin.include_role"]["name"] == "factory_floor.llm.rolling_restart"
    rescue = [{"name": "Stop here, with what failed",
               "ansible.builtin.fail": {"msg": "{{ ansible_failed_result.msg | default('A step failed (see above).', true) }}"}}]
    return [dict(play, tasks=[dict(block, rescue=rescue)])]


def run(tmp_path, plays, extra, limit=None):
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_SSH_RETRIES="0", ANSIBLE_SSH_ARGS="-o ConnectTimeout=5")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)] + (["--limit", limit] if limit else []), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr


def inventory(tmp_path, **spark_a):
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({
        "gb10": {"hosts": {
            "spark-a": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable}, **spark_a),
            "spark-b": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": free_port(),
                        "ansible_user": "nobody", "vllm_port": 8000}}},
        "proxy": {"hosts": {}}}))


needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


@pytest.fixture
def engine():
    fake = FakeVLLM().start()
    yield fake
    fake.stop()


@needs_tools
def test_an_unreachable_peer_gets_the_refusal_not_a_silent_exit(tmp_path, engine):
    inventory(tmp_path, vllm_port=engine.port)
    extra = {"topology": "replicas", "vllm_served_model_name": engine.models[0],
             "vllm_service_plan": {"restart_pending": True, "change": "was --max-num-seqs 12, now --max-num-seqs 10"}}
    rc, output = run(tmp_path, deploy_rolling_restart_play(), extra, limit="spark-a")
    assert rc != 0, output
    assert "Not restarting spark-a for its new configuration (was --max-num-seqs 12, now --max-num-seqs 10): it serves, " \
           "and no other replica both serves and is in the proxy's rotation to carry the load meanwhile " \
           "(spark-b: host unreachable)." in " ".join(output.split()), output
    # It never restarted: the stand-in vLLM was only probed (health, models, one 1-token generation).
    probed = {path for _method, path, _headers, _body in engine.requests}
    assert probed <= {"/health", "/version", "/v1/models", "/v1/completions"}


ABORT = [{
    "name": "A step of deploy.yml that fails after the lock was taken",
    "hosts": "spark-a",
    "gather_facts": False,
    "any_errors_fatal": True,
    "tasks": [{
        "name": "The step, or give the lock back",
        "block": [{"name": "The step", "ansible.builtin.fail": {"msg": "the step failed"}}],
        "rescue": [{"name": "Give back this run's lock and stop",
                    "ansible.builtin.include_role": {"name": "factory_floor.llm.maintenance_window", "tasks_from": "abort"}}],
    }],
}]


@needs_tools
def test_the_lock_is_given_back_and_the_failure_named_with_an_engine_host_unreachable(tmp_path):
    inventory(tmp_path, maintenance_window_lock_path=str(tmp_path / "lock"))
    (tmp_path / "lock").write_text(json.dumps({"run": "r1", "holder": "deploy", "expires": 4102444800}))
    extra = {"maintenance_window_run": {"id": "r1", "by": "test", "start": 1796000000.0}}
    rc, output = run(tmp_path, ABORT, extra)
    assert rc != 0, output
    said = " ".join(output.split())
    assert "the step failed This run's maintenance lock was given back on spark-a; it stays on spark-b (not reachable): " \
           "remove it there once this run is known ended." in said, output
    assert not (tmp_path / "lock").exists()
