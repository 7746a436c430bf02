# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Issue 35, item 2: a switch refuses a proxy that does not run the inventory's settings, before anything changes.

A trial changed the API key and the served model name in the inventory, then switched: the switch started the new
engines with them and left the proxy with its own - 401 for every client for 8 minutes, then the new engines were
never in rotation. The switch's preflight now includes the nginx_proxy role's ``settings`` entry point on the proxy
hosts and refuses any difference (``vllm_check`` ``switch_proxy``), naming each setting and the command that applies
it; a key is named, never shown.

Run here for real, dry run (``--check``) and run alike: ``ansible-playbook`` with a local connection, the proxy's
files written from the role's own templates as ``deploy.yml`` writes them (paths in a tmp dir), then the two tasks
as ``switch_preflight.yml`` has them, read from that file, with the inventory changed by ``-e``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
TEMPLATES = os.path.join(ROOT, "roles", "nginx_proxy", "templates")
KEY = "lab-key-7f3e9a2c41d86b05"
NEW_KEY = "new-key-0b1c2d3e4f5a6978"

needs_tools = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK), reason="needs ansible-playbook next to this Python")


def _switch_tasks():
    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "topology_switch", "tasks", "switch_preflight.yml"), encoding="utf-8"))
    names = ["Compare the settings each proxy host runs with the inventory's (reads only)",
             "Refuse a proxy that does not run the inventory's settings, naming them and the command that applies them"]
    found = [task for task in tasks if task.get("name") in names]
    assert [task["name"] for task in found] == names
    return found


def test_the_switch_compares_before_it_decides_or_scores_anything():
    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "topology_switch", "tasks", "switch_preflight.yml"), encoding="utf-8"))
    names = [task.get("name", "") for task in tasks]
    refused = names.index("Refuse a proxy that does not run the inventory's settings, naming them and the command "
                          "that applies them")
    assert refused < names.index("Decide whether there is anything to switch, whether it finishes an interrupted "
                                 "switch, and what serves now")
    assert refused < names.index("Make sure the incumbent build has a tool-calling score to compare with")
    compare, refuse = _switch_tasks()
    assert compare["ansible.builtin.include_role"] == {"name": "factory_floor.llm.nginx_proxy", "tasks_from": "settings"}
    assert compare["when"] == "inventory_hostname in groups[site_proxy_group]"
    assert refuse["factory_floor.llm.vllm_check"] == {"check": "switch_proxy"} and refuse["run_once"] is True


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A proxy (and engine) host whose files were written from the role's templates, as deploy.yml writes them."""
    tmp = tmp_path_factory.mktemp("proxy")
    (tmp / "etc").mkdir()
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "vllm_api_key": KEY, "vllm_served_model_name": "lab-chat"},
                         "children": {"gb10": {"hosts": {"spark-t": {}}}, "proxy": {"hosts": {"spark-t": {}}}}}}
    (tmp / "inventory.yml").write_text(json.dumps(inventory))
    paths = {"_nginx_proxy_config_dir": str(tmp / "etc"), "_nginx_proxy_key_map": str(tmp / "etc" / "nginx-api-key.conf"),
             "_nginx_proxy_conf": str(tmp / "etc" / "nginx.conf")}
    (tmp / "paths.json").write_text(json.dumps(paths))
    deploy = [{"name": "Write the proxy's files as the role does", "hosts": "proxy", "gather_facts": False, "tasks": [
        {"name": "The role's variables", "ansible.builtin.include_role": {
            "name": "factory_floor.llm.nginx_proxy", "tasks_from": "settings", "public": True}},
        {"name": "Write them", "ansible.builtin.template": {"src": "{{ item.src }}", "dest": "{{ item.dest }}",
                                                            "mode": "0600"},
         "loop": [{"src": os.path.join(TEMPLATES, "upstream.json.j2"), "dest": paths["_nginx_proxy_config_dir"]
                   + "/upstream.json"},
                  {"src": os.path.join(TEMPLATES, "nginx-api-key.conf.j2"), "dest": paths["_nginx_proxy_key_map"]},
                  {"src": os.path.join(TEMPLATES, "nginx.conf.j2"), "dest": paths["_nginx_proxy_conf"]}]}]}]
    (tmp / "deploy.yml").write_text(json.dumps(deploy, indent=1))
    switch = [{"name": "The switch's proxy check", "hosts": "gb10:proxy", "gather_facts": False,
               "tasks": [{"name": "The vllm role's settings", "ansible.builtin.include_role": {
                   "name": "factory_floor.llm.vllm", "tasks_from": "settings", "public": True}}] + _switch_tasks()}]
    (tmp / "switch.yml").write_text(json.dumps(switch, indent=1))
    rc, output = _playbook(tmp, "deploy.yml")
    assert rc == 0, output[-3000:]
    return tmp


