# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The model upgrade's checks (the ``model_upgrade`` role, ``playbooks/switch_model.yml``): the request and the
layout, what each replica serves and runs before the upgrade, and what a restarted replica serves after it.

Pure functions over plain data: the variables as the task sees them (``request``, ``replica``) and the results the
role registered on the host (``vllm_health`` with ``probe: models``, ``container_image_info``, the ``vllm`` role's
``vllm_image_check``). Each refusal is the message the role's ``assert`` said before, in the same words.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils._playbook_name import playbook_name

# The container the vllm_replica role runs the engine in (the role's _model_upgrade_container).
CONTAINER = "vllm-replica"


def _truthy(value):
    """Ansible's ``bool`` filter on a variable: true, "true", "yes", "1", "on" (any case)."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on", "y", "t")


def request_errors(v):
    """The refusals of the request and the layout, the first that applies (``[]`` when it may go). ``v``: the
    variables (model_upgrade_model, model_upgrade_image, model_upgrade_allow_outage, topology, engines, proxies,
    engine, vllm_runtime, inventory_hostname, playbook_dir)."""
    engines, proxies = list(v.get("engines") or []), list(v.get("proxies") or [])
    model, image, topology = v.get("model_upgrade_model") or "", v.get("model_upgrade_image") or "", v.get("topology") or ""
    if not ((model or image) and topology == "replicas"
            and (len(engines) >= 2 or _truthy(v.get("model_upgrade_allow_outage", False))) and proxies):
        return [
            "A rolling upgrade needs switch_model (the new model directory, given '%s') or switch_image (the new vLLM "
            "image, given '%s'), the replicas topology (topology is '%s') and at least two replicas in group gb10 (%d) "
            "behind a proxy (%d), so that one serves while the other restarts. On one machine add -e "
            "switch_model_allow_outage=true: the model is then down for one start-up plus the tool-calling test (clients "
            "get 503), still gated and rolled back when rejected. On split the model must stop to change: set "
            "vllm_split_model and run %s, or switch to replicas first."
            % (model, image, topology, len(engines), len(proxies),
               playbook_name("switch-to-split.yml", v.get("playbook_dir")))]
    runtime = v.get("vllm_runtime") or "container"
    if v.get("inventory_hostname") in engines and image and runtime != "container":
        return ["switch_image=%s needs the container runtime; %s has vllm_runtime: %s (a virtualenv: upgrade vLLM "
                "there, or switch to vllm_runtime: container with %s first)."
                % (image, v.get("inventory_hostname"), runtime, playbook_name("deploy.yml", v.get("playbook_dir")))]
    return []


def settings(v):
    """The candidate's settings and the old build's (what a failed replica gets back): ``{candidate, old}``, each
    ``{model, tool_call_parser, chat_template}``; images are added by :func:`replica`."""
    return {
        "candidate": {"model": v.get("model_upgrade_model") or v.get("vllm_model") or "",
                      "tool_call_parser": v.get("model_upgrade_tool_call_parser") or "",
                      "chat_template": v.get("model_upgrade_chat_template") or ""},
        "old": {"model": v.get("vllm_model") or "", "tool_call_parser": v.get("vllm_tool_call_parser") or "",
                "chat_template": v.get("vllm_chat_template") or ""},
    }


def _image(check):
    return ((check or {}).get("image") or {}) if isinstance(check, dict) else {}


def _running(check, unit):
    return ((check or {}).get("running") or {}).get(unit) or {}


def serving_model(models, served_name):
    """The model directory the replica serves as ``served_name`` (``models``: vllm_health's ``probe: models``
    result; vLLM lists the directory it loaded as the model's root); "" when it does not serve, or not that name."""
    models = models or {}
    return ((models.get("model_roots") or {}).get(served_name) or "") if models.get("status") == "serving" else ""


def replica(base, old_check, new_check, models, served_name, unit):
    """``base`` (:func:`settings`) with what this replica runs: ``running`` (the model directory its vLLM lists as
    root, "" when it does not serve), ``running_image`` (its container's image ID, "" with the venv runtime), and
    the images of the candidate (``new_check``, the image check of switch_image, else the inventory's) and of the
    old build (``old_check``, the inventory's image check)."""
    models = models or {}
    out = {"candidate": dict(base.get("candidate") or {}), "old": dict(base.get("old") or {})}
    out["running_image"] = _running(old_check, unit).get("image_id") or ""
    new = _image(new_check)
    out["candidate"].update(image=new.get("ref") or "", image_id=new.get("id") or "")
    old = _image(old_check)
    out["old"].update(image=old.get("ref") or "", image_id=old.get("id") or "")
    out["running"] = serving_model(models, served_name)
    return out


def replica_errors(v, state, old_check, models, unit):
    """The refusals of what this replica serves and runs (``state``: :func:`replica`), the first that applies.
    ``v``: inventory_hostname, vllm_model, vllm_served_model_name, url (its endpoint), playbook_dir."""
    host, models = v.get("inventory_hostname"), models or {}
    running, candidate, old = state["running"], state["candidate"], state["old"]
    deploy = playbook_name("deploy.yml", v.get("playbook_dir"))
    if running not in (v.get("vllm_model"), candidate["model"]):
        if running:
            serves = "serves " + running
        else:
            serves = "does not serve %s on port %s (%s)" % (
                v.get("vllm_served_model_name"), str(v.get("url") or "").rsplit(":", 1)[-1],
                models.get("error") or models.get("msg", "no answer"))
        return ["%s %s; expected the inventory's vllm_model (%s) or switch_model (%s). Both replicas must serve before "
                "a rolling upgrade (%s brings them up), and vllm_model must be what runs now: a failed replica gets "
                "vllm_model back." % (host, serves, v.get("vllm_model"), candidate["model"], deploy)]
    image_id = state["running_image"]
    if image_id and image_id not in (old["image_id"], candidate["image_id"]):
        ran = _running(old_check, unit).get("image") or ""
        same = ran == old["image"]
        return ["%s's %s container runs the image %s (%s); expected the inventory's vllm_container_image (%s, %s) or "
                "switch_image (%s, %s). vllm_container_image must be what runs now: a failed replica gets it back. "
                "Set it to what runs (%s: the name it ran with %s), then run again."
                % (host, CONTAINER, ran, image_id, old["image"], old["image_id"], candidate["image"],
                   candidate["image_id"] or "not on the host yet", image_id if same else ran,
                   "names another build now, so its ID" if same else "still names it")]
    return []


def _json_list(values):
    """Ansible's ``to_json`` of a list of strings."""
    return "[%s]" % ", ".join('"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"') for value in values)


