# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_sync_result
short_description: What one rsync run of a model copy changed
version_added: 0.1.0
description:
  - Reads rsync's C(--itemize-changes) and C(--stats) output. A change is any itemized line - a file sent,
    created, deleted, or its permissions or time set; with C(--dry-run), what the run would change.
options:
  _input:
    description: rsync's standard output.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Copy
  ansible.builtin.command:
    argv: "{{ target.argv }}"
  register: copied
  changed_when: (copied.stdout | factory_floor.llm.model_sync_result).changed
"""

RETURN = r"""
_value:
  description:
    - C(changed), C(items) (the first 20 itemized lines), C(more_items), C(files_transferred), C(deleted),
      C(bytes_transferred) and C(total_bytes) (bytes; null when rsync did not say), C(summary) (one line).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms


def model_sync_result(stdout):
    """Filter entry point."""
    if not isinstance(stdout, str):
        raise AnsibleFilterError("model_sync_result expects rsync's output (a string), got %s" % type(stdout).__name__)
    return ms.rsync_result(stdout)


class FilterModule:
    """An rsync run read."""

    def filters(self):
        return {"model_sync_result": model_sync_result}
