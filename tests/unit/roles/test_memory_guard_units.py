# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The memory guard's start check as systemd runs it: the words its ``ExecStartPre=`` passes to
``_host/memory_guard.py start-check`` are the ones the role meant, whatever the inventory's slice name holds.

The drop-in is rendered the way its template task does (the role's defaults and vars, Ansible's own
templating, the collection's ``systemd_exec`` filter), then read by systemd itself (``systemd --test``,
tests/unit/plugins/systemd_dump.py) and by the guard's own argument parser.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.systemd_exec import systemd_exec
from ansible_collections.factory_floor.llm.tests.unit.plugins import systemd_dump
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, role_variables

needs_systemd = pytest.mark.skipif(not systemd_dump.AVAILABLE, reason=systemd_dump.WHY_NOT)


def render(name, **inventory):
    variables = role_variables("memory_guard")
    variables.update(ansible_managed="Ansible managed: test", inventory_hostname="spark-a")
    variables.update(inventory)
    templar = Templar(loader=DataLoader(), variables=variables)
    templar.environment.filters["factory_floor.llm.systemd_exec"] = systemd_exec
    with open("%s/roles/memory_guard/templates/%s" % (ROOT, name), encoding="utf-8") as handle:
        return templar.template(trust_as_template(handle.read()))


# Slice names systemd escapes (\x2d is "-" in a unit name), a space, a specifier, a variable.
SLICES = ["factory-floor-workloads.slice", "site\\x2dbuilds.slice", "work loads.slice", "a%nb.slice", "${SLICE}.slice"]


@needs_systemd
@pytest.mark.parametrize("slice_name", SLICES)
def test_the_start_check_gets_exactly_the_roles_arguments(slice_name):
    text = render("engine-start-check.conf.j2", item={"unit": "vllm-replica.service"}, __memory_guard_need_gib=80.5,
                  __memory_guard_need_source="the share of MemTotal", memory_guard_slice=slice_name,
                  memory_guard_start_require_free=True)
    (line,) = re.findall(r"^ExecStartPre=(.*)$", text, re.M)
    # The drop-in's line as the engine unit's own command: systemd unquotes, unescapes and expands it the same way.
    words = systemd_dump.exec_start("[Unit]\n[Service]\nExecStart=%s\n" % line, name="vllm-replica.service")
    assert words == ["/usr/bin/env", "PYTHONPATH=/usr/local/lib/factory-floor", "/usr/bin/python3", "-m", "_host.memory_guard",
                     "start-check",
                     "--unit", "vllm-replica.service", "--need-gib", "80.50", "--floor-gib", "2.00", "--wait", "120",
                     "--slice", slice_name, "--require-free"]


def test_the_drop_in_passes_systemds_own_check(tmp_path):
    """What the role's validate runs: systemd-analyze verify on a stub unit with the drop-in."""
    text = render("engine-start-check.conf.j2", item={"unit": "vllm-replica.service"}, __memory_guard_need_gib=80.5,
                  __memory_guard_need_source="x", memory_guard_slice="site\\x2dbuilds.slice")
    path = tmp_path / "guard.conf"
    path.write_text(text)
    validate = Templar(loader=DataLoader(), variables=role_variables("memory_guard")).template(
        trust_as_template("{{ _memory_guard_validate_service_dropin }}"))
    done = subprocess.run(validate.replace("%s", str(path)), shell=True, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
