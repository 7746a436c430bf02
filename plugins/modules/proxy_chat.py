#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: proxy_chat
short_description: Send a chat completion through the nginx proxy, as a client or as the deploy's check
version_added: 0.1.0
description:
  - "On a proxy host of the C(factory_floor.llm.nginx_proxy) role, to O(url) C(/v1/chat/completions), with
    C(Authorization: Bearer) O(api_key) when one is given."
  - "O(purpose=check) - the deploy's check that the proxy passes requests, not only C(/healthz): waits up to
    O(healthz_wait) seconds for C(/healthz) to answer 200, then sends one chat completion of one token (user
    C(factory-floor-proxy-check)), again after 2 s while nothing answers or nginx answers 500 (3 tries). An engine's
    answer (any status below 500), or nginx's own 503 with C(Retry-After) (no engine serves yet), passes; otherwise
    it fails naming the status (a 500 is what a broken balancer answers while C(/healthz) stays 200)."
  - "O(purpose=chat) - what a client sees: one chat completion of O(prompt), 64 tokens at most, temperature 0; fails
    unless it answers 200 (a 401 names the key this run sent), and returns the lines to print - the prompt, the
    answer, and which engine served it (C(X-Factory-Floor-Upstream), C(X-Factory-Floor-Proxy))."
  - In check mode nothing is sent; O(purpose=chat) returns what it would ask as RV(message).
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  url:
    description:
      - The proxy's base URL, without a path - for the check its own loopback (C(_nginx_proxy_local_url)), for a client
        the address clients use (C(_nginx_proxy_client_url), C(https) to the certificate's name with TLS).
    type: str
    required: true
  purpose:
    description: V(check) (the deploy's) or V(chat) (a client's).
    type: str
    choices: [check, chat]
    default: check
  api_key:
    description: The API key sent as a bearer token (C(nginx_proxy_api_key), C(site_api_key)); empty sends none. Never logged.
    type: str
    default: ""
  model:
    description: The served model name to ask for (C(nginx_proxy_model)).
    type: str
    default: ""
  prompt:
    description: (chat) What to ask.
    type: str
    default: "Say OK."
  timeout:
    description: Seconds one chat completion may take.
    type: int
    default: 120
  healthz_wait:
    description: (check) Seconds to wait for C(/healthz) to answer 200, asking once a second.
    type: int
    default: 30
  validate_certs:
    description: Whether to verify an C(https) proxy's certificate.
    type: bool
    default: true
  ca_path:
    description: A CA bundle on the host to verify the certificate with (C(nginx_proxy_tls_ca_file)); empty for the system's.
    type: path
  host:
    description: The proxy host's inventory name, for the messages.
    type: str
    default: ""
  engine_host:
    description: (chat) The first engine host, whose C(vllm_api_key) is C(site_api_key)'s default, for a 401's message.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Check that the proxy passes requests (not only /healthz)
  factory_floor.llm.proxy_chat:
    url: http://127.0.0.1:8080
    api_key: "{{ nginx_proxy_api_key }}"
    model: "{{ nginx_proxy_model }}"
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
changed:
  description: Always false.
  returned: always
  type: bool
  sample: false
status:
  description: The chat completion's HTTP status; -1 when none came, null when nothing was sent (check mode).
  returned: always
  type: int
  sample: 200
lines:
  description: (chat) What to print - the prompt, the answer, who served it.
  returned: with purpose chat, outside check mode, on success
  type: list
  elements: str
  sample: ["prompt: Say OK.", "answer: OK.", "served by: spark-a through gateway (2 tokens)"]
message:
  description: (chat, check mode) What it would ask.
  returned: with purpose chat in check mode
  type: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_chat as pc


def ask(module, url, body=None, timeout=30):
    """One request; the answer as ``_proxy_chat`` reads it."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if body is not None and module.params["api_key"]:
        headers["Authorization"] = "Bearer " + module.params["api_key"]
    response, info = fetch_url(module, url, data=json.dumps(body) if body is not None else None, headers=headers,
                               method="POST" if body is not None else "GET", timeout=timeout)
    # An HTTP error's body is in info (fetch_url read it); a success's in the response.
    body = info.get("body") if "body" in info else (response.read() if response is not None else b"")
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    headers = {str(name).lower(): value for name, value in info.items() if isinstance(name, str)}
    return {"status": int(info.get("status", -1)), "msg": info.get("msg", ""), "headers": headers, "body": text}


def check(module):
    params = module.params
    url, host = params["url"].rstrip("/"), params["host"]
    deadline = time.monotonic() + params["healthz_wait"]
    while True:
        answer = ask(module, url + "/healthz")
        if answer["status"] == 200:
            break
        if time.monotonic() >= deadline:
            module.fail_json(msg=pc.healthz_refusal(answer, url, host, params["healthz_wait"]), status=None)
        time.sleep(1)
    for attempt in range(4):  # as a task's retries: 3
        answer = ask(module, url + "/v1/chat/completions", pc.check_body(params["model"]), params["timeout"])
        if not pc.retry_check(answer) or attempt == 3:
            break
        time.sleep(2)
    if not pc.passes(answer):
        module.fail_json(msg=pc.check_refusal(answer, url, host), status=answer["status"])
    module.exit_json(changed=False, status=answer["status"])


def chat(module):
    params = module.params
    url = params["url"].rstrip("/")
    if module.check_mode:
        module.exit_json(changed=False, status=None, message=pc.would_send(params["model"], url, params["prompt"]))
    answer = ask(module, url + "/v1/chat/completions", pc.chat_body(params["model"], params["prompt"]),
                 params["timeout"])
    if answer["status"] != 200:
        module.fail_json(msg=pc.chat_refusal(answer, url, params["host"], params["engine_host"]),
                         status=answer["status"])
    module.exit_json(changed=False, status=200, lines=pc.chat_lines(answer, params["prompt"]))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            purpose=dict(type="str", choices=["check", "chat"], default="check"),
            api_key=dict(type="str", default="", no_log=True),
            model=dict(type="str", default=""),
            prompt=dict(type="str", default="Say OK."),
            timeout=dict(type="int", default=120),
            healthz_wait=dict(type="int", default=30),
            validate_certs=dict(type="bool", default=True),
            ca_path=dict(type="path"),
            host=dict(type="str", default=""),
            engine_host=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    if module.params["purpose"] == "chat":
        chat(module)
    if module.check_mode:  # the check sends nothing in check mode: nothing was started
        module.exit_json(changed=False, status=None)
    check(module)


if __name__ == "__main__":
    main()
