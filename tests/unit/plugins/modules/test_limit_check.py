# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.limit_check``."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import limit_check as module

LAB = {"engines": ["spark-a", "spark-b"], "proxies": ["gateway"], "inventory": ["spark-a", "spark-b", "gateway"],
       "limit": "spark-a"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_deploy_limited_to_one_engine_names_the_proxy_to_read(run_module, check_mode):
    result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], _ansible_check_mode=check_mode)).result
    assert result["changed"] is False
    assert result["errors"] == []
    assert result["gather"] == ["gateway"]
    assert result["outside"] == ["spark-b", "gateway"]


def test_the_split_limited_to_one_rank_is_refused(run_module):
    code, result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], topology="split"))
    assert code == 1 and result["failed"] is True
    assert "Use --limit spark-a,spark-b, or no --limit. Nothing has changed." in result["msg"]
    assert result["errors"][0]["limit"] == "spark-a,spark-b"


def test_an_unreadable_proxy_is_refused_after_the_gather(run_module):
    result = run_module(module, dict(LAB, playbook="deploy", hosts=["spark-a"], gathered=True,
                                     gather_errors={"gateway": "unreachable"})).result
    assert result["failed"] is True
    assert "the address of gateway could not be read (gateway: unreachable)" in result["msg"]


def test_unknown_playbook_is_refused_by_the_argument_spec(run_module):
    result = run_module(module, dict(LAB, playbook="nope", hosts=[])).result
    assert result["failed"] is True and "value of playbook must be one of" in result["msg"]
