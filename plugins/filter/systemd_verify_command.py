# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: systemd_verify_command
short_description: A task's C(validate) command that checks a unit file with systemd-analyze verify
version_added: 0.1.0
description:
  - Returns a C(/bin/sh -c '...') command for the C(validate) option of C(ansible.builtin.template) or
    C(ansible.builtin.copy). It copies the candidate file (C(%s)) into a temporary directory under the unit's own name
    and runs C(systemd-analyze verify --man=no) on it; the file is installed only when systemd accepts it.
  - With O(warnings=true) any line systemd prints about the file itself (C(NAME:LINE), an unknown key, an invalid
    value that systemd would ignore) fails the check too, not only a hard error; the output is shown either way.
options:
  _input:
    description: The unit's file name, for example C(factory-floor-memory-guard.service) or C(factory-floor.slice).
    type: str
    required: true
  warnings:
    description: Whether a line systemd prints about the file (a warning) fails the check.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Write the watch's unit (checked with systemd-analyze verify)
  ansible.builtin.template:
    src: watch.service.j2
    dest: /etc/systemd/system/watch.service
    mode: "0644"
    validate: "{{ 'watch.service' | factory_floor.llm.systemd_verify_command(warnings=true) }}"
"""

RETURN = r"""
_value:
  description: The command, with C(%s) where Ansible puts the candidate file.
  type: str
  sample: >-
    /bin/sh -c 'd=$(mktemp -d) && cp %s "$d/watch.service" && systemd-analyze verify --man=no "$d/watch.service";
    r=$?; rm -rf "$d"; exit $r'
"""

from ansible.errors import AnsibleFilterError


def systemd_verify_command(unit, warnings=False):
    """Filter entry point."""
    # The name goes inside a single-quoted sh -c and into a path: no quote, no slash.
    if not isinstance(unit, str) or not unit or "'" in unit or "/" in unit:
        raise AnsibleFilterError("systemd_verify_command expects a unit file name (no quote, no slash), got %r" % (unit,))
    if warnings:
        return ("/bin/sh -c 'd=$(mktemp -d) && cp %%s \"$d/%s\""
                " && out=$(systemd-analyze verify --man=no \"$d/%s\" 2>&1); r=$?; rm -rf \"$d\"; echo \"$out\";"
                " test \"$r\" -eq 0 && ! echo \"$out\" | grep -q \"%s:[0-9]\"'" % (unit, unit, unit))
    return ("/bin/sh -c 'd=$(mktemp -d) && cp %%s \"$d/%s\""
            " && systemd-analyze verify --man=no \"$d/%s\"; r=$?; rm -rf \"$d\"; exit $r'" % (unit, unit))


class FilterModule:
    """systemd's own check of a unit file before it is installed."""

    def filters(self):
        return {"systemd_verify_command": systemd_verify_command}
