# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a chat completion through the nginx proxy says (factory_floor.llm.proxy_chat): whether the proxy passes
requests after a deploy, and what a client's chat completion answered. Pure logic, standard library only; the
requests are the module's.

An answer is ``{status, msg, headers, body}`` as the module saw it: ``status`` -1 when no HTTP answer came,
``msg`` the reason, ``headers`` lower-case names, ``body`` the text.
"""

from __future__ import annotations

import json

# The deploy's check: one token, named so that the engines' logs tell it from a client.
CHECK_BODY = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1,
              "user": "factory-floor-proxy-check"}
CHAT_MAX_TOKENS = 64


def truncate(text, length=200, leeway=5, end="..."):
    """``text`` as Jinja's ``truncate`` filter shortens it (at a word's end)."""
    text = str(text)
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def reason(answer):
    """The answer's reason as ``ansible.builtin.uri`` words it."""
    if answer["status"] == 200:
        return answer["msg"]
    return "Status code was %s and not [200]: %s" % (answer["status"], answer["msg"])


def check_body(model):
    return dict(CHECK_BODY, model=model)


def chat_body(model, prompt):
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": CHAT_MAX_TOKENS,
            "temperature": 0}


def retry_check(answer):
    """Whether the deploy's check asks again: no answer yet, or the 500 a broken balancer gives."""
    return answer["status"] in (-1, 500)


def passes(answer):
    """Whether the proxy passes requests: an engine's answer (any status below 500), or nginx's own 503 with
    Retry-After (no engine serves yet)."""
    status = answer["status"]
    return 200 <= status < 500 or (status == 503 and "retry-after" in answer["headers"])


def check_refusal(answer, url, host):
    return ("POST %s/v1/chat/completions on %s answered %s (%s) while /healthz answers 200: requests do not get through "
            "the proxy. See /var/log/nginx/error.log there (a Lua error names the balancer)." % (
                url, host, answer["status"], truncate(reason(answer))))


def healthz_refusal(answer, url, host, waited):
    return ("The proxy's own health endpoint %s/healthz on %s did not answer 200 within %s s (last: %s)." % (
        url, host, waited, truncate(reason(answer))))


def would_send(model, url, prompt):
    """What check mode says instead of asking."""
    return ("Check mode: would send one chat completion (max_tokens %s) for %s to %s/v1/chat/completions - \"%s\"."
            % (CHAT_MAX_TOKENS, model, url, prompt))


def _json(answer):
    try:
        return json.loads(answer["body"])
    except (TypeError, ValueError):
        return None


def chat_refusal(answer, url, host, engine_host):
    """Why a client's chat completion failed; a 401 names the key this run sent."""
    body = _json(answer)
    shown = json.dumps(body if body is not None else "")  # a body that is no JSON is not shown
    message = "POST %s/v1/chat/completions from %s answered %s (%s): %s" % (
        url, host, answer["status"], truncate(reason(answer)), truncate(shown, 400))
    if answer["status"] == 401:
        message += (" (401: the engines require an API key; this run sent site_api_key (default: vllm_api_key of %s), "
                    "which is unset or not theirs)" % engine_host)
    return message


def chat_lines(answer, prompt):
    """What a client's chat completion answered, to print: the prompt, the answer, who served it."""
    body = _json(answer) or {}
    headers = answer["headers"]
    return ["prompt: %s" % prompt,
            "answer: %s" % str(body["choices"][0]["message"]["content"]).strip(),
            "served by: %s through %s (%s tokens)" % (
                headers.get("x-factory-floor-upstream", "an engine (nginx_proxy_expose_upstream names which)"),
                headers.get("x-factory-floor-proxy", "?"), body["usage"]["completion_tokens"])]
