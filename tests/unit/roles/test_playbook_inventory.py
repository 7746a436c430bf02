# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every playbook refuses, first, an inventory without the hosts it runs on (2026-12-06, issue 33).

``ansible-playbook -i <a path that does not exist> playbooks/deploy.yml`` printed Ansible's
"Unable to parse ... as an inventory source" warnings, skipped every play ("skipping: no
hosts matched") and exited 0 having done nothing; an inventory with the hosts under other
group names than ``gb10`` did the same or failed somewhere later, after contacting hosts.
Each playbook under playbooks/ is run here by ansible-playbook for real: with a path that
does not exist and with an inventory that has a proxy host and no ``gb10`` group, it exits
non-zero with one line naming what to check, in its first play, having contacted no host
(every run sends each host, localhost too, to 127.0.0.1 port 1 over SSH, where a connection
is refused and reported UNREACHABLE - also what keeps a run of an older playbook, whose first
play was another, from reaching a host). The decision:
tests/unit/plugins/module_utils/test_inventory_groups.py.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PLAYBOOKS = sorted(os.path.basename(path) for path in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
FIRST_PLAY = "Inventory (reads the inventory only; contacts no host, changes nothing)"

# Where every host, whatever its inventory says, would be reached: nothing listens on port 1.
NOWHERE = ["-e", "ansible_connection=ssh", "-e", "ansible_host=127.0.0.1", "-e", "ansible_port=1"]
PROXY_ONLY = """\
all:
  children:
    proxy:
      hosts:
        gw:
"""
ENGINES_ONLY = PROXY_ONLY.replace("proxy:", "gb10:").replace("gw:", "spark-1:")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK) and not shutil.which("ansible-playbook"),
                                reason="ansible-playbook not installed next to this Python")


