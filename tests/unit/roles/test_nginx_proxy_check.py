# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The deploy's check that the proxy passes requests (factory_floor.llm.proxy_chat, run.yml's last task) against a
real nginx with the role's configuration (tests/unit/roles/nginx_proxy_harness.py) and a stand-in engine.

The module runs in a child process, as on a host: its arguments in a file, its result on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.factory_floor.llm.tests.unit.roles import nginx_proxy_harness as h


@pytest.fixture
def engine():
    e = h.Engine()
    yield e
    e.close()


def run_check(tmp_path, url, api_key, purpose="check"):
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"url": url, "api_key": api_key, "model": "lab-chat",
                                                        "host": "gateway", "purpose": purpose, "healthz_wait": 5}}))
    env = dict(os.environ, PYTHONPATH=os.path.join(h.ROOT, "build", "collections"))
    done = subprocess.run([sys.executable, "-m", "ansible_collections.factory_floor.llm.plugins.modules.proxy_chat",
                           str(args)], env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(done.stdout)


@pytest.mark.parametrize("balance", ["affinity", "least_conn"])
def test_the_check_passes_through_the_key_check_the_balancer_and_the_upstream(tmp_path, engine, balance):
    proxy = h.Proxy(tmp_path, engines=[engine], nginx_proxy_balance=balance).start()
    try:
        result = run_check(tmp_path, "http://%s:%d" % (h.NET, proxy.port), h.KEY)
        assert result.get("failed") is not True and result["status"] == 200, result
        assert engine.paths() == ["/v1/chat/completions"]
        assert json.loads(engine.requests[0]["body"])["user"] == "factory-floor-proxy-check"
        # A key nginx refuses is an answer below 500: the way works (the key is the engines' to judge).
        assert run_check(tmp_path, "http://%s:%d" % (h.NET, proxy.port), "wrong")["status"] == 401
    finally:
        proxy.stop()
