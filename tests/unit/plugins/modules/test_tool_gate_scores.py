# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``factory_floor.llm.tool_gate_scores`` through its action plugin: a store, in check mode and for real, and the
lookup that reads it back. Which record counts is tests/unit/plugins/module_utils/test_tool_gate_scores.py's."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.factory_floor.llm.plugins.action.tool_gate_scores import ActionModule

BUILD = {"id": "b" * 64, "parts": {"model_path": "/models/m"}}
RUN = {"url": "http://127.0.0.1:8000", "model": "lab-chat", "score": 38.9, "total": 18, "passed_count": 7,
       "suite_digest": "d" * 64}


def run(args, check_mode=False):
    task = mock.MagicMock(args=dict(args), check_mode=check_mode, async_val=0,
                          action="factory_floor.llm.tool_gate_scores")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    return action.run(task_vars={})


def test_a_store_then_a_lookup(tmp_path):
    path = tmp_path / "scores" / ("%s.%s.spark-a.json" % ("b" * 16, "d" * 16))
    store = dict(state="store", path=str(path), build=BUILD, run=RUN, host="spark-a", role="incumbent")
    assert run(store, check_mode=True)["changed"] is True and not path.exists()
    result = run(store)
    assert result["changed"] is True and json.loads(path.read_text()) == result["record"]
    assert oct(os.stat(str(path)).st_mode & 0o777) == "0o644"
    found = run(dict(state="lookup", store_dir=str(tmp_path / "scores"), build_id="b" * 64, suite_digest="d" * 64))
    assert found["changed"] is False and found["found"] == result["record"]
    assert found["found"]["passed"] is None and found["found"]["score"] == 38.9


def test_a_lookup_without_scores_finds_none(tmp_path):
    assert run(dict(state="lookup", store_dir=str(tmp_path), build_id="b" * 64, suite_digest="d" * 64))["found"] is None


@pytest.mark.parametrize("args, words", [
    (dict(state="lookup", store_dir="/s"), "tool_gate_scores lookup needs build_id, suite_digest"),
    (dict(state="store", path="/s/x.json"), "tool_gate_scores store needs build, run, host, role"),
])
def test_what_each_state_needs_is_named(args, words):
    with pytest.raises(AnsibleActionFail, match=words):
        run(args)


def test_a_score_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / ("%s.%s.spark-a.json" % ("b" * 16, "d" * 16))).write_text("{")
    with pytest.raises(AnsibleActionFail, match="Could not read the tool gate's scores in %s" % tmp_path):
        run(dict(state="lookup", store_dir=str(tmp_path), build_id="b" * 64, suite_digest="d" * 64))


def test_the_spread_of_every_play_host_in_one_file(tmp_path):
    task = mock.MagicMock(args={"state": "spread", "path": str(tmp_path / "spread.json")}, check_mode=False,
                          async_val=0, action="factory_floor.llm.tool_gate_scores")
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader()), None)
    task_vars = {"ansible_play_hosts": ["spark-a", "spark-b"],
                 "hostvars": {"spark-a": {"tool_gate_spread": {"score": 38.9}}, "spark-b": {}}}
    result = action.run(task_vars=task_vars)
    assert result["changed"] is True
    assert (tmp_path / "spread.json").read_text() == (
        '{\n    "spark-a": {\n        "score": 38.9\n    },\n    "spark-b": null\n}\n')
