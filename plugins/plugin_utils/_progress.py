# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Progress lines of a long task, printed as it goes: the one way every long wait and measurement shows itself.

An Ansible module cannot print while it runs; its result comes back when it ends. A
module that works for minutes (a vLLM start-up wait, the tool-calling gate's cases, a
concurrency sweep's levels, a benchmark's arms) is therefore run in *runs*: a run does
part of the work, returns, and says how it goes; this action plugin prints that on the
controller at the default verbosity and runs the module again to go on.

The protocol, between the module (its options ``progress_interval`` and ``resume``) and
this plugin:

- the plugin runs the module with the task's arguments, and from the second run on
  ``resume`` set to what the previous run returned in ``progress.resume``;
- a run that returns ``progress`` with ``done`` false has not finished the task: the
  plugin prints each of ``progress.lines`` as ``<inventory host>: <line>`` and runs the
  module again;
- any other result (no ``progress``, ``progress.done`` true, a failure) is the task's
  result, after its ``progress.lines`` are printed.

A result key named in the action's ``controller_stamps`` (``ended_at`` for vllm_health) is
an epoch time of when the task ended: the plugin sets it again, on the controller's clock,
when the last run's result arrives. The module stamps it with its host's clock, which may
be minutes off another host's; a switch's timeline puts one host's events next to
another's, and the controller's clock is the one they all share.

So the module keeps all the logic (what a run does, when it returns, what its line
says, how it goes on - unit-tested without Ansible), and each module that reports has a
three-line action plugin of its own name that is this class. With ``no_log`` on the task
nothing is printed; with ``async`` the module runs once, in the background, as any
module does (``progress_interval`` 0 unless the task sets it).
"""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import VariableReader

display = Display()

# A module that keeps asking to go on without end is a bug, not a long task: stop there.
MAX_RUNS = 100000


def progress_of(result):
    """``(lines, resume, more)`` of a run's result: the lines to print, what to go on from, whether to."""
    progress = result.get("progress") if isinstance(result, dict) else None
    if not isinstance(progress, dict):
        return [], None, False
    lines = [str(line) for line in progress.get("lines") or []]
    more = (progress.get("done") is False and "resume" in progress
            and not result.get("failed") and not result.get("unreachable") and not result.get("skipped"))
    return lines, progress.get("resume"), more


class ProgressAction(VariableReader, ActionBase):
    """Run the module of this action's name in runs; print each run's progress lines; return the last run's result."""

    _supports_check_mode = True
    _supports_async = True
    # Result keys set again to the controller's time (epoch seconds) when the last run's result arrives.
    controller_stamps = ()

    def module_args(self, task_vars):
        """The module's arguments for one run: the task's (an action may add what it reads on the controller)."""
        del task_vars  # read by the actions that override this
        return dict(self._task.args)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        if self._task.async_val and not self._connection.has_native_async:
            args = self.module_args(task_vars)
            args.setdefault("progress_interval", 0)
            result.update(self._execute_module(module_args=args, task_vars=task_vars, wrap_async=True))
            return result
        host = task_vars.get("inventory_hostname", "")
        resume = None
        try:
            for _run in range(MAX_RUNS):
                args = self.module_args(task_vars)
                if resume is not None:
                    args["resume"] = resume
                outcome = self._execute_module(module_args=args, task_vars=task_vars)
                lines, resume, more = progress_of(outcome)
                if not self._task.no_log:
                    for line in lines:
                        display.display("%s: %s" % (host, line) if host else line)
                if not more:
                    result.update(outcome)
                    arrived = round(time.time(), 3)
                    result.update((key, arrived) for key in self.controller_stamps if key in result)
                    return result
            result.update(failed=True, msg="%s asked to go on %d times without finishing; stopped"
                                           % (self._task.action, MAX_RUNS))
            return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
