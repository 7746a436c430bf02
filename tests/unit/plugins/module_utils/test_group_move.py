# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One group move (issue 37): what it stops and starts, who serves meanwhile, the gate, the rollback, the words;
and the two-topology switch as its two-host case."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _switch_plan as sp
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import grouping_of
from ansible_collections.factory_floor.llm.plugins.module_utils._group_move import (
    capacity,
    current_grouping,
    kv_by_size,
    move_plan,
    restorable,
    timeline,
)

A, B, C, D = "spark-a", "spark-b", "spark-c", "spark-d"
REPLICA, SPLIT = "vllm-replica.service", "vllm-split.service"
# KV tokens per group by its size (a made-up side: a pair holds more than twice a replica, as weights split).
KV = {1: 100000, 2: 260000}


def unit(topology, group, rank=0):
    return {"topology": topology, "unit": REPLICA if topology == "replicas" else SPLIT, "group": group, "rank": rank}


# --- the table over 2, 3 and 4 hosts ---------------------------------------------------------------


@pytest.mark.parametrize("current, target, touched, stops, starts, serving, drain, admit, away, remaining, cap", [
    # Two hosts: the two-topology switch, the model away.
    ([[A, B]], [[A], [B]], [A, B], {A: unit("split", [A, B]), B: unit("split", [A, B], 1)},
     {A: unit("replicas", [A]), B: unit("replicas", [B])}, [], [A], [A, B], True, 1, (0, 1, 0, 2, 0)),
    ([[A], [B]], [[A, B]], [A, B], {A: unit("replicas", [A]), B: unit("replicas", [B])},
     {A: unit("split", [A, B]), B: unit("split", [A, B], 1)}, [], [A, B], [A], True, 1, (0, 2, 0, 2, 0)),
    # Three hosts: a pair formed from two replicas while the third serves.
    ([[A], [B], [C]], [[A, B], [C]], [A, B], {A: unit("replicas", [A]), B: unit("replicas", [B])},
     {A: unit("split", [A, B]), B: unit("split", [A, B], 1)}, [[C]], [A, B], [A], False, 1, (1, 3, 1, 3, 100000)),
    # Three hosts: the pair taken apart while c serves throughout (the model never away).
    ([[A, B], [C]], [[A], [B], [C]], [A, B], {A: unit("split", [A, B]), B: unit("split", [A, B], 1)},
     {A: unit("replicas", [A]), B: unit("replicas", [B])}, [[C]], [A], [A, B], False, 1, (1, 2, 1, 3, 100000)),
    # Four hosts: two pairs to four replicas, one pair at a time (the first move here).
    ([[A, B], [C, D]], [[A], [B], [C], [D]], [A, B], {A: unit("split", [A, B]), B: unit("split", [A, B], 1)},
     {A: unit("replicas", [A]), B: unit("replicas", [B])}, [[C, D]], [A], [A, B], False, 2, (1, 2, 2, 4, 260000)),
])
def test_one_move(current, target, touched, stops, starts, serving, drain, admit, away, remaining, cap):
    plan = move_plan(current, target, kv_tokens=KV)
    assert plan["todo"] is True
    assert plan["touched"] == touched
    assert {host: view["stops"] for host, view in plan["hosts"].items()} == stops
    assert {host: view["starts"] for host, view in plan["hosts"].items()} == starts
    assert plan["serving"] == serving
    assert plan["drain"] == drain
    assert plan["admit"] == admit
    assert plan["gate_hosts"] == admit
    assert plan["away"] is away
    assert plan["remaining"] == remaining
    got = plan["capacity"]
    assert (got["groups_serving"], got["groups_total"], got["hosts_serving"], got["hosts_total"],
            got["kv_tokens_serving"]) == cap
    assert plan["rollback"]["needed"] is False
    assert sorted(plan["after"]) == sorted(serving + plan["move"]["start"])


def test_the_pair_taken_apart_leaves_c_serving_and_says_so():
    plan = move_plan([[A, B], [C]], [[A], [B], [C]], kv_tokens=KV)
    assert plan["after"] == [[A], [B], [C]]
    assert "[spark-c] serves meanwhile: 1 of 2 groups, 1 of 3 hosts, 100,000 of 360,000 KV tokens" in \
        plan["announcement"]
    assert "model is away" not in plan["announcement"]
    assert plan["dry_run"][1] == ("Stops: vllm-split.service on spark-a (rank 0), spark-b (rank 1) (spark-a drained "
                                  "from the proxy, in-flight requests finishing, before it stops).")
    assert plan["dry_run"][2].startswith("Starts: vllm-replica.service on spark-a (a replica); vllm-replica.service "
                                         "on spark-b (a replica)")
    assert "the groups that serve are not touched" in plan["dry_run"][5]


def test_two_pairs_to_four_replicas_is_two_moves_each_with_a_pair_serving():
    rows = timeline([[A, B], [C, D]], [[A], [B], [C], [D]], kv_tokens=KV)
    assert [(r["stop"], r["start"], r["serving"], r["away"]) for r in rows] == [
        ([[A, B]], [[A], [B]], [[C, D]], False),
        ([[C, D]], [[C], [D]], [[A], [B]], False),
    ]
    assert [r["capacity"]["kv_tokens_serving"] for r in rows] == [260000, 200000]
    plan = move_plan([[A, B], [C, D]], [[A], [B], [C], [D]], kv_tokens=KV)
    assert "1 more move after this one" in plan["announcement"]
    assert plan["dry_run"][-2] == ("Then move 2: stops [spark-c, spark-d], starts [spark-c], [spark-d]; [spark-a], "
                                   "[spark-b] serve (2 of 3 groups, 2 of 4 hosts, 200,000 of 460,000 KV tokens).")
    # The next run reads what runs again and plans the second move as its first.
    second = move_plan(plan["after"], [[A], [B], [C], [D]], number=2)
    assert second["touched"] == [C, D] and second["serving"] == [[A], [B]] and second["remaining"] == 1


