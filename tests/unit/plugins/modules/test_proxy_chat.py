# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.proxy_chat against a stand-in proxy on loopback (a stdlib HTTP server
whose answers each test sets). The words are tests/unit/plugins/module_utils/test_proxy_chat.py's; a run against a
real nginx with the role's configuration is tests/unit/roles/test_nginx_proxy_nginx.py's."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import proxy_chat

KEY = "ff-test-key.A1~b2+c3/d4-e5_f6="
ANSWER = {"choices": [{"message": {"content": "OK."}}], "usage": {"completion_tokens": 2}}


@pytest.fixture
def stand_in():
    """A proxy stand-in: ``answers`` maps a path to a list of (status, headers, body), the last one repeated."""
    seen = {"answers": {"/healthz": [(200, {}, b"ok")], "/v1/chat/completions": [(200, {}, json.dumps(ANSWER))]},
            "requests": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            seen["requests"].append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                     "body": json.loads(self.rfile.read(length)) if length else None})
            answers = seen["answers"][self.path]
            status, headers, body = answers.pop(0) if len(answers) > 1 else answers[0]
            body = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for name, value in dict({"Content-Type": "application/json"}, **headers).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["url"] = "http://127.0.0.1:%d" % server.server_address[1]
    yield seen
    server.shutdown()
    server.server_close()


def args(stand_in, **more):
    more.setdefault("healthz_wait", 2)
    return dict(url=stand_in["url"], api_key=KEY, model="lab-chat", host="gateway", **more)


def test_the_deploys_check_passes_with_one_token_and_the_key(stand_in, run_module):
    code, result = run_module(proxy_chat, args(stand_in))
    assert code == 0 and result["status"] == 200 and result["changed"] is False
    post = stand_in["requests"][-1]
    assert post["authorization"] == "Bearer " + KEY and post["body"]["max_tokens"] == 1
    assert KEY not in json.dumps(result)


def test_nginxs_own_503_with_retry_after_passes_and_a_500_is_asked_again_then_refused(stand_in, run_module):
    stand_in["answers"]["/v1/chat/completions"] = [(503, {"Retry-After": "5"}, "{}")]
    assert run_module(proxy_chat, args(stand_in)).result["status"] == 503
    stand_in["answers"]["/v1/chat/completions"] = [(500, {}, "<html>500</html>")]
    code, result = run_module(proxy_chat, args(stand_in))
    assert code == 1 and result["msg"].startswith("POST %s/v1/chat/completions on gateway answered 500 (Status code "
                                                  "was 500 and not [200]: " % stand_in["url"])
    assert [r["path"] for r in stand_in["requests"]].count("/v1/chat/completions") == 1 + 4


def test_a_health_endpoint_that_does_not_answer_200_is_refused(stand_in, run_module):
    stand_in["answers"]["/healthz"] = [(502, {}, "")]
    code, result = run_module(proxy_chat, args(stand_in, healthz_wait=1))
    assert code == 1 and result["msg"].startswith("The proxy's own health endpoint %s/healthz on gateway did not "
                                                  "answer 200 within 1 s" % stand_in["url"])


def test_a_client_sees_the_answer_and_check_mode_asks_nothing(stand_in, run_module):
    result = run_module(proxy_chat, args(stand_in, purpose="chat", prompt="Why?")).result
    assert result["lines"][:2] == ["prompt: Why?", "answer: OK."]
    assert stand_in["requests"][-1]["body"]["max_tokens"] == 64
    count = len(stand_in["requests"])
    checked = run_module(proxy_chat, args(stand_in, purpose="chat", prompt="Why?", _ansible_check_mode=True)).result
    assert checked["message"].startswith("Check mode: would send one chat completion (max_tokens 64) for lab-chat")
    assert len(stand_in["requests"]) == count
    assert run_module(proxy_chat, args(stand_in, _ansible_check_mode=True)).result["status"] is None
    assert len(stand_in["requests"]) == count


def test_a_client_refused_for_its_key_is_told_which_key_it_sent(stand_in, run_module):
    stand_in["answers"]["/v1/chat/completions"] = [(401, {}, json.dumps({"error": "Unauthorized"}))]
    code, result = run_module(proxy_chat, args(stand_in, purpose="chat", engine_host="spark-a"))
    assert code == 1 and "{\"error\": \"Unauthorized\"}" in result["msg"], result["msg"]
    assert result["msg"].endswith("(default: vllm_api_key of spark-a), which is unset or not theirs)")
