#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_package_prune
short_description: Remove the host programs' files the collection no longer ships, and the flat layout once nothing runs it
version_added: 0.1.0
description:
  - After the C(factory_floor.llm.site) role's C(host_programs) step copied every file of the collection's
    C(plugins/module_utils/_host) package to O(package_dir), removes the C(*.py) files there that are not in O(keep) - a
    file an older collection had in the package; nothing imports it.
  - Before the package, each role copied its programs' files one by one to O(lib_dir) (C(_<name>.py)). They are removed,
    with O(lib_dir)C(/__pycache__), once no file under O(config_dirs) (systemd units and drop-ins, keepalived's
    configuration) names one of them - on an upgrade, the run that rewrites those (and reloads systemd and keepalived)
    comes first, and keepalived runs its check every few seconds from the path its loaded configuration names.
  - Hidden files are left alone, as C(ansible.builtin.find) leaves them; a directory of O(config_dirs) that does not
    exist names nothing.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
attributes:
  check_mode:
    support: full
    details: Says what it would remove (RV(removed)) and removes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  package_dir:
    description: The package's directory on the host (the C(site) role's C(_site_host_package_dir)).
    type: path
    required: true
  keep:
    description: The package's file names (basenames) the collection ships now.
    type: list
    elements: str
    required: true
  lib_dir:
    description: The directory of the flat layout (the C(site) role's C(_site_host_lib_dir)).
    type: path
    required: true
  config_dirs:
    description: The directories searched, recursively, for a configuration that still runs a flat file (C(_site_host_config_dirs)).
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Remove the files the package no longer has, and the flat layout once nothing runs it
  factory_floor.llm.host_package_prune:
    package_dir: /usr/local/lib/factory-floor/_host
    keep: [__init__.py, daemon.py, watchdog.py]
    lib_dir: /usr/local/lib/factory-floor
    config_dirs: [/etc/systemd/system, /etc/keepalived]
"""

RETURN = r"""
removed:
  description: The paths removed (in check mode, the ones a run would remove), sorted.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/factory-floor/_host/gone.py]
flat_users:
  description: The configuration files that still run a file of the flat layout (it is then kept), sorted.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/vllm-replica-watchdog.service]
"""

import fnmatch
import os
import re
import shutil

from ansible.module_utils.basic import AnsibleModule


def _files(directory, pattern):
    """The non-hidden regular files of ``directory`` (not recursive) matching ``pattern``, sorted paths."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(directory, name) for name in names
                  if not name.startswith(".") and fnmatch.fnmatch(name, pattern)
                  and os.path.isfile(os.path.join(directory, name)) and not os.path.islink(os.path.join(directory, name)))


def flat_users(config_dirs, lib_dir):
    """The files under ``config_dirs`` (recursively, hidden ones left out) with a line naming ``lib_dir/_<name>.py``."""
    named = re.compile(re.escape(lib_dir.rstrip("/")) + r"/_[a-z_]+[.]py")
    users = []
    for top in config_dirs:
        for root, _dirs, names in os.walk(top):
            for name in names:
                path = os.path.join(root, name)
                if name.startswith(".") or not os.path.isfile(path):
                    continue
                try:
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        if any(named.search(line) for line in handle):
                            users.append(path)
                except OSError:
                    continue
    return sorted(users)


def plan(package_dir, keep, lib_dir, config_dirs):
    """``(remove, users)``: the paths to remove and the configurations that keep the flat layout."""
    keep = set(keep)
    remove = [path for path in _files(package_dir, "*.py") if os.path.basename(path) not in keep]
    flat = _files(lib_dir, "_*.py")
    users = flat_users(config_dirs, lib_dir) if flat else []
    if flat and not users:
        remove += flat
        cache = os.path.join(lib_dir, "__pycache__")
        if os.path.lexists(cache):
            remove.append(cache)
    return remove, users


def main():
    module = AnsibleModule(
        argument_spec=dict(
            package_dir=dict(type="path", required=True),
            keep=dict(type="list", elements="str", required=True),
            lib_dir=dict(type="path", required=True),
            config_dirs=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    remove, users = plan(params["package_dir"], params["keep"], params["lib_dir"], params["config_dirs"])
    if not module.check_mode:
        for path in remove:
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError as error:
                module.fail_json(msg="Removing %s failed: %s" % (path, error), removed=[])
    module.exit_json(changed=bool(remove), removed=sorted(remove), flat_users=users)


if __name__ == "__main__":
    main()
