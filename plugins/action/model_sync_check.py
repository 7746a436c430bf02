# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.model_sync_check, on the controller: the model copy's plan and its refusals.

The ``vllm`` role's ``model_sync`` entry point reads the hosts (``model_manifest``) and copies
(rsync); what it decides from what every engine host has and holds is decided here, from
``hostvars``: the plan (``plan``: each engine host's SSH and link variables,
``_model_sync.plan_hostvars``), the room on the targets (``space``) and whether the copies
equal the source (``copies``), each from the targets' ``model_manifest`` results registered
under ``listing``; and before the copy, the source's listing (``source``) and the SSH probes (``reach``). The
decisions are ``plugins/module_utils/_model_sync.py``'s and
``_model_manifest.py``'s, through the filters that have always made them (the same messages).
Nothing runs on a host. The module's documentation is ``plugins/modules/model_sync_check.py``.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.factory_floor.llm.plugins.filter.model_manifest_diff import model_manifest_diff
from ansible_collections.factory_floor.llm.plugins.filter.model_sync_plan import model_sync_plan
from ansible_collections.factory_floor.llm.plugins.filter.model_sync_space import model_sync_space
from ansible_collections.factory_floor.llm.plugins.module_utils import _model_sync as ms
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

# The plan's options not given to the task: the role's variable of each (its defaults/main.yml, the inventory, -e).
PLAN_VARIABLES = dict(engine_group=("site_engine_group", "gb10"), source=("model_sync_source", ""),
                      path=("model_sync_path", ""), source_path=("model_sync_source_path", ""),
                      delete=("model_sync_delete", False), checksum=("model_sync_checksum", True),
                      dry_run=("ansible_check_mode", False), ssh_user=("model_sync_ssh_user", ""),
                      ssh_key_file=("model_sync_ssh_key_file", ""), ssh_args=("model_sync_ssh_args", []),
                      rsync_path=("model_sync_rsync_path", "rsync"), play_hosts=("ansible_play_hosts", None))
BOOLEANS = ("delete", "checksum", "dry_run")
# The plan's options, as the model_sync_plan filter takes them.
PLAN_OPTIONS = ("source", "path", "source_path", "delete", "checksum", "dry_run", "ssh_user", "ssh_key_file",
                "ssh_args", "rsync_path")

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["plan", "space", "copies", "source", "reach"]),
    play_hosts=dict(type="list", elements="str"),
    plan=dict(type="dict"),
    results=dict(type="list", elements="dict"),
    engine_group=dict(type="str"),
    source=dict(type="str"),
    path=dict(type="str"),
    source_path=dict(type="str"),
    delete=dict(type="bool"),
    checksum=dict(type="bool"),
    dry_run=dict(type="bool"),
    ssh_user=dict(type="str"),
    ssh_key_file=dict(type="str"),
    ssh_args=dict(type="raw"),
    rsync_path=dict(type="str"),
    targets=dict(type="list", elements="str", default=[]),
    listing=dict(type="str"),
    source_files=dict(type="dict"),
    source_manifest=dict(type="dict"),
    margin_bytes=dict(type="int", default=0),
    manifest_checksum=dict(type="str"),
    rsync_version=dict(type="dict"),
)
MANIFEST = "factory_floor.llm.model_manifest"
COMMAND = "ansible.legacy.command"


def decide(args, groups, hostvars):
    """The result of ``args["check"]``: the plan (``plan``), or ``space``'s / ``copies``' verdict."""
    name = args["check"]
    if name == "plan":
        engines = list(groups.get(args["engine_group"]) or [])
        given = plain({key: args[key] for key in PLAN_OPTIONS if args.get(key) is not None})
        planned = model_sync_plan(dict(given, engines=engines, hostvars=plain(ms.plan_hostvars(engines, hostvars))))
        for target in planned["targets"]:
            if target.get("address"):
                target["probe"] = ms.ssh_probe(target)
        if args.get("play_hosts") is not None:
            planned["left_out"] = ms.left_out(planned["targets"], args["play_hosts"])
        planned["target_hosts"] = [target["host"] for target in planned["targets"]]
        planned["copy_hosts"] = ([planned["source"]] if planned["source"] in engines else []) + [
            host for host in planned["target_hosts"] if host != planned["source"]]
        return planned
    if args.get("plan"):
        # The plan's source, paths and targets, where the task does not give them.
        planned = plain(args["plan"])
        for key in ("source", "source_path", "path"):
            if args.get(key) is None:
                args[key] = planned.get(key)
        args["targets"] = args["targets"] or [target["host"] for target in planned.get("targets") or []]
    if name == "source":
        message = ms.source_refusal(args["source"], args["source_path"], plain(args["source_manifest"] or {}))
        return {"ok": not message, "message": message}
    if name == "reach":
        message = ms.reach_refusal(args["source"], plain(args["results"]))
        return {"ok": not message, "message": message}
    listings = plain(ms.registered(args["targets"], hostvars, args["listing"]))
    if name == "space":
        return model_sync_space(plain(args["source_files"] or {}), ms.space_targets(listings), args["path"],
                                args["margin_bytes"])
    return model_manifest_diff(ms.copies(args["source"], args["source_path"], plain(args["source_manifest"] or {}),
                                         listings))


