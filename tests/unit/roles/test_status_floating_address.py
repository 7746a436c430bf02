# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""status.yml shows the floating address and its holder (issue 35: it always said "none configured").

The status playbook's proxy play runs the keepalived role's status entry point (which sets
``keepalived_status`` on the proxy hosts), and the site_view role's site_status entry point hands that
fact to ``factory_floor.llm.site_status``: its task's arguments are evaluated with Ansible's
templating, as a run would, and the view is made from them (``_site_status.build``, the module's code).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils._host import keepalived as ka
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_status as site
from ansible_collections.factory_floor.llm.tests.unit.roles.test_unit_freshness import ROOT, evaluate, tasks

OMIT = "__omit_place_holder__"
PROXIES = ["proxy-a", "proxy-b"]
ENGINES = ["spark-a", "spark-b"]


def _status():
    statuses = {"proxy-a": {"holds_address": False, "vrrp_state": "BACKUP", "vrrp_state_current": True,
                            "service_state": "active"},
                "proxy-b": {"holds_address": True, "vrrp_state": "MASTER", "vrrp_state_current": True,
                            "service_state": "active"}}
    return ka.summarize(statuses, "192.0.2.10/24")


def _site_status_arguments(hostvars):
    """The module's arguments as a run gives them: the task's, templated, then read by the action plugin (it reads
    each host's facts, keepalived_status among them, from hostvars itself)."""
    from unittest import mock

    from ansible_collections.factory_floor.llm.plugins.action.site_status import ActionModule

    (task,) = [t for t in tasks("roles/site_view/tasks/site_status.yml") if "factory_floor.llm.site_status" in t]
    variables = {"hostvars": hostvars, "groups": {"gb10": ENGINES, "proxy": PROXIES}, "site_engine_group": "gb10",
                 "site_proxy_group": "proxy", "tool_gate_scores_dir": "", "omit": OMIT}
    variables.update({name: evaluate(value, variables) for name, value in task.get("vars", {}).items()})
    args = {name: evaluate(value, variables) if isinstance(value, str) else value
            for name, value in task["factory_floor.llm.site_status"].items()}
    action = ActionModule(mock.MagicMock(async_val=0, check_mode=False, no_log=False, args=args,
                                         action="factory_floor.llm.site_status"),
                          mock.MagicMock(has_native_async=False), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(),
                          mock.MagicMock())
    runs = []
    action._execute_module = lambda module_name=None, module_args=None, task_vars=None, **kw: runs.append(module_args) or {}
    action.run(task_vars=variables)
    return runs[0]


def _table(arguments):
    keepalived = arguments.get("keepalived")
    view = site.build({}, {}, "replicas", floating=arguments.get("floating_addresses"),
                      keepalived=None if keepalived == OMIT else keepalived, now=0.0)
    return site.table(view, 0.0)


def test_the_status_view_names_the_floating_address_and_its_holder():
    hostvars = {name: {} for name in ENGINES}
    # The keepalived role's status entry point sets the fact on every host of the proxy play (run_once set_fact).
    hostvars.update({name: {"keepalived_status": _status()} for name in PROXIES})
    lines = _table(_site_status_arguments(hostvars))
    assert "floating proxy address: keepalived 192.0.2.10 on proxy-b (proxy-a BACKUP; proxy-b MASTER)" in lines


def test_one_proxy_host_has_none():
    hostvars = {name: {} for name in ENGINES + PROXIES}
    assert "floating proxy address: none configured" in _table(_site_status_arguments(hostvars))


def test_the_status_playbook_asks_keepalived_on_the_proxy_hosts_before_the_view_is_made():
    with open(os.path.join(ROOT, "playbooks", "status.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    includes = [(index, task) for index, play in enumerate(plays) for task in play.get("tasks", [])
                if (task.get("ansible.builtin.include_role") or {}).get("name") == "factory_floor.llm.keepalived"]
    assert len(includes) == 1
    index, task = includes[0]
    assert plays[index]["hosts"] == "proxy" and task["ansible.builtin.include_role"]["tasks_from"] == "status"
    view_play = next(i for i, play in enumerate(plays)
                     if any((t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "site_status"
                            for t in play.get("tasks", [])))
    assert index < view_play


PLAY = """
- name: What status.yml's proxy play runs
  hosts: proxy
  gather_facts: false
  tasks:
    - name: Read which proxy host holds the floating address
      ansible.builtin.include_role:
        name: factory_floor.llm.keepalived
        tasks_from: status
    - name: Keep the fact for the test
      ansible.builtin.copy:
        content: "{{ keepalived_status | to_json }}"
        dest: %s
        mode: "0644"
      run_once: true
      delegate_to: localhost
"""


def test_the_status_entry_point_reads_without_facts_and_a_lost_host_does_not_fail_it(tmp_path):
    """A real run of the keepalived role's status entry point on this machine: no facts gathered, no
    keepalived_interface, the address looked for on every interface (127.0.0.1 on lo, held by the two proxy
    hosts that are this machine: two holders), a third proxy host that cannot be reached counts as not
    holding it, and the run goes on."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"vars": {"keepalived_virtual_ipaddress": "127.0.0.1/8"}, "children": {"proxy": {"hosts": {
        "proxy-a": local, "proxy-b": local,
        "proxy-c": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                    "ansible_ssh_common_args": "-o ConnectTimeout=5"}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    out = tmp_path / "status.json"
    (tmp_path / "play.yml").write_text(PLAY % out)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_HOST_KEY_CHECKING="False")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                           str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(out.read_text())
    assert status["holders"] == ["proxy-a", "proxy-b"] and status["ok"] is False
    assert status["hosts"]["proxy-a"]["interface"] == "lo"
    assert "proxy-a and proxy-b hold the floating address 127.0.0.1 at once" in status["message"]
    assert "proxy-c keepalived unknown (unreachable)" in status["message"]
    view = site.build({}, {}, "replicas", keepalived=status, now=0.0)
    assert "floating address: proxy-a and proxy-b hold the floating address 127.0.0.1 at once" in " ".join(
        view["attention"])
