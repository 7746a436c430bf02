# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_topology_record.py (record files in a tmp dir, time passed in)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record as tr

T0 = 1795950000.0   # when the record was written
NOW = T0 + 1500.0   # "now" in these tests: 25 min later
RUN = "20261129T110000Z-3f9a1c"
INVENTORY = ["/srv/ff/inventory/site"]
# Where the playbook that runs is (playbook_dir): a checkout's playbooks, an installed collection's (issue 35).
CHECKOUT = "/srv/ff/playbooks"
INSTALLED = "/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks"


def record_text(topology="replicas", playbook="switch-to-replicas.yml", by="ops@ctl", since=T0, run=RUN, note="", model=None):
    fields = {"topology": topology, "since": since, "by": by, "playbook": playbook, "run": run, "note": note}
    if model is not None:
        fields["model"] = model
    return json.dumps(fields)


def record(**fields):
    parsed = tr.parse(record_text(**fields))
    parsed["path"] = tr.PATH
    return parsed


@pytest.fixture
def path(tmp_path):
    return tmp_path / "topology.json"


# --- parse() / read() ---------------------------------------------------------------------------


def test_parse_reads_every_field():
    assert tr.parse(record_text(note="n")) == {
        "topology": "replicas", "since": T0, "by": "ops@ctl", "playbook": "switch-to-replicas.yml", "run": RUN,
        "note": "n", "model": None, "error": None}


def test_parse_reads_the_model():
    assert tr.parse('{"topology": "replicas", "model": "/models/New"}')["model"] == "/models/New"


@pytest.mark.parametrize("text, error", [
    ("", "not JSON"),
    ("split", "not JSON"),
    ('["split"]', "not a JSON object"),
    ('{"topology": "both"}', 'topology "both" is neither replicas nor split'),
    ('{"since": 1}', "topology null is neither replicas nor split"),
])
def test_parse_without_a_topology_says_why(text, error):
    parsed = tr.parse(text)
    assert parsed["topology"] is None
    assert parsed["error"].startswith(error)


def test_parse_ignores_fields_of_the_wrong_type():
    parsed = tr.parse('{"topology": "split", "since": "yesterday", "by": 7, "run": null}')
    assert parsed["topology"] == "split" and parsed["error"] is None
    assert parsed["since"] is None and parsed["by"] == "7" and parsed["run"] is None


def test_read_absent_is_none(path):
    assert tr.read(str(path)) is None


def test_read_adds_path_and_mtime(path):
    path.write_text(record_text(topology="split"))
    read = tr.read(str(path))
    assert read["topology"] == "split" and read["path"] == str(path)
    assert read["mtime"] == pytest.approx(os.stat(path).st_mtime)


def test_read_of_a_directory_is_unreadable(path):
    path.mkdir()
    read = tr.read(str(path))
    assert read["topology"] is None and read["error"].startswith("unreadable")


# --- state_of() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("recorded, topology, state", [
    (None, "replicas", tr.ABSENT),
    ("replicas", "replicas", tr.AGREES),
    ("split", "split", tr.AGREES),
    ("replicas", "split", tr.DIFFERS),
    ("split", "replicas", tr.DIFFERS),
    ("unreadable", "split", tr.INVALID),
])
def test_state_of(recorded, topology, state):
    found = None if recorded is None else (tr.parse("garbage") if recorded == "unreadable" else record(topology=recorded))
    assert tr.state_of(found, topology) == state


# --- describe() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fields, words", [
    ({}, "switched to replicas by ops@ctl with switch-to-replicas.yml (run %s) on 2026-11-29 11:00:00 UTC (25 min ago)"
     % RUN),
    ({"playbook": "deploy.yml"}, "brought to replicas by ops@ctl with deploy.yml (run %s) on 2026-11-29 11:00:00 UTC"
     % RUN),
    ({"topology": "split", "playbook": "switch-to-replicas.yml", "note": "the switch to replicas rolled back"},
     "switched to split by ops@ctl with switch-to-replicas.yml (run %s) on 2026-11-29 11:00:00 UTC (25 min ago); "
     "the switch to replicas rolled back" % RUN),
    ({"by": "", "playbook": "", "run": ""}, "brought to replicas by an unknown user on 2026-11-29 11:00:00 UTC"),
])
def test_describe(fields, words):
    assert tr.describe(record(**fields), NOW).startswith(words)


