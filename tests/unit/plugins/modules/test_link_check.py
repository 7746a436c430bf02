# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.link_check run on this machine's loopback, as it reads (the link itself: test_link_check_netns.py)."""

from __future__ import annotations

import shutil

import pytest

from ansible_collections.factory_floor.llm.plugins.modules import link_check

pytestmark = pytest.mark.skipif(not shutil.which("ip"), reason="needs iproute2's ip")


@pytest.mark.parametrize("check_mode", [False, True])
def test_reads_the_interface_and_changes_nothing(run_module, check_mode):
    code, result = run_module(link_check, {"interface": "lo", "address": "127.0.0.1", "rdma": "disabled",
                                           "nccl_library": "", "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False
    assert result["interface"]["exists"] is True and result["address_holder"] == "lo"
    assert result["rdma"]["mode"] == "disabled" and result["rdma"]["hca"] == []


def test_an_absent_interface_is_reported_not_an_error(run_module):
    code, result = run_module(link_check, {"interface": "ffnolink0", "rdma": "disabled", "nccl_library": "",
                                           "_ansible_check_mode": True})
    assert code == 0, result
    assert result["interface"]["exists"] is False and "lo" in result["interfaces"]