def served_errors(host, build, models, container, after):
    """The refusals of a replica restarted with ``build`` ``after`` ("the restart" with the candidate, "the restore"
    of the old build): it must serve ``build["model"]`` (``models``, vllm_health's result) and its container run
    ``build["image_id"]`` when given (the restore: the ID noted before the upgrade), else the ID ``build["image"]``
    has on the host now when that is given (the upgrade: a start may just have pulled it; ``container``,
    container_image_info's result)."""
    roots = list(((models or {}).get("model_roots") or {}).values())
    if build.get("model") not in roots:
        return ["%s serves %s after %s, not %s" % (host, _json_list(roots), after, build.get("model"))]
    container = container or {}
    seen = (container.get("containers") or {}).get(CONTAINER) or {}
    if build.get("image_id"):
        if seen.get("image_id") != build["image_id"]:
            return ["%s's %s container runs %s after %s, not %s (%s)"
                    % (host, CONTAINER, seen.get("image_id") or "nothing", after, build.get("image"), build["image_id"])]
    elif build.get("image"):
        expected = (container.get("image") or {}).get("id")
        if seen.get("image_id") != expected:
            return ["%s's %s container runs %s (%s) after %s, not %s (%s)"
                    % (host, CONTAINER, seen.get("image") or "nothing", seen.get("image_id") or "no container", after,
                       build["image"], expected or "not on the host")]
    return []


# ------------------------------------------------------------------ what a failure notes for the report


def _truncate(text, length, end="..."):
    """Jinja's ``truncate(length)``: whole words, ``end`` appended, 5 characters of leeway."""
    text = str(text)
    if len(text) <= length + 5:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def failed_note(host, failed, gate, at):
    """The note of an upgrade that failed on ``host`` at ``at`` (epoch seconds): the gate's verdict (``gate``,
    tool_gate_result) and the reason - the gate's message when it rejected the candidate, else the failed task's
    (``failed``, ansible_failed_result)."""
    gate = gate or {}
    why = gate.get("message") if not gate.get("passed", True) else (failed or {}).get("msg", "upgrade failed")
    return {"failed": True, "gate": gate, "events": {"failed": at}, "reason": "%s: %s" % (host, _truncate(why, 900))}


def rollback_failed_note(host, failed, noted):
    """The note of a rollback of ``host`` that could not start (``failed``, ansible_failed_result), after what it
    noted so far (``noted``, maintenance_window_host)."""
    why = _truncate((failed or {}).get("msg", ""), 400)
    return {"restore_failed": True, "reason": "%s rollback of %s failed: %s" % ((noted or {}).get("reason", ""), host, why)}


def restore_note(host, restored, noted):
    """The note of a restore (``restored``, model_upgrade_restore_result: ok, at, msg): when the old build served
    again, or why it could not be put back, after the reason noted so far (``noted``, maintenance_window_host)."""
    if restored.get("ok"):
        return {"events": {"restored": restored.get("at")}}
    return {"restore_failed": True,
            "reason": "%s Putting the old model back on %s failed: %s" % (
                (noted or {}).get("reason", host + ":"), host, _truncate(restored.get("msg", ""), 400))}


def measured_startup(noted):
    """The start-up this replica's upgrade measured, for the next run's announcement (the maintenance window's
    ``record_startup``): ``{"replicas": seconds}`` from leaving the proxy (``events.drained``) to serving the candidate
    (``events.serving``), rounded to 0.1 s, when it was upgraded (``noted``: maintenance_window_host); ``{}`` else (a
    failed or rolled back replica measured no start-up of the candidate)."""
    noted = noted or {}
    events = noted.get("events") or {}
    if not noted.get("upgraded") or events.get("serving") is None or events.get("drained") is None:
        return {}
    return {"replicas": round(float(events["serving"]) - float(events["drained"]), 1)}
