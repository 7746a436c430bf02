# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.topology_record`` on record files in a tmp dir."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.doc_fragments.topology_record import ModuleDocFragment as TopologyRecordFragment
from ansible_collections.factory_floor.llm.plugins.modules import topology_record as module

INVENTORY = ["/srv/ff/inventory/site"]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "topology.json"


def write(path, topology, playbook="switch-to-%s.yml"):
    path.write_text(json.dumps({"topology": topology, "since": 1795950000.0, "by": "ops@ctl",
                                "playbook": playbook % topology if "%s" in playbook else playbook,
                                "run": "20261129T110000Z-3f9a1c", "note": ""}))


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("recorded, topology, state", [
    (None, "replicas", "absent"),
    ("replicas", "replicas", "agrees"),
    ("split", "replicas", "differs"),
    ("replicas", "split", "differs"),
])
def test_reads_and_compares_and_changes_nothing(run_module, path, check_mode, recorded, topology, state):
    if recorded:
        write(path, recorded)
    before = path.read_text() if recorded else None
    code, result = run_module(module, {"path": str(path), "topology": topology, "inventory_sources": INVENTORY,
                                       "_ansible_check_mode": check_mode})
    assert code == 0, result
    assert result["changed"] is False and result["state"] == state
    assert result["recorded"] == (recorded or "")
    assert (result["record"] is None) == (recorded is None)
    assert bool(result["message"]) == (state == "differs")
    assert (path.read_text() if recorded else None) == before
    assert path.exists() == bool(recorded)


@pytest.mark.parametrize("playbook_dir, deploy, switch", [
    ("/srv/ff/playbooks", "playbooks/deploy.yml", "playbooks/switch-to-split.yml"),
    ("/opt/ansible/collections/ansible_collections/factory_floor/llm/playbooks", "factory_floor.llm.deploy",
     "factory_floor.llm.switch_to_split"),
])
def test_the_refusal_names_what_to_do(run_module, path, playbook_dir, deploy, switch):
    write(path, "replicas")
    code, result = run_module(module, {"path": str(path), "topology": "split", "inventory_sources": INVENTORY,
                                       "playbook_dir": playbook_dir})
    assert code == 0
    assert result["message"].startswith("This host is on replicas, not split: switched to replicas by ops@ctl with "
                                        "switch-to-replicas.yml (run 20261129T110000Z-3f9a1c) on 2026-11-29 11:00:00 UTC")
    for words in ("`topology: replicas` in /srv/ff/inventory/site/group_vars/all.yml and run %s again" % deploy,
                  "ansible-playbook -i /srv/ff/inventory/site %s" % switch,
                  "To change the topology through %s all the same" % deploy,
                  "-e vllm_deploy_topology_change=true"):
        assert words in result["message"]
    assert result["inventory"]["advice"].endswith("is what the hosts are on: %s agrees." % deploy)


def test_an_unreadable_record_is_invalid(run_module, path):
    path.write_text("{")
    code, result = run_module(module, {"path": str(path), "topology": "split"})
    assert code == 0
    assert result["state"] == "invalid" and result["recorded"] == ""
    assert result["record"]["error"].startswith("not JSON")
    assert result["message"].startswith("%s does not say which topology" % path)


@pytest.mark.parametrize("inventory_topology, agrees", [(None, True), ("split", False), ("replicas", True)])
def test_inventory_advice_defaults_to_the_topology(run_module, path, inventory_topology, agrees):
    args = {"path": str(path), "topology": "replicas", "inventory_sources": INVENTORY}
    if inventory_topology is not None:
        args["inventory_topology"] = inventory_topology
    code, result = run_module(module, args)
    assert code == 0
    assert result["inventory"]["agrees"] is agrees
    assert result["inventory"]["line"] == "topology: replicas"
    assert result["inventory"]["file"] == "/srv/ff/inventory/site/group_vars/all.yml"


def test_an_unknown_topology_is_refused_by_the_argument_spec(run_module, path):
    code, result = run_module(module, {"path": str(path), "topology": "both"})
    assert code == 1 and "topology" in result["msg"]


