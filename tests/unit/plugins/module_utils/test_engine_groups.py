# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Engine groups (issue 37): the groupings a site may declare, and the steps from one to another."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.proxy_members import proxy_members as proxy_members_filter
from ansible_collections.factory_floor.llm.plugins.filter.split_rank import split_rank as split_rank_filter
from ansible_collections.factory_floor.llm.plugins.module_utils._engine_groups import (
    api_hosts,
    check_grouping,
    group_moves,
    grouping_of,
    is_supported,
    moves_report,
    proxy_members,
    split_rank,
    split_sizes,
    topology_of,
)

FOUR = ["spark-a", "spark-b", "spark-c", "spark-d"]


def test_the_two_topologies_are_groupings():
    assert grouping_of(FOUR[:2], "replicas") == [["spark-a"], ["spark-b"]]
    assert grouping_of(FOUR[:2], "split", head="spark-b") == [["spark-b", "spark-a"]]
    assert topology_of([["spark-a"], ["spark-b"]]) == "replicas"
    assert topology_of([["spark-a", "spark-b"]]) == "split"
    assert topology_of([["spark-a", "spark-b"], ["spark-c"]]) == "groups"
    with pytest.raises(ValueError, match="replicas, split"):
        grouping_of(FOUR, "pairs")


@pytest.mark.parametrize("heads, kv_heads, sizes", [
    (32, 8, [1, 2, 4, 8]),       # Llama-style GQA
    (9, 3, [1, 3]),              # SmolLM2-135M: 9 heads, 3 KV heads
    (64, 8, [1, 2, 4, 8]),
    (40, 8, [1, 2, 4, 8]),       # 40 heads: 8 divides; KV 8 splits over 8
    (28, 4, [1, 2, 4]),          # 28 heads: 4 divides (7 each); 8 does not
    (None, None, [1, 2, 3, 4, 5, 6, 7, 8]),
])
def test_split_sizes_follow_vllms_head_rule(heads, kv_heads, sizes):
    assert split_sizes(heads, kv_heads) == sizes


def test_a_grouping_of_every_host_once_passes():
    assert check_grouping([["spark-a", "spark-b"], ["spark-c"], ["spark-d"]], FOUR, num_attention_heads=32,
                          num_key_value_heads=8) == []


@pytest.mark.parametrize("grouping, words", [
    ("spark-a", ["site_engine_groups must be a non-empty list of host lists"]),
    ([], ["site_engine_groups must be a non-empty list"]),
    ([["spark-a", "spark-b"], "spark-c", ["spark-d"]], ["group 2 of site_engine_groups must be"]),
    ([["spark-a", "spark-b"], ["spark-c", "spark-x"], ["spark-d"]],
     ["names spark-x in group 2, which is not in the engine group 'gb10'"]),
    ([["spark-a", "spark-b"], ["spark-b", "spark-c"], ["spark-d"]],
     ["spark-b is in group 1 and in group 2", "exactly one group"]),
    ([["spark-a", "spark-b"], ["spark-c"]],
     ["spark-d is in the engine group 'gb10' but in no group", "add [spark-d] as a group of its own"]),
    ([["spark-a", "spark-b", "spark-c"], ["spark-d"]],
     ["group 1 (spark-a, spark-b, spark-c) has 3 hosts", "heads (32)", "make its groups 1 or 2 or 4 hosts"]),
])
def test_every_refusal_says_what_to_change(grouping, words):
    errors = check_grouping(grouping, FOUR, num_attention_heads=32, num_key_value_heads=8)
    assert errors, grouping
    text = " | ".join(errors)
    for word in words:
        assert word in text


def test_a_group_on_one_machine_and_a_replica_that_does_not_fit_are_refused():
    machines = {"spark-a": "10.0.0.1", "spark-b": "10.0.0.1", "spark-c": "10.0.0.3", "spark-d": "10.0.0.4"}
    errors = check_grouping([["spark-a", "spark-b"], ["spark-c"], ["spark-d"]], FOUR, machines=machines,
                            replica_fits=False)
    assert any("group 1 puts spark-a and spark-b on one machine (10.0.0.1)" in e for e in errors)
    assert any("group 2 (spark-c) is one host, and the model does not fit one host" in e for e in errors)
    assert len(errors) == 3


def _serving_hosts(step):
    return sorted(h for g in step["serving"] for h in g)


