# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every playbook that needs something from hosts a --limit leaves out checks it first (issue 33, item 8).

The decision is ``_limit.check_limit`` (tests/unit/plugins/module_utils/test_limit.py); this
checks, without Ansible, that each playbook runs it before any play that changes a host.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._limit import PLAYBOOKS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# playbook file -> (the check's playbook name, the play that runs it); play 0 of each checks that the
# inventory has the hosts (test_playbook_inventory.py).
WIRED = {
    "deploy.yml": ("deploy", 1),
    "switch.yml": ("switch", 1),
    "move_groups.yml": ("move_groups", 1),
    "switch_model.yml": ("switch_model", 1),
    "status.yml": ("status", 1),
    "peers.yml": ("peers", 2),          # the engines' play, before it lists the peers
    "metrics.yml": ("metrics", 1),
    "prometheus_config.yml": ("prometheus_config", 1),
    "chat.yml": ("chat", 1),
    "tune_concurrency.yml": ("tune", 1),
}
# Each host alone: nothing to check.
ALONE = {"memory_guard", "tool_gate_spread"}


def _plays(name):
    with open(os.path.join(ROOT, "playbooks", name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _limit_includes(play):
    """(index, vars) of each task of the play that includes the site role's limit entry point."""
    found = []
    for index, task in enumerate(play.get("tasks") or []):
        include = task.get("ansible.builtin.include_role") or {}
        if include.get("name") == "factory_floor.llm.site" and include.get("tasks_from") == "limit":
            found.append((index, task.get("vars") or {}))
    return found


def test_every_playbook_with_needs_is_wired():
    assert {name for name, _play in WIRED.values()} | ALONE == set(PLAYBOOKS)


@pytest.mark.parametrize("filename, expected", sorted(WIRED.items()))
def test_the_limit_is_checked_before_any_host_changes(filename, expected):
    name, play_index = expected
    plays = _plays(filename)
    for index, play in enumerate(plays):
        includes = _limit_includes(play)
        if includes:
            assert index == play_index, (filename, index)
            assert includes[0][1]["site_limit_playbook"] == name
            # Over the hosts the limit lets in: all of them, or the engines and proxies.
            assert play["hosts"] in ("all", "gb10:proxy", "gb10"), play["hosts"]
            break
    else:
        pytest.fail("%s never includes the limit entry point" % filename)
    # Nothing before it: it is the first task of its play, or follows the layout check only (and, in a switch, the
    # refusal of --tags, an assert on the command line).
    index, _vars = _limit_includes(plays[play_index])[0]
    before = [t.get("ansible.builtin.include_role", {}).get("tasks_from") for t in plays[play_index]["tasks"][:index]
              if "ansible.builtin.assert" not in t]
    assert set(before) <= {"layout"}, before


def test_deploy_reads_the_proxy_addresses_before_its_preflight_refuses_the_unknown_ones():
    plays = _plays("deploy.yml")
    names = [p["name"] for p in plays]
    gather = next(i for i, p in enumerate(plays) if any(v.get("site_limit_gather") for _i, v in _limit_includes(p)))
    preflight = names.index("Preflight (nothing changes on any host unless every check passes)")
    assert gather == preflight - 1
    # Without any_errors_fatal: there an unreachable proxy, even ignored, would end the play without a word.
    assert not plays[gather].get("any_errors_fatal")
    with open(os.path.join(ROOT, "roles", "site_deploy", "tasks", "deploy_preflight.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    # After the vllm role's settings, which the procedure role loads first.
    assert tasks[0]["ansible.builtin.include_role"]["tasks_from"] == "settings"
    first = tasks[1]
    assert (first["ansible.builtin.include_role"]["name"], first["ansible.builtin.include_role"]["tasks_from"]) == (
        "factory_floor.llm.site", "limit")
    assert first["vars"] == {"site_limit_playbook": "deploy", "site_limit_gathered": True}
