# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nginx_proxy role's preflight in a real ansible-playbook run (local connection, nothing changed).

Each "proxy host" of the inventory below carries one setting as an inventory would; the play
runs the role's preflight tasks on all of them, and the JSON callback says which failed, with
what message. ``type: list`` in the role's argument_specs splits a string for its own check only:
``nginx_proxy_affinity_body_fields: user`` passed it, and every proxied POST then answered 500.
In a child process, as tests/unit/plugins/filter/test_vllm_probe_url.py explains.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KEY = "lab-key-Z9.~+/-_=="

INVENTORY = """
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  children:
    gb10:
      hosts:
        spark-a: {vllm_served_model_name: lab-chat, vllm_api_key: "%(key)s"}
    proxy:
      hosts:
        good: {}
        fields_string: {nginx_proxy_affinity_body_fields: user}
        fields_mapping: {nginx_proxy_affinity_body_fields: {user: 1}}
        headers_string: {nginx_proxy_affinity_headers: x-session-id}
        headers_underscore: {nginx_proxy_affinity_headers: [x-session-id, session_id]}
        headers_own: {nginx_proxy_affinity_headers: [X-Conversation, thread-id]}
        headers_none: {nginx_proxy_affinity_headers: []}
        backends_string: {nginx_proxy_backends: spark-a}
        drain_string: {nginx_proxy_drain: spark-a}
        rotation_string: {nginx_proxy_expect_in_rotation: spark-a}
        key_newline: {nginx_proxy_api_key: "%(key)s\\n"}
        key_space: {nginx_proxy_api_key: "two words"}
        no_key: {nginx_proxy_api_key: ""}
        tls_half: {nginx_proxy_tls_certificate: /etc/ssl/proxy.crt}
        tls_both: {nginx_proxy_tls_certificate: /etc/ssl/proxy.crt, nginx_proxy_tls_certificate_key: /etc/ssl/proxy.key}
        no_engine_group: {site_engine_group: engines}
""" % {"key": KEY}

PLAYBOOK = """
- hosts: proxy
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: factory_floor.llm.nginx_proxy
        tasks_from: preflight
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    """{host: (failed, message of the failed task)} from one run over every host."""
    tmp = tmp_path_factory.mktemp("preflight")
    (tmp / "inventory.yml").write_text(INVENTORY)
    (tmp / "play.yml").write_text(PLAYBOOK)
    # ansible-core's own default callback, one JSON line per result (the json callback lives in ansible.posix,
    # which a controller with ansible-core alone lacks).
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_CALLBACK_FORMAT_PRETTY="false", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    done = subprocess.run([sys.executable, "-m", "ansible.cli.playbook", "-i", str(tmp / "inventory.yml"),
                           str(tmp / "play.yml")], env=env, capture_output=True, text=True, timeout=300, check=False)
    found = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^(?:ok|changed|skipping|fatal): \[([^\]]+)\]", line)
        if not match:
            continue
        host = match.group(1)
        if line.startswith("fatal:"):
            found[host] = (True, json.loads(line[line.index("{"):]).get("msg", ""))
        found.setdefault(host, (False, ""))
    assert found, done.stdout + done.stderr
    return found, done.stdout + done.stderr


@pytest.mark.parametrize("host, variable", [
    ("fields_string", "nginx_proxy_affinity_body_fields"),
    ("fields_mapping", "nginx_proxy_affinity_body_fields"),
    ("headers_string", "nginx_proxy_affinity_headers"),
    ("backends_string", "nginx_proxy_backends"),
    ("drain_string", "nginx_proxy_drain"),
    ("rotation_string", "nginx_proxy_expect_in_rotation"),
])
def test_a_string_or_mapping_for_a_list_is_refused_naming_it(outcome, host, variable):
    found, output = outcome
    failed, message = found[host]
    assert failed, output
    assert message.startswith(variable + " must be a YAML list"), message


@pytest.mark.parametrize("host", ["key_newline", "key_space"])
def test_a_key_outside_bearer_token_characters_is_refused_without_showing_it(outcome, host):
    found, output = outcome
    failed, message = found[host]
    assert failed and "nginx_proxy_api_key" in message and "not shown" in message, message
    assert KEY not in output and "two words" not in output


def test_a_header_name_nginx_would_drop_is_refused(outcome):
    failed, message = outcome[0]["headers_underscore"]
    assert failed and "nginx_proxy_affinity_headers a list of header names, each of letters, digits and '-'" in message
    assert "session_id" in message, message


def test_half_a_tls_setting_is_refused(outcome):
    failed, message = outcome[0]["tls_half"]
    assert failed and "nginx_proxy_tls_certificate_key" in message, message


def test_an_engine_group_the_inventory_lacks_is_refused_by_name(outcome):
    failed, message = outcome[0]["no_engine_group"]
    assert failed and "in group 'engines' (site_engine_group; now: none)" in message, message


@pytest.mark.parametrize("host", ["good", "no_key", "tls_both", "headers_own", "headers_none"])
def test_good_settings_pass(outcome, host):
    assert outcome[0][host] == (False, ""), outcome[1]
