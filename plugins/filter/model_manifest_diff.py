# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_manifest_diff
short_description: Where the hosts' copies of a model differ, from their model_manifest results
version_added: 0.1.0
description:
  - Runs on the controller. Compares what C(factory_floor.llm.model_manifest) listed on each host - file names, sizes,
    and every sha256 all hosts computed - and returns each difference with the hosts and their values, and the fix.
  - A host whose result has no manifest (the directory could not be read, or it did not run) is named too; a skipped
    result is left out.
options:
  _input:
    description: Per host, its registered C(model_manifest) result.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Refuse copies of the model that differ between the engine hosts
  ansible.builtin.fail:
    msg: "{{ diff.message }}"
  vars:
    diff: "{{ dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars, '__manifest'))) | factory_floor.llm.model_manifest_diff }}"
  when: not diff.ok
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - C(ok) (every copy is the same), C(problems) (each C(host), C(what) - the file and each host's size or hash - and
      C(fix)), C(message) (a title and one line per problem).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_manifest as mm


def model_manifest_diff(manifests):
    """Filter entry point."""
    if not isinstance(manifests, Mapping):
        raise AnsibleFilterError("model_manifest_diff expects a dict of each host's model_manifest result, got %s"
                                 % type(manifests).__name__)
    results = {}
    for host, value in manifests.items():
        value = dict(value or {})
        if value.get("skipped"):
            # Not listed there (a model named by its hub name, not a directory): nothing to compare.
            continue
        if value.get("failed") or "files" not in value:
            value = {"error": value.get("msg") or "no manifest"}
        results[str(host)] = value
    problems = mm.compare(results)
    return {"ok": not problems, "problems": problems,
            "message": lc.message(problems, "The hosts do not hold the same model. Nothing was changed.")}


class FilterModule:
    """Copies of a model compared across hosts."""

    def filters(self):
        return {"model_manifest_diff": model_manifest_diff}