def _playbook(tmp, name, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp / "inventory.yml"), str(tmp / name),
                           "-e", "@" + str(tmp / "paths.json")] + list(args),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def _files(tmp):
    return {name: (tmp / "etc" / name).read_text() for name in sorted(os.listdir(tmp / "etc"))}


@needs_tools
@pytest.mark.parametrize("check", [[], ["--check"]], ids=["run", "dry-run"])
def test_a_proxy_as_the_inventory_says_goes_on(site, check):
    rc, output = _playbook(site, "switch.yml", *check)
    assert rc == 0, output[-3000:]
    assert "The proxy does not run the inventory's settings." not in output


@needs_tools
@pytest.mark.parametrize("check", [[], ["--check"]], ids=["run", "dry-run"])
@pytest.mark.parametrize("extra, words, never", [
    (["-e", "vllm_api_key=" + NEW_KEY, "-e", "vllm_served_model_name=renamed-chat"],
     ["The proxy does not run the inventory's settings. On spark-t: nginx_proxy_model (by default "
      "vllm_served_model_name): lab-chat on the proxy, renamed-chat in the inventory; nginx_proxy_api_key (by default "
      "vllm_api_key): another key than the proxy's (neither is shown). A switch changes the engines only",
      "Nothing was changed. nginx_proxy_model, nginx_proxy_api_key describe the engines too",
      "(ansible-playbook -i %s factory_floor.llm.deploy; a new vllm_api_key"], ["--tags proxy"]),
    (["-e", "site_proxy_port=8081", "-e", "nginx_proxy_check_interval=1.5"],
     ["On spark-t: nginx_proxy_check_interval: 1.0 on the proxy, 1.5 in the inventory; nginx.conf, its listen lines "
      "(nginx_proxy_* settings).",
      "Nothing was changed. Apply them to the proxy first (ansible-playbook -i %s factory_floor.llm.deploy --tags "
      "proxy: nginx reloads, the engines that serve now stay in rotation), then run the switch again."],
     ["describe the engines"]),
], ids=["key-and-model-name", "the-proxys-port"])
def test_a_proxy_that_differs_is_refused_and_nothing_changes(site, check, extra, words, never):
    before = _files(site)
    rc, output = _playbook(site, "switch.yml", *(extra + check))
    assert rc != 0, output[-3000:]
    for word in words:
        word = word % (site / "inventory.yml") if "%s" in word else word
        assert word in output, (word, output[-3000:])
    for word in never + [KEY, NEW_KEY]:
        assert word not in output, word
    assert _files(site) == before


@needs_tools
@pytest.mark.parametrize("check", [[], ["--check"]], ids=["run", "dry-run"])
def test_settings_a_switch_can_go_on_with_are_named_not_refused(site, check):
    before = _files(site)
    rc, output = _playbook(site, "switch.yml", "-e", "nginx_proxy_read_timeout=600", "-e", "nginx_proxy_check_interval=1.5",
                           *check)
    assert rc == 0, output[-3000:]
    assert ("[WARNING]: The proxy runs other settings than the inventory's, which a switch leaves as they are. On "
            "spark-t: nginx_proxy_check_interval: 1.0 on the proxy, 1.5 in the inventory; nginx.conf, its "
            "proxy_read_timeout, proxy_send_timeout lines (nginx_proxy_* settings). None of them keeps the new engines "
            "out of rotation; apply them when you choose: ansible-playbook -i %s factory_floor.llm.deploy --tags proxy"
            % (site / "inventory.yml")) in output, output[-3000:]
    assert _files(site) == before
