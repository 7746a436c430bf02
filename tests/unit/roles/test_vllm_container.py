# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The vllm role's container runtime settings that live in YAML, checked without Ansible.

- The role's default image and the example inventories' are pinned (the preflight
  refuses an unpinned one: the same rule, _container_image.is_pinned).
- The preflight refuses in vllm_container_run_args what the role sets itself and every
  way of putting an environment value (the API key) on the command line.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _container_image as ci
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_check import MANAGED_RUN_ARGS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


DEFAULTS = _load("roles", "vllm", "defaults", "main.yml")
VARS = _load("roles", "vllm", "vars", "main.yml")


@pytest.mark.parametrize("where", [
    ("roles", "vllm", "defaults", "main.yml"),
    ("inventory", "example", "group_vars", "gb10.yml"),
    ("inventory", "example-single", "group_vars", "gb10.yml"),
])
def test_images_are_pinned(where):
    values = _load(*where)
    assert ci.is_pinned(values["vllm_container_image"], values.get("vllm_container_image_digest", "")), where


def test_run_args_hold_nothing_the_role_sets():
    # GPU access and IPC are variables of their own now; nothing is pulled unless asked.
    assert DEFAULTS["vllm_container_run_args"] == []
    assert DEFAULTS["vllm_container_pull"] is False
    managed = MANAGED_RUN_ARGS
    for flag in ("-e", "--env", "--env-file", "--gpus", "--ipc", "--shm-size", "--network", "--name", "--rm",
                 "--restart", "-d", "--detach", "--entrypoint", "--pull", "--log-driver"):
        assert flag in managed, flag
    for example in ("example", "example-single"):
        args = _load("inventory", example, "group_vars", "gb10.yml")["vllm_container_run_args"]
        assert not [a for a in args if a.split("=", 1)[0] in managed or a[:2] in managed], example


def test_container_names_follow_the_units():
    # The watchdog, the health wait and the unit's ExecStop=/ExecStopPost= all derive the
    # container's name from the unit's; the image check reads these.
    site = _load("roles", "site", "vars", "main.yml")["_site_topologies"]
    assert [t["unit"] for t in site.values()] == ["vllm-replica.service", "vllm-split.service"]
    assert VARS["_vllm_units"]["replicas"] == ["{{ _site_topologies.replicas.unit }}"]
    assert VARS["_vllm_units"]["split"] == ["{{ _site_topologies.split.unit }}"]
    assert "regex_replace" in VARS["_vllm_container_names"]