def test_describe_without_since_uses_the_file_time():
    found = tr.parse('{"topology": "split"}')
    found["mtime"] = T0
    assert tr.describe(found, NOW) == "brought to split by an unknown user, recorded 2026-11-29 11:00:00 UTC (25 min ago)"


# --- inventory_file() / switch_command() ---------------------------------------------------------


@pytest.mark.parametrize("sources, expected", [
    (["/srv/ff/inventory/site"], "/srv/ff/inventory/site/group_vars/all.yml"),
    (["/srv/ff/inventory/site/"], "/srv/ff/inventory/site/group_vars/all.yml"),
    (["/srv/ff/inventory/site/hosts.yml", "/other"], "/srv/ff/inventory/site/group_vars/all.yml"),
    (["/srv/ff/inventory/site/hosts"], "/srv/ff/inventory/site/group_vars/all.yml"),
    (["inventory/lab"], "inventory/lab/group_vars/all.yml"),
    (["hosts.ini"], "./group_vars/all.yml"),
    ([], "inventory/<site>/group_vars/all.yml"),
    (None, "inventory/<site>/group_vars/all.yml"),
])
def test_inventory_file(sources, expected):
    assert tr.inventory_file(sources) == expected


@pytest.mark.parametrize("sources, playbook_dir, expected", [
    (INVENTORY, CHECKOUT, "ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-split.yml"),
    (["a", "b"], CHECKOUT, "ansible-playbook -i a -i b playbooks/switch-to-split.yml"),
    ([], CHECKOUT, "ansible-playbook -i inventory/<site> playbooks/switch-to-split.yml"),
    (INVENTORY, INSTALLED, "ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.switch_to_split"),
    (INVENTORY, None, "ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.switch_to_split"),
])
def test_switch_command(sources, playbook_dir, expected):
    assert tr.switch_command("split", sources, playbook_dir) == expected


# --- refusal() ----------------------------------------------------------------------------------


@pytest.mark.parametrize("found, topology", [(None, "split"), ("replicas", "replicas"), ("split", "split")])
def test_no_refusal_without_a_record_or_when_it_agrees(found, topology):
    assert tr.refusal(None if found is None else record(topology=found), topology, INVENTORY, NOW) == ""


@pytest.mark.parametrize("recorded, deployed", [("replicas", "split"), ("split", "replicas")])
def test_refusal_names_both_topologies_who_when_the_switch_the_line_and_the_override(recorded, deployed):
    found = record(topology=recorded, playbook="switch-to-%s.yml" % recorded)
    message = tr.refusal(found, deployed, INVENTORY, NOW, playbook_dir=CHECKOUT)
    assert message.startswith("This host is on %s, not %s: switched to %s by ops@ctl with switch-to-%s.yml (run %s) on "
                              "2026-11-29 11:00:00 UTC (25 min ago) (/var/lib/factory-floor/topology.json)."
                              % (recorded, deployed, recorded, recorded, RUN))
    assert ("playbooks/deploy.yml brings the hosts to the topology it is given (topology: %s) and would stop %s with no "
            "drain, no tool-calling gate and no maintenance lock" % (deployed, recorded) in message)
    assert "nothing was changed" in message
    assert ("change the inventory line to `topology: %s` in /srv/ff/inventory/site/group_vars/all.yml" % recorded
            in message)
    assert ("To go to %s: ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-%s.yml" % (deployed, deployed)
            in message)
    assert message.endswith("-e vllm_deploy_topology_change=true.")


def test_refusal_of_an_unreadable_record_names_the_file_and_the_ways_on(path):
    path.write_text("replicas\n")
    message = tr.refusal(tr.read(str(path)), "split", INVENTORY, NOW, playbook_dir=INSTALLED)
    assert message.startswith("%s does not say which topology this host was last brought to (not JSON: 'replicas'). "
                              "factory_floor.llm.deploy and the topology switches write it, so that a routine "
                              "factory_floor.llm.deploy cannot undo a switch" % path)
    assert ("If this host is on split, the topology this run deploys, remove the file and run factory_floor.llm.deploy "
            "again" in message)
    assert "`topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml" in message
    assert "go to split with ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.switch_to_split." in message
    assert "To change the topology through factory_floor.llm.deploy all the same" in message
    assert message.endswith("-e vllm_deploy_topology_change=true.")


