# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""site_check.yml's runtime note, as YAML data, against the Jinja dict it was part of."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OLD_RUNTIME = ("{{ {'runtime': vllm_runtime, 'engine': vllm_container_engine,"
               " 'gpus': vllm_container_gpus | default('', true)} }}")


def _task():
    with open(os.path.join(ROOT, "playbooks", "site_check.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    return next(task for play in plays for task in play.get("tasks", []) if task.get("name") == "Note the runtime")


def _trusted(value):
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    return trust_as_template(value) if isinstance(value, str) else value


@pytest.mark.parametrize("variables", [
    {"vllm_runtime": "container", "vllm_container_engine": "docker", "vllm_container_gpus": "all"},
    {"vllm_runtime": "pip", "vllm_container_engine": "podman", "vllm_container_gpus": None},
    {"vllm_runtime": "container", "vllm_container_engine": "docker", "vllm_container_gpus": ""},
    {"vllm_runtime": "container", "vllm_container_engine": "docker"},
])
def test_the_runtime_noted_is_the_one_the_dict_held(variables):
    task = _task()
    assert task["ansible.builtin.set_fact"] == {"site_check": "{{ site_check | combine({'runtime': __site_check_runtime}) }}"}
    templar = Templar(loader=DataLoader(), variables=variables)
    new = templar.template(_trusted(task["vars"]["__site_check_runtime"]))
    assert new == templar.template(trust_as_template(OLD_RUNTIME))
