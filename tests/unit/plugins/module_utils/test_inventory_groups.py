# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether the inventory has the hosts a playbook runs on, and the one line when not (``_inventory_groups``).

The playbooks run it first (tests/unit/roles/test_playbook_inventory.py runs them): a mistyped
``-i`` used to skip every play and exit 0.
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils._inventory_groups import check_inventory
from ansible_collections.factory_floor.llm.plugins.module_utils._layout import check_layout

SITE = {"all": ["spark-1", "spark-2"], "ungrouped": [], "gb10": ["spark-1", "spark-2"], "proxy": ["spark-1"]}
NOTHING = {"all": [], "ungrouped": []}
PROXY_ONLY = {"all": ["gw"], "ungrouped": [], "proxy": ["gw"]}
ENGINES_ONLY = {"all": ["spark-1"], "ungrouped": [], "gb10": ["spark-1"]}


@pytest.mark.parametrize("groups, proxy", [(SITE, True), (SITE, False), (ENGINES_ONLY, False)])
def test_an_inventory_with_the_hosts_passes(groups, proxy):
    assert check_inventory(groups, ["/srv/inventory/site"], ["/srv/inventory/site"], proxy=proxy) == {
        "ok": True, "missing": [], "message": ""}


@pytest.mark.parametrize("sources, existing, proxy, words", [
    # A mistyped -i: Ansible warns and goes on with an empty inventory.
    (["/srv/inventory/stie"], [], True,
     ["No inventory at /srv/inventory/stie: that path does not exist.", "Check the -i path",
      "group 'gb10' and the proxy host(s) listed under group 'proxy'", "inventory/example/hosts.yml",
      "Nothing has changed."]),
    (["/a", "/b"], [], False, ["No inventory at /a, /b: none of those paths exists.", "group 'gb10', as in"]),
    # There, but nothing Ansible could read in it (a YAML error, an empty file).
    (["/srv/inventory/site"], ["/srv/inventory/site"], True,
     ["The inventory /srv/inventory/site lists no host (Ansible's warnings above", "Check the -i path"]),
    # A host list that lists nothing is not a missing path.
    ([","], [], False, ["The inventory , lists no host"]),
])
def test_no_host_at_all_names_the_path_and_what_to_check(sources, existing, proxy, words):
    result = check_inventory(NOTHING, sources, existing, proxy=proxy)
    assert not result["ok"]
    assert result["missing"] == (["gb10", "proxy"] if proxy else ["gb10"])
    for word in words:
        assert word in result["message"], (word, result["message"])
    assert "\n" not in result["message"]
    if not proxy:
        assert "'proxy'" not in result["message"]


@pytest.mark.parametrize("groups, proxy, missing, words", [
    (PROXY_ONLY, True, ["gb10"],
     ["The inventory describes a layout that cannot work (-i /srv/inv): Group 'gb10' is not in the inventory, so the "
      "proxy on gw (group 'proxy') has no replica", "Check the -i path and the group name gb10, as in "
      "inventory/example/hosts.yml. Nothing has changed."]),
    (PROXY_ONLY, False, ["gb10"], ["Group 'gb10' is not in the inventory", "group name gb10,"]),
    (dict(PROXY_ONLY, gb10=[]), True, ["gb10"], ["Group 'gb10' has no hosts, so the proxy on gw"]),
    (ENGINES_ONLY, True, ["proxy"], ["Group 'proxy' is not in the inventory: every client goes through the proxy",
                                     "the group name proxy,"]),
    ({"all": ["web"], "ungrouped": ["web"]}, True, ["gb10", "proxy"],
     ["Group 'gb10' is not in the inventory: list the GB10 machine(s) under gb10", "Group 'proxy' is not in",
      "the group names gb10 and proxy,"]),
])
def test_hosts_without_the_groups_name_each_group(groups, proxy, missing, words):
    result = check_inventory(groups, ["/srv/inv"], ["/srv/inv"], proxy=proxy)
    assert not result["ok"] and result["missing"] == missing
    for word in words:
        assert word in result["message"], (word, result["message"])


def test_the_group_sentences_are_the_layout_checks():
    """One wording for one mistake, whichever check sees it first (the lab's impossible layouts look for it)."""
    layout = {e["check"]: e["message"] for e in check_layout("replicas", {"proxy": ["gw"]}, {"gw": {}})["errors"]}
    assert layout["no_engines"] in check_inventory(PROXY_ONLY, ["/i"], ["/i"])["message"]
    layout = {e["check"]: e["message"] for e in check_layout("replicas", {"gb10": ["spark-1"]}, {"spark-1": {}})["errors"]}
    assert layout["no_proxy"] in check_inventory(ENGINES_ONLY, ["/i"], ["/i"])["message"]