def test_the_pair_becomes_two_replicas_while_the_third_host_serves():
    steps = group_moves([["spark-a", "spark-b"], ["spark-c"]], [["spark-a"], ["spark-b"], ["spark-c"]])
    assert steps == [{"stop": [["spark-a", "spark-b"]], "start": [["spark-a"], ["spark-b"]],
                      "serving": [["spark-c"]], "away": False}]


def test_four_replicas_become_two_pairs_one_pair_at_a_time():
    steps = group_moves([[h] for h in FOUR], [["spark-a", "spark-b"], ["spark-c", "spark-d"]])
    assert [s["start"] for s in steps] == [[["spark-a", "spark-b"]], [["spark-c", "spark-d"]]]
    assert _serving_hosts(steps[0]) == ["spark-c", "spark-d"]
    assert steps[1]["serving"] == [["spark-a", "spark-b"]]
    assert not any(s["away"] for s in steps)


def test_regrouping_every_host_goes_through_replicas_so_something_always_serves():
    current = [["spark-a", "spark-b"], ["spark-c", "spark-d"]]
    target = [["spark-a"], ["spark-b", "spark-c"], ["spark-d"]]
    steps = group_moves(current, target)
    assert not any(s["away"] for s in steps)
    # Replay the steps: the grouping reached is the target's.
    state = {frozenset(g) for g in current}
    for s in steps:
        assert {frozenset(g) for g in s["stop"]} <= state
        state -= {frozenset(g) for g in s["stop"]}
        state |= {frozenset(g) for g in s["start"]}
    assert state == {frozenset(g) for g in target}


def test_without_replicas_or_on_two_hosts_the_model_is_away():
    assert group_moves([["spark-a", "spark-b"]], [["spark-a"], ["spark-b"]])[0]["away"] is True
    assert group_moves([["spark-a"], ["spark-b"]], [["spark-a", "spark-b"]])[0]["away"] is True
    steps = group_moves([["spark-a", "spark-b"], ["spark-c", "spark-d"]], [["spark-a", "spark-c"], ["spark-b", "spark-d"]],
                        replica_fits=False)
    assert len(steps) == 1 and steps[0]["away"] is True


def test_nothing_to_do_and_untouched_groups():
    assert group_moves([["spark-a"], ["spark-b"]], [["spark-b"], ["spark-a"]]) == []
    steps = group_moves([["spark-a"], ["spark-b"], ["spark-c", "spark-d"]], [["spark-a", "spark-b"], ["spark-c", "spark-d"]])
    assert len(steps) == 1 and steps[0]["serving"] == [["spark-c", "spark-d"]]


def test_the_report_names_each_step_and_the_capacity_left():
    current = [["spark-a", "spark-b"], ["spark-c"]]
    lines = moves_report(current, group_moves(current, [["spark-a"], ["spark-b"], ["spark-c"]]))
    assert lines == ["step 1: stop [spark-a, spark-b], start [spark-a] [spark-b]; meanwhile [spark-c] serves (1 of 3 hosts)"]
    two = [["spark-a", "spark-b"]]
    assert moves_report(two, group_moves(two, [["spark-a"], ["spark-b"]]))[0].endswith(
        "meanwhile the model is away (no other group serves)")


# ------------------------------- the proxy's members: each group's first host (its API host)

@pytest.mark.parametrize("engines, grouping, members", [
    # the two topologies (declared or not): the site switches between them with the proxy as it is, so every
    # engine host is a member, in inventory order - what nginx_proxy_backends was before groups
    (FOUR[:2], None, ["spark-a", "spark-b"]),
    (FOUR[:2], [], ["spark-a", "spark-b"]),
    (FOUR[:2], [["spark-a"], ["spark-b"]], ["spark-a", "spark-b"]),
    (FOUR[:2], [["spark-b", "spark-a"]], ["spark-a", "spark-b"]),
    (FOUR, [["spark-a"], ["spark-b"], ["spark-c"], ["spark-d"]], FOUR),
    (["spark-a"], None, ["spark-a"]),
    # engine groups: each group's rank 0, in the grouping's order
    (FOUR, [["spark-a", "spark-b"], ["spark-c", "spark-d"]], ["spark-a", "spark-c"]),
    (FOUR, [["spark-a"], ["spark-b"], ["spark-c", "spark-d"]], ["spark-a", "spark-b", "spark-c"]),
    (FOUR, [["spark-d", "spark-c"], ["spark-b", "spark-a"]], ["spark-d", "spark-b"]),
])
def test_the_proxy_balances_over_each_groups_api_host(engines, grouping, members):
    assert proxy_members(engines, grouping) == members
    assert proxy_members_filter(engines, grouping) == members


