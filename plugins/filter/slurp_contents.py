# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: slurp_contents
short_description: The decoded contents of a looped slurp, by item
version_added: 0.1.0
description:
  - From the registered result of a looped M(ansible.builtin.slurp), a dict of each item to its file's content,
    base64-decoded (UTF-8); C("") for an item whose file could not be read.
options:
  _input:
    description: The registered result's C(results).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Each watchdog's last verdict
  ansible.builtin.debug:
    msg: "{{ __vllm_watchdog_status_files.results | factory_floor.llm.slurp_contents }}"
"""

RETURN = r"""
_value:
  description: The text of each item's file, by item.
  type: dict
"""

import base64

from ansible.errors import AnsibleFilterError


def slurp_contents(results):
    """Filter entry point."""
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError("slurp_contents expects a looped slurp's results (a list), got %s" % type(results).__name__)
    return {result["item"]: base64.b64decode(result.get("content", "")).decode("utf-8") for result in results}


class FilterModule:
    """A looped slurp's files."""

    def filters(self):
        return {"slurp_contents": slurp_contents}
