# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Render a role's template the way its template task does: Ansible's own templating, the
role's defaults and vars (and the site role's defaults) under the inventory's variables."""

from __future__ import annotations

import importlib
import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _trusted(value):
    """A value as a role file holds it, its strings templates (as Ansible trusts the collection's own files)."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: _trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def collection_filters():
    """Every filter of plugins/filter by its FQCN, as a play finds them (no collection loader in this process)."""
    found = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "plugins", "filter"))):
        if name.endswith(".py") and not name.startswith("_"):
            plugin = importlib.import_module("ansible_collections.factory_floor.llm.plugins.filter." + name[:-3])
            found.update(("factory_floor.llm." + key, value) for key, value in plugin.FilterModule().filters().items())
    return found


def templar(variables):
    """Ansible's Templar over ``variables``, with the collection's filters."""
    found = Templar(loader=DataLoader(), variables=variables)
    found.environment.filters.update(collection_filters())
    return found


def role_variables(role):
    """The site role's defaults and vars (a dependency's, which its dependents see), then ``role``'s defaults
    and vars (later ones win), as templates."""
    variables = {}
    for parts in (("site", "defaults"), ("site", "vars"), (role, "defaults"), (role, "vars")):
        path = os.path.join(ROOT, "roles", parts[0], parts[1], "main.yml")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                variables.update(_trusted(yaml.safe_load(handle) or {}))
    return variables


def render(role, name, **inventory):
    """``roles/<role>/templates/<name>`` rendered with the role's variables and ``inventory`` (which wins)."""
    variables = role_variables(role)
    variables.update(ansible_managed="Ansible managed: test")
    variables.update(inventory)
    with open(os.path.join(ROOT, "roles", role, "templates", name), encoding="utf-8") as handle:
        text = handle.read()
    return templar(variables).template(trust_as_template(text))
