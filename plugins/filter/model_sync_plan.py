# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: model_sync_plan
short_description: Who sends a model directory, who receives it, over which address, with which rsync
version_added: 0.1.0
description:
  - Runs on the controller, for C(playbooks/model-sync.yml). The source is C(source) - an engine host, by
    default the first, or C(controller) - and the targets every other engine host (the source too when
    C(source_path) differs from C(path)).
  - A target is reached over its C(vllm_link_address) (the direct link) when the source is an engine host and both
    ends have one; else at its C(ansible_host). From an engine host, rsync's ssh uses that host's own key; from the
    controller, Ansible's own key, port, user and C(ansible_ssh_common_args) for the target.
  - Each rsync copies with C(--checksum) (by content), C(--partial-dir=.rsync-partial) (resumable),
    C(--copy-links) (a Hugging Face snapshot's links arrive as files), C(--delete) only with C(delete), and
    C(--dry-run) with C(dry_run).
  - Paths must be absolute, without C(.) or C(..) components, spaces or shell characters.
options:
  _input:
    description:
      - C(engines) (list, the engine group's hosts), C(hostvars) (dict, each engine host's variables), C(source) (str),
        C(path) (str, the directory on every target), C(source_path) (str, on the source; empty for C(path)),
        C(delete) (bool), C(checksum) (bool), C(dry_run) (bool), C(ssh_user) (str), C(ssh_key_file) (str, on the
        source), C(ssh_args) (list of str), C(rsync_path) (str, rsync's C(--rsync-path) on the targets).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Plan the copy
  ansible.builtin.set_fact:
    plan: >-
      {{ {'engines': groups['gb10'], 'hostvars': dict(groups['gb10'] | zip(groups['gb10'] | map('extract', hostvars))),
          'path': '/models/Qwen3-8B'} | factory_floor.llm.model_sync_plan }}
"""

RETURN = r"""
_value:
  description:
    - C(ok), C(errors) (each what to change), C(source), C(source_host) (where rsync runs - the source's inventory name,
      or C(localhost)), C(source_path), C(path), C(targets) (each C(host), C(address) - null for a local copy -,
      C(via) - in words - and C(argv), rsync's argv).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms

_KEYS = ("engines", "hostvars", "source", "path", "source_path", "delete", "checksum", "dry_run", "ssh_user",
         "ssh_key_file", "ssh_args", "rsync_path")


def model_sync_plan(options):
    """Filter entry point."""
    if not isinstance(options, Mapping):
        raise AnsibleFilterError("model_sync_plan expects a dict of options, got %s" % type(options).__name__)
    unknown = sorted(set(options) - set(_KEYS))
    if unknown:
        raise AnsibleFilterError("model_sync_plan: unknown options %s (known: %s)" % (", ".join(unknown), ", ".join(_KEYS)))
    given = {key: options[key] for key in _KEYS if key in options}
    for key in ("delete", "checksum", "dry_run"):
        if key in given and not isinstance(given[key], bool):
            raise AnsibleFilterError("model_sync_plan: %s must be true or false, got %r" % (key, given[key]))
    given["hostvars"] = {str(h): dict(v or {}) for h, v in (given.get("hostvars") or {}).items()}
    return ms.plan(**given)


class FilterModule:
    """A model's copy planned."""

    def filters(self):
        return {"model_sync_plan": model_sync_plan}
