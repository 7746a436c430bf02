# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.tool_gate_run: the tool_gate role's steps after the build is known, as one task each.

``plan`` plans the incumbent's run (the suite's digest, nothing sent) and reads its stored score; ``incumbent`` scores
it when ``plan`` said to, stores the score and returns ``tool_gate_incumbent``, and as ``known`` whether the build of
``tool_gate_candidate_model_path`` passed the gate on this site's engine hosts (``tool_gate_known``); ``candidate`` scores the candidate,
reads the incumbent build's stored score, judges and stores the run (``tool_gate_result``); ``spread`` scores the build
``tool_gate_repeat`` times. The test runs through ``factory_floor.llm.tool_call_test``'s own action (its progress lines
print as they do there), against ``_tool_gate_endpoint``; the scores stay on the controller. The sentences and facts
are ``tool_gate_note``'s (``_tool_gate_notes.py``, ``_tool_gate_verdict.py``); the documentation is
``plugins/modules/tool_gate_run.py``'s.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.action.tool_gate_note import note
from ansible_collections.factory_floor.llm.plugins.action.tool_gate_scores import store
from ansible_collections.factory_floor.llm.plugins.filter.tool_gate_record_file import tool_gate_record_file
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_scores as ts
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_share as share
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

STEPS = ("plan", "incumbent", "candidate", "union", "spread")
ARGUMENT_SPEC = dict(
    step=dict(type="str", required=True, choices=list(STEPS)),
    suites=dict(type="list", elements="raw", default=[]),
    plan=dict(type="dict", default={}),
)
TEST = "factory_floor.llm.tool_call_test"
# tool_call_test's options and the role's variables they come from, as tasks/run.yml passed them.
TEST_OPTIONS = {"categories": "tool_gate_categories", "cases": "tool_gate_cases", "bfcl_limit": "tool_gate_bfcl_limit",
                "bfcl_tool_choice": "tool_gate_bfcl_tool_choice", "timeout": "tool_gate_timeout",
                "temperature": "tool_gate_temperature", "max_tokens": "tool_gate_max_tokens",
                "streaming": "tool_gate_streaming", "concurrency": "tool_gate_concurrency",
                "repeat": "tool_gate_repeat", "progress_interval": "tool_gate_progress_interval"}


