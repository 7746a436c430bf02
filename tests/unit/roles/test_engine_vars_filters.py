# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engine roles' variables that moved from Jinja into filters (vllm, vllm_split, vllm_watchdog vars):
for representative inputs, the old expression rendered with Ansible's own templating equals the filter's value."""

from __future__ import annotations

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.unit_verify_command import unit_verify_command

FILTERS = {"factory_floor.llm.unit_verify_command": unit_verify_command}


def render(expression, **variables):
    """``expression`` (a role variable's value) as Ansible evaluates it, with the collection's filters by FQCN."""
    templar = Templar(loader=DataLoader(), variables=variables)
    templar.environment.filters.update(FILTERS)
    return templar.template(trust_as_template(expression))


OLD_UNIT_VALIDATE = """/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ unit }}" && systemd-analyze verify --man=no "$d/{{ unit }}"; r=$?; rm -rf "$d"; exit $r'"""


@pytest.mark.parametrize("unit", ["vllm-replica.service", "vllm-split.service", "factory-floor-engine-leave.service",
                                  "vllm-watchdog-split.service"])
def test_unit_verify_command_as_before(unit):
    assert render("{{ unit | factory_floor.llm.unit_verify_command }}", unit=unit) == render(OLD_UNIT_VALIDATE, unit=unit)


@pytest.mark.parametrize("unit", ["", "a'b.service", "../x.service", None])
def test_unit_verify_command_refuses_what_is_no_unit_name(unit):
    with pytest.raises(Exception, match="unit_verify_command expects a unit file name"):
        unit_verify_command(unit)
