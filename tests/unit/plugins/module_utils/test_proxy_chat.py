# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a chat completion through the proxy says (``_proxy_chat``): which answers pass the deploy's check, and every
message, in the words the nginx_proxy role's tasks used."""

from __future__ import annotations

import json

import pytest

from ansible.plugins.filter.core import to_json
from jinja2 import Environment

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_chat as pc

URL = "http://127.0.0.1:8080"


def answer(status, msg="", headers=None, body=""):
    return {"status": status, "msg": msg, "headers": headers or {}, "body": body}


@pytest.mark.parametrize("seen, retried, passed", [
    (answer(200, "OK (120 bytes)"), False, True),
    (answer(401, "HTTP Error 401: Unauthorized"), False, True),
    (answer(404), False, True),
    (answer(503, headers={"retry-after": "5"}), False, True),
    (answer(503), False, False),
    (answer(502), False, False),
    (answer(500), True, False),
    (answer(-1, "Request failed: <urlopen error [Errno 111] Connection refused>"), True, False),
])
def test_which_answers_show_that_the_proxy_passes_requests(seen, retried, passed):
    assert pc.retry_check(seen) is retried
    assert pc.passes(seen) is passed


@pytest.mark.parametrize("text", ["short", "word " * 60, "x" * 204, "x" * 206])
def test_truncate_is_jinjas(text):
    env = Environment()
    assert pc.truncate(text) == env.from_string("{{ t | truncate(200) }}").render(t=text)
    assert pc.truncate(text, 400) == env.from_string("{{ t | truncate(400) }}").render(t=text)


def test_the_deploys_refusal_names_the_status_and_where_to_look():
    assert pc.check_refusal(answer(500, "HTTP Error 500: Internal Server Error"), URL, "gateway") == (
        "POST http://127.0.0.1:8080/v1/chat/completions on gateway answered 500 (Status code was 500 and not [200]: "
        "HTTP Error 500: Internal Server Error) while /healthz answers 200: requests do not get through the proxy. "
        "See /var/log/nginx/error.log there (a Lua error names the balancer).")


def test_a_health_endpoint_that_never_answers_is_named():
    assert pc.healthz_refusal(answer(-1, "Request failed: refused"), URL, "gateway", 30) == (
        "The proxy's own health endpoint http://127.0.0.1:8080/healthz on gateway did not answer 200 within 30 s "
        "(last: Status code was -1 and not [200]: Request failed: refused).")


def test_check_mode_says_what_it_would_ask():
    assert pc.would_send("lab-chat", URL, "Why?") == (
        "Check mode: would send one chat completion (max_tokens 64) for lab-chat to "
        "http://127.0.0.1:8080/v1/chat/completions - \"Why?\".")


@pytest.mark.parametrize("status, body, shown", [
    (401, json.dumps({"error": "Unauthorized"}), to_json({"error": "Unauthorized"})),
    (502, "<html>bad gateway</html>", '""'),
])
def test_a_clients_failed_chat_completion_is_named(status, body, shown):
    message = pc.chat_refusal(answer(status, "HTTP Error", body=body), URL, "gateway", "spark-a")
    assert message.startswith("POST http://127.0.0.1:8080/v1/chat/completions from gateway answered %s (Status code "
                              "was %s and not [200]: HTTP Error): %s" % (status, status, shown))
    assert message.endswith(" (401: the engines require an API key; this run sent site_api_key (default: vllm_api_key "
                            "of spark-a), which is unset or not theirs)") is (status == 401)


def test_what_a_client_sees():
    body = json.dumps({"choices": [{"message": {"content": " One copy per machine. \n"}}],
                       "usage": {"completion_tokens": 7}})
    assert pc.chat_lines(answer(200, body=body, headers={"x-factory-floor-upstream": "spark-a",
                                                         "x-factory-floor-proxy": "gateway"}), "Why?") == [
        "prompt: Why?", "answer: One copy per machine.", "served by: spark-a through gateway (7 tokens)"]
    assert pc.chat_lines(answer(200, body=body), "Why?")[2] == (
        "served by: an engine (nginx_proxy_expose_upstream names which) through ? (7 tokens)")


def test_the_bodies():
    assert pc.check_body("lab-chat") == {"model": "lab-chat", "messages": [{"role": "user", "content": "Say OK."}],
                                         "max_tokens": 1, "user": "factory-floor-proxy-check"}
    assert pc.chat_body("lab-chat", "Why?")["max_tokens"] == 64
