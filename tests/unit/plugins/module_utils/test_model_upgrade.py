# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The model upgrade's checks (plugins/module_utils/_model_upgrade.py): one test per outcome and refusal, each
refusal in the words the role's assert said before."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.factory_floor.llm.plugins.filter.model_upgrade_startup import FilterModule as StartupFilters
from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_upgrade as mu

UNIT = "vllm-replica.service"
OLD_ID, NEW_ID, OTHER_ID = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64
REQUEST = dict(model_upgrade_model="/models/new", model_upgrade_image="", model_upgrade_allow_outage=False,
               topology="replicas", engines=["spark-a", "spark-b"], proxies=["gw"], vllm_runtime="container",
               inventory_hostname="spark-a", playbook_dir="/src/playbooks", vllm_model="/models/old",
               vllm_tool_call_parser="hermes", vllm_chat_template="", model_upgrade_tool_call_parser="hermes",
               model_upgrade_chat_template="/t.jinja")
LAYOUT = ("A rolling upgrade needs switch_model (the new model directory, given '%s') or switch_image (the new vLLM "
          "image, given '%s'), the replicas topology (topology is '%s') and at least two replicas in group gb10 (%d) "
          "behind a proxy (%d), so that one serves while the other restarts. On one machine add -e "
          "switch_model_allow_outage=true: the model is then down for one start-up plus the tool-calling test (clients "
          "get 503), still gated and rolled back when rejected. On split the model must stop to change: set "
          "vllm_split_model and run playbooks/switch-to-split.yml, or switch to replicas first.")


def test_a_request_with_two_replicas_behind_a_proxy_goes():
    assert mu.request_errors(REQUEST) == []


@pytest.mark.parametrize("change, words", [
    ({"model_upgrade_model": ""}, ("", "", "replicas", 2, 1)),
    ({"topology": "split"}, ("/models/new", "", "split", 2, 1)),
    ({"engines": ["spark-a"]}, ("/models/new", "", "replicas", 1, 1)),
    ({"proxies": []}, ("/models/new", "", "replicas", 2, 0)),
])
def test_a_request_or_layout_that_cannot_roll_is_refused(change, words):
    assert mu.request_errors(dict(REQUEST, **change)) == [LAYOUT % words]


@pytest.mark.parametrize("allow", [True, "true", "yes"])
def test_one_replica_goes_with_the_outage_allowed(allow):
    assert mu.request_errors(dict(REQUEST, engines=["spark-a"], model_upgrade_allow_outage=allow)) == []


def test_a_new_image_without_the_container_runtime_is_refused_on_an_engine_host_only():
    request = dict(REQUEST, model_upgrade_model="", model_upgrade_image="vllm:v2", vllm_runtime="venv")
    assert mu.request_errors(request) == [
        "switch_image=vllm:v2 needs the container runtime; spark-a has vllm_runtime: venv (a virtualenv: upgrade vLLM "
        "there, or switch to vllm_runtime: container with playbooks/deploy.yml first)."]
    assert mu.request_errors(dict(request, inventory_hostname="gw")) == []


def test_the_settings_are_the_candidates_and_the_inventorys():
    assert mu.settings(REQUEST) == {
        "candidate": {"model": "/models/new", "tool_call_parser": "hermes", "chat_template": "/t.jinja"},
        "old": {"model": "/models/old", "tool_call_parser": "hermes", "chat_template": ""}}
    # No new model: the candidate is the inventory's model (a new image only).
    assert mu.settings(dict(REQUEST, model_upgrade_model=""))["candidate"]["model"] == "/models/old"


def _check(ref, image_id, running_image, running_id):
    return {"image": {"ref": ref, "id": image_id},
            "running": {UNIT: {"image": running_image, "image_id": running_id}}}


OLD = _check("vllm:v1", OLD_ID, "vllm:v1", OLD_ID)
NEW = _check("vllm:v2", NEW_ID, "vllm:v1", OLD_ID)
SERVING = {"status": "serving", "model_roots": {"qwen": "/models/old"}}
SEEN = dict(inventory_hostname="spark-a", vllm_model="/models/old", vllm_served_model_name="qwen",
            url="http://127.0.0.1:8000", playbook_dir="/src/playbooks")


def test_the_replica_notes_what_it_serves_and_runs_and_both_images():
    state = mu.replica(mu.settings(REQUEST), OLD, NEW, SERVING, "qwen", UNIT)
    assert state["running"] == "/models/old" and state["running_image"] == OLD_ID
    assert (state["candidate"]["image"], state["candidate"]["image_id"]) == ("vllm:v2", NEW_ID)
    assert (state["old"]["image"], state["old"]["image_id"]) == ("vllm:v1", OLD_ID)
    assert mu.replica_errors(SEEN, state, OLD, SERVING, UNIT) == []


