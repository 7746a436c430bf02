# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of factory_floor.llm.proxy_rotation against a state file and a drain directory in a temporary
directory, with a stand-in for the membership checker (a thread that applies the drain files a moment later)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_rotation as pr
from ansible_collections.factory_floor.llm.plugins.modules import proxy_rotation

STATUSES = {"spark-a": "serving", "spark-b": "serving"}


@pytest.fixture
def proxy(tmp_path):
    drain = tmp_path / "drain"
    drain.mkdir()
    state = tmp_path / "upstream.json"

    def write(in_rotation, drained=()):
        state.write_text(json.dumps({"in_rotation": list(in_rotation), "drained": list(drained),
                                     "statuses": STATUSES}))

    def checker(delay=0.3):
        """Applies the drain files once, after ``delay`` seconds, as the checker would."""
        def apply():
            time.sleep(delay)
            drained = sorted(os.listdir(str(drain)))
            write([name for name in STATUSES if name not in drained], drained)
        thread = threading.Thread(target=apply)
        thread.start()
        return thread

    write(["spark-a", "spark-b"])
    return {"dir": drain, "state": state, "write": write, "checker": checker,
            "args": dict(state_file=str(state), drain_dir=str(drain), host="gateway", timeout=3)}


def test_a_drain_with_a_holder_is_written_and_waited_for(proxy, run_module):
    thread = proxy["checker"]()
    code, result = run_module(proxy_rotation, dict(proxy["args"], drain=["spark-a"], drain_holder="switch"))
    thread.join()
    assert code == 0 and result["changed"] is True and result["found"] is True
    assert (proxy["dir"] / "spark-a").read_text() == pr.holder_content("switch")
    assert oct(os.stat(str(proxy["dir"] / "spark-a")).st_mode & 0o777) == "0o644"
    assert result["rotation"]["drained"] == ["spark-a"]
    again = run_module(proxy_rotation, dict(proxy["args"], drain=["spark-a"], drain_holder="switch")).result
    assert again["changed"] is False


def test_an_operators_drain_file_keeps_its_content_and_a_lifted_one_goes(proxy, run_module):
    (proxy["dir"] / "spark-b").write_text("operator\n")
    proxy["write"](["spark-a"], ["spark-b"])
    assert run_module(proxy_rotation, dict(proxy["args"], drain=["spark-b"])).result["changed"] is False
    assert (proxy["dir"] / "spark-b").read_text() == "operator\n"
    thread = proxy["checker"]()
    result = run_module(proxy_rotation, dict(proxy["args"], drain=["spark-b"], drain_state="absent")).result
    thread.join()
    assert result["changed"] is True and not (proxy["dir"] / "spark-b").exists()


def test_check_mode_changes_no_file_and_waits_for_nothing(proxy, run_module):
    result = run_module(proxy_rotation, dict(proxy["args"], drain=["spark-a"], drain_holder="switch",
                                             _ansible_check_mode=True)).result
    assert result["changed"] is True and os.listdir(str(proxy["dir"])) == []


@pytest.mark.parametrize("drain, message", [
    ("spark-a", pr.not_a_list("spark-a")),
    (["gb10-a"], "nginx_proxy_drain names gb10-a, which the proxy's membership checker on gateway does not know"),
])
def test_a_drain_the_checker_would_ignore_is_refused_before_any_file_changes(proxy, run_module, drain, message):
    code, result = run_module(proxy_rotation, dict(proxy["args"], drain=drain))
    assert code == 1 and result["msg"].startswith(message)
    assert os.listdir(str(proxy["dir"])) == []


def test_a_drain_the_checker_does_not_apply_fails_naming_it(proxy, run_module):
    code, result = run_module(proxy_rotation, dict(proxy["args"], drain=["spark-a"], timeout=1))
    assert code == 1 and result["msg"] == pr.drain_not_applied(
        {"drained": []}, ["spark-a"], True, "gateway", 1, "factory-floor-upstream.service")


def test_waiting_for_engines_to_join(proxy, run_module):
    result = run_module(proxy_rotation, dict(proxy["args"], expect_in_rotation=["spark-a", "spark-b"])).result
    assert result["found"] is True and result["rotation"]["in_rotation"] == ["spark-a", "spark-b"]
    proxy["write"](["spark-a"])
    code, result = run_module(proxy_rotation, dict(proxy["args"], expect_in_rotation=["spark-a", "spark-b"],
                                                   timeout=1))
    assert code == 1 and result["msg"].startswith("After 1 s the proxy on gateway has spark-a in rotation, expected "
                                                  "spark-a, spark-b.")


def test_the_rotation_read_never_fails(proxy, run_module, tmp_path):
    proxy["write"](["spark-a"])
    result = run_module(proxy_rotation, dict(proxy["args"], expect_in_rotation=["spark-b"], wait_for="any",
                                             timeout=1)).result
    assert result["found"] is False and result.get("failed") is not True
    missing = run_module(proxy_rotation, dict(proxy["args"], state_file=str(tmp_path / "none"), wait_for="any")).result
    assert missing["rotation"] == {} and missing["found"] is True


def test_the_holders_are_read_and_nothing_changes(proxy, run_module):
    (proxy["dir"] / "spark-a").write_text(pr.holder_content("deploy"))
    result = run_module(proxy_rotation, dict(proxy["args"], holders=True, _ansible_check_mode=True)).result
    assert result["changed"] is False and result["drained"] == {"spark-a": "deploy"}
    assert result["rotation"]["in_rotation"] == ["spark-a", "spark-b"]
