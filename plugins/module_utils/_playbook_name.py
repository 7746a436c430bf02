# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""How a message names one of the collection's playbooks: the way the operator who reads it runs playbooks.

Pure logic, standard library only: used on the controller (the ``playbook_name`` filter, the action plugins'
checks) and on the hosts (modules whose messages name a playbook, given ``playbook_dir``), with the same answer.

From the directory of the playbook that runs now (Ansible's magic variable ``playbook_dir``):

* inside an installed collection (``.../ansible_collections/factory_floor/llm/playbooks``: the operator ran
  ``ansible-playbook factory_floor.llm.deploy``): the collection name, ``factory_floor.llm.switch_to_replicas``;
* another directory named ``playbooks``, not inside any installed collection (a checkout, run from its root as its
  README does): the file, ``playbooks/switch-to-replicas.yml``;
* anything else, or unknown (a playbook of the operator's own that includes the roles): the collection name, which
  runs from any directory once the collection is installed, as it must be for the roles to run at all.

One form per message, not both: a message names a playbook up to three times, and the reader copies the one
that works where they are.
"""

from __future__ import annotations

import posixpath

COLLECTION = "factory_floor.llm"
# The playbooks a message may name, by their file name in a checkout. Each hyphenated one is a one-line import of
# the playbook itself, its underscore file (playbooks/switch_to_replicas.yml), the name a collection playbook must
# have; a checkout's messages keep the hyphenated name its commands and docs use, which runs the same plays.
PLAYBOOKS = ("advise-topology.yml", "chat.yml", "deploy.yml", "link-check.yml", "memory-guard.yml", "metrics.yml", "move-groups.yml",
             "model-sync.yml", "monitoring.yml", "peers.yml", "prometheus-config.yml", "site-check.yml", "status.yml",
             "switch.yml", "switch-model.yml", "switch-to-replicas.yml", "switch-to-split.yml", "tool-gate-spread.yml",
             "tune-concurrency.yml", "workload-profile.yml", "workload-replay.yml")


def _parts(playbook_dir):
    text = str(playbook_dir or "").replace("\\", "/").rstrip("/")
    return [part for part in posixpath.normpath(text).split("/") if part] if text else []


def playbook_name(name, playbook_dir=None):
    """``name`` (a file of ``PLAYBOOKS``, "deploy.yml") as the operator runs it, seen from ``playbook_dir``.

    ValueError for a name that is not one of the collection's playbooks (a message naming a playbook that
    does not exist is a bug, caught by the tests that render it)."""
    if name not in PLAYBOOKS:
        raise ValueError("%r is not one of the collection's playbooks (%s)" % (name, ", ".join(PLAYBOOKS)))
    parts = _parts(playbook_dir)
    if parts and parts[-1] == "playbooks" and "ansible_collections" not in parts:
        return "playbooks/" + name
    return "%s.%s" % (COLLECTION, name[:-len(".yml")].replace("-", "_"))
