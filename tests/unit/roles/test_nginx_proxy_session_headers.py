# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Agents' own session headers as the affinity key, in a real nginx (the role's nginx.conf and Lua balancer).

What an agent client sees through the proxy: every request that carries one of
``nginx_proxy_affinity_headers`` goes to the same engine as the others of its conversation,
whatever its body says; with two of them, the first in the list decides; a value is never
written to nginx's logs nor sent back. The stand-in engines and nginx run as
``nginx_proxy_harness.py`` explains (loopback, own prefix, stopped by PID).
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.tests.unit.roles import nginx_proxy_harness as h
from ansible_collections.factory_floor.llm.tests.unit.roles.test_nginx_proxy_nginx import AUTH, request
# The proxies fixture (nginx under a private prefix, stopped by PID), shared with that module's tests.
from ansible_collections.factory_floor.llm.tests.unit.roles.test_nginx_proxy_nginx import proxies  # pylint: disable=unused-import # noqa: F401

with open(os.path.join(h.ROLE, "defaults", "main.yml"), encoding="utf-8") as _handle:
    DEFAULT_HEADERS = yaml.safe_load(_handle)["nginx_proxy_affinity_headers"]


def test_the_default_list_names_the_agents_headers_in_order():
    # The documented order (README, "Conversation affinity"): the generic name first, as before.
    assert DEFAULT_HEADERS == ["x-session-id", "x-claude-code-session-id", "thread-id", "session-id",
                               "x-litellm-session-id"]


@pytest.fixture
def engines():
    started = [h.Engine(), h.Engine(), h.Engine()]
    yield started
    for e in started:
        e.close()


def turn(n):
    """A chat turn whose body alone would key it elsewhere each time: no key field, a first message of its own."""
    return {"model": "lab-chat", "max_tokens": 1,
            "messages": [{"role": "system", "content": "agent %d" % n}, {"role": "user", "content": "step %d" % n}]}


def send(proxy, headers, n=0):
    """(engine address, route) of one chat turn with ``headers``."""
    status, answer, body = request(proxy.port, "POST", "/v1/chat/completions", body=turn(n),
                                   headers=dict(AUTH, **headers))
    assert status == 200, (status, body, proxy.error_log())
    return answer["x-factory-floor-upstream"], answer["x-factory-floor-route"]


@pytest.fixture
def proxy(tmp_path, proxies, engines):
    return proxies(tmp_path, engines=engines, nginx_proxy_expose_upstream=True).start()


def homes(proxy, header, values):
    """{value: the engine every turn of its conversation went to}, after checking that all went there."""
    found = {}
    for value in values:
        seen = {send(proxy, {header: value}, n) for n in range(6)}
        assert len(seen) == 1, "%s: %s went to %s" % (header, value, sorted(seen))
        (engine, route), = seen
        assert route == "header", (header, route)
        found[value] = engine
    return found


@pytest.mark.parametrize("header", DEFAULT_HEADERS)
def test_each_default_header_keeps_a_conversation_on_one_engine(proxy, header):
    # Without the header as a key, each turn would be keyed by its own leading messages and spread.
    unkeyed = {send(proxy, {}, n)[0] for n in range(12)}
    assert len(unkeyed) > 1, "the turns' bodies alone should spread them: %s" % unkeyed
    found = homes(proxy, header, ["conv-%s-%d" % (header, i) for i in range(8)])
    # Conversations are spread over the engines by their keys, not all sent to one.
    assert len(set(found.values())) > 1, found
    # The header's name is not part of the key: the same value in another header finds the same engine.
    other = DEFAULT_HEADERS[0] if header != DEFAULT_HEADERS[0] else DEFAULT_HEADERS[1]
    assert homes(proxy, other, list(found)) == found


def test_header_names_match_in_any_case(proxy):
    found = homes(proxy, "x-claude-code-session-id", ["case-%d" % i for i in range(4)])
    assert homes(proxy, "X-Claude-Code-Session-Id", list(found)) == found


@pytest.mark.parametrize("first, second", [(a, b) for i, a in enumerate(DEFAULT_HEADERS)
                                           for b in DEFAULT_HEADERS[i + 1:]])