def test_two_hosts_the_model_is_away_and_the_words_say_so():
    plan = move_plan([[A, B]], [[A], [B]])
    assert "no other group serves: the model is away" in plan["announcement"]
    assert "nothing else serves meanwhile" in plan["dry_run"][5]


def test_nothing_to_move_ends_at_once():
    plan = move_plan([[A], [B, C]], [[B, C], [A]])
    assert plan["todo"] is False
    assert plan["touched"] == [] and plan["gate_hosts"] == [] and plan["drain"] == [] and plan["away"] is False
    assert plan["announcement"].startswith("Already on [spark-b, spark-c], [spark-a]: no group to move")


def test_ungated_moves_gate_no_one():
    plan = move_plan([[A, B], [C]], [[A], [B], [C]], gated=False)
    assert plan["gate_hosts"] == []
    assert "take traffic untested" in plan["announcement"]


def test_proxy_members_bound_drain_and_admit():
    plan = move_plan([[A, B], [C]], [[A], [B], [C]], members=[A, C])
    assert plan["drain"] == [A] and plan["admit"] == [A]


# --- failures: only the touched groups roll back --------------------------------------------------


def test_a_failed_start_in_one_group_rolls_back_that_group_only():
    plan = move_plan([[A, B], [C, D]], [[A], [B], [C], [D]], failed=[B])
    assert plan["rollback"] == {"needed": True, "stop": [[A], [B]], "start": [[A, B]], "hosts": [A, B],
                                "lost_groups": []}
    assert plan["gate_hosts"] == []
    assert plan["admit"] == []
    assert plan["after"] == [[A, B], [C, D]]          # c, d never touched
    assert plan["serving"] == [[C, D]]


def test_a_failed_pair_goes_back_to_its_replicas_while_c_serves():
    plan = move_plan([[A], [B], [C]], [[A, B], [C]], failed=[B])
    assert plan["rollback"]["start"] == [[A], [B]]
    assert plan["after"] == [[A], [B], [C]]


def test_a_lost_host_keeps_its_old_group_away_and_the_rest_comes_back():
    # a lost: its old replica cannot come back, b's can.
    plan = move_plan([[A], [B], [C]], [[A, B], [C]], lost=[A])
    assert plan["rollback"]["needed"] is True
    assert plan["rollback"]["start"] == [[B]] and plan["rollback"]["lost_groups"] == [[A]]
    assert plan["failed_hosts"] == [A] and plan["lost_hosts"] == [A]
    # A pair that needs a lost host cannot come back: the new replicas that started are gated and kept.
    plan = move_plan([[A, B], [C]], [[A], [B], [C]], lost=[B])
    assert plan["rollback"]["needed"] is False
    assert plan["gate_hosts"] == [A]
    assert plan["after"] == [[A], [C]]


def test_restorable_and_capacity_and_kv_by_size():
    assert restorable([[A, B], [C]], [B]) == [[C]]
    assert capacity([[A, B]], [[A, B], [C]], {"2": 5})["kv_tokens_serving"] == 5
    assert capacity([[A, B]], [[A, B], [C]], {1: 5})["kv_tokens_serving"] is None
    assert kv_by_size([{"sizes": [1, 1, 2], "kv_tokens": [10, 10, 30]}, {"sizes": [2, 2], "kv_tokens": [31, 31]}]) \
        == {1: 10, 2: 30}


def test_current_grouping_from_units_and_records():
    units = {A: ["inactive", "active"], B: ["inactive", "active"], C: ["active", "inactive"], D: ["inactive", "inactive"]}
    seen = current_grouping([A, B, C, D], units, head=B)
    assert seen["grouping"] == [[B, A], [C]]
    assert seen["idle"] == {D: "no engine unit runs there"}


# --- the two-topology switch is the two-host move ---------------------------------------------------


def _units(topology):
    return ["active", "inactive"] if topology == "replicas" else ["inactive", "active"]


@pytest.mark.parametrize("topology", ["replicas", "split"])
@pytest.mark.parametrize("failed, lost", [(None, ()), ([B], ()), ([A], ()), (None, [B]), ([A], [B])])
def test_the_switch_is_the_two_host_move(topology, failed, lost):
    engines, head = [A, B], A
    old = sp.other(topology)
    units = {host: _units(old) for host in engines}
    play_hosts = [host for host in engines if host not in lost] if lost else None
    plan = sp.switch_plan(topology, engines, head, units, gated=True, failed=failed, play_hosts=play_hosts)
    move = plan["move"]
    assert move == move_plan(grouping_of(engines, old, head), grouping_of(engines, topology, head), engines,
                             failed=failed, lost=lost)
    assert move["away"] is True
    assert move["touched"] == engines
    if not failed and not lost:
        assert move["admit"] == plan["api_engines"] == move["gate_hosts"]
    elif plan["rollback"]:
        assert move["admit"] == [] and move["after"] == restorable(grouping_of(engines, old, head), lost)
    assert move["drain"] == sp.api_engines(old, engines, head)
    assert move["gate_hosts"] == plan["gate_hosts"]
    assert move["rollback"]["needed"] is plan["rollback"]
    assert move["failed_hosts"] == plan["failed_hosts"]


def test_the_switch_on_its_target_has_no_move():
    plan = sp.switch_plan("split", [A, B], A, {A: _units("split"), B: _units("split")})
    assert plan["on_target"] is True
    assert plan["move"]["todo"] is False
