# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every role's meta/argument_specs.yml against its defaults, checked without Ansible.

- The main entry point documents exactly the variables of defaults/main.yml.
- A default written in both places is the same value (a templated default, such
  as "{{ vllm_port }}", is documented by its usual value).
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


def _descriptions(node):
    """Every description text in an argument spec (options nest under options)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "short_description"):
                yield from (value if isinstance(value, list) else [value])
            else:
                yield from _descriptions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _descriptions(item)


@pytest.mark.parametrize("role", ROLES)
def test_no_jinja_in_descriptions(role):
    # ansible-core templates the spec it validates against (validate_argument_spec's argument_spec is
    # a task argument): "{{ prometheus_config_dir }}" in a description failed every include of the role.
    specs = _load(role, "meta", "argument_specs.yml")["argument_specs"]
    assert [text for text in _descriptions(specs) if "{{" in str(text) or "{%" in str(text)] == []


@pytest.mark.parametrize("role", ROLES)
def test_descriptions_are_text(role):
    # "C(x) sets Y: z" in a list item is a YAML mapping, not a sentence: the spec then documents a dict.
    specs = _load(role, "meta", "argument_specs.yml")["argument_specs"]
    assert [text for text in _descriptions(specs) if not isinstance(text, str)] == []


@pytest.mark.parametrize("role", ROLES)
def test_every_default_passes_its_own_choices(role):
    # ansible-core validates an entry point's options when a play includes it: a default outside the
    # choices (null included) refused every include of that entry point on a site that kept the default.
    defaults = _load(role, "defaults", "main.yml") or {}
    bad = []
    for entry_point, spec in _load(role, "meta", "argument_specs.yml")["argument_specs"].items():
        for name, option in (spec.get("options") or {}).items():
            if "choices" in option and name in defaults and not (isinstance(defaults[name], str) and "{{" in defaults[name]):
                # A list's choices are its elements'.
                values = defaults[name] if isinstance(defaults[name], list) else [defaults[name]]
                if [value for value in values if value not in option["choices"]]:
                    bad.append((entry_point, name, defaults[name]))
    assert bad == []