def test_the_venv_runtime_has_no_images():
    state = mu.replica(mu.settings(REQUEST), {}, {}, SERVING, "qwen", UNIT)
    assert state["running_image"] == "" and state["candidate"]["image_id"] == "" and state["old"]["image"] == ""
    assert mu.replica_errors(SEEN, state, {}, SERVING, UNIT) == []


def test_a_replica_that_serves_another_model_is_refused():
    models = {"status": "serving", "model_roots": {"qwen": "/models/third"}}
    state = mu.replica(mu.settings(REQUEST), OLD, OLD, models, "qwen", UNIT)
    assert mu.replica_errors(SEEN, state, OLD, models, UNIT) == [
        "spark-a serves /models/third; expected the inventory's vllm_model (/models/old) or switch_model (/models/new). "
        "Both replicas must serve before a rolling upgrade (playbooks/deploy.yml brings them up), and vllm_model must "
        "be what runs now: a failed replica gets vllm_model back."]


@pytest.mark.parametrize("models, why", [
    ({"status": "unreachable", "error": "connection refused"}, "connection refused"),
    ({"status": "failed", "error": "", "msg": "timed out"}, "timed out"),
    ({}, "no answer"),
])
def test_a_replica_that_does_not_serve_is_refused_saying_why(models, why):
    state = mu.replica(mu.settings(REQUEST), OLD, OLD, models, "qwen", UNIT)
    (error,) = mu.replica_errors(SEEN, state, OLD, models, UNIT)
    assert error.startswith("spark-a does not serve qwen on port 8000 (%s); expected" % why)


def test_a_container_of_another_build_under_the_inventorys_name_is_refused_naming_its_id():
    running = _check("vllm:v1", OLD_ID, "vllm:v1", OTHER_ID)
    state = mu.replica(mu.settings(REQUEST), running, running, SERVING, "qwen", UNIT)
    assert mu.replica_errors(SEEN, state, running, SERVING, UNIT) == [
        "spark-a's vllm-replica container runs the image vllm:v1 (%s); expected the inventory's vllm_container_image "
        "(vllm:v1, %s) or switch_image (vllm:v1, %s). vllm_container_image must be what runs now: a failed replica "
        "gets it back. Set it to what runs (%s: the name it ran with names another build now, so its ID), then run "
        "again." % (OTHER_ID, OLD_ID, OLD_ID, OTHER_ID)]


def test_a_container_of_another_image_name_is_refused_naming_that_name():
    running = _check("vllm:v1", OLD_ID, "vllm:v0", OTHER_ID)
    new = _check("vllm:v2", "", "vllm:v0", OTHER_ID)
    state = mu.replica(mu.settings(REQUEST), running, new, SERVING, "qwen", UNIT)
    (error,) = mu.replica_errors(SEEN, state, running, SERVING, UNIT)
    assert "or switch_image (vllm:v2, not on the host yet)" in error
    assert error.endswith("Set it to what runs (vllm:v0: the name it ran with still names it), then run again.")


ROOTS = {"status": "serving", "model_roots": {"qwen": "/models/new"}}
ON_HOST = {"image": {"id": NEW_ID}, "containers": {"vllm-replica": {"image": "vllm:v2", "image_id": NEW_ID}}}


def test_a_restarted_replica_that_serves_the_build_passes():
    assert mu.served_errors("spark-a", {"model": "/models/new", "image": "vllm:v2"}, ROOTS, ON_HOST,
                            "the restart") == []
    assert mu.served_errors("spark-a", {"model": "/models/new", "image": "vllm:v2", "image_id": NEW_ID}, ROOTS,
                            {"containers": ON_HOST["containers"]}, "the restore") == []
    # The venv runtime: no image, no container read.
    assert mu.served_errors("spark-a", {"model": "/models/new", "image": ""}, ROOTS, {"skipped": True},
                            "the restart") == []


def test_a_restarted_replica_that_serves_another_model_is_refused():
    assert mu.served_errors("spark-a", {"model": "/models/old"}, ROOTS, {}, "the restore") == [
        'spark-a serves ["/models/new"] after the restore, not /models/old']


def test_a_restarted_replica_in_another_image_is_refused():
    seen = {"image": {"id": NEW_ID}, "containers": {"vllm-replica": {"image": "vllm:v1", "image_id": OLD_ID}}}
    assert mu.served_errors("spark-a", {"model": "/models/new", "image": "vllm:v2"}, ROOTS, seen, "the restart") == [
        "spark-a's vllm-replica container runs vllm:v1 (%s) after the restart, not vllm:v2 (%s)" % (OLD_ID, NEW_ID)]
    gone = {"image": {"id": NEW_ID}, "containers": {}}
    assert mu.served_errors("spark-a", {"model": "/models/new", "image": "vllm:v2"}, ROOTS, gone, "the restart") == [
        "spark-a's vllm-replica container runs nothing (no container) after the restart, not vllm:v2 (%s)" % NEW_ID]


