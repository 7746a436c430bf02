# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's third engine host without the lab: lab/engines.py's platforms, spark-c's inventory
(inventory/lab-groups), the Makefile's commands for LAB_ENGINES=2 and 3 (make -n), the doctor's
figures per engine host, and the groups scenario's files."""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("lab_engines", os.path.join(ROOT, "lab", "engines.py"))
engines = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(engines)


def _text(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as handle:
        return handle.read()


def _yaml(*path):
    return yaml.safe_load(_text(*path))


CONFIG = _yaml("extensions", "molecule", "config.yml")


def _by_name(platforms):
    return {p["name"]: p for p in platforms}


@pytest.mark.parametrize("ncpu, core", [(2, 0), (3, 2), (8, 2)])
def test_spark_c_is_spark_b_renamed_at_the_next_address_on_its_own_core(ncpu, core):
    platforms = engines.platforms(CONFIG, 3, ncpu)
    assert [p["name"] for p in platforms] == ["spark-a", "spark-b", "spark-c", "gateway"]
    b, c = _by_name(platforms)["spark-b"], _by_name(platforms)["spark-c"]
    assert c["ip"] == "10.89.7.12"
    assert c["volumes"][0] == "factory-floor-lab-docker-spark-c:/var/lib/docker"
    assert "--cpuset-cpus=%d" % core in c["extra_opts"]
    differ = {key for key in set(b) | set(c) if b.get(key) != c.get(key)}
    assert differ == {"name", "ip", "volumes", "extra_opts"}
    assert c["volumes"][1:] == b["volumes"][1:]
    assert [o for o in c["extra_opts"] if not o.startswith("--cpuset-cpus=")] == \
        [o for o in b["extra_opts"] if not o.startswith("--cpuset-cpus=")]
    # The platforms of config.yml are unchanged, and two engine hosts are config.yml's own.
    assert [p for p in platforms if p["name"] != "spark-c"] == CONFIG["platforms"]
    assert engines.platforms(CONFIG, 2, ncpu) == CONFIG["platforms"]


@pytest.mark.parametrize("count", [1, 4])
def test_other_engine_counts_are_refused(count):
    with pytest.raises(ValueError, match="2 to 3 engine hosts"):
        engines.platforms(CONFIG, count, 4)


def test_spark_c_address_is_outside_podmans_pool_and_free():
    network = _text("lab", "network.sh")
    subnet = ipaddress.ip_network(re.search(r"^SUBNET=(\S+)", network, re.M).group(1))
    pool = ipaddress.ip_network(re.search(r"^LAB_IP_RANGE=(\S+)", network, re.M).group(1))
    link = ipaddress.ip_network(re.search(r"^LINK_SUBNET=(\S+)", network, re.M).group(1))
    c = ipaddress.ip_address(_by_name(engines.platforms(CONFIG, 3, 4))["spark-c"]["ip"])
    taken = {ipaddress.ip_address(p["ip"]) for p in CONFIG["platforms"]}
    taken.add(ipaddress.ip_interface(_yaml("inventory", "lab-vip", "group_vars", "proxy.yml")
                                     ["keepalived_virtual_ipaddress"]).ip)
    assert c in subnet and c not in pool and c not in taken
    host_vars = _yaml("inventory", "lab-groups", "host_vars", "spark-c.yml")
    assert host_vars["ansible_host"] == str(c)
    links = {_yaml("inventory", "lab", "host_vars", h + ".yml")["vllm_link_address"] for h in ("spark-a", "spark-b")}
    assert ipaddress.ip_address(host_vars["vllm_link_address"]) in link
    assert host_vars["vllm_link_address"] not in links


@pytest.mark.parametrize("ncpu", [1, 2, 3, 4, 16])
def test_spark_c_worker_is_bound_to_the_core_its_container_has(ncpu):
    """inventory/lab-groups/host_vars/spark-c.yml and lab/engines.py state one rule twice: they must agree."""
    text = _yaml("inventory", "lab-groups", "host_vars", "spark-c.yml")["vllm_env_host"]["VLLM_CPU_OMP_THREADS_BIND"]
    env = jinja2.Environment()
    env.filters["int"] = int
    bound = env.from_string(text).render(lookup=lambda plugin, command: str(ncpu) if command == "nproc" else None)
    assert bound == str(engines.core_of(2, ncpu))


def test_the_lab_groups_inventory_parses_with_three_engine_hosts():
    tool = shutil.which("ansible-inventory") or os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
    done = subprocess.run([tool, "-i", os.path.join(ROOT, "inventory", "lab-groups"), "--list"],
                          capture_output=True, text=True, timeout=120, check=True, cwd=ROOT)
    inventory = json.loads(done.stdout)
    assert inventory["gb10"]["hosts"] == ["spark-a", "spark-b", "spark-c"]
    assert inventory["proxy"]["hosts"] == ["gateway"]
    hostvars = inventory["_meta"]["hostvars"]
    assert hostvars["spark-c"]["site_engine_groups"] == [["spark-a"], ["spark-b"], ["spark-c"]]
    # spark-a, spark-b and the gateway are inventory/lab's own hosts (links, one definition).
    for host in ("spark-a", "spark-b", "gateway"):
        assert os.path.realpath(os.path.join(ROOT, "inventory", "lab-groups", "host_vars", host + ".yml")) == \
            os.path.join(ROOT, "inventory", "lab", "host_vars", host + ".yml")
    assert hostvars["spark-c"]["vllm_split_model"] == hostvars["spark-a"]["vllm_split_model"]


# ------------------------------------------------------------------------------------------ the Makefile

def _make(*args):
    done = subprocess.run(["make", "-n"] + list(args), capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT, env=dict(os.environ, MAKEFLAGS=""))
    return done.returncode, done.stdout + done.stderr


needs_make = pytest.mark.skipif(not shutil.which("make"), reason="no make")
THREE = "molecule -c extensions/molecule/config.yml -c build/lab/molecule-engines-3.yml"


@needs_make
def test_lab_up_with_three_engine_hosts_creates_and_links_spark_c():
    rc, out = _make("lab-up", "LAB_ENGINES=3")
    assert rc == 0, out
    assert "lab/engines.py 3 > build/lab/molecule-engines-3.yml" in out
    assert THREE + " create -s default" in out
    assert '!= "gateway spark-a spark-b spark-c"' in out
    assert "LAB_ENGINES=3 bash lab/link.sh" in out


@needs_make
def test_lab_up_by_default_is_two_engine_hosts_as_before():
    rc, out = _make("lab-up")
    assert rc == 0, out
    assert re.search(r"^molecule create -s default$", out, re.M), out
    assert '!= "gateway spark-a spark-b"' in out
    # A spark-c left running differs from the two-host set: destroyed with every lab host there may be.
    assert THREE + " destroy -s default" in out


@needs_make
@pytest.mark.parametrize("engines", ["2", "3"])
def test_lab_down_removes_spark_c_whatever_the_count(engines):
    rc, out = _make("lab-down", "LAB_ENGINES=" + engines)
    assert rc == 0, out
    assert THREE + " destroy -s default" in out


@needs_make
def test_make_test_runs_the_switch_scenario_on_lab_hosts_the_default_scenario_makes():
    rc, out = _make("molecule")
    assert rc == 0, out
    lines = out.splitlines()
    run = [line for line in lines if " test --all" in line]
    assert len(run) == 1 and run[0].startswith("molecule test --all "), out
    for scenario in ("groups", "default", "metrics", "proxy", "replica"):
        assert "--exclude %s " % scenario in run[0] + " "
    assert "--exclude switch " not in run[0] + " "
    # Without the default scenario in the run, its create makes the lab hosts first.
    assert lines.index("molecule create -s default") < lines.index(run[0])
    rc, out = _make("molecule", "MOLECULE_SCENARIOS=default switch")
    assert rc == 0 and "create -s default" not in out, out


@needs_make
def test_the_groups_scenario_runs_with_three_engine_hosts_only():
    rc, out = _make("molecule", "MOLECULE_SCENARIOS=groups")
    assert rc != 0 and "scenario groups needs three engine hosts: add LAB_ENGINES=3" in out
    rc, out = _make("molecule", "MOLECULE_SCENARIOS=groups", "LAB_ENGINES=3")
    assert rc == 0, out
    run = [line for line in out.splitlines() if " test --all" in line][0]
    assert run.startswith(THREE + " test --all") and "--exclude groups" not in run and "--exclude proxy" in run
    rc, out = _make("molecule", "MOLECULE_SCENARIOS=all")
    assert rc == 0 and "--exclude groups" in out, out


@needs_make
def test_other_engine_counts_are_refused_by_make():
    rc, out = _make("lab-up", "LAB_ENGINES=4")
    assert rc != 0 and "LAB_ENGINES is 2 (spark-a, spark-b) or 3 (spark-c too), not '4'" in out


# ------------------------------------------------------------------------------------------ the doctor

@pytest.mark.parametrize("count, memory, volumes", [("2", "11.0 GiB needed", "volumes 15.0"),
                                                    ("3", "14.0 GiB needed", "volumes 22.5")])
def test_the_doctor_counts_each_engine_host(count, memory, volumes):
    done = subprocess.run(["bash", os.path.join(ROOT, "lab", "doctor.sh")], capture_output=True, text=True,
                          timeout=120, check=False, env=dict(os.environ, LAB_ENGINES=count, APT_PACKAGES=""))
    out = done.stdout + done.stderr
    assert memory in out, out
    assert volumes in out, out


def test_the_doctor_refuses_another_engine_count():
    done = subprocess.run(["bash", os.path.join(ROOT, "lab", "doctor.sh")], capture_output=True, text=True,
                          timeout=60, check=False, env=dict(os.environ, LAB_ENGINES="5"))
    assert done.returncode == 2 and "LAB_ENGINES is 2 or 3, not '5'" in done.stderr


# ------------------------------------------------------------------------------------------ the scenario

def test_link_sh_reads_spark_c_s_link_address_where_the_inventory_has_it():
    text = _text("lab", "link.sh")
    assert "inventory/lab-groups/host_vars/$host.yml" in text
    assert os.path.exists(os.path.join(ROOT, "inventory", "lab-groups", "host_vars", "spark-c.yml"))


def test_the_groups_scenario_uses_the_lab_groups_inventory_and_skips_the_moves_without_their_playbook():
    scenario = _yaml("extensions", "molecule", "groups", "molecule.yml")
    links = scenario["provisioner"]["inventory"]["links"]
    assert links == {"host_vars": "../../../inventory/lab-groups/host_vars/",
                     "group_vars": "../../../inventory/lab-groups/group_vars/"}
    plays = _yaml("extensions", "molecule", "groups", "verify_moves.yml")
    for play in plays[1:]:
        first = play["tasks"][0]
        assert first["ansible.builtin.meta"] == "end_play"
        assert first["when"] == "not hostvars['localhost']['groups_moves_available']"
    moves = [task for play in plays for task in play.get("tasks", []) if "ansible.builtin.include_tasks" in task]
    assert [m["vars"]["move_to"] for m in moves] == [[["spark-a", "spark-b"], ["spark-c"]]] * 2 + \
        [[["spark-a"], ["spark-b"], ["spark-c"]]]
    assert [m["vars"]["move_fails"] for m in moves] == [True, False, False]
