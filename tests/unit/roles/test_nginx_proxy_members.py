# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Affinity over more than two members, in a real nginx (issue 37: engine groups behind one proxy).

Each engine group's API host is one member of the proxy. With four members, a member leaving
(its group switching) moves only the conversations it held; the others' stay where their
prefix cache is. Requests go one at a time, so the load bound never spills one elsewhere.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from ansible_collections.factory_floor.llm.tests.unit.roles import nginx_proxy_harness as h
from ansible_collections.factory_floor.llm.tests.unit.roles.test_nginx_proxy_nginx import CHAT, request

AUTH = {"Authorization": "Bearer " + h.KEY}
SESSIONS = ["conversation-%03d" % i for i in range(120)]


@pytest.fixture
def engines():
    started = [h.Engine() for _number in range(4)]
    yield started
    for engine in started:
        engine.close()


def _homes(proxy, engines):
    """{session: index of the engine that answered it}."""
    homes = {}
    for session in SESSIONS:
        before = [len(e.requests) for e in engines]
        status, _headers, body = request(proxy.port, "POST", "/v1/chat/completions", CHAT,
                                         dict(AUTH, **{"X-Session-Id": session}))
        assert status == 200, body
        grew = [i for i, e in enumerate(engines) if len(e.requests) > before[i]]
        assert len(grew) == 1, (session, grew)
        homes[session] = grew[0]
    return homes


def _reload(proxy, engines, keep):
    """The membership the checker would export once the members not in ``keep`` left: files, then a reload."""
    names = ["engine-%d" % i for i in range(len(engines))]   # the harness's names, by index
    proxy.engines = [engines[i] for i in keep]
    proxy.names = [names[i] for i in keep]
    proxy.write()
    proxy.proc.send_signal(signal.SIGHUP)   # our own nginx (proxy.proc), never another
    # Every worker, of the old configuration too, routes by the member list the last (re)load
    # stored: once the balancer's own view shows it, the next request uses it.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.2)
        status, _headers, body = request(proxy.port, "GET", "/factory-floor/affinity")
        if status == 200 and [m["name"] for m in json.loads(body)["members"]] == proxy.names:
            return
    raise AssertionError("nginx did not take the new member list within 20 s: %s" % proxy.error_log())


def test_a_leaving_member_moves_only_its_own_conversations(tmp_path, engines):
    proxy = h.Proxy(tmp_path, engines=engines, nginx_proxy_balance="affinity").start()
    try:
        homes = _homes(proxy, engines)
        # Four members share the conversations (rendezvous hashing: each holds some).
        assert sorted(set(homes.values())) == [0, 1, 2, 3], homes
        assert homes == _homes(proxy, engines)   # the same conversation goes home again
        _reload(proxy, engines, keep=[0, 1, 3])
        after = _homes(proxy, engines)
        moved = {s for s in SESSIONS if after[s] != homes[s]}
        assert moved == {s for s in SESSIONS if homes[s] == 2}, "only member 2's conversations may move"
        assert {after[s] for s in moved} <= {0, 1, 3} and len({after[s] for s in moved}) > 1
        # Back in: each conversation goes back to where it was before.
        _reload(proxy, engines, keep=[0, 1, 2, 3])
        assert _homes(proxy, engines) == homes
    finally:
        proxy.stop()