class ActionModule(ActionBase):
    """Runs the gate's step; its documentation is the module factory_floor.llm.tool_gate_run's."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # What this step worked out, read before the role's variables of the same name (the registered results the
        # role's YAML once noted: the run, the stored score, the record file).
        self.known = {}

    def var(self, name, default=...):
        """The role's variable ``name`` as the task sees it, or what this step worked out under that name."""
        if name in self.known:
            return self.known[name]
        try:
            return plain(self._templar.resolve_variable_expression(name))
        except AnsibleUndefinedVariable as error:
            if default is ...:
                raise AnsibleActionFail("tool_gate_run reads %s, which is not defined here: %s" % (name, error)) from error
            return default

    def test_args(self, suites, validate_only, cases=None):
        """tool_call_test's arguments: the suites, the role's settings and the endpoint (_tool_gate_endpoint); ``cases``
        (patterns) instead of tool_gate_cases for a share of a split suite."""
        args = {option: self.var(name) for option, name in TEST_OPTIONS.items()}
        args.update(suite=suites, validate_only=validate_only)
        if cases is not None:
            args["cases"] = cases
        if self.var("tool_gate_bfcl_path", ""):
            args["bfcl_path"] = self.var("tool_gate_bfcl_path")
        if self.var("tool_gate_bfcl_categories", []):
            args["bfcl_categories"] = self.var("tool_gate_bfcl_categories")
        endpoint = self.var("_tool_gate_endpoint")
        args.update((key, value) for key, value in endpoint.items() if value not in (None, ""))
        return args

    def run_test(self, suites, validate_only, task_vars, cases=None):
        """The tool-calling test on the host, through its own action plugin (which prints its progress lines)."""
        task = self._task.copy()
        task.args = self.test_args(suites, validate_only, cases)
        task.action = TEST
        task._resolved_action = TEST
        action = self._shared_loader_obj.action_loader.get(
            TEST, task=task, connection=self._connection, play_context=self._play_context, loader=self._loader,
            templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        run = action.run(task_vars=task_vars)
        if run.get("failed") or run.get("unreachable"):
            raise StepFailed(run)
        self.known["__tool_gate_run"] = run
        return run

    def lookup(self, build_id, suite_digest):
        """The latest stored score of ``build_id`` with ``suite_digest`` (any host), or None."""
        store_dir = self.var("tool_gate_store_dir")
        try:
            found = ts.lookup(store_dir, build_id, suite_digest, int(self.var("_tool_gate_id_chars")))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise AnsibleActionFail("Could not read the tool gate's scores in %s: %s" % (store_dir, error)) from None
        self.known["__tool_gate_found"] = found
        return found

    def store(self, path, run, role, passed=None):
        """Store ``run`` of the build at ``path`` on the controller; whether the file changed."""
        one = ts.record(self.var("tool_gate_build"), run, self.var("inventory_hostname"), role, passed)
        try:
            return store(path, ts.text(one), self._task.check_mode)
        except OSError as error:
            raise AnsibleActionFail("Could not store the tool gate's score at %s: %s" % (path, error)) from None

    def candidate_build(self, model_path, task_vars):
        """The build id of the candidate ``model_path`` on this host, as the role's build_id step names it (the image
        tool_gate_candidate_image, else the one the preflight checked, as the candidate entry point takes it)."""
        image = self.var("tool_gate_candidate_image", "") or (
            (self.var("vllm_image_check", {}) or {}).get("image") or {}).get("id", "")
        args = {"model_path": model_path, "small_files": self.var("_tool_gate_small_files"),
                "weight_files": self.var("_tool_gate_weight_files"),
                "tool_call_parser": self.var("tool_gate_tool_call_parser"),
                "chat_template": self.var("tool_gate_chat_template"), "container_image": image,
                "container_engine": "/usr/bin/%s" % self.var("tool_gate_container_engine"),
                "build_id": self.var("tool_gate_build_id"), "host": self.var("inventory_hostname")}
        found = self._execute_module(module_name="factory_floor.llm.tool_gate_build", module_args=args,
                                     task_vars=task_vars)
        if found.get("failed"):
            raise AnsibleActionFail("Could not identify the candidate build %s: %s" % (model_path, found.get("msg")))
        return found["build"]["id"]

    def known_build(self, suite_digest, task_vars):
        """The fact ``tool_gate_known`` for tool_gate_candidate_model_path ({} when none is given): whether that build
        passed the gate on this site's engine hosts (``_tool_gate_scores.known``)."""
        model_path = self.var("tool_gate_candidate_model_path", "")
        if not model_path:
            return {}
        min_score, id_chars = self.var("tool_gate_min_score"), int(self.var("_tool_gate_id_chars"))
        if not boolean(self.var("tool_gate_admit_known_builds", True), strict=False):
            return ts.known("", None, min_score, False, id_chars)
        build_id = self.candidate_build(model_path, task_vars)
        hosts = self.var("groups[site_engine_group]", None)
        try:
            found = ts.lookup(self.var("tool_gate_store_dir"), build_id, suite_digest, id_chars, hosts)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise AnsibleActionFail("Could not read the tool gate's scores in %s: %s"
                                    % (self.var("tool_gate_store_dir"), error)) from None
        return ts.known(build_id, found, min_score, True, id_chars)

    def share_hosts(self):
        """The engines a split suite is dealt over, when this host is one of two or more (tool_gate_share_hosts)."""
        hosts = list(self.var("tool_gate_share_hosts", []) or [])
        return hosts if len(hosts) > 1 and self.var("inventory_hostname") in hosts else []

    def run_share(self, suites, hosts, task_vars):
        """This host's share of the suite split over ``hosts``: the whole selection read first (nothing sent), then
        only this host's cases run; nothing judged or stored (the union step does)."""
        whole = self.run_test(suites, True, task_vars)
        host = self.var("inventory_hostname")
        ids = share.shares(whole.get("selected") or [], hosts)[host]
        started_at = time.time()
        run = self.run_test(suites, False, task_vars, share.patterns(ids)) if ids else {"results": []}
        value = share.share_value(host, hosts, ids, len(whole.get("selected") or []), run, round(started_at, 3),
                                  round(time.time(), 3))
        value.update(selected=whole.get("selected") or [], suite_digest=whole.get("suite_digest"))
        return dict(changed=False, value=value, message=value["message"])

    def union_step(self, task_vars):
        """Once every host of a split suite ran its share: one verdict over all the cases, stored as this host's score
        of the build; without a share, the candidate step's verdict as it is."""
        own = (self.var("__tool_gate_verdict", {}) or {}).get("value") or {}
        if not isinstance(own.get("share"), dict):
            return dict(changed=False, value=own, message=own.get("message", ""))
        hosts = own["share"]["hosts"]
        hostvars = task_vars.get("hostvars") or {}
        values = {}
        for host in hosts:
            registered = plain((hostvars.get(host) or {}).get("__tool_gate_verdict")) or {}
            values[host] = registered.get("value") or {"msg": registered.get("msg")}
        run, missing = share.union(hosts, values, own["selected"], own["suite_digest"])
        if run is None:
            value = dict(own, passed=False, message="Tool-calling gate on %s: no verdict over the split suite: %s." % (
                self.var("inventory_hostname"), "; ".join(missing)))
            return dict(changed=False, value=value, message=value["message"])
        self.known["__tool_gate_run"] = run
        incumbent_build_id = self.var("tool_gate_incumbent_build_id")
        if boolean(self.var("tool_gate_compare_own_build"), strict=False):
            incumbent_build_id = self.known["tool_gate_incumbent_build_id"] = self.var("tool_gate_build")["id"]
        self.known["__tool_gate_found"] = (self.lookup(incumbent_build_id, run["suite_digest"]) if incumbent_build_id
                                           else None)
        self.known["_tool_gate_record_file"] = self.record_file(run)
        value, message = note("verdict", self.var)
        words = share.union_words(hosts, values)
        value.update(message=value["message"] + words, started_at=own["share"]["started_at"],
                     shares={host: values[host]["share"] for host in hosts})
        changed = self.store(value["record_file"], run, "candidate", value["passed"])
        return dict(changed=changed, value=value, message=message + words)

    def record_file(self, run):
        """Where this host's score of the build with ``run``'s suite is kept (the role's _tool_gate_record_file)."""
        return tool_gate_record_file(self.var("tool_gate_store_dir"), self.var("tool_gate_build")["id"],
                                     run.get("suite_digest"), self.var("inventory_hostname"),
                                     int(self.var("_tool_gate_id_chars")))

    def step(self, name, args, task_vars):
        """The step's result: ``value`` (the fact the role notes), ``message`` (what it prints), ``changed``."""
        if name == "plan":
            run = self.run_test(args["suites"], True, task_vars)
            found = self.lookup(self.var("tool_gate_build")["id"], run["suite_digest"])
            gated = boolean(self.var("_tool_gate_topology_gated"), strict=False)
            measure = found is None and boolean(self.var("tool_gate_measure_incumbent"), strict=False) and gated
            message = note("not_measured", self.var)[1] if found is None and not measure else ""
            return dict(changed=False, suite_digest=run["suite_digest"], found=found, measure=measure, message=message)
        if name == "incumbent":
            plan, changed = args["plan"], False
            self.known["__tool_gate_found"] = plan.get("found")
            if plan.get("measure"):
                run = self.run_test(args["suites"], False, task_vars)
                # Check mode measured nothing (tool_call_test sends no request there): nothing to store.
                if "score" in run:
                    changed = self.store(self.record_file(run), run, "incumbent")
                self.known["__tool_gate_found"] = note("measured", self.var)[0]
            # After the incumbent's score is stored: a candidate of the same build is known by it.
            return dict(changed=changed, value=note("incumbent", self.var)[0], message="",
                        known=self.known_build(plan.get("suite_digest", ""), task_vars))
        if name == "candidate":
            if not boolean(self.var("tool_gate_gated"), strict=False):
                value = note("not_gated", self.var)[0]
                return dict(changed=False, value=value, message="")
            # A suite split over several engines: this host runs its share; the union step judges them all.
            if self.share_hosts():
                return self.run_share(args["suites"], self.share_hosts(), task_vars)
            # Read only when gated: a candidate that is not gated never ran the role's build_id step.
            build_id = self.var("tool_gate_build")["id"]
            # On the controller's clock, as the switch's timeline (gate_started).
            started_at = time.time()
            run = self.run_test(args["suites"], False, task_vars)
            # A candidate held to its own build's last passing score (a switch healing an interrupted one).
            if boolean(self.var("tool_gate_compare_own_build"), strict=False):
                self.known["tool_gate_incumbent_build_id"] = build_id
            incumbent_build_id = self.var("tool_gate_incumbent_build_id")
            self.known["__tool_gate_found"] = self.lookup(incumbent_build_id, run["suite_digest"]) if incumbent_build_id else None
            self.known["_tool_gate_record_file"] = self.record_file(run)
            value, message = note("verdict", self.var)
            value["started_at"] = round(started_at, 3)
            changed = self.store(value["record_file"], run, "candidate", value["passed"])
            return dict(changed=changed, value=value, message=message)
        if name == "union":
            return self.union_step(task_vars)
        self.run_test(args["suites"], False, task_vars)
        value, message = note("spread", self.var)
        return dict(changed=False, value=value, message=message)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            result.update(self.step(args["step"], args, task_vars or {}))
        except StepFailed as failed:
            # The failed run as the test returned it (its msg, its cases), as a failed tool_call_test task was.
            result.update(failed.result, failed=True)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result


class StepFailed(Exception):
    """A step's test run failed; ``result`` is its result."""

    def __init__(self, result):
        super().__init__(result.get("msg"))
        self.result = result
