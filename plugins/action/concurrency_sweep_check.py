# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.concurrency_sweep_check, on the controller: the concurrency tuning's decisions around the sweep.

The ``tune_concurrency`` role's tasks sweep (``concurrency_sweep``) and pass what they got; this plugin reads the
``tune_*`` variables and the others a check needs itself, as the task sees them, reads each engine unit's command line
on the host (``vllm_engine_info``) for ``plan`` when the task passes none, and decides with
``plugins/module_utils/_concurrency_sweep_check.py``. The module's documentation is
``plugins/modules/concurrency_sweep_check.py``.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.factory_floor.llm.plugins.module_utils import _concurrency_sweep_check as sc
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["plan", "report"]),
    engines=dict(type="list", elements="dict"),
    plan=dict(type="dict", default={}),
    sweep=dict(type="dict", default={}),
)

# What the checks read, with the default each takes where it is not defined.
PLAN_READ = dict(inventory_hostname="", tune_concurrency=[], tune_profiles=[], tune_target_metric="",
                 tune_write_path="", tune_allow_over_cap=False, tune_long_prompt_tokens=0, tune_load_host="",
                 vllm_max_num_seqs=None, vllm_max_num_batched_tokens=None, nginx_proxy_backend_address="",
                 playbook_dir=None, tune_num_speculative_tokens=[], vllm_speculative_config={}, topology="replicas",
                 site_engine_groups=[], vllm_split_tensor_parallel_size=None)
REPORT_READ = dict(inventory_hostname="", tune_target_seconds=None, tune_target_metric="", tune_write=False,
                   tune_write_path="", tune_output_dir="")


ENGINE_INFO = "factory_floor.llm.vllm_engine_info"


class ActionModule(TaskVariablesAction):
    """Decides on the controller; its documentation is the module factory_floor.llm.concurrency_sweep_check's."""

    _supports_check_mode = True  # it reads only
    _requires_connection = True  # plan reads the engine units on the host

    def engines(self, task_vars):
        """vllm_engine_info's result for each of the site's engine units (``_site_engine_units``), ``item`` the unit,
        as a loop's results; a unit that cannot be read is one whose process does not run."""
        try:
            return [dict(self._execute_module(module_name=ENGINE_INFO, module_args={"unit": unit}, task_vars=task_vars),
                         item=unit) for unit in self.variable("_site_engine_units", [])]
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    @staticmethod
    def stored(v):
        """What an earlier run saved as ``<tune_output_dir>/<host>.json`` on the controller (its num_speculative_tokens
        runs are compared with this one's); {} when there is none or it is not JSON."""
        path = os.path.join(v.get("tune_output_dir") or "", "%s.json" % v.get("inventory_hostname"))
        try:
            with open(path, encoding="utf-8") as handle:
                found = json.load(handle)
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["check"] == "plan":
            v = self.variables(PLAN_READ, **PLAN_READ)
            v["engines"] = self.variable("groups", {}).get(self.variable("site_engine_group", "gb10")) or []
            v["url"] = self.variable("_site_vllm_endpoint.url", "")
            engines = args["engines"] if args["engines"] is not None else self.engines(task_vars)
            outcome = sc.plan(v, engines)
            result.update(outcome, changed=False)
            if outcome["errors"]:
                result.update(failed=True, msg=outcome["errors"][0])
            return result
        v = self.variables(REPORT_READ, **REPORT_READ)
        v["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        outcome = sc.report(v, args["plan"], args["sweep"], self.stored(v))
        result.update(outcome, changed=False)
        return result
