# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which topology an engine host was last brought to, by whom, when, and with which playbook.

``deploy.yml`` writes the record when it brings the hosts to the inventory's topology, and a
topology switch when it completes (one that rolls back keeps, or writes again, the old
topology). One JSON object in ``/var/lib/factory-floor/topology.json`` on each engine host::

    {"topology": "replicas", "since": 1795950000.0, "by": "ops@controller",
     "playbook": "switch-to-replicas.yml", "run": "20261129T110000Z-3f9a1c", "note": ""}

- ``topology``: ``replicas`` or ``split``;
- ``since``: epoch seconds (the controller's clock) when the playbook brought the host to it;
- ``by``: who ran it (user@controller); ``playbook``: its file name; ``run``: its run id;
- ``note``: anything else for people (a rolled-back switch says so).

``deploy.yml`` compares the record with the topology it deploys and refuses when they
differ: after a switch, a routine deploy with the inventory's old ``topology`` would stop
the topology that serves with no drain, no tool-calling gate and no maintenance lock.
Pure logic plus one file read (the path and the time are passed in), unit-tested without
Ansible.
"""

from __future__ import annotations

import json
import posixpath

from ansible_collections.factory_floor.llm.plugins.module_utils._maintenance_lock import json_number, json_text, read_record, when

PATH = "/var/lib/factory-floor/topology.json"
TOPOLOGIES = ("replicas", "split")
FIELDS = ("topology", "since", "by", "playbook", "run", "note")
# deploy.yml's override (the vllm role's variable), named in the refusal.
OVERRIDE = "vllm_deploy_topology_change"

# The record, compared with the topology a run deploys.
ABSENT = "absent"      # no file: a first deploy, or hosts set up before records were written
AGREES = "agrees"      # it names that topology
DIFFERS = "differs"    # it names the other one
INVALID = "invalid"    # a file whose topology cannot be read

# Inventory sources that are files (their group_vars directory is next to them).
_INVENTORY_FILE_SUFFIXES = (".yml", ".yaml", ".ini", ".json", ".toml", ".cfg", ".txt")


def other(topology: str) -> str:
    """The topology that is not ``topology``."""
    return "split" if topology == "replicas" else "replicas"


def parse(text: str) -> dict:
    """The record's fields from a file's content, plus ``error``.

    A field that is absent or of the wrong type is None. Content that is not a JSON
    object, or whose ``topology`` is neither ``replicas`` nor ``split``, gives
    ``topology`` None and ``error`` saying why.
    """
    record = dict.fromkeys(FIELDS)
    record["error"] = None
    try:
        data = json.loads(text)
    except ValueError:
        record["error"] = "not JSON: %r" % text.strip()[:60]
        return record
    if not isinstance(data, dict):
        record["error"] = "not a JSON object: %r" % text.strip()[:60]
        return record
    record.update(since=json_number(data.get("since")), by=json_text(data.get("by")), playbook=json_text(data.get("playbook")),
                  run=json_text(data.get("run")), note=json_text(data.get("note")))
    if data.get("topology") in TOPOLOGIES:
        record["topology"] = data["topology"]
    else:
        record["error"] = "topology %s is neither replicas nor split" % json.dumps(data.get("topology"))
    return record


def read(path: str) -> dict | None:
    """The record at ``path`` (:func:`parse` plus ``path`` and ``mtime``, epoch seconds), or None when absent.

    A file that exists but cannot be read gives ``topology`` None and ``error``.
    """
    return read_record(path, parse, _unreadable)


def _unreadable(reason: str) -> dict:
    record = dict.fromkeys(FIELDS)
    record["error"] = "unreadable: %s" % reason
    return record


def state_of(record: dict | None, topology: str) -> str:
    """:data:`ABSENT`, :data:`AGREES`, :data:`DIFFERS` or :data:`INVALID`, for a run that deploys ``topology``."""
    if record is None:
        return ABSENT
    if record.get("topology") is None:
        return INVALID
    return AGREES if record["topology"] == topology else DIFFERS


def describe(record: dict, now: float) -> str:
    """Who brought the host to the recorded topology, with what and when, in words."""
    playbook = record.get("playbook") or ""
    verb = "switched to" if playbook.startswith("switch") else "brought to"
    words = "%s %s by %s" % (verb, record.get("topology"), record.get("by") or "an unknown user")
    if playbook:
        words += " with %s" % playbook
    if record.get("run"):
        words += " (run %s)" % record["run"]
    if record.get("since") is not None:
        words += " on %s" % when(record["since"], now)
    elif record.get("mtime") is not None:
        words += ", recorded %s" % when(record["mtime"], now)
    if record.get("note"):
        words += "; %s" % record["note"]
    return words


def inventory_file(sources) -> str:
    """The group_vars file that sets ``topology`` in the first of the run's inventory sources.

    A source that is a file (``hosts.yml``) has its group_vars next to it; a directory has
    them inside. The collection's inventories set ``topology`` in ``group_vars/all.yml``.
    Without sources: ``inventory/<site>/group_vars/all.yml``.
    """
    sources = [source for source in sources or [] if source]
    if not sources:
        return "inventory/<site>/group_vars/all.yml"
    source = sources[0].rstrip("/") or "/"
    if posixpath.splitext(source)[1].lower() in _INVENTORY_FILE_SUFFIXES or posixpath.basename(source) == "hosts":
        source = posixpath.dirname(source) or "."
    return posixpath.join(source, "group_vars", "all.yml")


def switch_command(topology: str, sources) -> str:
    """The command that switches to ``topology`` with the run's inventory."""
    sources = [source for source in sources or [] if source] or ["inventory/<site>"]
    return "ansible-playbook %s playbooks/switch-to-%s.yml" % (" ".join("-i " + source for source in sources), topology)


def refusal(record: dict, topology: str, sources, now: float) -> str:
    """Why deploy.yml stops before anything changes, and the ways on ("" when it need not stop)."""
    state = state_of(record, topology)
    where = inventory_file(sources)
    override = ("To change the topology through deploy.yml all the same (an outage of one start-up, no drain, "
                "no tool-calling gate): -e %s=true." % OVERRIDE)
    if state == DIFFERS:
        recorded = record["topology"]
        return ("This host is on %s, not %s: %s (%s). deploy.yml brings the hosts to the topology it is given "
                "(topology: %s) and would stop %s with no drain, no tool-calling gate and no maintenance lock, so it "
                "stops here; nothing was changed. To keep %s: change the inventory line to `topology: %s` in %s "
                "and run deploy.yml again. To go to %s: %s (drained, gated, rolled back on failure). %s"
                % (recorded, topology, describe(record, now), record.get("path") or PATH, topology, recorded,
                   recorded, recorded, where, topology, switch_command(topology, sources), override))
    if state == INVALID:
        return ("%s does not say which topology this host was last brought to (%s). deploy.yml and the topology "
                "switches write it, so that a routine deploy.yml cannot undo a switch; without it deploy.yml cannot "
                "tell, so it stops here; nothing was changed. If this host is on %s, the topology this run deploys, "
                "remove the file and run deploy.yml again. If it is on %s: change the inventory line to "
                "`topology: %s` in %s, or go to %s with %s. %s"
                % (record.get("path") or PATH, record.get("error"), topology, other(topology), other(topology), where,
                   topology, switch_command(topology, sources), override))
    return ""


def inventory_advice(topology: str, inventory_topology: str | None, sources) -> dict:
    """What the inventory must say for deploy.yml to agree with hosts that are on ``topology``.

    Returns ``{"topology", "inventory_topology", "agrees", "file", "line", "advice"}``:
    ``line`` is the inventory line (``topology: replicas``), ``advice`` one sentence for
    the end of a switch's output.
    """
    where = inventory_file(sources)
    line = "topology: %s" % topology
    agrees = inventory_topology == topology
    if agrees:
        advice = ("inventory: `%s` in %s is what the hosts are on: deploy.yml agrees." % (line, where))
    elif inventory_topology:
        advice = ("inventory: change the line `topology: %s` to `%s` in %s, so that deploy.yml agrees with the hosts "
                  "(until then it refuses and names this switch)." % (inventory_topology, line, where))
    else:
        advice = "inventory: set `%s` in %s, so that deploy.yml agrees with the hosts." % (line, where)
    return {"topology": topology, "inventory_topology": inventory_topology or "", "agrees": agrees, "file": where,
            "line": line, "advice": advice}
