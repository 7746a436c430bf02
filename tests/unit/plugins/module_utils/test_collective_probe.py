# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_collective_probe.py, the rank that runs inside the image.

With a stand-in for torch (two ranks' sums computed here); the real torch.distributed run
over a link is tests/unit/plugins/modules/test_link_check_netns.py's (FF_TORCH_PYTHON).
"""

from __future__ import annotations

import json
import types

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _collective_probe as probe


class _Tensor:
    def __init__(self, numel, value=1.0):
        self.numel, self.value = numel, value

    def fill_(self, value):
        self.value = value

    def min(self):
        return types.SimpleNamespace(item=lambda: self.value)

    max = min


def _torch(world_size=2, peer_value=None, fail_init=None):
    """A torch whose all_reduce adds what the other ranks hold (``peer_value``: what they hold, else the same)."""
    calls = []

    def all_reduce(tensor):
        calls.append("all_reduce")
        other = tensor.value if peer_value is None else peer_value
        tensor.value = tensor.value + other * (world_size - 1)

    def init_process_group(**kwargs):
        calls.append(("init", kwargs))
        if fail_init:
            raise fail_init

    dist = types.SimpleNamespace(init_process_group=init_process_group, all_reduce=all_reduce,
                                 barrier=lambda: calls.append("barrier"),
                                 destroy_process_group=lambda: calls.append("destroy"))
    torch = types.SimpleNamespace(distributed=dist, float32="float32", __version__="2.13.0+cpu",
                                  ones=lambda numel, dtype=None, device=None: _Tensor(numel))
    return torch, calls


def test_a_rank_reports_time_bandwidth_and_right_sums(capsys):
    # Rank 1 holds 2, the other rank 1: the checked sum is 3 = n(n+1)/2.
    torch, calls = _torch(peer_value=1.0)
    code = probe.main(["--rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29501", "--size-mib", "1",
                       "--iterations", "3"], torch=torch)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(probe.MARKER)
    result = json.loads(line[len(probe.MARKER):])
    assert code == 0 and result["ok"] and result["error"] == ""
    assert (result["bytes"], result["iterations"], result["backend"], result["rank"]) == (1024 * 1024, 3, "gloo", 1)
    assert result["busbw_gb_s"] == result["algbw_gb_s"]           # two ranks: 2(n-1)/n = 1
    init = [c for c in calls if isinstance(c, tuple)][0][1]
    assert init["init_method"] == "tcp://10.0.0.1:29501" and init["rank"] == 1 and init["world_size"] == 2
    assert calls[-1] == "destroy"


def test_wrong_sums_are_a_failure(capsys):
    torch, _calls = _torch(peer_value=5.0)
    assert probe.main(["--rank", "0", "--master-addr", "a", "--master-port", "1", "--iterations", "1"], torch=torch) == 1
    result = json.loads(capsys.readouterr().out.strip()[len(probe.MARKER):])
    assert not result["ok"] and "wrong sums" in result["error"]


def test_a_rank_that_cannot_meet_the_other_says_why(capsys):
    torch, _calls = _torch(fail_init=RuntimeError("Timed out after 5 seconds waiting for clients. 1/2 clients joined."))
    assert probe.main(["--rank", "0", "--master-addr", "a", "--master-port", "1"], torch=torch) == 1
    result = json.loads(capsys.readouterr().out.strip()[len(probe.MARKER):])
    assert result == {"ok": False, "backend": "gloo", "rank": 0,
                      "error": "RuntimeError: Timed out after 5 seconds waiting for clients. 1/2 clients joined."}


@pytest.mark.parametrize("world_size, factor", [(2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_bandwidth_as_nccl_tests_counts_it(world_size, factor):
    assert probe.bus_bandwidth(10.0, world_size) == pytest.approx(10.0 * factor)