def test_the_proxy_members_filter_refuses_what_is_no_grouping():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="site_engine_groups must be a list of non-empty host lists"):
        proxy_members_filter(FOUR, "spark-a")
    with pytest.raises(AnsibleFilterError, match="expects the engine hosts"):
        proxy_members_filter("spark-a", [])


@pytest.mark.parametrize("grouping, supported", [
    ([["spark-a"], ["spark-b"], ["spark-c"]], True),
    ([["spark-a", "spark-b"]], True),
    ([["spark-a", "spark-b", "spark-c"]], True),
    ([["spark-a", "spark-b", "spark-c", "spark-d"]], True),
    ([["spark-a", "spark-b"], ["spark-c"]], False),
    ([["spark-a", "spark-b"], ["spark-c", "spark-d"]], False),
])
def test_the_playbooks_run_replicas_and_one_split_group_of_every_host_only(grouping, supported):
    assert is_supported(grouping) is supported
    assert api_hosts(grouping) == [group[0] for group in grouping]


# --- split_rank: where each host runs in a split group ---------------------------------------------

@pytest.mark.parametrize("grouping, host, head, group, rank, others, peer", [
    # two hosts: the head is vllm_split_head when in the group, else the first host
    (["spark-a", "spark-b"], "spark-a", None, ["spark-a", "spark-b"], 0, ["spark-b"], "spark-b"),
    (["spark-a", "spark-b"], "spark-b", None, ["spark-a", "spark-b"], 1, ["spark-a"], "spark-a"),
    (["spark-a", "spark-b"], "spark-a", "spark-b", ["spark-b", "spark-a"], 1, ["spark-b"], "spark-b"),
    (["spark-a", "spark-b"], "spark-a", "spark-x", ["spark-a", "spark-b"], 0, ["spark-b"], "spark-b"),
    # three and four: the others follow the group's order; each pings the head, the head pings rank 1
    (FOUR[:3], "spark-c", None, FOUR[:3], 2, ["spark-a", "spark-b"], "spark-a"),
    (FOUR, "spark-a", "spark-c", ["spark-c", "spark-a", "spark-b", "spark-d"], 1,
     ["spark-c", "spark-b", "spark-d"], "spark-c"),
    (FOUR, "spark-c", "spark-c", ["spark-c", "spark-a", "spark-b", "spark-d"], 0,
     ["spark-a", "spark-b", "spark-d"], "spark-a"),
    (FOUR, "spark-d", None, FOUR, 3, ["spark-a", "spark-b", "spark-c"], "spark-a"),
    # several groups: each its own head and rendezvous; vllm_split_head heads only its own group
    ([["spark-a", "spark-b"], ["spark-c", "spark-d"]], "spark-d", None, ["spark-c", "spark-d"], 1, ["spark-c"],
     "spark-c"),
    ([["spark-a", "spark-b"], ["spark-c", "spark-d"]], "spark-a", "spark-d", ["spark-a", "spark-b"], 0, ["spark-b"],
     "spark-b"),
    ([["spark-a", "spark-b"], ["spark-c", "spark-d"]], "spark-c", "spark-d", ["spark-d", "spark-c"], 1, ["spark-d"],
     "spark-d"),
])
def test_split_rank_table(grouping, host, head, group, rank, others, peer):
    found = split_rank(grouping, host, head)
    assert found["group"] == group and found["rank"] == rank and found["nnodes"] == len(group)
    assert found["head"] == group[0] and found["is_head"] == (rank == 0)
    assert found["others"] == [{"host": name, "rank": group.index(name)} for name in others]
    assert found["peer"] == peer


def test_a_host_in_no_split_group_has_no_rank():
    assert split_rank([["spark-a", "spark-b"]], "spark-c", "spark-a") == {
        "group": [], "rank": None, "nnodes": 0, "head": "", "is_head": False, "others": [], "peer": ""}
    assert split_rank([], "spark-a") == split_rank(None, "spark-a") == split_rank([["spark-b"]], "spark-a")


def test_the_split_rank_filter_takes_one_group_or_several():
    assert split_rank_filter(["spark-a", "spark-b", "spark-c"], "spark-b", "spark-c")["rank"] == 2
    assert split_rank_filter([["spark-a", "spark-b"], ["spark-c"]], "spark-c", "")["is_head"] is True
    with pytest.raises(AnsibleFilterError, match="split_rank expects"):
        split_rank_filter("spark-a", "spark-a")
