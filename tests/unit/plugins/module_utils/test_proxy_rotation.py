# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the proxy's membership checker has in rotation (``_proxy_rotation``): the waits' conditions and every
message of factory_floor.llm.proxy_rotation, in the words the nginx_proxy role's tasks used."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_rotation as pr

STATE = {"mode": "replicas", "in_rotation": ["spark-a"], "drained": ["spark-b"],
         "statuses": {"spark-a": "serving", "spark-b": "drained"}}


def test_the_state_is_none_until_a_whole_file_is_there(tmp_path):
    path = tmp_path / "upstream.json"
    assert pr.read_state(str(path)) is None
    path.write_text('{"in_rotation": [')
    assert pr.read_state(str(path)) is None
    path.write_text("[]")
    assert pr.read_state(str(path)) is None
    path.write_text('{"in_rotation": ["spark-a"]}')
    assert pr.read_state(str(path)) == {"in_rotation": ["spark-a"]}


@pytest.mark.parametrize("state, expected, wait_for, done", [
    (STATE, ["spark-a"], "all", True),
    (STATE, ["spark-a", "spark-b"], "all", False),
    (STATE, [], "all", True),
    (None, [], "all", False),
    (STATE, ["spark-a", "spark-b"], "any", True),
    (STATE, ["spark-b"], "any", False),
    (None, [], "any", True),
    (None, ["spark-a"], "any", False),
])
def test_which_engines_are_in_rotation(state, expected, wait_for, done):
    assert pr.expected_in(state, expected, wait_for) is done


@pytest.mark.parametrize("engines, present, applied", [
    (["spark-b"], True, True), (["spark-a", "spark-b"], True, False), (["spark-a"], False, True),
    (["spark-b"], False, False), ([], True, True),
])
def test_whether_a_drain_is_applied(engines, present, applied):
    assert pr.drain_applied(STATE, engines, present) is applied
    assert pr.drain_applied(None, engines, present) is False


def test_a_drain_file_names_its_holder():
    assert pr.holder_content("switch") == '{"holder": "switch"}\n'


def test_a_drain_that_is_no_list_is_refused():
    assert pr.not_a_list("spark-a") == ("nginx_proxy_drain must be a YAML list of inventory names, such as [spark-a], "
                                        "not 'spark-a'.")


def test_a_name_the_checker_does_not_know_is_refused():
    assert pr.unknown_engines(["spark-a"], STATE, "gateway") == ""
    assert pr.unknown_engines(["gb10-a", "spark-a"], STATE, "gateway") == (
        "nginx_proxy_drain names gb10-a, which the proxy's membership checker on gateway does not know: use the "
        "engines' inventory names (spark-a, spark-b).")


def test_engines_that_did_not_join_are_named_with_what_the_checker_saw():
    assert pr.not_in_rotation(STATE, ["spark-a", "spark-b"], "gateway", 30, "factory-floor-upstream.service") == (
        "After 30 s the proxy on gateway has spark-a in rotation, expected spark-a, spark-b. Engine states seen: "
        "{'spark-a': 'serving', 'spark-b': 'drained'}. See journalctl -u factory-floor-upstream.service.")
    assert pr.not_in_rotation(None, ["spark-a"], "gateway", 30, "u").startswith(
        "After 30 s the proxy on gateway has no engine in rotation, expected spark-a. Engine states seen: {}.")


def test_a_drain_the_checker_did_not_apply_is_named():
    assert pr.drain_not_applied(STATE, ["spark-a"], True, "gateway", 30, "u") == (
        "After 30 s the membership checker on gateway has not taken out of rotation spark-a (drained now: spark-b). "
        "See journalctl -u u.")
    assert "put back in rotation spark-b (drained now: no state file)" in pr.drain_not_applied(
        None, ["spark-b"], False, "gateway", 30, "u")


@pytest.mark.parametrize("text, holder", [
    ('{"holder": "switch-model"}\n', "switch-model"), ("", ""), ("ops, by hand\n", "ops, by hand"), ("{}", ""),
])
def test_who_a_drain_file_names(text, holder):
    assert pr.holder_of(text) == holder


def test_the_holders_of_the_drain_files(tmp_path):
    (tmp_path / "spark-a").write_text(pr.holder_content("switch-model"))
    (tmp_path / "spark-b").write_text("")
    (tmp_path / ".spark-c").write_text("hidden")
    (tmp_path / "sub").mkdir()
    (tmp_path / "spark-d").symlink_to(tmp_path / "spark-a")
    assert pr.read_holders(str(tmp_path)) == {"spark-a": "switch-model", "spark-b": ""}
    assert pr.read_holders(str(tmp_path / "none")) == {}
