# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's role around the share decision and the plan's problems (issue 35).

The role's own tasks and vars resolved by Ansible's templating: which engine's running share the
share computation may keep (the topology the run deploys, a switch's target), and the refusal of a
plan whose device total the host does not have - as the site check reports it, with the plan.
"""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_check as sc
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_plan import plan_hosts
from ansible_collections.factory_floor.llm.plugins.module_utils._memory_report import reasoning_lines
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, _trusted, role_variables

GIB_KB = 1024 * 1024


def variables(**inventory):
    found = role_variables("memory_guard")
    with open(os.path.join(ROOT, "roles/site/vars/main.yml"), encoding="utf-8") as handle:
        found.update(_trusted(yaml.safe_load(handle)))     # a dependency's vars: _site_topologies
    found.update(inventory)
    return found


def read(check, **inventory):
    """What factory_floor.llm.memory_guard_check reads for ``check``, as the role's task sees it."""
    found = variables(inventory_hostname="spark-a", __memory_guard_model={"weights_gib": 1, "min_kv_gib": 1},
                      **inventory)
    templar = with_filters(Templar(loader=DataLoader(), variables=found))
    return {name: templar.template(trust_as_template("{{ %s }}" % name)) for name in mg.VARIABLES[check]
            if name in found}


@pytest.mark.parametrize("inventory, unit", [
    (dict(topology="replicas"), "vllm-replica.service"),
    (dict(topology="split"), "vllm-split.service"),
    (dict(), "vllm-replica.service"),
    # A switch starts its target's engine anyway: the running one (the other topology's) is not kept.
    (dict(topology="replicas", switch_to="split"), "vllm-split.service"),
    (dict(topology="split", switch_to="replicas"), "vllm-replica.service"),
])
def test_the_share_kept_is_the_one_of_the_engine_this_run_configures(inventory, unit):
    args = mg.module_args(read("compute", **inventory))
    assert args["running_unit"] == unit
    assert float(args["hysteresis_gib"]) == 4.0
    assert float(mg.module_args(read("compute", memory_guard_share_hysteresis_gib=0, **inventory))["hysteresis_gib"]) == 0.0


def trial_plan():
    """The trial's engine host: a lab container with MemTotal 23.54 GiB, memory_guard_device_total_gib 121.7."""
    meminfo = {"MemTotal": int(23.54 * GIB_KB), "MemFree": 18 * GIB_KB, "MemAvailable": 18 * GIB_KB}
    result = plan_hosts([dict(name="spark-a", meminfo=meminfo, device_total_gib=121.7, weights_gib=0.26,
                              min_kv_gib=0.09, engines_held_gib=0)])
    return {"problems": result["problems"], "reasoning": reasoning_lines(result["hosts"][0])}


def test_a_device_total_the_host_does_not_have_is_refused_naming_the_variable_and_shown_by_the_site_check():
    plan = trial_plan()
    msg = mg.share(read("share"), plan)["refusal"]
    assert msg.startswith("spark-a: the memory plan does not describe this host: device total 121.70 GiB "
                          "(device_total_gib) is 5.2 times host spark-a's MemTotal 23.54 GiB")
    assert "Set memory_guard_device_total_gib to what CUDA reports on this host" in msg
    assert "or to null to plan on MemTotal" in msg and "memory_guard_enabled: false" in msg

    # The site check's rescue records the refusal with the plan it refused (playbooks/site-check.yml).
    synced = {"time": {"ntp_synchronized": True, "services": ["systemd-timesyncd.service"]},
              "units": {"docker.service": {"load_state": "loaded", "active_state": "active"}}, "ports": []}
    record = {"groups": ["engine"], "reach": {"ok": True}, "facts": {}, "info": synced,
              "runtime": {"runtime": "container", "engine": "docker", "gpus": ""}, "image": {"ok": True},
              "memory": {"ok": False, "enabled": True, "msg": msg, "plan": {"reasoning": plan["reasoning"]}}}
    out = sc.report({"spark-a": record})
    assert not out["ok"]
    assert [p["what"] for p in out["hosts"]["spark-a"]["problems"] if "memory_guard_device_total_gib" in p["what"]]
    assert "  - the memory plan does not describe this host: device total 121.70 GiB" in out["message"]
    # The memory section prints the plan, its problem first.
    assert out["hosts"]["spark-a"]["reasons"][:2] == plan["reasoning"][:2]
    assert out["hosts"]["spark-a"]["reasons"][1].startswith("problem: device total 121.70 GiB")


def test_a_plan_that_describes_the_host_passes():
    assert mg.plan_refusal("spark-a", {"problems": []}) is None
