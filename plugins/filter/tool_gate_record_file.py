# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tool_gate_record_file
short_description: Where the tool-calling gate keeps a build's score for a suite and a host
version_added: 0.1.0
description:
  - Takes the controller's score store (C(tool_gate_store_dir)) and returns
    C(<store>/<build id>.<suite digest>.<host>.json), the build's id and the suite's digest (sha256) cut to
    O(id_chars) characters - one file per build, suite and host, holding the last run that counts as the build's score.
  - Used by the C(factory_floor.llm.tool_gate) role (C(_tool_gate_record_file)).
options:
  _input:
    description: The score store's directory.
    type: str
    required: true
  build_id:
    description: The build's id (C(tool_gate_build.id), a sha256).
    type: str
    required: true
  suite_digest:
    description: The suite's digest (the run's C(suite_digest), a sha256).
    type: str
    required: true
  host:
    description: The engine host the suite ran against.
    type: str
    required: true
  id_chars:
    description: How many characters of each sha256 the name keeps.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Where this build's score goes
  ansible.builtin.debug:
    msg: "{{ '/var/lib/gate' | factory_floor.llm.tool_gate_record_file(build.id, run.suite_digest, inventory_hostname, 16) }}"
  # /var/lib/gate/0123456789abcdef.fedcba9876543210.spark-a.json
"""

RETURN = r"""
_value:
  description: The record file's path on the controller.
  type: str
"""


def tool_gate_record_file(store_dir, build_id, suite_digest, host, id_chars):
    """Filter entry point."""
    return "%s/%s.%s.%s.json" % (store_dir, build_id[:id_chars], suite_digest[:id_chars], host)


class FilterModule:
    """The gate's record file."""

    def filters(self):
        return {"tool_gate_record_file": tool_gate_record_file}
