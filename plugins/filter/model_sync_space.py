# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_sync_space
short_description: Whether each target of a model copy has the room for it, before anything is copied
version_added: 0.1.0
description:
  - Runs on the controller, for C(playbooks/model-sync.yml). For each target, the free bytes of the filesystem that
    holds O(path) (C(model_manifest)'s C(filesystem), statvfs at the path's nearest existing directory; without it the
    longest mount point of Ansible's C(ansible_mounts) that contains it, its C(size_available))
    against what the copy can need at its peak, in bytes - every file the target lacks, plus the largest file it
    has (rsync writes a changed file beside the old one, then renames it over), plus O(margin_bytes).
options:
  _input:
    description: The source's file sizes in bytes by name (C(model_manifest)'s C(files)).
    type: dict
    required: true
  targets:
    description:
      - Per target host, C(files) (its C(model_manifest) C(files), or null with no copy yet) and C(filesystem) (its
        C(model_manifest) C(filesystem), C(path) and C(bytes_available)) or C(mounts) (its C(ansible_mounts)).
    type: dict
    required: true
  path:
    description: The model directory on the targets.
    type: str
    required: true
  margin_bytes:
    description: Bytes to keep free beyond the copy.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Refuse a target without room
  ansible.builtin.fail:
    msg: "{{ verdict.message }}"
  vars:
    verdict: "{{ source.files | factory_floor.llm.model_sync_space(targets, '/models/Qwen3-8B', 1073741824) }}"
  when: not verdict.ok
"""

RETURN = r"""
_value:
  description:
    - C(ok), C(problems) (each C(host), C(what), C(fix)), C(hosts) (each C(needed), C(available) - bytes - and
      C(mount)), C(message) (a title and one line per problem).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms


def model_sync_space(source_files, targets, path, margin_bytes=0):
    """Filter entry point."""
    if not isinstance(source_files, Mapping) or not isinstance(targets, Mapping):
        raise AnsibleFilterError("model_sync_space expects the source's files (a dict) and the targets (a dict)")
    verdict = ms.space(dict(source_files), {str(h): dict(v or {}) for h, v in targets.items()}, str(path),
                       int(margin_bytes or 0))
    verdict["message"] = lc.message(verdict["problems"], "Not enough room for the model. Nothing was copied.")
    return verdict


class FilterModule:
    """Room for a model's copy."""

    def filters(self):
        return {"model_sync_space": model_sync_space}