def test_a_restored_replica_in_another_image_is_refused():
    build = {"model": "/models/new", "image": "vllm:v1", "image_id": OLD_ID}
    assert mu.served_errors("spark-a", build, ROOTS, ON_HOST, "the restore") == [
        "spark-a's vllm-replica container runs %s after the restore, not vllm:v1 (%s)" % (NEW_ID, OLD_ID)]
    assert mu.served_errors("spark-a", build, ROOTS, {"containers": {}}, "the restore") == [
        "spark-a's vllm-replica container runs nothing after the restore, not vllm:v1 (%s)" % OLD_ID]


# ------------------------------------------------------------------ what a failure notes (the maintenance_note action)

def _note(kind, host, failed=None, noted=None, restored=None):
    """As the maintenance_note action notes it on ``host`` (failure ``kind``, or a restore's outcome)."""
    return mw.host_note(noted or {}, host, failure=kind, failed=failed, restored=restored)


def test_a_failed_upgrade_notes_the_failed_tasks_message_or_the_gates():
    note = mu.failed_note("spark-a", {"msg": "timed out"}, {}, 12.5)
    assert note == {"failed": True, "gate": {}, "events": {"failed": 12.5}, "reason": "spark-a: timed out"}
    gate = {"passed": False, "message": "score 0.4 below 0.9"}
    assert mu.failed_note("spark-a", {"msg": "x"}, gate, 1)["reason"] == "spark-a: score 0.4 below 0.9"
    assert mu.failed_note("spark-a", {}, {"passed": True}, 1)["reason"] == "spark-a: upgrade failed"
    assert len(mu.failed_note("spark-a", {"msg": "word " * 400}, {}, 1)["reason"]) <= len("spark-a: ") + 900
    assert _note("upgrade", "spark-a", {"msg": "boom"})["reason"] == "spark-a: boom"


def test_a_rollback_that_could_not_start_notes_why_after_what_was_noted():
    assert mu.rollback_failed_note("spark-a", {"msg": "lock held"}, {"reason": "spark-b: gate."}) == {
        "restore_failed": True, "reason": "spark-b: gate. rollback of spark-a failed: lock held"}
    assert _note("upgrade_rollback", "spark-a", {}, noted={})["reason"] == " rollback of spark-a failed: "


def test_a_restore_notes_when_the_old_build_served_or_why_it_could_not():
    assert mu.restore_note("spark-a", {"ok": True, "at": 9.0, "msg": ""}, {}) == {"events": {"restored": 9.0}}
    assert mu.restore_note("spark-a", {"ok": False, "at": 0, "msg": "no start"}, {"reason": "spark-a: gate."}) == {
        "restore_failed": True, "reason": "spark-a: gate. Putting the old model back on spark-a failed: no start"}
    assert _note(None, "spark-a", noted={}, restored={"ok": False, "msg": "x"})["reason"] == (
        "spark-a: Putting the old model back on spark-a failed: x")


def test_an_unknown_failure_is_an_error():
    with pytest.raises(ValueError, match="failure must be one of"):
        _note("done", "spark-a")


@pytest.mark.parametrize("noted, record", [
    ({"upgraded": True, "events": {"drained": 100.0, "serving": 412.34}}, {"replicas": 312.3}),
    ({"upgraded": True, "events": {"drained": "100", "serving": "160.06"}}, {"replicas": 60.1}),
    ({"upgraded": False, "events": {"drained": 100.0, "serving": 412.0}}, {}),
    ({"events": {"drained": 100.0, "serving": 412.0}}, {}),
    ({"upgraded": True, "events": {"drained": 100.0}}, {}),
    ({"upgraded": True, "events": {"serving": 412.0}}, {}),
    ({}, {}),
    (None, {}),
], ids=["upgraded", "as-text", "not-upgraded", "no-upgraded-note", "no-serving", "no-drained", "nothing", "none"])
def test_the_measured_start_up_is_recorded_only_for_an_upgraded_replica(noted, record):
    assert mu.measured_startup(noted) == record


def test_the_startup_filter_names_what_it_expects():
    startup = StartupFilters().filters()["model_upgrade_startup"]
    assert startup({"upgraded": True, "events": {"drained": 1.0, "serving": 2.0}}) == {"replicas": 1.0}
    with pytest.raises(AnsibleFilterError, match="expects maintenance_window_host"):
        startup({"upgraded": True, "events": {"drained": "soon", "serving": 2.0}})
