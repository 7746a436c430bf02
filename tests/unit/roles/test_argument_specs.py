# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every role's meta/argument_specs.yml against its defaults, checked without Ansible.

- The main entry point documents exactly the variables of defaults/main.yml.
- A default written in both places is the same value (a templated default, such
  as "{{ ff_proxy_port | default(8080) }}", is documented by its usual value).
- Every entry point has its task file.
"""

from __future__ import annotations

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", name)))


def _load(*parts):
    with open(os.path.join(ROOT, "roles", *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("role", ROLES)
def test_main_documents_every_default(role):
    defaults = _load(role, "defaults", "main.yml") or {}
    options = _load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(options) == set(defaults)


@pytest.mark.parametrize("role", ROLES)
def test_documented_defaults_match(role):
    defaults = _load(role, "defaults", "main.yml") or {}
    for entry_point, spec in _load(role, "meta", "argument_specs.yml")["argument_specs"].items():
        for name, option in (spec.get("options") or {}).items():
            if "default" in option and name in defaults and not (isinstance(defaults[name], str) and "{{" in defaults[name]):
                assert option["default"] == defaults[name], (entry_point, name)


@pytest.mark.parametrize("role", ROLES)
def test_entry_points_have_task_files(role):
    for entry_point in _load(role, "meta", "argument_specs.yml")["argument_specs"]:
        assert os.path.exists(os.path.join(ROOT, "roles", role, "tasks", entry_point + ".yml")), entry_point


def test_restart_force_is_off_by_default():
    # deploy.yml never takes the model away from clients unless asked to.
    assert _load("vllm", "defaults", "main.yml")["vllm_restart_force"] is False
    spec = _load("vllm", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]["vllm_restart_force"]
    assert spec["type"] == "bool"
    assert _load("vllm_replica", "defaults", "main.yml")["vllm_replica_restart"] is True


def _descriptions(options):
    for name, option in (options or {}).items():
        text = option.get("description", "")
        yield name, " ".join(text) if isinstance(text, list) else str(text)
        yield from _descriptions(option.get("options"))


@pytest.mark.parametrize("role", ROLES)
def test_descriptions_hold_no_jinja(role):
    """validate_argument_spec templates the whole spec: a {{ }} or {% %} in a description is
    evaluated at run time, and an undefined name in it fails the role."""
    for entry_point, spec in _load(role, "meta", "argument_specs.yml")["argument_specs"].items():
        for name, text in _descriptions(spec.get("options")):
            assert "{{" not in text and "{%" not in text, (entry_point, name, text)
