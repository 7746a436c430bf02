# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the maintenance_window role reads from its hosts' results (``_maintenance_window.py``) and the filters that
give it to the role (longest_startups, lock_refusals)."""

from __future__ import annotations

import base64
import json

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.lock_refusals import lock_refusals as lock_refusals_filter
from ansible_collections.factory_floor.llm.plugins.filter.longest_startups import longest_startups as startups_filter
from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_window import lock_refusals, longest_startups


def _slurped(seconds):
    return {"content": base64.b64encode(json.dumps(seconds).encode()).decode(), "encoding": "base64"}


def test_the_longest_start_up_per_name_over_the_engine_hosts():
    files = [_slurped({"replicas": 40, "split": "131.5"}), _slurped({"replicas": 48.5, "replicas_gate": "n/a"}),
             {"skipped": True}, {"failed": False, "msg": "file not found"}, {}]
    assert longest_startups(files) == {"replicas": 48.5, "split": 131.5, "replicas_gate": 0}
    assert longest_startups([]) == {} and longest_startups(None) == {}
    assert startups_filter(files) == longest_startups(files)
    with pytest.raises(AnsibleFilterError, match="a list"):
        startups_filter({"content": ""})


def test_each_refusal_names_its_host_and_reason_then_the_roles_sentence():
    results = [{"item": "spark-a", "failed": True, "msg": "the maintenance lock is held by switch-model"},
               {"item": "spark-b", "changed": False}, {"item": "gw", "failed": True}]
    # "<host>: <why> " each; the role's maintenance_window_lock_refused follows (as the Jinja loop wrote it).
    assert lock_refusals(results) == "spark-a: the maintenance lock is held by switch-model gw:  "
    assert lock_refusals([]) == "" and lock_refusals(None) == ""
    assert lock_refusals_filter(results) == lock_refusals(results)
    with pytest.raises(AnsibleFilterError, match="a list"):
        lock_refusals_filter("spark-a")