# --- inventory_advice() --------------------------------------------------------------------------


@pytest.mark.parametrize("topology, inventory_topology, agrees, advice", [
    ("replicas", "split", False,
     "inventory: change the line `topology: split` to `topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml, "
     "so that factory_floor.llm.deploy agrees with the hosts (until then it refuses and names this switch)."),
    ("split", "split", True,
     "inventory: `topology: split` in /srv/ff/inventory/site/group_vars/all.yml is what the hosts are on: "
     "factory_floor.llm.deploy agrees."),
    ("replicas", "", False,
     "inventory: set `topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml, so that "
     "factory_floor.llm.deploy agrees with the hosts."),
    ("split", None, False,
     "inventory: set `topology: split` in /srv/ff/inventory/site/group_vars/all.yml, so that factory_floor.llm.deploy "
     "agrees with the hosts."),
])
def test_inventory_advice(topology, inventory_topology, agrees, advice):
    assert tr.inventory_advice(topology, inventory_topology, INVENTORY, INSTALLED) == {
        "topology": topology, "inventory_topology": inventory_topology or "", "agrees": agrees,
        "file": "/srv/ff/inventory/site/group_vars/all.yml", "line": "topology: " + topology, "advice": advice}
    checkout = tr.inventory_advice(topology, inventory_topology, INVENTORY, CHECKOUT)["advice"]
    assert checkout == advice.replace("factory_floor.llm.deploy", "playbooks/deploy.yml")


