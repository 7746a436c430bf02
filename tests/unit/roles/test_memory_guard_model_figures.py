# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's two model figures (issue 35): the inventory's value, else read from the model's files.

The role's own vars resolved by Ansible's templating, with the model_memory module's result
(tests/unit/plugins/modules/test_model_memory.py runs the module on a synthetic directory)
standing in as registered; the preflight and the share computation read only these.
"""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _memory_guard_check as mg
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, role_variables

READ = {"weights_gib": 23.67, "weights_source": "11 checkpoint file(s) in /m / 2 ranks", "min_kv_gib": 6.0,
        "min_kv_source": "config.json in /m: one full-context request of 262,144 tokens"}


def resolve(name, **inventory):
    variables = role_variables("memory_guard")
    variables.update(inventory)
    templar = with_filters(Templar(loader=DataLoader(), variables=variables), "memory_guard_figures", "memory_guard_model_dir")
    return templar.template(trust_as_template("{{ %s }}" % name))


def test_defaults_leave_both_figures_to_the_model_files():
    defaults = yaml.safe_load(open(os.path.join(ROOT, "roles/memory_guard/defaults/main.yml"), encoding="utf-8"))
    assert defaults["memory_guard_weights_gib"] is None and defaults["memory_guard_min_kv_gib"] is None


@pytest.mark.parametrize("name, expected", [("_memory_guard_weights_gib", 23.67), ("_memory_guard_min_kv_gib", 6.0),
                                            ("_memory_guard_weights_source", READ["weights_source"])])
def test_null_figures_come_from_the_model_files(name, expected):
    assert resolve(name, __memory_guard_model=READ) == expected


def test_a_value_the_inventory_sets_is_kept():
    assert resolve("_memory_guard_weights_gib", memory_guard_weights_gib=48, __memory_guard_model=READ) == 48
    assert resolve("_memory_guard_min_kv_source", memory_guard_min_kv_gib=12,
                   __memory_guard_model=READ) == "memory_guard_min_kv_gib"


def test_nothing_read_and_nothing_set_is_none_which_the_preflight_refuses():
    assert resolve("_memory_guard_weights_gib", __memory_guard_model={"skipped": True}) is None
    variables = {name: resolve(name, __memory_guard_model={"skipped": True}) for name in mg.VARIABLES["preflight"]
                 if name != "inventory_hostname"}
    (error,) = mg.preflight(dict(variables, inventory_hostname="spark-a"))
    assert error["check"] == "figures" and "Now: weights  (unknown)" in error["message"]


@pytest.mark.parametrize("inventory, model, tp", [
    (dict(topology="replicas", vllm_model="/m/a", vllm_split_model="/m/b"), "/m/a", 1),
    (dict(topology="split", vllm_model="/m/a", vllm_split_model="/m/b", vllm_split_tensor_parallel_size=2), "/m/b", 2),
    (dict(topology="split", vllm_model="/m/a"), "/m/a", 2),
    # A switch computes the share of the topology it switches to.
    (dict(topology="replicas", switch_to="split", vllm_model="/m/a"), "/m/a", 2),
])
def test_the_model_and_its_ranks_follow_the_topology(inventory, model, tp):
    assert resolve("_memory_guard_model_dir", **inventory) == model
    assert int(resolve("_memory_guard_tensor_parallel_size", **inventory)) == tp
