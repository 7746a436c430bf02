# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: unit_verify_command
short_description: The validate command that has systemd check a unit file before it is installed
version_added: 0.1.0
description:
  - Returns a C(validate) command for M(ansible.builtin.template) or M(ansible.builtin.copy) that copies the rendered
    file (C(%s)) into a fresh temporary directory under the unit's own name, runs C(systemd-analyze verify --man=no)
    on it, removes the directory and exits with C(systemd-analyze)'s status.
  - The name matters to systemd (a C(.service) unit is checked as one), hence the copy.
options:
  _input:
    description: The unit's file name, for example C(vllm-replica.service).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Install the engine's unit, checked by systemd first
  ansible.builtin.template:
    src: vllm.service.j2
    dest: /etc/systemd/system/vllm-replica.service
    owner: root
    group: root
    mode: "0644"
    validate: "{{ 'vllm-replica.service' | factory_floor.llm.unit_verify_command }}"
"""

RETURN = r"""
_value:
  description: The command, C(%s) standing for the file to check.
  type: str
  sample: >-
    /bin/sh -c 'd=$(mktemp -d) && cp %s "$d/vllm-replica.service" && systemd-analyze verify --man=no
    "$d/vllm-replica.service"; r=$?; rm -rf "$d"; exit $r'
"""

from ansible.errors import AnsibleFilterError


def unit_verify_command(unit):
    """Filter entry point."""
    if not isinstance(unit, str) or not unit or "'" in unit or "/" in unit:
        raise AnsibleFilterError("unit_verify_command expects a unit file name (no quote, no slash), got %r" % (unit,))
    return ("/bin/sh -c 'd=$(mktemp -d) && cp %%s \"$d/%s\" && systemd-analyze verify --man=no \"$d/%s\"; r=$?;"
            " rm -rf \"$d\"; exit $r'" % (unit, unit))


class FilterModule:
    """The systemd check of a unit file."""

    def filters(self):
        return {"unit_verify_command": unit_verify_command}