def _run(playbook, inventory, cwd, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    done = subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, playbook] + NOWHERE + list(args), cwd=str(cwd),
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each playbook with (a) an -i path that does not exist and (b) an inventory with only a proxy host, run at once."""
    work = tmp_path_factory.mktemp("inventories")
    (work / "proxy-only.yml").write_text(PROXY_ONLY)
    inventories = {"missing": str(work / "no-such-inventory"), "proxy_only": str(work / "proxy-only.yml")}
    jobs = {(name, case): (os.path.join(ROOT, "playbooks", name), inventory)
            for name in PLAYBOOKS for case, inventory in inventories.items()}
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(_run, playbook, inventory, work) for key, (playbook, inventory) in jobs.items()}
        return {"inventories": inventories, "results": {key: future.result() for key, future in futures.items()}}


def _refused_first(rc, output):
    assert rc != 0, output
    # The first play that ran is the check, and it ended the run: no other play started, no host was contacted.
    assert re.findall(r"^PLAY \[(.*?)\] \*", output, re.M) == [FIRST_PLAY], output
    assert "UNREACHABLE" not in output, output
    assert "skipping: no hosts matched" not in output, output


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_an_inventory_path_that_does_not_exist_is_refused(runs, name):
    rc, output = runs["results"][(name, "missing")]
    _refused_first(rc, output)
    missing = runs["inventories"]["missing"]
    for words in ("No inventory at %s: that path does not exist. Check the -i path" % missing,
                  "the GB10 machines listed under group 'gb10'", "inventory/example/hosts.yml", "Nothing has changed."):
        assert words in output, (words, output)


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_an_inventory_without_the_engine_group_is_refused(runs, name):
    rc, output = runs["results"][(name, "proxy_only")]
    _refused_first(rc, output)
    for words in ("The inventory describes a layout that cannot work (-i %s)" % runs["inventories"]["proxy_only"],
                  "Group 'gb10' is not in the inventory, so the proxy on gw (group 'proxy') has no replica",
                  "Check the -i path and the group name gb10, as in inventory/example/hosts.yml."):
        assert words in output, (words, output)


# What refuses --limit, --tags and --check runs too: the play is over localhost:all, tagged always, a read.
@pytest.mark.parametrize("name, args", [
    ("chat.yml", ["--limit", "gw"]),                  # the implicit localhost is outside the limit
    ("link-check.yml", ["--limit", "gw"]),            # whose plays are all on gb10: the limit used to skip them all
    ("deploy.yml", ["--tags", "proxy", "--check", "--diff"]),
    ("switch.yml", ["-e", "switch_to=replicas", "-e", "switch_dry_run=true"]),
])
def test_a_limit_tags_or_check_still_refuse(tmp_path, name, args):
    (tmp_path / "proxy-only.yml").write_text(PROXY_ONLY)
    rc, output = _run(os.path.join(ROOT, "playbooks", name), str(tmp_path / "proxy-only.yml"), tmp_path, *args)
    _refused_first(rc, output)
    assert "Group 'gb10' is not in the inventory" in output, output


def _first_play(name):
    """The first play a playbook runs, following import_playbook (the twins, the switches)."""
    path = os.path.join(ROOT, "playbooks", name)
    while True:
        with open(path, encoding="utf-8") as handle:
            first = yaml.safe_load(handle)[0]
        if "ansible.builtin.import_playbook" not in first:
            return first
        path = os.path.join(os.path.dirname(path), first["ansible.builtin.import_playbook"])


# The playbooks that run something on a proxy host or read it (the rest need the engine hosts only).
NEEDS_PROXY = {"deploy.yml", "switch.yml", "move-groups.yml", "switch-model.yml", "status.yml", "chat.yml", "prometheus-config.yml",
               "peers.yml", "metrics.yml", "workload-profile.yml", "workload-replay.yml", "advise-topology.yml"}


@pytest.mark.parametrize("name", ["deploy.yml", "metrics.yml", "model-sync.yml"])  # needs the proxy, or not
@pytest.mark.parametrize("inventory", ["example", "example-single", "lab", "lab-single", "lab-vip", "lab-groups", "engines-only"])
def test_a_site_inventory_passes_the_check(tmp_path, name, inventory):
    """The check alone (the playbook's first play), against the shipped inventories: a site's passes."""
    (tmp_path / "play.yml").write_text(yaml.safe_dump([_first_play(name)]))
    if inventory == "engines-only":
        (tmp_path / "engines-only.yml").write_text(ENGINES_ONLY)
        path = str(tmp_path / "engines-only.yml")
    else:
        path = os.path.join(ROOT, "inventory", inventory)
    rc, output = _run(str(tmp_path / "play.yml"), path, tmp_path, "--check")
    refused = inventory == "engines-only" and name in NEEDS_PROXY
    assert (rc != 0) is refused, output
    assert ("Group 'proxy' is not in the inventory" in output) is refused, output
    assert "UNREACHABLE" not in output, output


def test_metrics_from_another_host_needs_no_proxy(tmp_path):
    (tmp_path / "play.yml").write_text(yaml.safe_dump([_first_play("metrics.yml")]))
    (tmp_path / "engines-only.yml").write_text(ENGINES_ONLY)
    rc, output = _run(str(tmp_path / "play.yml"), str(tmp_path / "engines-only.yml"), tmp_path,
                      "-e", "metrics_from=spark-1")
    assert rc == 0, output


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_the_check_is_the_first_play_and_always_runs(name):
    play = _first_play(name)
    assert play["name"] == FIRST_PLAY
    assert play["hosts"] == "localhost:all" and play["gather_facts"] is False
    [task] = play["tasks"]
    include = task["ansible.builtin.include_role"]
    assert (include["name"], include["tasks_from"]) == ("factory_floor.llm.site", "inventory")
    assert task["tags"] == ["always"] and include["apply"]["tags"] == ["always"]
    base = name.replace("_", "-")
    if base.startswith("switch-to-"):
        base = "switch.yml"
    expected = {"metrics.yml": "{{ metrics_from is not defined }}"}.get(base, base in NEEDS_PROXY)
    assert task["vars"]["site_inventory_proxy"] == expected
