# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""deploy.yml's rolling restart: who carries the load while a replica restarts, refuse or go, and the sentences.

One row per outcome, the sentences as the operator reads them (they read as when the rule was Jinja in
roles/vllm_replica/tasks/rolling_restart.yml). Under ``--check`` nothing was written, so no sentence may say it
was (issue 35).
"""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _restart_plan as rp

ENGINES = ("spark-a", "spark-b")
CHANGE = "was --max-num-seqs 8, now --max-num-seqs 12"
CHECKOUT = "/src/ff/playbooks"
IN_ROTATION = [{"in_rotation": ["spark-a", "spark-b"]}]
B_SERVES = [{"item": "spark-b", "status": "serving"}]


def plan(status="serving", peers=(), rotations=(), engines=ENGINES, startup=None, force=False, check_mode=False):
    return rp.restart_plan("spark-a", list(engines), status, list(peers), list(rotations), startup, CHANGE, force, check_mode,
                           CHECKOUT)


def test_go_another_replica_serves_and_is_in_rotation():
    found = plan(peers=B_SERVES, rotations=IN_ROTATION)
    assert (found["serving"], found["carriers"], found["refusal"], found["forced"]) == (True, ["spark-b"], "", "")
    assert found["announcement"] == (
        "Restarting spark-a for its new configuration (%s): spark-b serves meanwhile; it leaves the proxy first and its "
        "in-flight requests finish." % CHANGE)


def test_go_two_carriers_serve_and_check_mode_says_would():
    found = plan(peers=B_SERVES + [{"item": "spark-c", "status": "serving"}], engines=ENGINES + ("spark-c",),
                 rotations=[{"in_rotation": ["spark-b", "spark-c"]}, {"in_rotation": ["spark-c", "spark-b"]}],
                 check_mode=True)
    assert found["carriers"] == ["spark-b", "spark-c"] and found["refusal"] == ""
    assert found["announcement"].startswith("Would restart spark-a for its new configuration (%s): spark-b, spark-c "
                                            "serve meanwhile;" % CHANGE)


def test_go_it_does_not_serve_so_nobody_loses_anything():
    found = plan(status="loading")
    assert (found["serving"], found["carriers"], found["refusal"], found["forced"]) == (False, [], "", "")
    assert found["announcement"] == ("Restarting spark-a for its new configuration (%s): it does not serve now "
                                     "(loading), so nobody loses anything." % CHANGE)


def test_go_without_a_proxy_host_every_serving_peer_carries():
    # No proxy host to ask: nobody's rotation leaves a serving peer out (as the Jinja rule read it).
    assert plan(peers=B_SERVES, rotations=[])["carriers"] == ["spark-b"]


@pytest.mark.parametrize("check, keeps", [
    (True, "spark-a keeps its old configuration and serves; --check wrote nothing: a real run would write its new "
           "unit, leave it serving on the old one and stop here."),
    (False, "spark-a keeps its old configuration and serves (its new unit is in place)."),
])
def test_refuse_the_other_replica_serves_but_is_not_in_rotation(check, keeps):
    found = plan(peers=B_SERVES, rotations=[{"in_rotation": ["spark-a"]}], check_mode=check)
    assert found["carriers"] == [] and found["forced"] == ""
    assert found["refusal"] == (
        "Not restarting spark-a for its new configuration (%s): it serves, and no other replica both serves and is in "
        "the proxy's rotation to carry the load meanwhile (spark-b: serving, not in rotation). Restarting it now would "
        "leave clients without a model (503) for one start-up (5 to 13 min on GB10). Bring the other replica back first "
        "(journalctl -u vllm-replica.service on it; the proxy's view is in /run/factory-floor/upstream.json on the proxy "
        "host), then run playbooks/deploy.yml again. %s To restart it now anyway, accepting the outage: "
        "playbooks/deploy.yml -e vllm_restart_force=true." % (CHANGE, keeps))
    assert ("in place" in found["refusal"]) is not check


def test_refuse_a_proxy_host_that_read_nothing_has_nobody_in_rotation():
    found = plan(peers=B_SERVES, rotations=IN_ROTATION + [{}])
    assert found["carriers"] == [] and found["refusal"].startswith("Not restarting spark-a")


@pytest.mark.parametrize("peer, said", [
    ({"item": "spark-b", "status": "loading"}, "spark-b: loading"),
    ({"item": "spark-b", "status": "failed", "error": "connection refused"}, "spark-b: failed (connection refused)"),
    ({"item": "spark-b", "unreachable": True, "msg": "ssh: connect to host"}, "spark-b: host unreachable"),
    ({"item": "spark-b", "msg": "x " * 100}, "spark-b: not probed: " + ("x " * 58).rstrip() + "..."),
    ({"item": "spark-b", "status": "failed", "error": "e " * 100}, "spark-b: failed (" + ("e " * 78).rstrip() + "...)"),
])
def test_refuse_naming_each_other_replica_as_it_was_seen(peer, said):
    found = plan(peers=[peer], rotations=IN_ROTATION)
    assert "to carry the load meanwhile (%s). Restarting" % said in found["refusal"]


def test_refuse_the_only_replica_with_the_start_up_measured_here():
    found = plan(engines=["spark-a"], startup={"replicas": 31.0})
    assert found["refusal"] == (
        "Not restarting spark-a for its new configuration (%s): it is the only replica and it serves, so restarting it "
        "is an outage by nature: clients get 503 with Retry-After from the proxy for one start-up (about 0.5 min, last "
        "measured here). spark-a keeps its old configuration and serves (its new unit is in place). To restart it now "
        "anyway, accepting the outage: playbooks/deploy.yml -e vllm_restart_force=true." % CHANGE)


def test_forced_go_says_so_first():
    found = plan(peers=[{"item": "spark-b", "status": "loading"}], force=True, startup={"replicas": "600"})
    assert (found["refusal"], found["carriers"]) == ("", [])
    assert found["forced"] == ("Restarting spark-a although no other replica serves and is in the proxy's rotation "
                               "(vllm_restart_force): clients get 503 with Retry-After from the proxy for one start-up "
                               "(about 10.0 min, last measured here).")
    assert found["announcement"] == "Restarting spark-a for its new configuration (%s): forced, see above." % CHANGE


def test_the_installed_collection_names_its_playbook():
    found = rp.restart_plan("spark-a", ["spark-a"], "serving", playbook_dir="/x/ansible_collections/factory_floor/llm/playbooks")
    assert found["refusal"].endswith("accepting the outage: factory_floor.llm.deploy -e vllm_restart_force=true.")


@pytest.mark.parametrize("startup, words", [
    (None, "5 to 13 min on GB10"),
    ({}, "5 to 13 min on GB10"),
    ({"split": 400}, "5 to 13 min on GB10"),
    ({"replicas": 93.5}, "about 1.6 min, last measured here"),
    ({"replicas": None}, "about 0.0 min, last measured here"),
])
def test_startup_words(startup, words):
    assert rp.startup_words(startup) == words


@pytest.mark.parametrize("text, length", [("x " * 100, 120), ("e " * 100, 160), ("a" * 200, 120), ("word " * 30 + "z", 150),
                                          ("short", 120)])
def test_truncate_is_jinjas(text, length):
    jinja2 = pytest.importorskip("jinja2")
    assert rp.truncate(text, length) == jinja2.Environment().from_string("{{ t | truncate(n) }}").render(t=text, n=length)


# --- deploy.yml's announcement of the rolling restart (site_deploy's deploy_preflight; issue 36) -------------------

def test_the_deploy_announcement_names_each_changed_replica_and_the_others():
    assert rp.deploy_announcement(["spark-a", "spark-b", "spark-c"], [("spark-b", "--max-num-seqs 8 -> 16")]) == (
        "Configuration changed on spark-b (--max-num-seqs 8 -> 16). Restarted after the other engines are in place, one "
        "host at a time; one that serves only while another replica serves and is in the proxy's rotation, after leaving "
        "the proxy and finishing its requests. Not restarted (unchanged, or not running yet): spark-a, spark-c.")
    forced = rp.deploy_announcement(["spark-a", "spark-b"], [("spark-a", "image"), ("spark-b", "image")], force=True)
    assert forced.startswith("Configuration changed on spark-a (image), spark-b (image). ")
    assert "in the proxy's rotation (or forced: vllm_restart_force), after" in forced
    assert forced.endswith("Not restarted (unchanged, or not running yet): none.")
    assert rp.deploy_announcement(["spark-a"], []) == ""
