# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which topology an engine host was last brought to, by whom, when, and with which playbook.

``deploy.yml`` writes the record when it brings the hosts to the inventory's topology, and a
topology switch when it completes (one that rolls back keeps, or writes again, the old
topology). One JSON object in ``/var/lib/factory-floor/topology.json`` on each engine host::

    {"topology": "replicas", "since": 1795950000.0, "by": "ops@controller",
     "playbook": "switch-to-replicas.yml", "run": "20261129T110000Z-3f9a1c", "note": "",
     "model": "/models/Qwen3-Next-80B-A3B-Instruct-NVFP4"}

- ``topology``: ``replicas`` or ``split``;
- ``model``: the model directory the host's engine was brought to serve (``switch-model.yml``
  writes the candidate it put there; absent in records written before models were recorded);
- ``since``: epoch seconds (the controller's clock) when the playbook brought the host to it;
- ``by``: who ran it (user@controller); ``playbook``: its file name; ``run``: its run id;
- ``note``: anything else for people (a rolled-back switch says so);
- ``grouping``, ``group``, ``rank``: the site's engine groups and this host's place in them, in a record of a
  grouping (``_group_record``; not written yet: read when present, absent from :func:`parse`'s result otherwise).

``deploy.yml`` compares the host with the topology it deploys and refuses when they
differ: after a switch, a routine deploy with the inventory's old ``topology`` would stop
the topology that serves with no drain, no tool-calling gate and no maintenance lock. What
the host is on is the topology whose engine unit runs there (``systemctl is-active``), else
(nothing runs) the one its record names: a host with no record that runs the other
topology's engine is refused too. It compares the record's ``model`` with the model it
deploys the same way: after ``switch-model.yml``, a routine deploy with the inventory's old
``vllm_model`` would put the old model back with no tool-calling gate.

:func:`compare` puts every engine host's record next to what its units run and names each
disagreement (a record that names another topology than the host runs, hosts whose records
or units differ, a host that could not be read); every playbook that reads the records says
them (deploy.yml, the switches, switch-model.yml, status.yml).
Pure logic plus one file read (the path and the time are passed in), unit-tested without
Ansible.
"""

from __future__ import annotations

import json
import posixpath

from ansible_collections.factory_floor.llm.plugins.module_utils._group_record import parse_fields as group_fields
from ansible_collections.factory_floor.llm.plugins.module_utils._host.maintenance_lock import json_number, json_text, read_record, when
from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

PATH = "/var/lib/factory-floor/topology.json"
TOPOLOGIES = ("replicas", "split")
FIELDS = ("topology", "since", "by", "playbook", "run", "note", "model")
# deploy.yml's overrides (the vllm role's variables), named in the refusals.
OVERRIDE = "vllm_deploy_topology_change"
MODEL_OVERRIDE = "vllm_deploy_model_change"
# The engine unit of each topology, in the order ``systemctl is-active`` is asked about them.
UNIT_ORDER = TOPOLOGIES
UNITS = {"replicas": "vllm-replica.service", "split": "vllm-split.service"}
# The inventory variable that names each topology's model directory.
MODEL_VARIABLES = {"replicas": "vllm_model", "split": "vllm_split_model"}
# ``systemctl is-active`` states of a unit that runs (or is on its way to).
UP_STATES = ("active", "activating", "reloading")
# What a host runs, besides a topology.
NONE = "none"          # no engine unit runs
BOTH = "both"          # both topologies' units run (Conflicts= should make that impossible)

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
                  run=json_text(data.get("run")), note=json_text(data.get("note")), model=json_text(data.get("model")) or None)
    if data.get("topology") in TOPOLOGIES:
        record["topology"] = data["topology"]
    else:
        record["error"] = "topology %s is neither replicas nor split" % json.dumps(data.get("topology"))
    # A record of a grouping (issue 37) holds its site's grouping too; an old record gets no such keys.
    record.update(group_fields(data, record["topology"]))
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


def runs(states) -> str | None:
    """What a host runs, from ``systemctl is-active`` of the engine units in :data:`UNIT_ORDER`.

    A topology, :data:`NONE` or :data:`BOTH`; None when the states were not read (no list).
    """
    if not isinstance(states, (list, tuple)) or not states:
        return None
    up = [name for name, state in zip(UNIT_ORDER, states) if str(state).strip() in UP_STATES]
    if len(up) == 1:
        return up[0]
    return NONE if not up else BOTH


def state_of(record: dict | None, topology: str, running: str | None = None) -> str:
    """:data:`ABSENT`, :data:`AGREES`, :data:`DIFFERS` or :data:`INVALID`, for a run that deploys ``topology``.

    With ``running`` (:func:`runs`) a topology, the host is on that one whatever its record
    says; otherwise (nothing runs, or not read) it is on what the record names.
    """
    if running in TOPOLOGIES:
        return AGREES if running == topology else DIFFERS
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


def switch_command(topology: str, sources, playbook_dir=None) -> str:
    """The command that switches to ``topology`` with the run's inventory (the playbook named as the run's
    ``playbook_dir`` runs it, :func:`playbook_name`)."""
    sources = [source for source in sources or [] if source] or ["inventory/<site>"]
    return "ansible-playbook %s %s" % (" ".join("-i " + source for source in sources),
                                       playbook_name("switch-to-%s.yml" % topology, playbook_dir))


def refusal(record: dict, topology: str, sources, now: float, running: str | None = None, playbook_dir=None) -> str:
    """Why deploy.yml stops before anything changes, and the ways on ("" when it need not stop).

    ``running``: what the host runs (:func:`runs`); a topology there decides, whatever the record says.
    ``playbook_dir``: the run's, to name the playbooks as the operator runs them (:func:`playbook_name`).
    """
    state = state_of(record, topology, running)
    where = inventory_file(sources)
    deploy = playbook_name("deploy.yml", playbook_dir)
    override = ("To change the topology through %s all the same (an outage of one start-up, no drain, "
                "no tool-calling gate): -e %s=true." % (deploy, OVERRIDE))
    if state == DIFFERS and running in TOPOLOGIES and (record is None or record.get("topology") != running):
        if record is None:
            said = "it has no topology record (%s)" % PATH
        elif record.get("topology") is None:
            said = "its record cannot be read (%s: %s)" % (record.get("path") or PATH, record.get("error"))
        else:
            said = "its record says %s: %s (%s), which is not what runs" % (
                record["topology"], describe(record, now), record.get("path") or PATH)
        return ("This host runs %s (%s is active), not %s; %s. %s brings the hosts to the topology it is given "
                "(topology: %s) and would stop %s with no drain, no tool-calling gate and no maintenance lock, so it "
                "stops here; nothing was changed. To keep %s: change the inventory line to `topology: %s` in %s and run "
                "%s again (it records %s). To go to %s: %s (drained, gated, rolled back on failure). %s"
                % (running, UNITS[running], topology, said, deploy, topology, running, running, running, where, deploy,
                   running, topology, switch_command(topology, sources, playbook_dir), override))
    if state == DIFFERS:
        recorded = record["topology"]
        return ("This host is on %s, not %s: %s (%s). %s brings the hosts to the topology it is given "
                "(topology: %s) and would stop %s with no drain, no tool-calling gate and no maintenance lock, so it "
                "stops here; nothing was changed. To keep %s: change the inventory line to `topology: %s` in %s "
                "and run %s again. To go to %s: %s (drained, gated, rolled back on failure). %s"
                % (recorded, topology, describe(record, now), record.get("path") or PATH, deploy, topology, recorded,
                   recorded, recorded, where, deploy, topology, switch_command(topology, sources, playbook_dir),
                   override))
    if state == INVALID:
        return ("%s does not say which topology this host was last brought to (%s). %s and the topology "
                "switches write it, so that a routine %s cannot undo a switch; without it %s cannot "
                "tell, so it stops here; nothing was changed. If this host is on %s, the topology this run deploys, "
                "remove the file and run %s again. If it is on %s: change the inventory line to "
                "`topology: %s` in %s, or go to %s with %s. %s"
                % (record.get("path") or PATH, record.get("error"), deploy, deploy, deploy, topology, deploy,
                   other(topology), other(topology), where, topology, switch_command(topology, sources, playbook_dir),
                   override))
    return ""


def inventory_advice(topology: str, inventory_topology: str | None, sources, playbook_dir=None) -> dict:
    """What the inventory must say for deploy.yml to agree with hosts that are on ``topology``.

    Returns ``{"topology", "inventory_topology", "agrees", "file", "line", "advice"}``:
    ``line`` is the inventory line (``topology: replicas``), ``advice`` one sentence for
    the end of a switch's output.
    """
    where = inventory_file(sources)
    deploy = playbook_name("deploy.yml", playbook_dir)
    line = "topology: %s" % topology
    agrees = inventory_topology == topology
    if agrees:
        advice = ("inventory: `%s` in %s is what the hosts are on: %s agrees." % (line, where, deploy))
    elif inventory_topology:
        advice = ("inventory: change the line `topology: %s` to `%s` in %s, so that %s agrees with the hosts "
                  "(until then it refuses and names this switch)." % (inventory_topology, line, where, deploy))
    else:
        advice = "inventory: set `%s` in %s, so that %s agrees with the hosts." % (line, where, deploy)
    return {"topology": topology, "inventory_topology": inventory_topology or "", "agrees": agrees, "file": where,
            "line": line, "advice": advice}


# --- the model a host was brought to serve ---------------------------------------------------------


def model_state(record: dict | None, topology: str, model: str | None) -> str:
    """The record's ``model`` compared with the ``model`` a run deploys for ``topology``.

    :data:`AGREES` when they are the same, :data:`DIFFERS` when the record names another
    model for that topology, :data:`ABSENT` when there is nothing to compare (no record, no
    model recorded, the record is of the other topology, or no ``model`` given).
    """
    if not record or not model or not record.get("model") or record.get("topology") != topology:
        return ABSENT
    return AGREES if record["model"] == model else DIFFERS


def model_file(sources) -> str:
    """The group_vars file that sets the engines' model in the first inventory source (``gb10.yml`` next to ``all.yml``)."""
    return posixpath.join(posixpath.dirname(inventory_file(sources)), "gb10.yml")


def model_refusal(record: dict | None, topology: str, model: str | None, sources, now: float, playbook_dir=None) -> str:
    """Why deploy.yml stops when the host was brought to another model than it deploys ("" when it need not stop)."""
    if model_state(record, topology, model) != DIFFERS:
        return ""
    recorded, variable = record["model"], MODEL_VARIABLES.get(topology, "vllm_model")
    playbook = record.get("playbook") or "a playbook"
    who = "%s put it there%s%s%s" % (
        playbook, " (run %s)" % record["run"] if record.get("run") else "", " by %s" % record["by"] if record.get("by") else "",
        " on %s" % when(record["since"], now) if record.get("since") is not None else "")
    sources_args = " ".join("-i " + source for source in [s for s in sources or [] if s] or ["inventory/<site>"])
    deploy = playbook_name("deploy.yml", playbook_dir)
    if topology == "replicas":
        gated = ("To go to %s, one replica at a time and gated: ansible-playbook %s %s "
                 "-e switch_model=%s." % (model, sources_args, playbook_name("switch-model.yml", playbook_dir), model))
    else:
        gated = "The split stops to change its model whichever way (an outage of one start-up)."
    return ("This host's engine was brought to %s (%s; %s), not %s. %s would restart it on %s (the inventory's "
            "%s) with no tool-calling gate, so it stops here; nothing was changed. To keep %s: change the inventory line "
            "to `%s: %s` in %s (and the tool-call parser and chat template if they changed with it) and run %s "
            "again. %s To restart it on %s through %s all the same (no tool-calling gate): -e %s=true."
            % (recorded, who, record.get("path") or PATH, model, deploy, model, variable, recorded, variable, recorded,
               model_file(sources), deploy, gated, model, deploy, MODEL_OVERRIDE))


# --- every engine host at once ----------------------------------------------------------------------


def _host_words(hosts):
    return ", ".join("%s %s" % (host, value) for host, value in hosts)


def compare(engines, observed) -> dict:
    """Every engine host's record next to what its engine units run, and each disagreement in words.

    ``observed``: per host, what it said - ``record`` (:func:`read`'s, or None) and ``runs``
    (:func:`runs`'s, or None when not read) - or None, {} or absent for a host that could not be read.
    Returns ``hosts`` ({host: {read, recorded, runs, model}}), ``running`` (the one topology
    the hosts run; :data:`NONE`; ``mixed``; or ``unknown`` when no host's units were read),
    ``recorded`` (the one topology the records name, ``mixed``, or None), ``agrees`` and
    ``disagreements`` (sentences, host by host first).
    """
    observed = observed or {}
    hosts, problems = {}, []
    for host in engines:
        seen = observed.get(host)
        if not isinstance(seen, dict) or not seen or seen.get("unreachable") or seen.get("failed"):
            hosts[host] = {"read": False, "recorded": None, "runs": None, "model": None}
            problems.append("%s could not be read%s: its record and engine units are unknown" % (
                host, " (%s)" % str(seen.get("msg"))[:120] if isinstance(seen, dict) and seen.get("msg") else ""))
            continue
        record = seen.get("record")
        running = seen.get("runs") or None
        recorded = (record or {}).get("topology")
        hosts[host] = {"read": True, "recorded": recorded, "runs": running, "model": (record or {}).get("model")}
        if record is not None and recorded is None:
            problems.append("%s's topology record cannot be read (%s)" % (host, record.get("error")))
        elif recorded and running in TOPOLOGIES and recorded != running:
            problems.append("%s records %s but runs %s" % (host, recorded, running))
        elif record is None and running in TOPOLOGIES:
            problems.append("%s has no topology record and runs %s" % (host, running))
        if running == BOTH:
            problems.append("%s runs both topologies' engine units" % host)
    read = [(host, view) for host, view in hosts.items() if view["read"]]
    ran = [(host, view["runs"]) for host, view in read if view["runs"] in TOPOLOGIES]
    if len({topology for _host, topology in ran}) > 1:
        problems.append("the hosts run different topologies: %s" % _host_words(ran))
    named = [(host, view["recorded"]) for host, view in read if view["recorded"]]
    if len({topology for _host, topology in named}) > 1:
        problems.append("the hosts' records differ: %s" % _host_words(named))
    models = [(host, view["model"]) for host, view in read if view["model"] and view["recorded"]]
    if len({topology for _host, topology in named}) == 1 and len({model for _host, model in models}) > 1:
        problems.append("the hosts' records name different models: %s" % _host_words(models))
    kinds = sorted({topology for _host, topology in ran})
    if not [view for _host, view in read if view["runs"] is not None]:
        running = "unknown"
    else:
        running = kinds[0] if len(kinds) == 1 else (NONE if not kinds else "mixed")
    recorded = sorted({topology for _host, topology in named})
    return {"hosts": hosts, "running": running,
            "recorded": recorded[0] if len(recorded) == 1 else ("mixed" if recorded else None),
            "agrees": not problems, "disagreements": problems}


def disagreement(view: dict) -> str:
    """:func:`compare`'s disagreements as one sentence for people ("" when the hosts agree)."""
    if view.get("agrees", True):
        return ""
    return "The engine hosts' topology records and what they run disagree: %s." % "; ".join(view["disagreements"])


def site_advice(view: dict, inventory_topology: str | None, sources, playbook_dir=None) -> dict:
    """What the inventory must say for deploy.yml to agree with what the hosts run (``view``, :func:`compare`'s).

    :func:`inventory_advice`'s keys; ``advice`` names what the hosts run, not what a record
    says. When they do not run one topology, ``topology`` and ``line`` are "" and ``advice``
    says so instead of naming an inventory line.
    """
    running = view.get("running")
    where = inventory_file(sources)
    deploy = playbook_name("deploy.yml", playbook_dir)
    if running in TOPOLOGIES:
        result = inventory_advice(running, inventory_topology, sources, playbook_dir)
        line = result["line"]
        if result["agrees"]:
            result["advice"] = "inventory: the hosts run %s, and `%s` in %s says so: %s agrees." % (
                running, line, where, deploy)
        elif inventory_topology:
            result["advice"] = ("inventory: the hosts run %s: change the line `topology: %s` to `%s` in %s, so that %s "
                                "agrees with them (until then it refuses and names this switch)."
                                % (running, inventory_topology, line, where, deploy))
        else:
            result["advice"] = "inventory: the hosts run %s: set `%s` in %s, so that %s agrees with them." % (
                running, line, where, deploy)
        return result
    words = {NONE: "no engine", "unknown": "something this run could not read", "mixed": "no one topology"}.get(
        running, str(running))
    return {"topology": "", "inventory_topology": inventory_topology or "", "agrees": False, "file": where, "line": "",
            "advice": "inventory: the hosts run %s (%s), so no `topology:` line in %s agrees with all of them; %s "
                      "refuses each host that differs from it (see %s)."
                      % (words, ", ".join("%s: %s" % (host, h["runs"] or "not read") for host, h in view["hosts"].items()),
                         where, deploy, playbook_name("status.yml", playbook_dir))}
