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
  - With O(by_path), copies are compared only between the hosts that list the same model directory (the result's
    C(path)) - in a group move a group of two or more serves the split's model (C(vllm_split_model)) while a group of
    one serves the replicas' (C(vllm_model)), and each host lists the one its own new group serves. A host with no
    manifest is named in every comparison.
options:
  _input:
    description: Per host, its registered C(model_manifest) result.
    type: dict
    required: true
  by_path:
    description: Compare each model directory's copies on their own (the hosts whose results name the same C(path)).
    type: bool
    default: false
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


def model_manifest_diff(manifests, by_path=False):
    """Filter entry point."""
    if not isinstance(manifests, Mapping):
        raise AnsibleFilterError("model_manifest_diff expects a dict of each host's model_manifest result, got %s"
                                 % type(manifests).__name__)
    paths, errors = {}, {}
    for host, value in manifests.items():
        value = dict(value or {})
        if value.get("skipped"):
            # Not listed there (a model named by its hub name, not a directory): nothing to compare.
            continue
        if value.get("failed") or "files" not in value:
            errors[str(host)] = {"error": value.get("msg") or "no manifest"}
            continue
        paths.setdefault(value.get("path") if by_path else None, {})[str(host)] = value
    problems = []
    for results in list(paths.values()) or [{}]:
        problems += [problem for problem in mm.compare(dict(results, **errors)) if problem not in problems]
    return {"ok": not problems, "problems": problems,
            "message": lc.message(problems, "The hosts do not hold the same model. Nothing was changed.")}


class FilterModule:
    """Copies of a model compared across hosts."""

    def filters(self):
        return {"model_manifest_diff": model_manifest_diff}
