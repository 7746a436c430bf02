# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""tool_gate_run's steps in a real ansible-playbook run, against a loopback stand-in of vLLM.

One case of the default suite (``single_string``) against a loopback server that answers every chat completion with
text and no tool call: every run scores 0, so the steps' flow shows without a model. The build is given (``tool_gate_build``), the
scores kept in a temporary ``tool_gate_store_dir``. Each step's outcome, in order: the plan finds no stored score
and measures; the incumbent's score is stored; a second plan finds it and does not measure; a candidate of the same
build is judged against it and its failed run kept apart; a candidate whose topology is not gated runs nothing.
The verdict's words are ``test_tool_gate_verdict.py``'s and ``test_tool_gate_decide.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
BUILD = "b" * 64

ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "model": "tiny-llama",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "No tool."}, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}


class ChatServer:
    """Answers every POST with ANSWER and every GET with an empty JSON object; keeps (method, path)."""

    def __init__(self):
        server = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, method, payload):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append((method, self.path))
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's naming
                self._answer("GET", {})

            def do_POST(self):  # noqa: N802
                self._answer("POST", ANSWER)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def _step(name, step, register, **extra):
    args = {"step": step, "suites": "{{ __tool_gate_suites }}"}
    args.update(extra)
    return {"name": name, "factory_floor.llm.tool_gate_run": args, "register": register}


def _play(fake_url, store_dir, out_file):
    variables = {"tool_gate_url": fake_url, "tool_gate_model": "tiny-llama", "tool_gate_api_key": "",
                 "tool_gate_store_dir": str(store_dir), "tool_gate_cases": ["single_string"],
                 "tool_gate_streaming": False, "tool_gate_timeout": 5, "tool_gate_progress_interval": 0,
                 "tool_gate_model_path": "/models/chat", "tool_gate_topology": "replicas", "tool_gate_gated": True,
                 "tool_gate_build": {"id": BUILD, "parts": {}}}
    tasks = [
        {"name": "Read the suite", "ansible.builtin.include_role": {
            "name": "factory_floor.llm.tool_gate", "tasks_from": "suite", "public": True}},
        _step("Plan with nothing stored", "plan", "first_plan"),
        _step("Score the incumbent", "incumbent", "incumbent", plan="{{ first_plan }}"),
        _step("Plan with the score stored", "plan", "second_plan"),
        _step("Judge a candidate of the same build", "candidate", "candidate"),
        dict(_step("A candidate not gated", "candidate", "not_gated"),
             vars={"tool_gate_gated": False, "tool_gate_topology": "split", "tool_gate_topologies": ["replicas"]}),
        {"name": "Keep what each step said", "ansible.builtin.copy": {
            "dest": str(out_file), "mode": "0644",
            "content": "{{ {'first_plan': first_plan, 'incumbent': incumbent, 'second_plan': second_plan,"
                       " 'candidate': candidate, 'not_gated': not_gated} | to_json }}"}}]
    return [{"name": "tool_gate_run's steps", "hosts": "spark-t", "gather_facts": False,
             "vars": dict(variables, tool_gate_incumbent_build_id=BUILD), "tasks": tasks}]


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """(what each step returned, the store's files, the requests the fake saw, the output)."""
    tmp = tmp_path_factory.mktemp("gate")
    fake = ChatServer()
    try:
        (tmp / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"spark-t": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
        (tmp / "play.yml").write_text(json.dumps(_play(fake.url, tmp / "store", tmp / "steps.json"), indent=1))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                   ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
                   ANSIBLE_NOCOLOR="1")
        done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp / "inventory.yml"), str(tmp / "play.yml")], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        stored = sorted(os.path.relpath(os.path.join(where, name), tmp / "store")
                        for where, _dirs, names in os.walk(tmp / "store") for name in names)
        return json.loads((tmp / "steps.json").read_text()), stored, list(fake.requests), output
    finally:
        fake.stop()


@needs_tools
def test_the_plan_measures_when_nothing_is_stored(steps):
    said = steps[0]["first_plan"]
    assert said["found"] is None and said["measure"] is True and said["message"] == ""
    assert said["suite_digest"] and said["changed"] is False


@needs_tools
def test_the_incumbent_is_scored_and_stored(steps):
    said, stored = steps[0]["incumbent"], steps[1]
    assert said["changed"] is True
    assert said["value"]["build_id"] == BUILD and said["value"]["score"] == 0.0 and said["value"]["measured_now"]
    assert any("failed" not in path for path in stored)


@needs_tools
def test_a_second_plan_finds_the_stored_score(steps):
    said = steps[0]["second_plan"]
    assert said["measure"] is False and said["found"]["score"] == 0.0


@needs_tools
def test_the_candidate_is_judged_against_the_stored_score_and_stored(steps):
    said, stored = steps[0]["candidate"], steps[1]
    assert said["value"]["gated"] is True and said["value"]["incumbent_score"] == 0.0
    # A score of 0 never passes: the run is kept in a file of its own under failed/, not as the build's score.
    assert said["value"]["passed"] is False and said["changed"] is True
    assert said["message"] == said["value"]["message"]
    assert said["message"].startswith("Tool-calling gate on spark-t (http://127.0.0.1:")
    assert "no case passed (a score of 0 never passes, whatever min_score says). Failed cases: single_string." in said["message"]
    failed = [os.path.basename(path) for path in stored if path.startswith("failed/")]
    assert os.path.basename(said["value"]["record_file"]) in failed


@needs_tools
def test_a_candidate_not_gated_runs_nothing(steps):
    said = steps[0]["not_gated"]
    assert said["value"]["gated"] is False and said["value"]["passed"] is True
    assert said["changed"] is False


@needs_tools
def test_only_chat_completions_and_no_probe_were_sent(steps):
    posts = [path for method, path in steps[2] if method == "POST"]
    # The incumbent's run and the candidate's: one case each (the plans and the candidate not gated send nothing).
    assert posts and set(posts) == {"/v1/chat/completions"}
