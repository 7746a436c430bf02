# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm_idle filter: the rolling restart's leave waits until it is true (the conditions its until: listed)."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.filter.vllm_idle import vllm_idle


@pytest.mark.parametrize("result, idle", [
    ({"complete": True, "total": {"num_requests_running": 0, "num_requests_waiting": 0}}, True),
    ({"complete": True, "total": {"num_requests_running": 0.0, "num_requests_waiting": 0}}, True),
    ({"complete": True, "total": {"num_requests_running": 1, "num_requests_waiting": 0}}, False),
    ({"complete": True, "total": {"num_requests_running": 0, "num_requests_waiting": 2}}, False),
    # An engine that did not answer, or a metric it does not export (None), is not idle.
    ({"complete": False, "total": {"num_requests_running": 0, "num_requests_waiting": 0}}, False),
    ({"complete": True, "total": {"num_requests_running": None, "num_requests_waiting": 0}}, False),
    ({"complete": True, "total": {"num_requests_running": "0", "num_requests_waiting": 0}}, False),
    ({"complete": True}, False),
    ({}, False),
    (None, False),
])
def test_idle_only_when_every_engine_answered_and_nothing_runs_or_waits(result, idle):
    assert vllm_idle(result) is idle
