# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tool_gate_suite_files
short_description: The files of the tool-calling gate's suites
version_added: 0.1.0
description:
  - Takes the suites (C(tool_gate_suite), then C(tool_gate_suite_extra)) and returns their files - a bare name
    (letters, digits, C(_) and C(-)) is a suite shipped in the role's C(files/suites/<name>.yml), anything else a path,
    kept as it is.
  - Used by the C(factory_floor.llm.tool_gate) role.
options:
  _input:
    description: The suites, names or paths.
    type: list
    elements: str
    required: true
  role_path:
    description: The C(tool_gate) role's directory (C(role_path)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The suites' files
  ansible.builtin.debug:
    msg: "{{ ([tool_gate_suite] + tool_gate_suite_extra) | factory_floor.llm.tool_gate_suite_files(role_path) }}"
  # [default, /srv/suites/mine.yml] -> [<role_path>/files/suites/default.yml, /srv/suites/mine.yml]
"""

RETURN = r"""
_value:
  description: The files, in the suites' order.
  type: list
  elements: str
"""

import re

from ansible.errors import AnsibleFilterError

SHIPPED = re.compile(r"^[A-Za-z0-9_-]+$")


def tool_gate_suite_files(suites, role_path):
    """Filter entry point."""
    if not isinstance(suites, (list, tuple)):
        raise AnsibleFilterError("tool_gate_suite_files expects the suites (a list), got %r" % (suites,))
    return ["%s/files/suites/%s.yml" % (role_path, suite) if SHIPPED.match(str(suite)) else str(suite) for suite in suites]


class FilterModule:
    """The gate's suite files."""

    def filters(self):
        return {"tool_gate_suite_files": tool_gate_suite_files}
