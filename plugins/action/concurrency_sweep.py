# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.concurrency_sweep in runs that report: each run's progress lines printed as it goes (see
plugin_utils/_progress.py); the sweep's options the task leaves out read from the tune_concurrency role's ``tune_*``
variables, as the task sees them (``SWEEP_VARIABLES``), where they are defined."""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.plugin_utils._progress import ProgressAction

# Each option and the variable it is read from when the task leaves it out; a variable that is not defined, or null
# (or, for shares, empty), leaves the module's own default.
SWEEP_VARIABLES = dict(
    concurrency="tune_concurrency", profiles="tune_profiles", duration="tune_duration", requests="tune_requests",
    short_max_tokens="tune_short_max_tokens", long_prompt_tokens="tune_long_prompt_tokens",
    long_max_tokens="tune_long_max_tokens", timeout="tune_request_timeout", target_seconds="tune_target_seconds",
    target_metric="tune_target_metric", shares="tune_shares",
)


def sweep_args(args, variable):
    """``args`` with each option of ``SWEEP_VARIABLES`` the task leaves out read through ``variable(name)`` (None
    when not defined). The module's argument spec converts them (``-e`` may give the levels as strings)."""
    args = dict(args)
    for option, name in SWEEP_VARIABLES.items():
        if args.get(option) is None:
            value = variable(name)
            if value is not None and value != {}:
                args[option] = value
    return args


class ActionModule(ProgressAction):
    """Runs the module factory_floor.llm.concurrency_sweep; its documentation is the module's."""

    def module_args(self, task_vars):
        return sweep_args(super().module_args(task_vars), self.variable_or_none)