class ActionModule(TaskVariablesAction):
    """Decides on the controller; its documentation is the module factory_floor.llm.model_sync_check's."""

    _supports_check_mode = True  # it reads only
    _requires_connection = True  # source, reach and copies read the source host (the task's delegate_to)

    def read_source(self, args, task_vars):
        """What the source reads that the task does not pass: its listing of the model (``source``: unhashed;
        ``copies``: hashed with ``manifest_checksum``, else model_sync_manifest_checksum, else all) and the SSH
        probes to each target with an address (``reach``; ``item`` the plan's target, as a loop's results)."""
        try:
            if args["check"] == "reach" and args["results"] is None:
                args["results"] = [
                    dict(self._execute_module(module_name=COMMAND, module_args={"argv": target["probe"]},
                                              task_vars=task_vars), item=target)
                    for target in plain((args["plan"] or {}).get("targets") or []) if target.get("address")]
            elif args["check"] == "source" and args["source"] == ms.CONTROLLER and args["rsync_version"] is None:
                # The controller sends: rsync must be there (an engine source gets it installed by the role).
                args["rsync_version"] = self._execute_module(module_name=COMMAND, module_args={
                    "argv": ["rsync", "--version"]}, task_vars=task_vars)
            no_rsync = (args["rsync_version"] or {}).get("failed")
            if args["check"] in ("source", "copies") and args["source_manifest"] is None and not no_rsync:
                checksum = "none" if args["check"] == "source" else (
                    args["manifest_checksum"] or self.variable("model_sync_manifest_checksum", "all"))
                args["source_manifest"] = self._execute_module(
                    module_name=MANIFEST, module_args={"path": args["source_path"], "checksum": checksum},
                    task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return args

    def plan_args(self, args):
        """``args`` with each plan option the task leaves out read from its variable; the path, when neither gives
        one, is the model of the topology that runs (``topology``: ``vllm_model``, the split's ``vllm_split_model``),
        as the vllm role's ``_vllm_topologies`` has it, worked out here without loading that role's settings."""
        for option, (name, default) in PLAN_VARIABLES.items():
            if args.get(option) is None:
                args[option] = self.variable(name, default)
        for option in BOOLEANS:
            args[option] = boolean(args[option], strict=False)
        if not args["path"]:
            args["path"] = ms.topology_model(self.variable("topology", "") or "replicas", self.variable("vllm_model", ""),
                                             self.variable("vllm_split_model", None))
        return args

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["check"] == "plan":
            args = self.plan_args(args)
        elif args["plan"]:
            for key in ("source", "source_path"):
                if args.get(key) is None:
                    args[key] = plain(args["plan"]).get(key)
        if args["check"] in ("source", "reach", "copies"):
            args = self.read_source(args, task_vars)
        if args["check"] == "source" and (args["rsync_version"] or {}).get("failed"):
            # As the command task that ran it said: the command's own message.
            result.update(failed=True, changed=False, msg=args["rsync_version"].get("msg", "rsync --version failed"))
            return result
        if args["check"] == "copies" and (args["source_manifest"] or {}).get("failed"):
            # The source's hashed listing failed: its own message, as the listing task's was.
            result.update(failed=True, changed=False, msg=args["source_manifest"].get("msg", "model_manifest failed"))
            return result
        outcome = decide(args, task_vars.get("groups") or {}, task_vars.get("hostvars") or {})
        if args["check"] == "plan":
            result.update(outcome, changed=False)
            refusal = ms.plan_refusal(outcome)
            if refusal:
                result.update(failed=True, msg=refusal)
            return result
        if not outcome["ok"]:
            # A refusal reads as the fail task that said it before: its message, nothing else.
            result.update(failed=True, changed=False, msg=outcome["message"])
            return result
        result.update(outcome, changed=False)
        if args["check"] in ("source", "copies"):
            # The source's listing, for the later steps (its files) and the last message (its summary).
            result["source_manifest"] = plain(args["source_manifest"])
        return result