def test_the_first_header_of_the_list_wins(proxy, first, second):
    found = homes(proxy, first, ["order-%d" % i for i in range(8)])
    # Two conversations whose keys live on different engines.
    one = next(iter(found))
    two = next(value for value, engine in found.items() if engine != found[one])
    for n in range(4):
        # Sent in either order on the wire: the list's order decides.
        assert send(proxy, {first: one, second: two}, n) == (found[one], "header")
        assert send(proxy, {second: two, first: one}, n) == (found[one], "header")
        assert send(proxy, {first: two, second: one}, n) == (found[two], "header")


def test_an_empty_header_is_skipped_for_the_next(proxy):
    found = homes(proxy, "thread-id", ["skip-%d" % i for i in range(4)])
    for value, engine in found.items():
        assert send(proxy, {"x-session-id": "", "thread-id": value}) == (engine, "header")


def test_a_header_key_outranks_the_body_fields(proxy):
    found = homes(proxy, "session-id", ["body-%d" % i for i in range(8)])
    one = next(iter(found))
    two = next(value for value, engine in found.items() if engine != found[one])
    status, answer, dummy = request(proxy.port, "POST", "/v1/chat/completions",
                                    body=dict(turn(0), prompt_cache_key=two, user=two),
                                    headers=dict(AUTH, **{"session-id": one}))
    assert status == 200
    assert (answer["x-factory-floor-upstream"], answer["x-factory-floor-route"]) == (found[one], "header")


def test_a_site_list_replaces_the_default(tmp_path, proxies, engines):
    proxy = proxies(tmp_path, engines=engines, nginx_proxy_expose_upstream=True,
                    nginx_proxy_affinity_headers=["X-Conversation"]).start()
    homes(proxy, "x-conversation", ["site-%d" % i for i in range(3)])
    # A default header no longer keys: the body does (no key field: its leading messages).
    assert send(proxy, {"x-session-id": "ignored"})[1] == "prefix"
    proxy.stop()
    proxy = proxies(tmp_path / "none", engines=engines, nginx_proxy_expose_upstream=True,
                    nginx_proxy_affinity_headers=[]).start()
    assert {send(proxy, {name: "ignored"})[1] for name in DEFAULT_HEADERS} == {"prefix"}


@pytest.mark.parametrize("value, words", [
    ("x-session-id", "must be a list of header names"),
    (["session_id"], "must be a list of header names"),
    (["x-session-id", ""], "must be a list of header names"),
])
def test_a_bad_header_list_fails_nginx_t(tmp_path, proxies, engines, value, words):
    proxy = proxies(tmp_path, engines=engines, nginx_proxy_affinity_headers=value)
    rc, output = proxy.test()
    assert rc != 0, "nginx -t accepted nginx_proxy_affinity_headers %r" % (value,)
    assert "headers (nginx_proxy_affinity_headers) " + words in output, output


def test_no_header_value_is_logged_or_sent_back(proxy):
    marks = {name: "secret-mark-%d-%s" % (i, name) for i, name in enumerate(DEFAULT_HEADERS)}
    seen = []
    for n in range(3):
        status, answer, body = request(proxy.port, "POST", "/v1/chat/completions", body=turn(n),
                                       headers=dict(AUTH, **marks))
        assert status == 200 and answer["x-factory-floor-route"] == "header"
        seen.append(repr(answer) + body.decode("utf-8", "replace"))
        # A request refused before routing (no key) and a GET, too.
        status, answer, body = request(proxy.port, "POST", "/v1/chat/completions", body=turn(n), headers=marks)
        assert status == 401
        seen.append(repr(answer) + body.decode("utf-8", "replace"))
        status, answer, body = request(proxy.port, "GET", "/v1/models", headers=dict(AUTH, **marks))
        assert status == 200
        seen.append(repr(answer) + body.decode("utf-8", "replace"))
    proxy.stop()   # flushes the logs
    with open(os.path.join(proxy.tmp, "access.log"), encoding="utf-8", errors="replace") as handle:
        access = handle.read()
    assert "route=header" in access, access
    for text in [access, proxy.error_log()] + seen:
        for mark in marks.values():
            assert mark not in text