def test_the_override_is_the_vllm_roles_variable():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(root, "roles", "vllm", "defaults", "main.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle)[tr.OVERRIDE] is False
    with open(os.path.join(root, "roles", "vllm", "vars", "main.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["_vllm_topology_record_file"] == tr.PATH


# --- runs() and what the host runs --------------------------------------------------------------


@pytest.mark.parametrize("states, expected", [
    (["active", "inactive"], "replicas"),
    (["inactive", "active"], "split"),
    (["activating", "inactive"], "replicas"),
    (["failed", "reloading"], "split"),
    (["inactive", "inactive"], tr.NONE),
    (["failed", "unknown"], tr.NONE),
    (["active", "active"], tr.BOTH),
    ([], None),
    (None, None),
])
def test_runs(states, expected):
    assert tr.runs(states) == expected


@pytest.mark.parametrize("recorded, running, topology, state", [
    # Item 14: a host with no record used to agree with any topology, whatever it ran.
    (None, "split", "replicas", tr.DIFFERS),
    (None, "replicas", "replicas", tr.AGREES),
    (None, tr.NONE, "replicas", tr.ABSENT),
    # What runs decides over a record a half-failed run left behind.
    ("split", "replicas", "replicas", tr.AGREES),
    ("replicas", "split", "replicas", tr.DIFFERS),
    ("unreadable", "replicas", "replicas", tr.AGREES),
    # Nothing runs (a host whose engine is down): the record decides.
    ("split", tr.NONE, "replicas", tr.DIFFERS),
    ("split", None, "split", tr.AGREES),
    ("split", tr.BOTH, "replicas", tr.DIFFERS),
])
def test_state_of_what_runs_first(recorded, running, topology, state):
    found = None if recorded is None else (tr.parse("garbage") if recorded == "unreadable" else record(topology=recorded))
    assert tr.state_of(found, topology, running) == state


def test_a_host_with_no_record_that_runs_the_other_topology_is_refused():
    message = tr.refusal(None, "replicas", INVENTORY, NOW, running="split", playbook_dir=CHECKOUT)
    assert message.startswith("This host runs split (vllm-split.service is active), not replicas; it has no topology "
                              "record (/var/lib/factory-floor/topology.json).")
    assert "would stop split with no drain, no tool-calling gate and no maintenance lock" in message
    assert ("change the inventory line to `topology: split` in /srv/ff/inventory/site/group_vars/all.yml and run "
            "playbooks/deploy.yml again (it records split)" in message)
    assert "ansible-playbook -i /srv/ff/inventory/site playbooks/switch-to-replicas.yml" in message
    assert message.endswith("-e vllm_deploy_topology_change=true.")


def test_a_record_that_is_not_what_runs_is_named_in_the_refusal():
    message = tr.refusal(record(topology="replicas"), "replicas", INVENTORY, NOW, running="split")
    assert message.startswith("This host runs split (vllm-split.service is active), not replicas; its record says "
                              "replicas: switched to replicas by ops@ctl")
    assert "which is not what runs" in message


@pytest.mark.parametrize("recorded, running", [("split", "replicas"), (None, "replicas"), (None, tr.NONE)])
def test_no_refusal_when_what_runs_is_what_is_deployed(recorded, running):
    found = None if recorded is None else record(topology=recorded)
    assert tr.refusal(found, "replicas", INVENTORY, NOW, running) == ""


# --- the model ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fields, topology, model, state", [
    ({"model": "/models/New"}, "replicas", "/models/New", tr.AGREES),
    ({"model": "/models/New"}, "replicas", "/models/Old", tr.DIFFERS),
    ({}, "replicas", "/models/Old", tr.ABSENT),
    ({"model": "/models/New", "topology": "split"}, "replicas", "/models/Old", tr.ABSENT),
    ({"model": "/models/New"}, "replicas", "", tr.ABSENT),
])
def test_model_state(fields, topology, model, state):
    assert tr.model_state(record(**fields), topology, model) == state
    assert tr.model_state(None, topology, model) == tr.ABSENT


def test_after_switch_model_deploy_refuses_the_old_model_naming_the_line_and_switch_model():
    found = record(model="/models/New", playbook="switch-model.yml")
    message = tr.model_refusal(found, "replicas", "/models/Old", INVENTORY, NOW, CHECKOUT)
    assert message.startswith("This host's engine was brought to /models/New (switch-model.yml put it there (run %s) by "
                              "ops@ctl on 2026-11-29 11:00:00 UTC (25 min ago); /var/lib/factory-floor/topology.json), "
                              "not /models/Old." % RUN)
    assert ("playbooks/deploy.yml would restart it on /models/Old (the inventory's vllm_model) with no tool-calling gate"
            in message)
    assert "change the inventory line to `vllm_model: /models/New` in /srv/ff/inventory/site/group_vars/gb10.yml" in message
    assert ("ansible-playbook -i /srv/ff/inventory/site playbooks/switch-model.yml -e switch_model=/models/Old"
            in message)
    assert message.endswith("To restart it on /models/Old through playbooks/deploy.yml all the same (no tool-calling "
                            "gate): -e vllm_deploy_model_change=true.")
    assert ("ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.switch_model -e switch_model=/models/Old"
            in tr.model_refusal(found, "replicas", "/models/Old", INVENTORY, NOW, INSTALLED))
    assert tr.model_refusal(found, "replicas", "/models/New", INVENTORY, NOW) == ""


def test_the_split_names_its_own_model_variable():
    message = tr.model_refusal(record(topology="split", model="/models/A"), "split", "/models/B", INVENTORY, NOW)
    assert "`vllm_split_model: /models/A`" in message and "switch-model.yml" not in message


# --- compare(): every host at once -----------------------------------------------------------------


HOSTS = ["spark-a", "spark-b"]


def seen(recorded, running, model=None):
    return {"record": None if recorded is None else record(topology=recorded, **({"model": model} if model else {})),
            "runs": running}


@pytest.mark.parametrize("row, observed, running, recorded, disagreements", [
    ("what the issue saw: a half-failed switch", {"spark-a": seen("split", "replicas"), "spark-b": seen("replicas", "replicas")},
     "replicas", "mixed",
     ["spark-a records split but runs replicas", "the hosts' records differ: spark-a split, spark-b replicas"]),
    ("all agree", {"spark-a": seen("split", "split"), "spark-b": seen("split", "split")}, "split", "split", []),
    ("one replica down: its record decides nothing, nothing to name",
     {"spark-a": seen("replicas", "replicas"), "spark-b": seen("replicas", tr.NONE)}, "replicas", "replicas", []),
    ("a host lost", {"spark-a": seen("replicas", "replicas"), "spark-b": {"unreachable": True, "msg": "ssh: timed out"}},
     "replicas", "replicas", ["spark-b could not be read (ssh: timed out): its record and engine units are unknown"]),
    ("a host never read", {"spark-a": seen("replicas", "replicas")}, "replicas", "replicas",
     ["spark-b could not be read: its record and engine units are unknown"]),
    ("a host not in the play (Ansible's map default {})", {"spark-a": seen("replicas", "replicas"), "spark-b": {}},
     "replicas", "replicas", ["spark-b could not be read: its record and engine units are unknown"]),
    ("no record, runs split", {"spark-a": seen(None, "split"), "spark-b": seen("split", "split")}, "split", "split",
     ["spark-a has no topology record and runs split"]),
    ("the hosts run different topologies", {"spark-a": seen("replicas", "replicas"), "spark-b": seen("split", "split")},
     "mixed", "mixed", ["the hosts run different topologies: spark-a replicas, spark-b split",
                        "the hosts' records differ: spark-a replicas, spark-b split"]),
    ("models differ after a half-done upgrade",
     {"spark-a": seen("replicas", "replicas", "/m/New"), "spark-b": seen("replicas", "replicas", "/m/Old")},
     "replicas", "replicas", ["the hosts' records name different models: spark-a /m/New, spark-b /m/Old"]),
    ("units not read", {"spark-a": seen("replicas", None), "spark-b": seen("replicas", None)}, "unknown", "replicas", []),
    ("both units", {"spark-a": seen("split", tr.BOTH), "spark-b": seen("split", "split")}, "split", "split",
     ["spark-a runs both topologies' engine units"]),
])
def test_compare(row, observed, running, recorded, disagreements):
    view = tr.compare(HOSTS, observed)
    assert (view["running"], view["recorded"], view["disagreements"], view["agrees"]) == (
        running, recorded, disagreements, not disagreements), row
    assert bool(tr.disagreement(view)) == bool(disagreements)


def test_disagreement_names_every_one():
    view = tr.compare(HOSTS, {"spark-a": seen("split", "replicas"), "spark-b": seen("replicas", "replicas")})
    assert tr.disagreement(view) == ("The engine hosts' topology records and what they run disagree: spark-a records split "
                                     "but runs replicas; the hosts' records differ: spark-a split, spark-b replicas.")


@pytest.mark.parametrize("observed, inventory_topology, line, advice", [
    # The issue: the report said "`topology: split` ... is what the hosts are on" while both ran replicas.
    ({"spark-a": seen("split", "replicas"), "spark-b": seen("replicas", "replicas")}, "split", "topology: replicas",
     "inventory: the hosts run replicas: change the line `topology: split` to `topology: replicas` in "
     "/srv/ff/inventory/site/group_vars/all.yml, so that factory_floor.llm.deploy agrees with them (until then it "
     "refuses and names this switch)."),
    ({"spark-a": seen("split", "split"), "spark-b": seen("split", "split")}, "split", "topology: split",
     "inventory: the hosts run split, and `topology: split` in /srv/ff/inventory/site/group_vars/all.yml says so: "
     "factory_floor.llm.deploy agrees."),
    ({"spark-a": seen("replicas", "replicas"), "spark-b": seen("split", "split")}, "split", "",
     "inventory: the hosts run no one topology (spark-a: replicas, spark-b: split), so no `topology:` line in "
     "/srv/ff/inventory/site/group_vars/all.yml agrees with all of them; factory_floor.llm.deploy refuses each host "
     "that differs from it (see factory_floor.llm.status)."),
])
def test_site_advice_says_what_the_hosts_run(observed, inventory_topology, line, advice):
    result = tr.site_advice(tr.compare(HOSTS, observed), inventory_topology, INVENTORY)
    assert (result["line"], result["advice"]) == (line, advice)