def test_documentation_is_yaml_and_matches_the_argument_spec():
    # The record-reading options live in the topology_record doc fragment (shared with deploy_topology_check).
    doc = yaml.safe_load(module.DOCUMENTATION)
    fragment = yaml.safe_load(TopologyRecordFragment.DOCUMENTATION)
    assert "topology_record" in " ".join(doc["extends_documentation_fragment"])
    assert set(doc["options"]) | set(fragment["options"]) == {
        "path", "topology", "inventory_sources", "inventory_topology", "playbook_dir", "units", "model", "hosts",
        "engine_hosts", "registered"}
    assert fragment["options"]["path"]["default"] == module.tr.PATH
    returned = yaml.safe_load(module.RETURN)
    assert set(returned) == {"state", "record_state", "recorded", "runs", "record", "message", "model_state", "model_message",
                             "site", "inventory"}
    yaml.safe_load(module.EXAMPLES)


UNITS = ["vllm-replica.service", "vllm-split.service"]


@pytest.fixture
def systemd(monkeypatch):
    """A fake ``systemctl is-active``: set ``systemd.states`` to what it prints, one state per unit."""
    class Systemd:
        states = ["inactive", "inactive"]
        asked = []

    def run_command(self, args, **_kwargs):
        Systemd.asked.append(args)
        return (0 if all(state == "active" for state in Systemd.states) else 3), "\n".join(Systemd.states) + "\n", ""

    monkeypatch.setattr(module.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(module.AnsibleModule, "run_command", run_command)
    return Systemd


@pytest.mark.parametrize("recorded, states, topology, state, record_state", [
    # Item 14: no record, the split's engine runs: deploy.yml used to bring it to replicas unasked.
    (None, ["inactive", "active"], "replicas", "differs", "absent"),
    (None, ["inactive", "inactive"], "replicas", "absent", "absent"),
    # A record a half-failed switch left: what runs decides, and the record is written again.
    ("split", ["active", "inactive"], "replicas", "agrees", "differs"),
    ("replicas", ["inactive", "active"], "replicas", "differs", "agrees"),
])
def test_what_runs_decides(run_module, path, systemd, recorded, states, topology, state, record_state):
    if recorded:
        write(path, recorded)
    systemd.states = states
    code, result = run_module(module, {"path": str(path), "topology": topology, "units": UNITS,
                                       "inventory_sources": INVENTORY})
    assert code == 0, result
    assert (result["state"], result["record_state"]) == (state, record_state)
    assert systemd.asked[-1] == ["/usr/bin/systemctl", "is-active", "--"] + UNITS
    assert bool(result["message"]) == (state == "differs")
    if state == "differs":
        assert result["message"].startswith("This host runs split (vllm-split.service is active), not replicas")


def test_without_units_systemd_is_not_asked(run_module, path, systemd):
    code, result = run_module(module, {"path": str(path), "topology": "replicas"})
    assert code == 0 and result["runs"] == "" and systemd.asked == []


def test_after_switch_model_the_old_model_is_refused(run_module, path):
    path.write_text(json.dumps({"topology": "replicas", "since": 1795950000.0, "by": "ops@ctl", "playbook": "switch-model.yml",
                                "run": "r1", "note": "", "model": "/models/New"}))
    code, result = run_module(module, {"path": str(path), "topology": "replicas", "model": "/models/Old",
                                       "inventory_sources": INVENTORY})
    assert code == 0
    assert result["state"] == "agrees" and result["message"] == ""
    assert result["model_state"] == "differs"
    assert "`vllm_model: /models/New` in /srv/ff/inventory/site/group_vars/gb10.yml" in result["model_message"]
    assert result["record"]["model"] == "/models/New"
    code, result = run_module(module, {"path": str(path), "topology": "replicas", "model": "/models/New"})
    assert result["model_state"] == "agrees" and result["model_message"] == ""


def test_hosts_are_compared_on_the_controller(run_module, path):
    def said(topology, runs):
        return {"record": {"topology": topology, "error": None}, "runs": runs, "state": "agrees"}
    code, result = run_module(module, {"topology": "split", "inventory_sources": INVENTORY, "path": str(path),
                                       "hosts": {"spark-a": said("split", "replicas"), "spark-b": said("replicas", "replicas"),
                                                 "spark-c": {"unreachable": True, "msg": "timed out"}}})
    assert code == 0
    assert result["state"] == "disagrees" and result["record"] is None
    assert result["site"]["running"] == "replicas"
    assert result["message"] == (
        "The engine hosts' topology records and what they run disagree: spark-a records split but runs replicas; "
        "spark-c could not be read (timed out): its record and engine units are unknown; the hosts' records differ: "
        "spark-a split, spark-b replicas.")
    assert result["inventory"]["line"] == "topology: replicas"
    assert result["inventory"]["advice"].startswith("inventory: the hosts run replicas: change the line `topology: split`")
    assert not path.exists()


# --- engine_hosts + registered: each host's result read from hostvars by the action plugin (issue 36) --------------

def _through_the_action(run_module, task_args, hostvars, **variables):
    from unittest import mock

    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from ansible_collections.factory_floor.llm.plugins.action.topology_record import ActionModule

    variables["hostvars"] = hostvars
    task = mock.MagicMock(async_val=0, check_mode=False, no_log=False, action="factory_floor.llm.topology_record",
                          args=task_args)
    connection = mock.MagicMock(has_native_async=False)
    connection._shell.tmpdir = None
    action = ActionModule(task, connection, mock.MagicMock(), DataLoader(), Templar(loader=DataLoader(), variables=variables),
                          mock.MagicMock())
    runs = []

    def execute(module_name=None, module_args=None, task_vars=None, **kwargs):
        runs.append(dict(module_args))
        return run_module(module, module_args).result

    action._execute_module = execute
    return action.run(task_vars=variables), runs


def test_the_action_reads_each_hosts_registered_result(run_module, path):
    from ansible.errors import AnsibleActionFail

    seen = {"record": {"topology": "split", "error": None}, "runs": "replicas", "state": "agrees"}
    hostvars = {"spark-a": {"__seen": seen}, "spark-b": {}}
    args = {"topology": "split", "inventory_sources": INVENTORY, "path": str(path)}
    result, runs = _through_the_action(run_module, dict(args, engine_hosts=["spark-a", "spark-b"], registered="__seen"),
                                       hostvars)
    assert runs[0]["hosts"] == {"spark-a": seen, "spark-b": {}} and "registered" not in runs[0]
    assert result == run_module(module, dict(args, hosts={"spark-a": seen, "spark-b": {}})).result
    with pytest.raises(AnsibleActionFail, match="engine_hosts and registered together"):
        _through_the_action(run_module, dict(args, engine_hosts=["spark-a"]), hostvars)
    with pytest.raises(AnsibleActionFail, match=r"registered \(with engine_hosts\) or hosts, not both"):
        _through_the_action(run_module, dict(args, engine_hosts=["spark-a"], registered="__seen", hosts={}), hostvars)
    with pytest.raises(AnsibleActionFail, match=r"registered \(with engine_hosts\) or hosts, not both"):
        _through_the_action(run_module, dict(args, registered="__seen", hosts={}), hostvars)


def test_the_action_reads_what_the_task_leaves_out(run_module, path):
    # The inventory's topology, its sources, playbook_dir, the record's path and the engine group: as the task sees them.
    seen = {"record": {"topology": "split", "error": None}, "runs": "split", "state": "agrees"}
    hostvars = {"spark-a": {"__seen": seen}, "spark-b": {"__seen": seen}, "gateway": {}}
    variables = dict(topology="split", playbook_dir="/srv/ff/playbooks", ansible_inventory_sources=INVENTORY,
                     _vllm_topology_record_file=str(path), site_engine_group="engines",
                     groups={"engines": ["spark-a", "spark-b"], "proxy": ["gateway"]})
    result, runs = _through_the_action(run_module, {"registered": "__seen"}, hostvars, **variables)
    assert runs[0] == {"topology": "split", "path": str(path), "inventory_sources": INVENTORY,
                       "playbook_dir": "/srv/ff/playbooks", "hosts": {"spark-a": seen, "spark-b": seen}}
    assert result["state"] == "agrees"
    # Explicit arguments win.
    _result, runs = _through_the_action(run_module, {"registered": "__seen", "topology": "replicas",
                                                     "engine_hosts": ["spark-a"], "playbook_dir": ""}, hostvars, **variables)
    assert runs[0]["topology"] == "replicas" and list(runs[0]["hosts"]) == ["spark-a"] and runs[0]["playbook_dir"] == ""


def test_without_a_topology_the_module_says_where_to_set_it(run_module, path):
    result = run_module(module, {"path": str(path)})
    assert result.code == 1 and "set the inventory's topology" in result.result["msg"]
